"""benchmarks/lint_bounds.py, the instrument behind `ratios.py --bounds`: it must lint exactly the
files it is given (their findings as a plain run reports them) and, in its floor mode, nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOUNDS = ROOT / "benchmarks" / "lint_bounds.py"
FIXTURES = ROOT / "fixtures"


def findings(command: list[str]) -> list[dict]:
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


def test_findings_only_lints_the_listed_files_as_a_plain_run_does(tmp_path):
    check = ["--no-cache", "--jobs", "1", "--output-format", "json", str(FIXTURES)]
    plain = findings([sys.executable, "-m", "gpulint", "check", *check])
    files = sorted({f["filename"] for f in plain})
    assert len(files) >= 2
    listing = tmp_path / "listed.txt"
    listing.write_text(str(ROOT / files[0]) + "\n")
    bounded = findings([sys.executable, str(BOUNDS), "findings-only", str(listing), "--", *check])
    assert bounded == [f for f in plain if f["filename"] == files[0]]


def test_no_lint_reports_nothing():
    check = ["--no-cache", "--jobs", "1", "--output-format", "json", str(FIXTURES)]
    assert findings([sys.executable, str(BOUNDS), "no-lint", "--", *check]) == []
