"""Reading and writing the user's files when the tree may be hostile.

Reading: only regular files, and no more than a size limit.  A file is opened without blocking and
checked on the open descriptor (`fstat`), so a FIFO, a device or a file swapped for one after
discovery is refused instead of hanging the run or filling memory.

Writing (`--fix`, `--add-suppressions`): a file is written only if its real path lies inside the
paths the run was given (`WriteScope`), so a symbolic link never carries a fix out of the tree; a
read-only file is left alone and reported; the new content goes to a temporary file next to the
target, which is renamed over it (mode kept), so a killed run never leaves half a file.  The
temporary file's name carries the writer's process id, which lets a later `--fix` remove the
temporaries a killed run left behind without touching those of a run still going.

Folders and files of gpulint's own (the result cache, the run history) are created without
following a link (`make_real_dir`, `create_new_file`), so a link planted in their place is an error,
not a way out of the project.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# The default `max-file-size`.  A file is compiled (CPython) before the budget of syntax nodes can
# turn it away: 2 MiB of dense training code compiles to about 300 MB (docs/safety.md, "Work per
# file"); the largest .py file of torch, TensorFlow and transformers is 1.4 MB.
DEFAULT_MAX_FILE_BYTES = 2 * 2**20
TEMPORARY_SUFFIX = ".gpulint-tmp"
# `.train.py.4242.x8k2_q1z.gpulint-tmp`: the target's name, the writer's pid, mkstemp's random part.
_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.(?P<pid>\d+)\.[A-Za-z0-9_]+" + re.escape(TEMPORARY_SUFFIX) + "$")
# A temporary whose writer may still be alive on another machine (a shared folder) is removed only
# once it is this old: a write takes milliseconds.
_STALE_AFTER_S = 3600.0
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotLintable(OSError):
    """A path that is not read on purpose (not a regular file, too large); `str()` is the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class WriteRefused(OSError):
    """A write gpulint will not do (outside the given paths, read-only); `str()` is the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")


def format_size(size: int) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{size} bytes"


def read_regular_file(path: Path | str, max_bytes: int = DEFAULT_MAX_FILE_BYTES, limit: str = "max-file-size") -> bytes:
    """The bytes of a regular file of at most `max_bytes` (the setting named `limit`); NotLintable
    for anything else.

    Opened with O_NONBLOCK (a FIFO opens at once instead of waiting for a writer) and checked on
    the descriptor, so what is read is what was checked."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotLintable(f"{kind_of(info.st_mode)}, not a regular file; skipped")
        if info.st_size > max_bytes:
            raise NotLintable(_too_large(info.st_size, max_bytes, limit))
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # grew since fstat
                raise NotLintable(_too_large(total, max_bytes, limit))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _too_large(size: int, most: int, limit: str) -> str:
    return f"larger than {limit} ({format_size(size)} > {format_size(most)}); skipped"


@dataclass(frozen=True)
class WriteScope:
    """Where a run may write: inside the real path of a folder it was given, or the real path of a
    file it was given by name (not a symbolic link: a link's target was not given)."""

    folders: tuple[str, ...] = ()
    files: tuple[str, ...] = ()

    @classmethod
    def of(cls, paths: Iterable[Path | str]) -> WriteScope:
        folders, files = [], []
        for path in paths:
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                if os.path.isdir(path):  # a folder named on the command line is followed, as git -C does
                    folders.append(os.path.realpath(path))
            elif stat.S_ISDIR(info.st_mode):
                folders.append(os.path.realpath(path))
            elif stat.S_ISREG(info.st_mode):
                files.append(os.path.realpath(path))
        return cls(tuple(folders), tuple(files))

    def allows(self, path: Path | str) -> bool:
        real = os.path.realpath(path)
        if real in self.files:
            return True
        return any(real.startswith(folder.rstrip(os.sep) + os.sep) for folder in self.folders)


def write_atomic(path: Path | str, data: bytes, scope: WriteScope | None = None) -> None:
    """Replace a regular file's content in one rename, keeping its mode.

    Raises WriteRefused when the file's real path is outside `scope` or the file is read-only, and
    OSError when the write fails; the file is then unchanged."""
    target = Path(os.path.realpath(path))
    if scope is not None and not scope.allows(target):
        raise WriteRefused("not written: its real path is outside the paths given (a symbolic link?)")
    info = target.stat()
    if not stat.S_ISREG(info.st_mode):
        raise WriteRefused(f"not written: {kind_of(info.st_mode)}")
    if is_read_only(target, info):
        raise WriteRefused("not written: the file is read-only")
    _replace(target, data, stat.S_IMODE(info.st_mode))


def _replace(target: Path, data: bytes, mode: int) -> None:
    """Write `data` to a temporary file beside `target` and rename it over `target` (created with
    `mode`): a reader sees the old content or the new, never half a file."""
    import tempfile  # (only a run that writes pays for it)

    prefix = f".{target.name}.{os.getpid()}."
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=TEMPORARY_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def is_read_only(path: Path | str, info: os.stat_result) -> bool:
    """Whether the file at `path` (whose `info` the caller has) is read-only.  The mode bits, not
    os.access alone: root may write anything, but a file marked read-only is a statement by its
    owner that a tool should respect."""
    writable_bits = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    return not stat.S_IMODE(info.st_mode) & writable_bits or not os.access(path, os.W_OK)


def make_real_dir(path: Path | str) -> None:
    """Create a folder if absent; OSError when something else (a link, a file) has its name."""
    try:
        os.mkdir(path)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise NotADirectoryError(f"{path} is not a folder") from None


def create_new_file(path: Path | str, data: bytes, mode: int = 0o644) -> None:
    """Create `path` holding `data`, never through a symbolic link and never over an existing file:
    FileExistsError when anything (a dangling link included) has the name."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def write_output_file(path: Path | str, data: bytes) -> None:
    """Create or replace a file the user named for gpulint's output (a trace), in one rename, so a
    killed run never leaves half a file.  A symbolic link or anything but a regular file at that
    name is refused (WriteRefused) and left as it is: the rename would replace a link planted
    there, and the user named this path, not the link's target."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise WriteRefused("not written: it is a symbolic link")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise WriteRefused(f"not written: {kind_of(info.st_mode)}")
    if info is not None and is_read_only(path, info):
        raise WriteRefused("not written: the file is read-only")
    _replace(Path(path), data, stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask())


def _umask() -> int:
    """The process's umask (read by setting it: a command-line tool has no other thread doing so)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _writer_gone(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """Whether `pid` has exited but not been reaped.  A writer killed with its parent is reparented
    to the container's first process, which often never reaps it: it still answers `kill(pid, 0)`
    but will never finish its write."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (macOS) or already gone
        return False
    state = status.rpartition(")")[2].split()[:1]  # the command name in parentheses may hold spaces
    return state in (["Z"], ["X"])


def remove_stale_temporaries(folders: Iterable[Path | str], scope: WriteScope | None = None) -> list[str]:
    """Delete the temporary files killed `--fix` runs left in `folders`: regular files of our name
    pattern, for a target the run may write, whose writer process is gone or that are over an
    hour old.  Returns their paths."""
    removed = []
    now = time.time()
    for folder in sorted({os.fspath(f) for f in folders}):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            match = _TEMPORARY.match(entry.name)
            if match is None:
                continue
            if scope is not None and not scope.allows(os.path.join(folder, match["target"])):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and (_writer_gone(int(match["pid"])) or now - info.st_mtime > _STALE_AFTER_S):
                try:
                    os.unlink(entry.path)
                except OSError:
                    continue
                removed.append(entry.path)
    return removed
