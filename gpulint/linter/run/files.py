"""Which files to lint, and reading them without losing a byte.

Directories are walked for `*.py` and `*.ipynb`, skipping version-control folders, virtual
environments, build output, caches, whatever `.gitignore` files ignore (git's matching rules, in
gpulint/linter/path_patterns.py, which no pattern can make slow) and the `exclude` patterns of the
configuration.  A `.gitignore` line that cannot be read (a lone trailing backslash) is left out, as
git leaves it.  A file named
explicitly on the command line is always linted.

Symbolic links inside a folder are not followed, as git stores a link and not its target (and ruff
does not descend into linked folders): a link cannot lead the walk out of the tree, into a loop, or
to a device, and a linked file inside the tree is linted under its own name.  A folder or file
named on the command line is followed.  Anything that is neither a folder nor a regular file (a
FIFO named `x.py`) is reported in one line and skipped, as is a folder that cannot be read.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from gpulint.linter.path_patterns import GitIgnore
from gpulint.linter.run.safe_files import DEFAULT_MAX_FILE_BYTES, kind_of, read_regular_file
from gpulint.linter.run.stamps import Stamp, recordable, stamp_of, unchanged

SOURCE_SUFFIXES = (".py", ".ipynb")
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".eggs",
        "node_modules",
        "build",
        "dist",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".gpulint_cache",
        ".ipynb_checkpoints",
        ".direnv",
    }
)


@dataclass(frozen=True)
class PathError:
    """A path that cannot be linted, with the reason, shown as one line."""

    path: str
    reason: str


class Walk(NamedTuple):
    """A folder's discovery, as a run made it: the folder as named, the exclude patterns and the
    folder they are relative to, the files found and their real paths (in the same order)."""

    top: Path
    patterns: tuple[list[str], Path]
    files: list[Path]
    reals: list[str]


# A .gitignore larger than this is not one a person wrote; it is not read.
_GITIGNORE_MAX_BYTES = 2**20


def _is_virtualenv(directory: Path) -> bool:
    return os.path.isfile(directory / "pyvenv.cfg")  # False, not an error, when unreadable


class WalkStamps:
    """What a walk read besides the files it found -- each folder it listed or skipped as a
    virtual environment, each .gitignore -- with its stat data as the walk read it.  While none of
    it changed, a walk of the same folder with the same patterns finds the same files (adding,
    removing or renaming an entry changes its folder's stat data; run/stamps.py says what stat
    data can and cannot tell): an editor's index walks its project again on every edit."""

    def __init__(self) -> None:
        self.started = time.time_ns()
        self.stamps: dict[str, Stamp] = {}

    def note(self, path: Path) -> None:
        self.stamps[str(path)] = recordable(stamp_of(path), self.started)

    def unchanged(self) -> bool:
        return all(unchanged(path, stamp) for path, stamp in self.stamps.items())


class _IgnoreRules:
    """Stacked .gitignore specs: each applies to paths below the folder that holds it."""

    def __init__(self, exclude: list[str], root: Path, noted: WalkStamps | None = None) -> None:
        self.specs: list[tuple[Path, GitIgnore]] = []
        self.noted = noted
        if exclude:
            self.specs.append((root.resolve(), GitIgnore(exclude)))

    def load(self, directory: Path, resolved: Path) -> int:
        """Push the folder's .gitignore, if it has one (`resolved`: the folder's real path)."""
        gitignore = directory / ".gitignore"
        try:
            if not stat.S_ISREG(os.lstat(gitignore).st_mode):
                return 0  # git does not follow a .gitignore that is a symbolic link either
            if self.noted is not None:
                self.noted.note(gitignore)
            text = read_regular_file(gitignore, _GITIGNORE_MAX_BYTES)
        except OSError:
            return 0
        lines = text.decode("utf-8", errors="replace").splitlines()
        self.specs.append((resolved, GitIgnore(lines)))
        return 1

    def ignored(self, resolved: Path, is_dir: bool) -> bool:
        """Whether a path (its real path) is ignored."""
        for base, spec in self.specs:
            try:
                relative = resolved.relative_to(base).as_posix()
            except ValueError:
                continue
            if spec.match_file(relative + ("/" if is_dir else "")):
                return True
        return False


