"""The hostile-input suite: gpulint run as a user runs it (a subprocess, with a time bound) on a
project that was built to hurt it, next to files it must never touch.

`Sandbox` lays out `<tmp>/project` (the paths given to gpulint) and `<tmp>/outside` (a
checkpoint, a fixable training script, a victim folder a link may point at).  Every `run` records
the state of everything under `<tmp>` except the project before the command and checks it is
unchanged after: no file outside the target written, deleted or created.  A command that runs past
its bound fails the test instead of hanging the suite.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpulint.cli import COMMANDS
from tests.helpers import ROOT

# Every case must finish well within this (measured: the slowest case takes a few seconds on a
# loaded two-core machine); a regression that hangs fails here.
BOUND_S = 90

# A training script with a safe fix (GL102) and an unsafe one (GL101), over a dataset whose items
# decode files (so both are findings, not hints).
FIXABLE = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder
    device, dataset = "cuda", ImageFolder("data")
    loader = DataLoader(dataset, batch_size=32)
""")


SHOW_HINTS = "[tool.gpulint]\nshow-hints = true\n"


def workflow_commands(output: str) -> list[str]:
    """The lines of `output` the GitHub Actions runner would act on, read as it reads them: lines
    end at CR or LF; a line is a command when, past its leading whitespace, it begins with `::`, or
    when it holds `##[` anywhere (the older syntax; that a command of that name exists is not
    checked); after `::stop-commands::TOKEN`, nothing is one until the line `::TOKEN::`."""
    commands: list[str] = []
    resume = None
    for line in output.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        trimmed = line.lstrip()
        if resume is not None:
            if trimmed == resume:
                commands.append(trimmed)
                resume = None
            continue
        if trimmed.startswith("::") or "##[" in line:
            commands.append(trimmed)
            if trimmed.startswith("::stop-commands::"):
                resume = f"::{trimmed.removeprefix('::stop-commands::')}::"
    return commands


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    raw_stdout: bytes

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("gpulint: error: ")]

    def one_line(self, text: str) -> str:
        """The single stderr line containing `text` (fails when there is none or several)."""
        lines = [line for line in self.stderr.splitlines() if text in line]
        assert len(lines) == 1, f"expected one line with {text!r} in:\n{self.stderr}"
        return lines[0]


def _state(root: Path, skip: Path) -> dict[str, tuple]:
    """What is under `root` (not following links), `skip` left out: kind, mode, size, mtime and a
    hash of the content (of its first MiB for large files) or the link's target."""
    state: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root):
        if Path(folder) == skip:
            dirs[:] = []
            continue
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path == skip:
                continue
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                detail = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    detail = hashlib.sha256(handle.read(2**20)).hexdigest()
            else:
                detail = ""
            kind = stat.S_IFMT(info.st_mode)
            state[str(path.relative_to(root))] = (kind, info.st_mode, info.st_size, info.st_mtime_ns, detail)
    return state


class Sandbox:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "project"
        self.outside = root / "outside"
        self.home = root / "home"
        for folder in (self.project, self.outside / "victims", self.home):
            folder.mkdir(parents=True)
        # FIXABLE's findings (GL101, GL102) are held back as hints by default: the project shows
        # them, so each case's input still has findings to report, fix and post.
        (self.project / "pyproject.toml").write_text(SHOW_HINTS)
        (self.outside / "model.ckpt").write_bytes(os.urandom(4096))
        (self.outside / "train.py").write_text(FIXABLE)
        for index in range(3):
            (self.outside / "victims" / f"data_{index}.bin").write_bytes(os.urandom(1024))

    def write(self, relative: str, text: str = FIXABLE) -> Path:
        path = self.project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stdin: bytes | None = None,
        module: str | None = None,
        script: str | None = None,
    ) -> Result:
        """`python -m gpulint ARGS` (or `python -c SCRIPT ARGS`) in the project, bounded in time,
        checking that nothing outside the project changed."""
        before = _state(self.root, self.project)
        if script is None and module is None and (not args or args[0] == "check" or args[0] not in COMMANDS):
            # a lint: FIXABLE's findings are hints by default, and each case needs them reported
            # whatever configuration it writes
            args = ("check", "--show-hints", *args[1:]) if args and args[0] == "check" else ("--show-hints", *args)
        command = [sys.executable, *(["-c", script] if script else ["-m", module or "gpulint"]), *args]
        environment = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": str(ROOT), "HOME": str(self.home)}
        environment.update(env or {})
        started = time.monotonic()
        completed = subprocess.run(
            command, cwd=cwd or self.project, input=stdin, capture_output=True, env=environment, timeout=BOUND_S
        )
        result = Result(
            completed.returncode,
            completed.stdout.decode("utf-8", "replace"),
            completed.stderr.decode("utf-8", "replace"),
            time.monotonic() - started,
            completed.stdout,
        )
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
        after = _state(self.root, self.project)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert not changed, f"changed outside the project: {changed}"
        return result


@pytest.fixture
def sandbox(tmp_path) -> Sandbox:
    return Sandbox(tmp_path)
