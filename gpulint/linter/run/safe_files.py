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

A file the user names for gpulint's output (`profile --json/--html/--trace`, `report --html`, ...)
is an `OutputFile`: checked when the command starts, so a path gpulint will not write costs no
training run, and checked again when written.  Refused: a symbolic link (dangling or not) or
anything but a regular file at that name, a read-only file or folder, a missing folder, and a
symbolic link on the way to it inside the current folder or the project (where a tree someone else
wrote may have planted one); links above those folders (a system's /tmp, a cluster's /home) are
followed.  The write is the same rename as a fix's, into the folder that was checked.
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
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# A temporary file: a new name, never through a link left at it.
_CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | _O_CLOEXEC | getattr(os, "O_BINARY", 0)
# Where a folder can be opened and files created and renamed relative to it (not Windows).
_AT_FUNCTIONS = {os.open, os.replace, os.unlink} <= os.supports_dir_fd and bool(_O_DIRECTORY)

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


def _replace(target: Path, data: bytes, mode: int, folder: os.stat_result | None = None) -> None:
    """Write `data` to a temporary file beside `target` and rename it over `target` (created with
    `mode`): a reader sees the old content or the new, never half a file.

    Both go through one descriptor of the folder, so the file lands in the folder that was opened
    even if a link replaces it meanwhile; `folder`: the folder's stat as checked, refused
    (WriteRefused) when the folder opened is another one."""
    if not _AT_FUNCTIONS:  # (Windows) by path
        _replace_by_path(target, data, mode)
        return
    folder_fd = os.open(target.parent, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        if folder is not None and not _same_file(os.fstat(folder_fd), folder):
            raise WriteRefused(f"not written: the folder {target.parent} was replaced since it was checked")
        temporary = ""
        for _ in range(100):
            temporary = f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}{TEMPORARY_SUFFIX}"
            try:
                fd = os.open(temporary, _CREATE_NEW, 0o600, dir_fd=folder_fd)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"no free temporary name in {target.parent}")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fchmod(handle.fileno(), mode)
                os.fsync(handle.fileno())
            os.replace(temporary, target.name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=folder_fd)
            except FileNotFoundError:
                pass
            raise
    finally:
        os.close(folder_fd)


def _replace_by_path(target: Path, data: bytes, mode: int) -> None:
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


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


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


@dataclass(frozen=True)
class OutputFile:
    """A file the user named for gpulint's output, checked (`checked`) before anything runs, so a
    path gpulint will not write is refused before a training run is spent; `write` checks it
    again and writes it in one rename.  `within`: the real paths of the folders a tree someone
    else wrote may hold links in (the current folder, the script's project), always with the
    current folder."""

    path: Path
    within: tuple[str, ...] = ()

    @classmethod
    def checked(cls, path: Path | str, within: Iterable[Path | str] = ()) -> OutputFile:
        """The output file at `path`; WriteRefused (a sentence naming what is wrong) for a path
        gpulint will not write."""
        folders = dict.fromkeys(os.path.realpath(folder) for folder in (os.getcwd(), *within))
        output = cls(Path(path), tuple(folders))
        output._place()
        return output

    def write(self, data: bytes) -> None:
        """Create or replace the file with `data`; WriteRefused (a sentence) when the path became
        one gpulint will not write since it was checked, or the write failed (the file is then as
        it was)."""
        place, info = self._place()
        mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
        try:
            _replace(place.path, data, mode, place.folder)
        except WriteRefused:
            raise
        except OSError as exc:  # a full disk, a folder removed meanwhile
            raise WriteRefused(f"cannot write {self.path}: {exc.strerror or exc}") from exc

    def __str__(self) -> str:
        return str(self.path)

    def _place(self) -> tuple[_Place, os.stat_result | None]:
        """Where the file is (its real folder) and its lstat (None: a new file)."""
        place = _real_place(self.path, self.within)
        try:
            info = os.lstat(place.path)
        except FileNotFoundError:
            info = None
        except OSError as exc:
            raise WriteRefused(f"cannot write {self.path}: {exc.strerror or exc}") from None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise WriteRefused(
                f"{self.path} is a symbolic link (to {os.path.realpath(place.path)}): gpulint does not write "
                "through a link"
            )
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise WriteRefused(f"{self.path} is {kind_of(info.st_mode)}, not a regular file")
        if info is not None and is_read_only(place.path, info):
            raise WriteRefused(f"{self.path} is read-only")
        if is_read_only(place.path.parent, place.folder):
            raise WriteRefused(f"the folder {place.path.parent} is read-only: {self.path} cannot be written")
        return place, info


@dataclass(frozen=True)
class _Place:
    path: Path  # the file, in its real folder
    folder: os.stat_result  # that folder's stat


def _real_place(path: Path, within: tuple[str, ...]) -> _Place:
    """`path` in its real folder, found one folder at a time from the root without following a
    link inside a folder of `within` (WriteRefused, as for a missing folder or a file on the way)."""
    absolute = Path(os.path.normpath(os.path.join(os.getcwd(), path)))
    if not absolute.name:
        raise WriteRefused(f"{path} is a directory, not a regular file")
    real = Path(absolute.anchor)
    info = os.stat(real)
    for name in absolute.parts[1:-1]:
        here = real / name
        info = _lstat_folder(here)
        if stat.S_ISLNK(info.st_mode):
            if _inside(real, within):
                raise WriteRefused(
                    f"{here} is a symbolic link (to {os.path.realpath(here)}): gpulint does not write through a "
                    "link inside the project or the current folder"
                )
            here = Path(os.path.realpath(here))
            info = _lstat_folder(here)
        if not stat.S_ISDIR(info.st_mode):
            kind = "a file" if stat.S_ISREG(info.st_mode) else kind_of(info.st_mode)
            raise WriteRefused(f"{here} is {kind}, not a folder")
        real = here
    return _Place(real / absolute.name, info)


def _lstat_folder(path: Path) -> os.stat_result:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        raise WriteRefused(f"the folder {path} does not exist") from None
    except OSError as exc:
        raise WriteRefused(f"cannot use the folder {path}: {exc.strerror or exc}") from None


def _inside(folder: Path, within: tuple[str, ...]) -> bool:
    text = str(folder)
    return any(text == top or text.startswith(top.rstrip(os.sep) + os.sep) for top in within)


def write_output_file(path: Path | str, data: bytes) -> None:
    """Create or replace a file the user named for gpulint's output, as OutputFile checks and
    writes it (relative to the current folder)."""
    OutputFile.checked(path).write(data)


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
