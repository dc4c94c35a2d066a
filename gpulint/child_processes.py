"""The processes gpulint starts for its own work, started so that nothing in the folder it runs in
runs with them.

gpulint runs in folders it has no reason to trust: a repository just cloned, the workspace an
editor opens.  Two things would otherwise run code from there:

- A Python started as `python -m module` or `python -c CODE` puts the working directory first on
  its import path, so a `struct.py`, a `pickle.py` or a `gpulint/` package planted in it runs
  instead of the standard library's or gpulint's own.  `python_module_command` starts one of
  gpulint's own modules with this process's import path less the working directory, and a worker
  pool started by `spawn` (macOS, Windows) runs inside `spawned_without_working_directory`.
- git reads the repository's own `.git/config`, and some of its settings are commands that git
  runs (`core.fsmonitor` on every look at the working tree, a `filter` driver's `clean` command,
  the hooks of `core.hooksPath`).  Every git command gpulint runs goes through `run_git`, which
  switches those off.

The user's own training script is none of these: `gpulint profile -- python train.py` runs it as
the user's command would run, with its normal import path (docs/safety.md, "Processes gpulint
starts").
"""

from __future__ import annotations

import _thread
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

# -- Python ---------------------------------------------------------------------------------------
# Run as `python -c _RUN_MODULE MODULE N PATH_1 ... PATH_N ARGS...`: sets the import path before
# anything is imported (`sys` is built into the interpreter, so it comes from no folder), then runs
# MODULE as `python -m MODULE ARGS...` would.
#
# Why an explicit path rather than an interpreter option: `-P` (leave the working directory out)
# exists from Python 3.11 only, and gpulint supports 3.10; `-I` also drops PYTHONPATH and the
# user's site-packages, which is where gpulint may be installed (`pip install --user`, or a
# PYTHONPATH pointing at a checkout), so the child would not find gpulint at all.  This process
# found gpulint on its own import path, so the child gets that path, working directory left out,
# on every supported version.  (The child still runs `site` at start-up as usual: that happens
# before `-c` puts the working directory on the path, so nothing of it is read from there.)
_RUN_MODULE = (
    "import sys; "
    "count = int(sys.argv[2]); "
    "module = sys.argv[1]; "
    "sys.path[:] = sys.argv[3 : 3 + count]; "
    "del sys.argv[1 : 3 + count]; "
    "import runpy; "
    "runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


def python_module_command(module: str, *args: str) -> list[str]:
    """The argv that runs gpulint's own `module` with `args` in a fresh interpreter (this one's),
    as `python -m module args` would, but with `import_path()` as its import path."""
    path = import_path()
    return [sys.executable, "-c", _RUN_MODULE, module, str(len(path)), *path, *args]


def import_path() -> list[str]:
    """This process's import path less the entries that stand for the working directory: `''`
    (which `python -c` puts first, and which follows the working directory wherever it goes) and
    the folder itself (which `python -m` puts first).  The folder stays when gpulint itself was
    imported from it (gpulint run from its own checkout): this process already runs code from
    there, and the child must find the same gpulint."""
    import gpulint

    here = os.path.realpath(os.getcwd())
    own = os.path.realpath(Path(gpulint.__file__).parent.parent)
    return [
        entry for entry in sys.path if entry and (os.path.realpath(entry) != here or os.path.realpath(entry) == own)
    ]


# `spawn` starts a worker as `python -c "from multiprocessing.spawn import spawn_main; ..."`, which
# imports struct, pickle, threading and more with the working directory first on the path, before
# the worker takes this process's import path.  multiprocessing offers no way to pass the
# interpreter an option; PYTHONSAFEPATH (Python 3.11 and later) in the environment the workers
# inherit has them leave the working directory out.
SPAWN_CAN_LEAVE_OUT_WORKING_DIRECTORY = sys.version_info >= (3, 11)
_SAFE_PATH = "PYTHONSAFEPATH"
_spawn_guard_lock = _thread.allocate_lock()
_spawn_guards = 0  # how many spawned_without_working_directory blocks are running (threads may overlap)
_safe_path_before: str | None = None


@contextmanager
def spawned_without_working_directory(start_method: str) -> Iterator[None]:
    """Python processes that `multiprocessing` starts meanwhile with `start_method` ("spawn",
    "forkserver") leave the working directory off their import path (as `-P` does).  Nothing to do
    for "fork": a forked worker starts no interpreter, it has this process's import path.  Sets
    PYTHONSAFEPATH in this process's environment while the block runs, and puts back what was
    there when the last block running ends."""
    global _spawn_guards, _safe_path_before
    if start_method == "fork":
        yield
        return
    with _spawn_guard_lock:
        if _spawn_guards == 0:
            _safe_path_before = os.environ.get(_SAFE_PATH)
            os.environ[_SAFE_PATH] = "1"
        _spawn_guards += 1
    try:
        yield
    finally:
        with _spawn_guard_lock:
            _spawn_guards -= 1
            if _spawn_guards == 0:
                if _safe_path_before is None:
                    os.environ.pop(_SAFE_PATH, None)
                else:
                    os.environ[_SAFE_PATH] = _safe_path_before


# -- git ------------------------------------------------------------------------------------------
# Settings that make git run a command, switched off for every git command gpulint runs:
# - core.fsmonitor: a command git runs to ask which files changed, on every look at the working
#   tree (status, diff);
# - core.hooksPath: where hooks are looked for; `status` and `diff` write the index when they can,
#   which runs the `post-index-change` hook (and GIT_OPTIONAL_LOCKS=0 has them not write it);
# - the pager: --no-pager (git starts one only on a terminal, which captured output is not).
# Those of a diff (diff.external, a driver's `command` and `textconv`) are switched off by the
# options `run_git` gives `diff`; filter drivers, whose names are the repository's own, by
# `_filter_overrides`; submodules, whose own configurations git would read in a child git, are
# only compared by commit (--ignore-submodules=dirty).
# The system configuration (/etc/gitconfig) is the machine's administrator's and is left alone.
# (core.quotePath=false is no safety setting: file names come out as their bytes, which the review
# bot's diff reader expects.)
_CONFIG = ("core.fsmonitor=false", f"core.hooksPath={os.devnull}", "core.quotePath=false")
_SUBCOMMAND_OPTIONS = {
    "diff": ("--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty"),
    "status": ("--ignore-submodules=dirty",),
}
_FILTER_SETTINGS = {"clean": "", "smudge": "", "process": "", "required": "false"}


class GitRefused(Exception):
    """A repository whose configuration names a filter driver git cannot be told to skip."""


def run_git(args: Sequence[str], cwd: Path | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """`git ARGS` in `cwd` (default: the working directory), with no setting of the repository that
    runs a command in effect; its output as text (bytes that are not UTF-8 kept as lone surrogates,
    as file names are).  Raises what subprocess.run raises (FileNotFoundError: no git), and
    GitRefused."""
    import subprocess

    environment = {**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    base = ["git", "--no-pager"]
    for setting in _CONFIG:
        base += ["-c", setting]

    def run(command: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*base, *command],
            cwd=cwd,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            env=environment,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    for setting in _filter_overrides(run(["config", "--null", "--get-regexp", r"^filter\."]).stdout):
        base += ["-c", setting]
    command = list(args)
    if command and command[0] in _SUBCOMMAND_OPTIONS:
        command[1:1] = _SUBCOMMAND_OPTIONS[command[0]]
    return run(command)


def _filter_overrides(listing: str) -> list[str]:
    """`-c` settings that leave every filter driver of `git config --null --get-regexp` output
    (`filter.NAME.KEY\\nVALUE\\0` records) without a command and not required."""
    names = []
    for record in listing.split("\0"):
        key = record.split("\n", 1)[0]
        if key.startswith("filter.") and key.count(".") >= 2:
            name = key[len("filter.") : key.rindex(".")]
            if name not in names:
                names.append(name)
    settings = []
    for name in names:
        if "=" in name:  # `-c` splits a setting at its first "=": such a driver cannot be switched off
            raise GitRefused(f"the git configuration names a filter driver git cannot be told to skip: {name!r}")
        settings += [f"filter.{name}.{key}={value}" for key, value in _FILTER_SETTINGS.items()]
    return settings
