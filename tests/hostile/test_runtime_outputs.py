"""The runtime checker's output files and processes: a file named with `--json`, `--html` or
`--trace` is refused before the training script starts when gpulint will not write it (a link,
dangling or not, a FIFO, a folder, a read-only file, a link on the way inside the project), and
the training processes end with gpulint however gpulint is stopped (SIGTERM, SIGHUP, SIGINT,
SIGQUIT, SIGKILL), ranks under a launcher included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import History, RunRecord
from tests.helpers import ROOT
from tests.hostile.conftest import BOUND_S, Sandbox

# A training script with a fix verify would apply: when it runs at all it leaves `ran` beside it.
TRAIN = """\
from pathlib import Path

Path(__file__).with_name("ran").touch()
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder
device, dataset = "cuda", ImageFolder("data")
loader = DataLoader(dataset, batch_size=32)
"""
# A script that never makes a step and never ends by itself; it says who it is first (each rank
# under a launcher), and with IGNORE_TERM it ignores SIGTERM.
SLEEPER = """\
import os
import signal
import sys
import time
from pathlib import Path

if "IGNORE_TERM" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
here = Path(__file__).parent
rank = os.environ.get("RANK", "")
(here / f"pid{rank}.tmp").write_text(str(os.getpid()))  # (one per rank: ranks start together)
os.replace(here / f"pid{rank}.tmp", here / f"pid{rank}")
while True:
    time.sleep(0.5)
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


# -- processes ---------------------------------------------------------------------------------
def _start_profile(sandbox: Sandbox, *command: str, prefix: tuple[str, ...] = (), ranks: int = 0):
    """`gpulint profile -- COMMAND` (default: the sleeper) started as a user starts it (after
    `prefix`: `nohup`), and the training processes' pids once they run (`ranks` of them under a
    launcher)."""
    sandbox.write("sleeper.py", SLEEPER)
    environment = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": str(ROOT), "HOME": str(sandbox.home)}
    gpulint = subprocess.Popen(
        [*prefix, sys.executable, "-m", "gpulint", "profile", "--no-history", "--", *(command or ["sleeper.py"])],
        cwd=sandbox.project,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    pid_files = [sandbox.project / f"pid{rank}" for rank in range(ranks)] if ranks else [sandbox.project / "pid"]
    deadline = time.monotonic() + BOUND_S
    while not all(path.exists() for path in pid_files):
        assert gpulint.poll() is None, gpulint.communicate()
        if time.monotonic() > deadline:
            _end(gpulint, [])
            raise AssertionError("the script never started")
        time.sleep(0.1)
    return gpulint, [int(path.read_text()) for path in pid_files]


def _gone(pid: int) -> bool:
    """Whether process `pid` has ended (an ended process nobody reaped yet counts as ended)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + BOUND_S
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _end(gpulint: subprocess.Popen, children: list[int]) -> None:
    """End what a test started, whatever it found."""
    if gpulint.poll() is None:
        gpulint.kill()
    gpulint.communicate()
    for child in children:
        if not _gone(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT"])
def test_the_training_process_ends_with_gpulint(sandbox, name):
    gpulint, children = _start_profile(sandbox)
    try:
        gpulint.send_signal(getattr(signal, name))
        _, stderr = gpulint.communicate(timeout=BOUND_S)
        assert _wait_gone(children[0]), f"the training process outlived gpulint stopped by {name}"
        number = getattr(signal, name)
        assert gpulint.returncode == 128 + number, stderr
        assert stderr.decode().splitlines()[-1] == (
            f"gpulint: error: stopped by {name}: ended python sleeper.py and every process it started"
        )
    finally:
        _end(gpulint, children)


def test_the_training_process_ends_when_gpulint_is_killed(sandbox):
    gpulint, children = _start_profile(sandbox)
    try:
        gpulint.kill()
        gpulint.communicate(timeout=BOUND_S)
        assert _wait_gone(children[0]), "the training process outlived gpulint killed with SIGKILL"
    finally:
        _end(gpulint, children)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGKILL"])
def test_ranks_that_ignore_sigterm_end_with_gpulint(sandbox, name):
    """torchrun starts each rank in a session of its own, out of reach of a signal to torchrun's
    process group; ranks that ignore SIGTERM outlive a torchrun that is killed."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    gpulint, ranks = _start_profile(sandbox, *launcher, "sleeper.py", "IGNORE_TERM", ranks=2)
    try:
        gpulint.send_signal(getattr(signal, name))
        gpulint.communicate(timeout=BOUND_S)
        assert all(_wait_gone(rank) for rank in ranks), f"a rank outlived gpulint stopped by {name}"
    finally:
        _end(gpulint, ranks)


def test_a_hangup_that_nohup_ignores_stays_ignored(sandbox):
    """Under `nohup` (SIGHUP ignored) a hangup stops neither gpulint nor its run: the SIGTERM sent
    after it is what stops them (a gpulint that took the hangup would stop on it first: exit 129)."""
    gpulint, children = _start_profile(sandbox, prefix=("nohup",))
    try:
        gpulint.send_signal(signal.SIGHUP)
        gpulint.send_signal(signal.SIGTERM)
        _, stderr = gpulint.communicate(timeout=BOUND_S)
        assert gpulint.returncode == 128 + signal.SIGTERM, stderr
        assert "stopped by SIGTERM" in stderr.decode()
        assert _wait_gone(children[0])
    finally:
        _end(gpulint, children)
