"""`make demo`, the README's first command, on a copy of the checkout: it prints what a newcomer
should read and ends with a success line, without make's `Error 1 (ignored)` (gpulint's exit 1 on
the fixtures' findings is expected); and a real failure of gpulint (exit 2) fails it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import ROOT


def _copy_of_the_checkout(target: Path) -> Path:
    """The tracked files of the working tree (what a fresh clone has, with this tree's edits)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: cannot tell which files a clone would have")
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _make_demo(checkout: Path) -> subprocess.CompletedProcess:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # As a user runs it from a shell: not as a sub-make of `make test` (MAKELEVEL makes make print
    # "make[1]: Leaving directory" after the demo's last line).
    outer_make = ("PYTHONPATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {key: value for key, value in os.environ.items() if key not in outer_make}
    return subprocess.run(
        ["make", "demo", f"PYTHON={sys.executable}"],
        cwd=checkout,
        capture_output=True,
        text=True,
        env={**env, "NO_COLOR": "1"},
        timeout=900,
    )


@pytest.mark.slow
def test_make_demo_reads_as_a_success_and_fails_on_a_real_error(tmp_path):
    checkout = _copy_of_the_checkout(tmp_path / "gpulint")
    # A configuration error is gpulint's exit 2: the target must fail, not carry on.
    broken_checkout = _copy_of_the_checkout(tmp_path / "broken")
    (broken_checkout / "fixtures" / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GL3O2"]\n')
    # Two copies, two demos at a time: each builds its own virtual environment, most of its time.
    with ThreadPoolExecutor(2) as pool:
        demo, broken = pool.map(_make_demo, (checkout, broken_checkout))

    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output
    assert "make: [" not in output and "Error 1" not in output, output  # make's "Error 1 (ignored)"
    assert "fixtures/pytorch_image_classification.py:" in demo.stdout  # the findings
    assert "+++ b/fixtures/" in demo.stdout  # the diff of the fixes
    assert demo.stdout.rstrip().splitlines()[-1].startswith("==> Demo done.")

    assert broken.returncode != 0, broken.stdout + broken.stderr
    assert "did you mean 'GL302'?" in broken.stderr
    assert "Demo done" not in broken.stdout
