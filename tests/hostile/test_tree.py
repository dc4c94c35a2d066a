"""Trees that are not what they seem: links out of the tree, files that are not files, folders
that cannot be read, files too large to lint, read-only files, leftovers of a killed run."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT
from tests.hostile.conftest import BOUND_S, FIXABLE

FIXED_MARK = "pin_memory=True"


def test_fix_does_not_write_through_a_file_link_out_of_the_tree(sandbox):
    sandbox.write("train.py")
    (sandbox.project / "linked.py").symlink_to(sandbox.outside / "train.py")
    result = sandbox.run(".", "--fix")
    assert result.returncode == 1 and not result.stderr  # the link is not followed, as git would not
    assert FIXED_MARK in (sandbox.project / "train.py").read_text()


def test_fix_does_not_write_through_a_folder_link_out_of_the_tree(sandbox):
    sandbox.write("src/train.py")
    (sandbox.project / "src" / "vendor").symlink_to(sandbox.outside)
    result = sandbox.run(".", "--fix")
    assert result.returncode == 1 and not result.stderr
    assert FIXED_MARK in (sandbox.project / "src" / "train.py").read_text()


def test_fix_does_not_write_through_a_link_named_on_the_command_line(sandbox):
    (sandbox.project / "linked.py").symlink_to(sandbox.outside / "train.py")
    result = sandbox.run("linked.py", "--fix")
    assert result.returncode == 2
    result.one_line("gpulint: error: linked.py: fixes not written: its real path is outside the paths given")
    assert "linked.py:5:10: GL102" in result.stdout, "the report shows the file as it is"


def test_fifo_named_like_a_source_file_is_skipped(sandbox):
    sandbox.write("train.py")
    os.mkfifo(sandbox.project / "pipe.py")
    result = sandbox.run(".")
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: pipe.py: a FIFO, not a regular file; skipped"]
    assert "train.py:5:10: GL102" in result.stdout


def test_link_to_a_device_is_not_followed_in_a_tree_and_refused_by_name(sandbox):
    sandbox.write("train.py")
    (sandbox.project / "zero.py").symlink_to("/dev/zero")
    in_tree = sandbox.run(".")
    assert in_tree.returncode == 1 and not in_tree.stderr
    named = sandbox.run("zero.py", "train.py")
    assert named.returncode == 2
    assert named.error_lines == ["gpulint: error: zero.py: a character device, not a regular file; skipped"]
    assert "train.py:5:10: GL102" in named.stdout


def test_link_loop_named_first_on_the_command_line(sandbox):
    sandbox.write("train.py")
    (sandbox.project / "loop.py").symlink_to(sandbox.project / "loop.py")
    result = sandbox.run("loop.py", "train.py")
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: loop.py: symbolic link loop; skipped"]
    assert "train.py:5:10: GL102" in result.stdout


def test_link_loops_inside_a_tree_are_not_followed(sandbox):
    sandbox.write("pkg/train.py")
    (sandbox.project / "pkg" / "again").symlink_to(sandbox.project)
    (sandbox.project / "a.py").symlink_to(sandbox.project / "b.py")
    (sandbox.project / "b.py").symlink_to(sandbox.project / "a.py")
    result = sandbox.run(".")
    assert result.returncode == 1 and not result.stderr
    assert result.stdout.count("GL102") == 1


# The walk as an unprivileged user sees a `chmod 000` folder (root reads every folder).
UNREADABLE_SCRIPT = """
import os, sys
from pathlib import Path
real_scandir = os.scandir
def scandir(path="."):
    if Path(path).name == "locked":
        raise PermissionError(13, "Permission denied", str(path))
    return real_scandir(path)
