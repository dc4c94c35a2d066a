"""benchmarks/lint_bounds.py, the instrument behind `ratios.py --bounds`: it must lint exactly the
files it is given (their findings as a plain run reports them) and, in its floor mode, nothing."""

from __future__ import annotations

import json
import shutil
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


# A loop that calls a helper of another module under an `if`: the project index reads the
# condition (on CPython's tree, as the loop model does on libcst's) to know whether the helper runs
# every step.
TRAIN = """\
import torch
from helpers import log_loss

model = torch.nn.Linear(2, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.randn(4, 2)).sum()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        log_loss(loss)
"""
HELPERS = "def log_loss(loss):\n    print(loss.item())\n"


def test_no_lint_reports_nothing_and_never_imports_libcst(tmp_path):
    # Copies, away from this repository's configuration (its local rules are rules: libcst).
    for script in FIXTURES.glob("*.py"):
        shutil.copy(script, tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "helpers.py").write_text(HELPERS)
    check = ["--no-cache", "--jobs", "2", "--output-format", "json", str(tmp_path)]
    assert findings([sys.executable, "-m", "gpulint", "check", *check])  # a plain run finds something
    assert findings([sys.executable, str(BOUNDS), "no-lint", "--", *check]) == []
    # The floor must not pay for libcst anywhere (the rules, the pools' start, the index's guards),
    # in this process or a worker: every import is listed (-X importtime, inherited by the workers).
    run = subprocess.run(
        [sys.executable, "-X", "importtime", str(BOUNDS), "no-lint", "--", *check],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    imported = [line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")]
    assert "gpulint.linter.run.runner" in imported  # (the listing is there)
    assert not [name for name in imported if name.split(".")[0] == "libcst"], run.stderr[-2000:]
