"""The facts rules require: each one's tokens occur in every file where it holds (or the prefilter
would hide findings), on real code, and each check holds where it should."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import libcst as cst
import pytest

from gpulint.linter.analysis import facts
from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import ACCELERATOR, ONE_PROCESS_PER_GPU, STEPS, TENSORFLOW, TORCH, Fact
from tests.helpers import FIXTURES

FACTS = [value for value in vars(facts).values() if isinstance(value, Fact)]
# Found without importing torch (seconds): its sources are only read.
TORCH_SOURCES = Path(importlib.util.find_spec("torch").origin).parent


@lru_cache(maxsize=1)
def _parsed() -> list[tuple[bytes, FileContext]]:
    return [(source, _context(source)) for source in _sources()]


def _sources() -> list[bytes]:
    paths = [*sorted(FIXTURES.rglob("*.py")), *sorted(TORCH_SOURCES.glob("utils/data/*.py"))]
    paths += sorted(TORCH_SOURCES.glob("nn/parallel/*.py"))
    sources = [p.read_bytes() for p in paths]
    sources += [
        b"import torch\nx.to('gpu:0')\n",
        b"import lightning_fabric\n",
        b"import deepspeed\n",
        b"import tf_keras\nopt.apply(grads, variables)\n",
        b"from torch.nn.parallel import DistributedDataParallel as D\nm = D(m)\n",
        b"import pytorch_lightning as pl\n"
        b"class M(pl.LightningModule):\n    def training_step(self, batch, i):\n        pass\n",
    ]
    return sources


def _context(source: bytes) -> FileContext:
    return FileContext(cst.parse_module(source), "x.py", {}, frozenset(), source)


def test_every_fact_is_tested():
    assert {TORCH, TENSORFLOW, ACCELERATOR, STEPS, ONE_PROCESS_PER_GPU} <= set(FACTS)


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: f.name)
def test_a_fact_that_holds_was_let_through_by_its_tokens(fact):
    held = 0
    for source, ctx in _parsed():
        if fact.holds(ctx):
            held += 1
            assert fact.may_hold(source), source[:200]
    assert held >= 2, f"{fact.name} held on {held} sources: the check proves nothing"


def test_negation_and_conjunction():
    torch_on_cuda = TORCH & ACCELERATOR
    both = _context(b"import torch\nmodel.cuda()\n")
    cpu = _context(b"import torch\nmodel.cpu()\n")
    assert torch_on_cuda.holds(both) and not torch_on_cuda.holds(cpu)
    assert (~torch_on_cuda).holds(cpu) and not (~torch_on_cuda).holds(both)
    assert not torch_on_cuda.may_hold(b"import torch\n") and torch_on_cuda.may_hold(b"import torch\nx.cuda()")
    assert (~torch_on_cuda).may_hold(b"anything")  # a negation rules no text out
