"""The bundled fixtures: every planted anti-pattern is reported exactly once, the clean twins
produce nothing, and fixing a copy leaves only unfixable findings."""

from __future__ import annotations

import shutil
from pathlib import Path

import libcst as cst
import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.runner import run
from gpulint.rules import rules_by_code
from tests.helpers import FIXTURES, expected_markers

BAD = sorted(p for p in FIXTURES.glob("*.py"))
CLEAN = sorted(p for p in (FIXTURES / "clean").glob("*.py"))


def _found(path: Path, settings: Settings) -> set[tuple[int, str]]:
    findings = Linter(settings).lint_source(path.read_bytes(), str(path)).findings
    return {(f.location.row, f.code) for f in findings}


def _is_default(code: str) -> bool:
    return rules_by_code()[code].default == "on"


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_planted_findings_reported_exactly_once_with_all_rules(path):
    # (hints shown: a marker is a finding, whether or not it shows evidence of a real cost)
    findings = Linter(Settings(select=["ALL"], show_hints=True)).lint_source(path.read_bytes(), str(path)).findings
    pairs = [(f.location.row, f.code) for f in findings]
    assert len(pairs) == len(set(pairs)), "a finding is reported twice"
    assert set(pairs) == expected_markers(path)


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_default_selection_reports_the_non_hint_markers(path):
    """The default selection reports the default rules' markers, except the findings that are
    hints (no evidence of a real cost): those it holds back, and counts."""
    everything = Linter(Settings(show_hints=True)).lint_source(path.read_bytes(), str(path)).findings
    hints = {(f.location.row, f.code) for f in everything if f.hint is not None}
    expected = {(row, code) for row, code in expected_markers(path) if _is_default(code)}
    result = Linter(Settings()).lint_source(path.read_bytes(), str(path))
    assert {(f.location.row, f.code) for f in result.findings} == expected - hints
    assert result.held_back == len(hints & expected)


def test_fixtures_exist_for_both_frameworks():
    names = " ".join(p.name for p in BAD)
    assert "pytorch" in names and ("keras" in names or "tensorflow" in names)
    missing = [p.name for p in BAD if not (FIXTURES / "clean" / p.name).exists()]
    assert not missing, f"fixtures without a clean twin in fixtures/clean/: {missing}"


@pytest.mark.parametrize("path", CLEAN, ids=lambda p: p.name)
def test_clean_twins_have_no_findings(path):
    assert _found(path, Settings(select=["ALL"])) == set()


def test_fixing_a_copy_leaves_only_unfixable_findings(tmp_path):
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, copy, ignore=shutil.ignore_patterns("runtime", "*.ipynb"))
    settings = Settings(select=["ALL"], unsafe_fixes=True)
    first = run([copy], settings, RunOptions(fix=True))
    assert not first.errors
    for path in copy.rglob("*.py"):
        cst.parse_module(path.read_bytes())
    assert all(f.fix is None for f in first.findings), [f for f in first.findings if f.fix]
    snapshot = {p: p.read_bytes() for p in copy.rglob("*.py")}
    second = run([copy], settings, RunOptions(fix=True))
    assert sum(o.fixed for o in second.outcomes) == 0
    assert snapshot == {p: p.read_bytes() for p in copy.rglob("*.py")}
