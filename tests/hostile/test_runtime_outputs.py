"""The runtime checker's output files: a file named with `--json`, `--html` or `--trace` is refused
before the training script starts when gpulint will not write it (a link, dangling or not, a
FIFO, a folder, a read-only file, a link on the way inside the project)."""

from __future__ import annotations

import os
import time

import pytest

from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import History, RunRecord
from tests.hostile.conftest import Sandbox

# A training script with a fix verify would apply: when it runs at all it leaves `ran` beside it.
TRAIN = """\
from pathlib import Path

Path(__file__).with_name("ran").touch()
import torch
from torch.utils.data import DataLoader

device = "cuda"
loader = DataLoader(dataset, batch_size=32)
"""
OUT = "out.json"
# Each command with an output file named OUT, on a script that would run if the file were not refused.
COMMANDS = {
    "profile --json": ("profile", "--no-history", "--json", OUT, "--", "train.py"),
    "profile --html": ("profile", "--no-history", "--html", OUT, "--", "train.py"),
    "profile --trace": ("profile", "--no-history", "--trace", OUT, "--", "train.py"),
    "verify --json": ("verify", "train.py", "--no-history", "--json", OUT, "--runs", "2", "--steps", "1"),
    "verify --param --json": ("verify", "train.py", "--param", "batch_size=16,32", "--json", OUT, "--runs", "2"),
    "scale --json": ("scale", "--nproc", "1,2", "--no-history", "--json", OUT, "--runs", "2", "--", "train.py"),
    "report --html": ("report", "1", "--history", "runs.db", "--html", OUT),
}


def _project(sandbox: Sandbox) -> None:
    sandbox.write("pyproject.toml", "[project]\nname = 'victim'\n")
    sandbox.write("train.py", TRAIN)
    run = RunRecord("profile", "gpulint profile -- train.py", '["profile", "train.py"]', "stopped", time.time())
    run.figures = [Figure("step time (mean)", 0.02, "s", better="lower", noise=0.001)]
    with History.open(sandbox.project / "runs.db") as history:
        history.record(run)


def _refused_before_the_run(sandbox: Sandbox, command: str, name: str, text: str) -> None:
    """The command, with its output file at `name`, fails at once with one line naming its option
    and `text`: exit 2, the script never started, nothing written (and, as every sandbox run
    checks, nothing outside the project changed)."""
    result = sandbox.run(*(name if arg == OUT else arg for arg in COMMANDS[command]))
    assert result.returncode == 2, result.stdout + result.stderr
    option = command.split()[-1]
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith(f"gpulint: error: {option}: ")
    assert text in result.error_lines[0], result.stderr
    assert not (sandbox.project / "ran").exists(), "the training script ran"
    assert not (sandbox.outside / "made.json").exists()
    assert not [p.name for p in sandbox.project.iterdir() if p.name.endswith(".gpulint-tmp")]


# Each hazard lays itself out in the project and returns the output file's name and what the
# refusal says.
def _link_to_a_victim(sandbox: Sandbox) -> tuple[str, str]:
    (sandbox.project / OUT).symlink_to(sandbox.outside / "victims" / "data_0.bin")
    return OUT, f"{OUT} is a symbolic link (to {sandbox.outside / 'victims' / 'data_0.bin'})"


def _dangling_link(sandbox: Sandbox) -> tuple[str, str]:
    (sandbox.project / OUT).symlink_to(sandbox.outside / "made.json")
    return OUT, f"{OUT} is a symbolic link (to {sandbox.outside / 'made.json'})"


def _fifo(sandbox: Sandbox) -> tuple[str, str]:
    os.mkfifo(sandbox.project / OUT)
    return OUT, f"{OUT} is a FIFO, not a regular file"


def _folder(sandbox: Sandbox) -> tuple[str, str]:
    (sandbox.project / OUT).mkdir()
    return OUT, f"{OUT} is a directory, not a regular file"


def _read_only(sandbox: Sandbox) -> tuple[str, str]:
    (sandbox.project / OUT).write_text("{}")
    (sandbox.project / OUT).chmod(0o444)
    return OUT, f"{OUT} is read-only"


def _linked_folder(sandbox: Sandbox) -> tuple[str, str]:
    (sandbox.project / "reports").symlink_to(sandbox.outside / "victims")
    return f"reports/{OUT}", f"{sandbox.project / 'reports'} is a symbolic link (to {sandbox.outside / 'victims'})"


HAZARDS = {
    "link": _link_to_a_victim,
    "dangling link": _dangling_link,
    "FIFO": _fifo,
    "folder": _folder,
    "read-only file": _read_only,
    "linked folder": _linked_folder,
}


@pytest.mark.parametrize("hazard", sorted(HAZARDS))
@pytest.mark.parametrize("command", ["profile --json", "profile --html", "profile --trace"])
def test_profile_refuses_an_output_file_it_will_not_write_before_the_script_starts(sandbox, command, hazard):
    _project(sandbox)
    _refused_before_the_run(sandbox, command, *HAZARDS[hazard](sandbox))


@pytest.mark.parametrize("hazard", ["link", "linked folder"])
@pytest.mark.parametrize("command", ["verify --json", "verify --param --json", "scale --json", "report --html"])
def test_every_runtime_command_refuses_its_output_file_first(sandbox, command, hazard):
    _project(sandbox)
    _refused_before_the_run(sandbox, command, *HAZARDS[hazard](sandbox))
