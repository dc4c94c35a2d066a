"""Reading only regular files within a size, writing only inside the given paths, atomically, and
cleaning up after a killed run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from gpulint.linter.config import Settings
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.runner import run
from gpulint.linter.run.safe_files import (
    NotLintable,
    OutputFile,
    WriteRefused,
    WriteScope,
    read_regular_file,
    remove_stale_temporaries,
    write_atomic,
)

FIXABLE = "import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'\nloader = DataLoader(ds)\n"


def test_reads_a_regular_file_within_the_limit(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"x = 1\n" * 10)
    assert read_regular_file(path, 60) == b"x = 1\n" * 10
    with pytest.raises(NotLintable, match=r"larger than max-file-size \(61 bytes > 60 bytes\); skipped"):
        path.write_bytes(b"x" * 61)
        read_regular_file(path, 60)


def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    refused: list[str] = []

    def read() -> None:
        try:
            read_regular_file(fifo)
        except NotLintable as exc:
            refused.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=60)  # opening it would wait for a writer that never comes
    if reader.is_alive():
        with open(fifo, "wb"):  # the writer it waits for, so that the thread ends
            pass
        pytest.fail("opened the FIFO and waited for a writer")
    assert len(refused) == 1 and "a FIFO, not a regular file; skipped" in refused[0], refused


def test_a_folder_and_a_device_are_refused(tmp_path):
    with pytest.raises(NotLintable, match="a directory"):
        read_regular_file(tmp_path)
    with pytest.raises(NotLintable, match="a character device"):
        read_regular_file("/dev/zero")


def test_write_scope(tmp_path):
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "treehouse").mkdir()
    (tmp_path / "one.py").write_text("")
    (tmp_path / "link.py").symlink_to(tmp_path / "other.py")
    (tmp_path / "other.py").write_text("")
    scope = WriteScope.of([tmp_path / "tree", tmp_path / "one.py", tmp_path / "link.py", tmp_path / "missing"])
    assert scope.allows(tmp_path / "tree" / "sub" / "x.py")
    assert scope.allows(tmp_path / "one.py")
    assert not scope.allows(tmp_path / "treehouse" / "x.py"), "a folder's name is not a prefix of another's"
    assert not scope.allows(tmp_path / "other.py"), "a named link's target was not given"
    assert not scope.allows(tmp_path / "link.py")


def test_write_keeps_the_mode_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(b"old\n")
    path.chmod(0o640)
    write_atomic(path, b"new\n", WriteScope.of([tmp_path]))
    assert path.read_bytes() == b"new\n" and (path.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_write_refusals(tmp_path):
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    target = outside / "victim.py"
    target.write_bytes(b"keep\n")
    (inside / "link.py").symlink_to(target)
    with pytest.raises(WriteRefused, match="outside the paths given"):
        write_atomic(inside / "link.py", b"new\n", WriteScope.of([inside]))
    readonly = inside / "ro.py"
    readonly.write_bytes(b"keep\n")
    readonly.chmod(0o444)
    with pytest.raises(WriteRefused, match="read-only"):
        write_atomic(readonly, b"new\n", WriteScope.of([inside]))
    assert target.read_bytes() == b"keep\n" and readonly.read_bytes() == b"keep\n"


def test_an_output_file_follows_links_above_the_project_but_not_inside_it(tmp_path, monkeypatch):
    project = tmp_path / "disk" / "project"
    (project / "reports").mkdir(parents=True)
    (tmp_path / "home").symlink_to(tmp_path / "disk")  # the machine's layout (a cluster's /home)
    (project / "linked").symlink_to(project / "reports")  # the tree's own, even pointing inside it
    monkeypatch.chdir(project)
    OutputFile.checked(tmp_path / "home" / "project" / "reports" / "run.json").write(b"{}")
    assert (project / "reports" / "run.json").read_bytes() == b"{}"
    for name in ("linked/run.json", tmp_path / "home" / "project" / "linked" / "run.json"):
        with pytest.raises(WriteRefused, match=f"{project / 'linked'} is a symbolic link"):
            OutputFile.checked(name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(WriteRefused, match="inside the project or the current folder"):
        OutputFile.checked(project / "linked" / "run.json", within=[project])
    OutputFile.checked(project / "linked" / "new.json").write(b"{}")  # the project was not named
    assert (project / "reports" / "new.json").exists()


def test_an_output_file_is_checked_again_when_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "victim").write_bytes(b"keep")
    output = OutputFile.checked("run.json")
    (tmp_path / "run.json").symlink_to(tmp_path / "victim")  # planted while the script ran
    with pytest.raises(WriteRefused, match="run.json is a symbolic link"):
        output.write(b"{}")
    (tmp_path / "run.json").unlink()
    (tmp_path / "run.json").mkdir()
    with pytest.raises(WriteRefused, match="run.json is a directory"):
        output.write(b"{}")
    assert (tmp_path / "victim").read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "victim"]


def test_a_new_output_file_gets_the_umask_s_mode_and_an_old_one_keeps_its_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    old_mask = os.umask(0o027)
    try:
        OutputFile.checked("new.json").write(b"1")
    finally:
        os.umask(old_mask)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o640
    (tmp_path / "old.json").write_bytes(b"")
    (tmp_path / "old.json").chmod(0o600)
    OutputFile.checked("old.json").write(b"2")
    assert (tmp_path / "old.json").stat().st_mode & 0o777 == 0o600 and (tmp_path / "old.json").read_bytes() == b"2"


def test_write_leaves_the_original_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "f.py"
    path.write_bytes(b"old\n")

    def failing_replace(src, dst, **dir_fds):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_atomic(path, b"new\n")
    assert path.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.py"]


def test_a_failed_write_reports_the_file_as_it_is(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_text(FIXABLE)

    def failing_replace(src, dst, **dir_fds):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    result = run([path], Settings(select=["GL102"]), RunOptions(fix=True))
    assert [f.code for f in result.findings] == ["GL102"], "the finding is still in the file"
    assert result.errors == [f"{os.path.relpath(path)}: cannot write fixes: No space left on device"]
    assert result.outcomes[0].fixed == 0 and path.read_text() == FIXABLE


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temporaries_are_removed_and_live_ones_kept(tmp_path):
    dead = _dead_pid()
    (tmp_path / "train.py").write_text("")
    stale = tmp_path / f".train.py.{dead}.abcd1234.gpulint-tmp"
    live = tmp_path / f".train.py.{os.getpid()}.abcd1234.gpulint-tmp"
    old = tmp_path / f".train.py.{os.getpid()}.old12345.gpulint-tmp"
    linked = tmp_path / f".train.py.{dead}.link1234.gpulint-tmp"
    foreign = tmp_path / f".notes.{dead}.gpulint-tmp"  # not our pattern (no random part)
    for path in (stale, live, old, foreign):
        path.write_text("partial")
    linked.symlink_to(tmp_path / "train.py")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    removed = remove_stale_temporaries([tmp_path], WriteScope.of([tmp_path]))
    assert sorted(removed) == sorted([str(stale), str(old)])
    assert live.exists() and foreign.exists() and linked.is_symlink()


def test_temporaries_outside_the_scope_are_left(tmp_path):
    stale = tmp_path / f".train.py.{_dead_pid()}.abcd1234.gpulint-tmp"
    stale.write_text("partial")
    assert remove_stale_temporaries([tmp_path], WriteScope.of([tmp_path / "elsewhere"])) == []
    assert stale.exists()


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="zombie states are read from /proc (Linux)")
def test_a_temporary_whose_writer_is_an_unreaped_zombie_is_stale(tmp_path):
    # A writer killed along with its parent is reparented to the container's first process, which
    # often never reaps it: it still answers kill(pid, 0).  Here our own unreaped child plays it.
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "Z" not in open(f"/proc/{child.pid}/stat").read().rpartition(")")[2][:3]:
            time.sleep(0.01)
        os.kill(child.pid, 0)  # the pid still answers, as the hostile run's killed worker did
        (tmp_path / "train.py").write_text("")
        zombie_written = tmp_path / f".train.py.{child.pid}.abcd1234.gpulint-tmp"
        zombie_written.write_text("partial")
        assert remove_stale_temporaries([tmp_path], WriteScope.of([tmp_path])) == [str(zombie_written)]
    finally:
        child.wait()
