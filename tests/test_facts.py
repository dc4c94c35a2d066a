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
from gpulint.linter.analysis.facts import (
    ACCELERATOR,
    LIGHTNING_MODULE,
    NAMES_ACCELERATOR,
    ONE_PROCESS_PER_GPU,
    PLACES_ON_DEVICE,
    STEPS,
    TENSORFLOW,
    TORCH,
    Fact,
)
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
        # accelerator evidence that names no accelerator
        b"import torch\ndef train(model, batch, device):\n    model(batch.to(device))\n",
        b"import torch\nx = batch.to(trainer.device)\n",
        b"import torch\nmodel = DDP(model, device_ids=[comm.get_local_rank()])\n",
        b"import torch\ntorch.distributed.init_process_group('nccl')\n",
        b"from lightning import LightningModule\nclass Net(LightningModule):\n    pass\n",
    ]
    return sources


def _context(source: bytes) -> FileContext:
    return FileContext(cst.parse_module(source), "x.py", {}, frozenset(), source)


def test_every_fact_is_tested():
    assert {TORCH, TENSORFLOW, ACCELERATOR, STEPS, ONE_PROCESS_PER_GPU} <= set(FACTS)
    assert {NAMES_ACCELERATOR, PLACES_ON_DEVICE, LIGHTNING_MODULE} <= set(FACTS)


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


@pytest.mark.parametrize(
    "source, evidence",
    [
        ("import torch\nmodel.cuda()\n", NAMES_ACCELERATOR),
        ("import torch\ndevice = torch.device('cuda:0')\n", NAMES_ACCELERATOR),
        ("import torch\nif torch.cuda.is_available(): pass\n", NAMES_ACCELERATOR),
        ("from accelerate import Accelerator\n", NAMES_ACCELERATOR),
        ("import torch\ndef step(model, x, device):\n    return model(x.to(device))\n", PLACES_ON_DEVICE),
        ("import torch\nbatch = [t.to(self.device) for t in batch]\n", PLACES_ON_DEVICE),
        ("import torch\nx = x.to(accelerator.device)\n", PLACES_ON_DEVICE),
        ("import torch\nfrom utils import get_device\ndev = get_device()\nmodel.to(dev)\n", PLACES_ON_DEVICE),
        ("import torch\nmodel.to(local_rank)\n", PLACES_ON_DEVICE),
        ("import torch\nx = x.to(device=rank, dtype=torch.float)\n", PLACES_ON_DEVICE),
        ("import torch\nm = DDP(m, device_ids=[args.gpu])\n", PLACES_ON_DEVICE),
        ("import torch.distributed as dist\ndist.init_process_group(backend='nccl')\n", PLACES_ON_DEVICE),
        ("import lightning.pytorch as pl\nclass M(pl.LightningModule):\n    pass\n", LIGHTNING_MODULE),
    ],
)
def test_each_kind_of_accelerator_evidence(source, evidence):
    ctx = _context(source.encode())
    assert evidence.holds(ctx) and ACCELERATOR.holds(ctx)
    assert evidence.may_hold(source.encode()) and ACCELERATOR.may_hold(source.encode())


@pytest.mark.parametrize(
    "source",
    [
        "import torch\n# move to cuda later\nx = torch.ones(3)\n",
        "import torch\nprint('no gpu here')\n",
        "import torch\ndevice = 'cpu'\nx = x.to(device)\n",
        "import torch\ndevice = torch.device('cpu')\nmodel.to(device)\n",
        "import torch\nx = x.to(torch.float16)\ny = y.to(other)\n",
        "import torch\nm = DDP(m, device_ids=None)\n",
        "import torch.distributed as dist\ndist.init_process_group(backend='gloo')\n",
    ],
)
def test_no_accelerator_evidence(source):
    assert not ACCELERATOR.holds(_context(source.encode()))


def test_either_lets_through_what_one_part_may_hold():
    assert ACCELERATOR.may_hold(b"x.to(dev)") and ACCELERATOR.may_hold(b"class M(LightningModule)")
    assert not ACCELERATOR.may_hold(b"import torch\nx = torch.ones(3)\n")
