"""The whole command line on the bundled fixtures, against stored output: every finding (code,
position, message, fix edits: the JSON format) and every fix (the diff `--unsafe-fixes` would make).

A guard for refactoring the engine: any change in what gpulint reports or writes on these files
shows up here as a diff.  When a change is meant (a new rule, a better message), regenerate the
files with `GPULINT_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_fixtures_snapshot.py`
and review the diff of tests/snapshots/ like code.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import ROOT

SNAPSHOTS = ROOT / "tests" / "snapshots"
ROOT_MARK = "<repo>"


def _gpulint(*args: str) -> subprocess.CompletedProcess:
    # Every rule, its findings held back as hints by default included: the fixtures are written to
    # show each rule's findings, and the snapshot guards all of them.
    return subprocess.run(
        [sys.executable, "-m", "gpulint", "fixtures/", "--select", "ALL", "--show-hints", "--no-cache", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )


def _check(name: str, actual: str) -> None:
    actual = actual.replace(str(ROOT), ROOT_MARK)
    stored = SNAPSHOTS / name
    if os.environ.get("GPULINT_UPDATE_SNAPSHOTS"):
        stored.write_text(actual, encoding="utf-8")
    assert stored.is_file(), f"{stored} is missing: run with GPULINT_UPDATE_SNAPSHOTS=1"
    assert actual == stored.read_text(encoding="utf-8")


def test_findings_on_the_fixtures_match_the_snapshot():
    result = _gpulint("--format", "json")
    assert result.returncode == 1, result.stderr  # the fixtures have findings
    _check("fixtures.json", result.stdout)


def test_fixes_of_the_fixtures_match_the_snapshot():
    result = _gpulint("--diff", "--unsafe-fixes")
    assert result.returncode == 1, result.stderr
    _check("fixtures.diff", result.stdout + "# stderr\n" + result.stderr)