def discover(
    paths: list[Path], exclude: list[str] | None = None, root: Path | None = None
) -> tuple[list[Path], list[PathError]]:
    """Files to lint, sorted and without duplicates, and the paths that could not be used."""
    files, errors = discover_real(paths, exclude, root)
    return sorted(files.values(), key=lambda p: p.as_posix()), errors


def discover_real(
    paths: list[Path], exclude: list[str] | None = None, root: Path | None = None, noted: WalkStamps | None = None
) -> tuple[dict[str, Path], list[PathError]]:
    """`discover`'s files by their real paths (which the run needs again), unsorted; `noted` gets
    what the walks read besides them."""
    files: dict[str, Path] = {}
    errors: list[PathError] = []
    rules = None  # built for the first directory walked
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            errors.append(PathError(str(path), _stat_problem(path, exc)))
            continue
        if stat.S_ISREG(mode):
            files.setdefault(os.path.realpath(path), path)
        elif stat.S_ISDIR(mode):
            rules = rules or _IgnoreRules(exclude or [], root or Path.cwd(), noted)
            for found, real in _walk(path, rules, errors):
                files.setdefault(str(real), found)
        else:
            errors.append(PathError(str(path), f"{kind_of(mode)}, not a regular file; skipped"))
    # A path both named and found by a walk is reported once.
    return files, list(dict.fromkeys(errors))


def _stat_problem(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symbolic link loop; skipped"
    if exc.errno == errno.ENOENT:
        return "broken symbolic link" if os.path.islink(path) else "no such file or directory"
    return exc.strerror or str(exc)


def _walk(top: Path, rules: _IgnoreRules, errors: list[PathError]) -> Iterator[tuple[Path, Path]]:
    """The files under `top` to lint, each with its real path."""
    seen_dirs: set[tuple[int, int]] = set()

    # `resolved`: the folder's real path.  The walk follows no symbolic link below `top`, so a
    # child's real path is its folder's and its name: only `top` is resolved (resolving every
    # path, a system call per component, was a third of a warm run's discovery).
    def visit(directory: Path, resolved: Path) -> Iterator[tuple[Path, Path]]:
        if rules.noted is not None:
            # (before the listing: a change during it shows next time; a folder that cannot be
            # stat'ed has no stat data, and the walk is made again every time while it has none)
            rules.noted.note(directory)
        try:
            info = directory.stat()
        except OSError as exc:
            errors.append(PathError(str(directory), exc.strerror or str(exc)))
            return
        key = (info.st_dev, info.st_ino)
        if key in seen_dirs:  # only a bind mount can bring a walk that follows no link back here
            errors.append(PathError(str(directory), "folder reached twice (a bind mount?); skipped"))
            return
        seen_dirs.add(key)
        pushed = rules.load(directory, resolved)
        try:
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError as exc:
                errors.append(PathError(str(directory), f"cannot read folder: {exc.strerror or exc}; skipped"))
                return
            for entry in entries:
                child = Path(entry.path)
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue  # removed while walking
                if stat.S_ISLNK(mode):
                    continue
                if stat.S_ISDIR(mode):
                    if entry.name in SKIPPED_DIRS or rules.ignored(resolved / entry.name, True):
                        continue
                    if _is_virtualenv(child):
                        if rules.noted is not None:
                            rules.noted.note(child)  # (no longer one once its pyvenv.cfg is gone)
                        continue
                    yield from visit(child, resolved / entry.name)
                elif entry.name.endswith(SOURCE_SUFFIXES) and not rules.ignored(resolved / entry.name, False):
                    if stat.S_ISREG(mode):
                        yield child, resolved / entry.name
                    else:
                        errors.append(PathError(str(child), f"{kind_of(mode)}, not a regular file; skipped"))
        finally:
            for _ in range(pushed):
                rules.specs.pop()

    yield from visit(top, top.resolve())


def read_source(path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """The file's bytes (decoding is the parser's job, so encodings and newlines survive); raises
    OSError, and NotLintable for a file that is not regular or over `max_bytes`."""
    return read_regular_file(path, max_bytes)
