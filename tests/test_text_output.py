"""The text people read: the `full` format (each finding with its source line and carets, the
default at a terminal), `concise` (one line per finding, the default in a pipe), `--output-format`
and its old spelling `--format`, `--show-fixes`, and the check options in `gpulint --help`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from gpulint.linter.findings import Finding, Location, SourceLine
from gpulint.linter.reporters.text import source_snippet
from gpulint.linter.rule import MOSTLY_NOT_WANTED
from tests.helpers import ROOT, run_cli

SCRIPT = textwrap.dedent(
    """\
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder
    dataset = ImageFolder("data")
    def train(model, optimizer):
        loader = DataLoader(dataset, batch_size=32, num_workers=4)
        model.cuda()
        for x, y in loader:
            loss = model(x.cuda(non_blocking=True), y)
            loss.backward()
            optimizer.step()
    """
)
HEADER = "train.py:6:14: GL102 [*] DataLoader without `pin_memory=True`"


# SCRIPT's finding (GL102) is held back as a hint by default; these tests are about how findings
# read, so the project shows hints, as one whose owner wants those findings does.
SHOW_HINTS = "[tool.gpulint]\nshow-hints = true\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(SHOW_HINTS)
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def test_full_shows_the_source_line_with_carets_under_the_finding(project, capsys):
    code, out, _ = run_cli(["train.py", "--no-cache", "--output-format", "full"], capsys)
    assert code == 1
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    assert lines[start + 1 : start + 7] == [
        "  |",
        "6 |     loader = DataLoader(dataset, batch_size=32, num_workers=4)",
        "  |              " + "^" * len("DataLoader(dataset, batch_size=32, num_workers=4)") + " GL102",
        "  |",
        "  = help: Pin host memory: `pin_memory=True`",
        "",
    ]
    assert lines[-1].startswith("Found 1 problem")


@pytest.mark.parametrize(
    "spelling", [[], ["--output-format", "concise"], ["--format", "concise"], ["--format", "text"]]
)
def test_concise_is_one_line_per_finding_and_the_default_in_a_pipe(project, capsys, spelling):
    code, out, _ = run_cli(["train.py", "--no-cache", *spelling], capsys)  # captured: not a terminal
    assert code == 1
    assert out.splitlines() == [
        HEADER + ": host-to-GPU copies are slower and cannot overlap compute; `ImageFolder` decodes a file for "
        f"every item (line 4), so its batches are decoded data, large to copy (hint: {MOSTLY_NOT_WANTED})",
        "Found 1 problem (1 fixable with --fix).",
    ]


def test_full_is_the_default_at_a_terminal(project):
    pty = pytest.importorskip("pty")
    parent, child = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "gpulint", "train.py", "--no-cache"]
    with subprocess.Popen(command, cwd=project, stdout=child, stderr=subprocess.PIPE, env=env) as process:
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(parent, 65536)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=60)
    os.close(parent)
    out = b"".join(chunks).decode().replace("\r\n", "\n")
    assert process.returncode == 1, out
    assert "6 |     loader = DataLoader(" in out and "^^^ GL102" in out


def test_old_format_names_still_work_and_a_bad_one_is_an_error(project, capsys):
    code, out, _ = run_cli(["train.py", "--no-cache", "--format", "json"], capsys)
    assert code == 1 and json.loads(out)[0]["code"] == "GL102"
    code, out, _ = run_cli(["train.py", "--no-cache", "--format=json"], capsys)
    assert code == 1 and json.loads(out)[0]["code"] == "GL102"
    code, _, err = run_cli(["train.py", "--no-cache", "--output-format", "yaml"], capsys)
    assert code == 2 and "unknown output format 'yaml'" in err


def _finding(line: str, column: int, end_column: int, end_row: int = 3) -> Finding:
    return Finding(
        code="GL201",
        name="host-sync-in-loop",
        message="m",
        path="a.py",
        location=Location(3, column),
        end_location=Location(end_row, end_column),
        source_line=SourceLine.of(line, column),
    )


def test_carets_follow_tabs_and_escaped_characters():
    snippet = source_snippet(_finding("\tx = '\x1b' + loss.item()", 12, 23))
    assert snippet[1] == "3 |     x = '\\x1b' + loss.item()"
    assert snippet[2] == "  | " + " " * len("    x = '\\x1b' + ") + "^" * len("loss.item()") + " GL201"


def test_a_finding_that_goes_on_below_is_underlined_to_the_end_of_its_first_line():
    snippet = source_snippet(_finding("    loader = DataLoader(  ", 14, 6, end_row=5))
    assert snippet[2] == "  |              ^^^^^^^^^^^ GL201"


def test_a_long_line_is_shown_as_a_window_around_the_finding():
    line = "x = [" + "1, " * 2000 + "loss.item()" + ", 2" * 2000 + "]"
    column = line.index("loss.item()") + 1
    finding = _finding(line, column, column + len("loss.item()"))
    assert finding.source_line is not None and len(finding.source_line.text) <= SourceLine.WIDTH + 2
    shown, carets = source_snippet(finding)[1:3]
    assert shown.startswith("3 | …") and shown.endswith("…")
    caret_at = carets.index("^")
    assert shown[caret_at : caret_at + len("loss.item()")] == "loss.item()"
    assert carets.count("^") == len("loss.item()")


def test_a_notebook_finding_shows_its_cell_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": SCRIPT},
    ]
    notebook = {
        "cells": cells,
        "metadata": {"kernelspec": {"language": "python", "name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "pyproject.toml").write_text(SHOW_HINTS)
    (tmp_path / "train.ipynb").write_text(json.dumps(notebook, indent=1))
    code, out, _ = run_cli([str(tmp_path / "train.ipynb"), "--no-cache", "--output-format", "full"], capsys)
    assert code == 1
    assert ":cell 2:6:14: GL102" in out
    assert "6 |     loader = DataLoader(dataset, batch_size=32, num_workers=4)" in out


def test_the_cache_keeps_the_source_line(project, capsys):
    first = run_cli(["train.py", "--output-format", "full"], capsys)
    again = run_cli(["train.py", "--output-format", "full"], capsys)
    assert (project / ".gpulint_cache").is_dir()
    assert first == again and "6 |     loader = DataLoader(" in again[1]


def test_show_fixes_lists_what_fix_changed(project, capsys):
    (project / "train.py").write_text(SCRIPT.replace("x.cuda(non_blocking=True)", "x.cuda()"))
    code, out, _ = run_cli(["train.py", "--no-cache", "--fix", "--show-fixes", "--select", "GL1"], capsys)
    assert code == 0, out
    assert "pin_memory=True" in (project / "train.py").read_text()
    assert out.splitlines() == [
        "Fixed 2 problems:",
        "- train.py:",
        "    1 × GL102 (dataloader-unpinned)",
        "    1 × GL104 (blocking-h2d-copy)",
    ]


def test_show_fixes_with_diff_lists_what_would_change(project, capsys):
    code, out, err = run_cli(["train.py", "--no-cache", "--diff", "--show-fixes", "--select", "GL102"], capsys)
    assert code == 1 and out.startswith("--- a/train.py")
    assert err.splitlines() == ["Would fix 1 problem:", "- train.py:", "    1 × GL102 (dataloader-unpinned)"]
    assert (project / "train.py").read_text() == SCRIPT


def test_without_show_fixes_the_summary_only_counts(project, capsys):
    (project / "train.py").write_text(SCRIPT.replace("x.cuda(non_blocking=True)", "x.cuda()"))
    code, out, _ = run_cli(["train.py", "--no-cache", "--fix", "--select", "GL1"], capsys)
    assert code == 0 and out.splitlines() == ["Fixed 2 problems."]


def test_top_level_help_shows_the_common_check_options(capsys):
    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0
    for option in ("--fix", "--unsafe-fixes", "--diff", "--show-fixes", "--select", "--ignore", "--output-format"):
        assert option in out, option
    assert "gpulint check --help" in out