os.scandir = scandir
from gpulint.cli import main
main(sys.argv[1:])
"""


def test_unreadable_folder_is_one_line_and_the_run_goes_on(sandbox):
    sandbox.write("train.py")
    sandbox.write("locked/hidden.py")
    result = sandbox.run(".", script=UNREADABLE_SCRIPT)
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: locked: cannot read folder: Permission denied; skipped"]
    assert "train.py:5:10: GL102" in result.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 folder")
def test_chmod_000_folder_is_one_line_and_the_run_goes_on(sandbox):
    sandbox.write("train.py")
    sandbox.write("locked/hidden.py")
    (sandbox.project / "locked").chmod(0)
    try:
        result = sandbox.run(".")
    finally:
        (sandbox.project / "locked").chmod(0o755)
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: locked: cannot read folder: Permission denied; skipped"]


def test_file_over_the_size_limit_is_skipped(sandbox):
    sandbox.write("train.py")
    with open(sandbox.project / "huge.py", "wb") as handle:
        handle.truncate(3 * 2**20)
    result = sandbox.run(".")
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: huge.py: larger than max-file-size (3.0 MiB > 2.0 MiB); skipped"]
    assert "train.py:5:10: GL102" in result.stdout


def test_size_limit_is_configurable(sandbox):
    sandbox.write("pyproject.toml", '[tool.gpulint]\nmax-file-size = "1KiB"\n')
    sandbox.write("train.py")
    sandbox.write("long.py", FIXABLE + "# padding\n" * 200)
    result = sandbox.run(".")
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: long.py: larger than max-file-size (2.1 KiB > 1.0 KiB); skipped"]


def test_read_only_file_is_left_alone_and_said_so(sandbox):
    path = sandbox.write("train.py")
    path.chmod(0o444)
    result = sandbox.run(".", "--fix")
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: train.py: fixes not written: the file is read-only"]
    assert path.read_text() == FIXABLE and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert "train.py:5:10: GL102 [*]" in result.stdout, "the report lists what is still in the file"
    assert "Fixed" not in result.stdout


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_leftovers_of_a_killed_fix_are_removed_by_the_next_fix(sandbox):
    path = sandbox.write("train.py")
    stale = sandbox.project / f".train.py.{_dead_pid()}.k3x9q2ab.gpulint-tmp"
    stale.write_text("half a file")
    alive = sandbox.project / f".train.py.{os.getpid()}.z8w7v6ab.gpulint-tmp"  # a run still writing
    alive.write_text("being written")
    lint = sandbox.run(".")
    assert stale.exists(), "a plain lint writes nothing, not even a clean-up"
    result = sandbox.run(".", "--fix")
    assert result.returncode == 1
    assert "removed 1 temporary file(s) an interrupted --fix left behind" in result.one_line("warning:")
    assert not stale.exists() and alive.exists()
    assert FIXED_MARK in path.read_text() and lint.returncode == 1


@pytest.mark.slow
def test_fix_killed_midway_leaves_whole_files(sandbox):
    for index in range(40):
        sandbox.write(f"pkg/train_{index}.py", FIXABLE + f"\nstep_{index} = {index}\n" * 20)
    files = sorted((sandbox.project / "pkg").glob("*.py"))
    originals = {path: path.read_text() for path in files}
    environment = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": str(ROOT), "HOME": str(sandbox.home)}
    run = subprocess.Popen(
        [sys.executable, "-m", "gpulint", ".", "--fix", "--no-cache", "--jobs", "2"],
        cwd=sandbox.project,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the kill takes the workers too, as a CI timeout does
    )
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline and not any(FIXED_MARK in p.read_text() for p in files):
        time.sleep(0.01)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(timeout=BOUND_S)
    for path in files:  # each file is the original or the fixed one, never a mix or a truncation
        assert path.read_text().replace(", pin_memory=True", "") == originals[path], path
    result = sandbox.run(".", "--fix", "--no-cache")
    assert result.returncode == 1
    assert not list(sandbox.project.rglob("*.gpulint-tmp"))
    assert all(FIXED_MARK in p.read_text() for p in files)
