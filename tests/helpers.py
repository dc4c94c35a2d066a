"""Shared test helpers: lint or fix a snippet, read `# expect:` markers from fixtures, run the CLI in-process."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from gpulint.cli import main
from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.findings import Finding
from gpulint.linter.fix.passes import fix_source

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SCHEMAS = ROOT / "tests" / "schemas"  # official schemas, vendored with their licences (see README there)

_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9,\s]+)")


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    """Run the gpulint CLI in-process; returns (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), out, err


def settings(select: str | list[str] = "ALL", **options) -> Settings:
    selected = [select] if isinstance(select, str) else list(select)
    return Settings(select=selected, options=dict(options))


def lint(source: str, select: str | list[str] = "ALL", path: str = "snippet.py", **options) -> list[Finding]:
    """Findings for a (dedented) snippet with the given rules selected."""
    linter = Linter(settings(select, **options))
    return linter.lint_source(textwrap.dedent(source).encode(), path).findings


def codes(source: str, select: str | list[str] = "ALL", **options) -> list[str]:
    return [f.code for f in lint(source, select, **options)]


def rows(source: str, select: str | list[str] = "ALL", **options) -> list[tuple[int, str]]:
    return [(f.location.row, f.code) for f in lint(source, select, **options)]


def fix(source: str, select: str | list[str] = "ALL", unsafe: bool = True, path: str = "snippet.py", **options) -> str:
    """The snippet after `--fix` (with unsafe fixes by default)."""
    linter = Linter(settings(select, **options))
    outcome = fix_source(linter, textwrap.dedent(source).encode(), path, unsafe)
    assert not outcome.errors, outcome.errors
    return outcome.source.decode()


def assert_fix_ok(source: str, select: str | list[str], unsafe: bool = True, **options) -> str:
    """Fix a snippet and check what every fix must guarantee: the output parses, a second run
    changes nothing, and the fixed rule no longer fires (when its fix applies).  Returns the output."""
    fixed = fix(source, select, unsafe, **options)
    cst.parse_module(fixed)  # raises if the fix broke the syntax
    assert fix(fixed, select, unsafe, **options) == fixed, "fix is not idempotent"
    linter = Linter(settings(select, **options))
    remaining = linter.lint_source(fixed.encode(), "snippet.py").findings
    allowed = {"safe"} | ({"unsafe"} if unsafe else set())
    assert not [f for f in remaining if f.fix and f.fix.applicability.value in allowed], remaining
    return fixed


def expected_markers(path: Path) -> set[tuple[int, str]]:
    """(row, code) pairs from `# expect: GL101, GL102` comments in a fixture."""
    expected = set()
    for row, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            for code in re.split(r"[,\s]+", match.group(1).strip()):
                if code:
                    expected.add((row, code))
    return expected
