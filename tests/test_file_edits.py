"""Fix edits for reports (json, SARIF, rdjson, the review bot): each finding's edits are what its fix
alone changes in the file, computed for the whole file at once (fix/fixer.py `file_edits`) in work
that grows with the findings, not with findings times the file."""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.findings import SYNTAX_ERROR_CODE
from gpulint.linter.fix import fixer
from gpulint.rules import all_rules
from tests.helpers import ROOT


def training_loop(log_lines: int, newline: str = "\n", trailing_newline: bool = True) -> str:
    """A training step that logs a synced loss `log_lines` times: each line a GL201 and a GL302
    finding, both fixed by a guard."""
    lines = [
        "import torch",
        "",
        "",
        "def train(model, loader, optimizer):",
        "    model.cuda()",
        "    for step, batch in enumerate(loader):",
        "        loss = model(batch.cuda())",
        "        loss.backward()",
        "        optimizer.step()",
        *(f"        print('loss {i}', loss.item())" for i in range(log_lines)),
    ]
    return newline.join(lines) + (newline if trailing_newline else "")


BESIDE_GUARDS = """\
import torch


def train(model, loader, optimizer):
    for step, batch in enumerate(loader):
        loss = model(batch.cuda())
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print("before")
        print(loss.item())
        if step % 100 == 0:
            print("after")
        lossf = loss.item()
        print(lossf)
"""


def _sources() -> list[tuple[Settings, str]]:
    everything = Settings(select=["ALL"], unsafe_fixes=True)
    sources = [(everything, path.read_text()) for path in sorted((ROOT / "fixtures").glob("*.py"))]
    sources += [
        (everything, training_loop(3)),
        (everything, training_loop(3, trailing_newline=False)),
        (everything, training_loop(3, newline="\r\n")),
        (everything, BESIDE_GUARDS),
    ]
    for rule in all_rules():
        if rule.code == SYNTAX_ERROR_CODE:  # its cases do not parse: nothing to fix
            continue
        for case in rule.INVALID:
            sources.append((Settings(select=[rule.code, *case.select], options=dict(case.options)), case.source))
    return sources


def test_each_fix_has_the_edits_the_whole_module_fixed_gives_it():
    compared = 0
    for settings, source in _sources():
        analysis = Linter(settings).analyze(source.encode(), "case.py")
        if analysis is None:
            continue
        fixes = [f.fix for f in analysis.findings if f.fix is not None]
        at_once = fixer.file_edits(analysis.ctx, fixes, settings.line_length)
        one_by_one = [fixer.edits_for(analysis.ctx, fix, settings.line_length) for fix in fixes]
        assert at_once == one_by_one, source
        compared += len(fixes)
    assert compared > 150  # every rule's fixes, not a handful


@pytest.mark.parametrize("log_lines", [10, 40])
def test_fix_edits_cost_no_code_generation_of_the_module_per_finding(monkeypatch, log_lines):
    """The edits of a file's fixes generate the whole module's code a fixed number of times (the
    positions, the windows' offsets), whatever the number of findings; one generation per
    finding made them quadratic."""
    generations = []
    real = cst.Module._codegen_impl

    def counted(self, state):
        generations.append(self)
        return real(self, state)

    monkeypatch.setattr(cst.Module, "_codegen_impl", counted)
    source = training_loop(log_lines).encode()
    result = Linter(Settings(select=["ALL"], show_hints=True)).lint_source(source, "train.py", with_edits=True)
    fixed = [f for f in result.findings if f.fix is not None and f.fix.edits]
    assert len(fixed) > 2 * log_lines  # every GL201 and GL302 (and the model and batch copies) has its edits
    assert len(generations) <= 2
