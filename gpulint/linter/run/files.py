"""Which files to lint, and reading them without losing a byte.

Directories are walked for `*.py` and `*.ipynb`, skipping version-control folders, virtual
environments, build output, caches, whatever `.gitignore` files ignore (via `pathspec`, which
implements git's own matching rules) and the `exclude` patterns of the configuration.  A file named
explicitly on the command line is always linted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pathspec

SOURCE_SUFFIXES = (".py", ".ipynb")
SKIPPED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", "__pycache__", ".venv", "venv", ".tox", ".nox", ".eggs",
        "node_modules", "build", "dist", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        ".gpulint_cache", ".ipynb_checkpoints", ".direnv",
    }
)


@dataclass(frozen=True)
class PathError:
    """A path that cannot be linted, with the reason, shown as one line."""

    path: str
    reason: str


def _is_virtualenv(directory: Path) -> bool:
    return (directory / "pyvenv.cfg").is_file()


class _IgnoreRules:
    """Stacked .gitignore specs: each applies to paths below the folder that holds it."""

    def __init__(self, exclude: list[str], root: Path) -> None:
        self.specs: list[tuple[Path, pathspec.PathSpec]] = []
        if exclude:
            self.specs.append((root.resolve(), pathspec.GitIgnoreSpec.from_lines(exclude)))

    def load(self, directory: Path) -> int:
        gitignore = directory / ".gitignore"
        if gitignore.is_file():
            try:
                lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                return 0
            self.specs.append((directory.resolve(), pathspec.GitIgnoreSpec.from_lines(lines)))
            return 1
        return 0

    def ignored(self, path: Path, is_dir: bool) -> bool:
        resolved = path.resolve()
        for base, spec in self.specs:
            try:
                relative = resolved.relative_to(base).as_posix()
            except ValueError:
                continue
            if spec.match_file(relative + ("/" if is_dir else "")):
                return True
        return False


def discover(paths: list[Path], exclude: list[str] | None = None, root: Path | None = None) -> tuple[list[Path], list[PathError]]:
    """Files to lint, sorted and without duplicates, and the paths that could not be used."""
    files: dict[str, Path] = {}
    errors: list[PathError] = []
    rules = _IgnoreRules(exclude or [], root or Path.cwd())
    for path in paths:
        if not path.exists():
            reason = "broken symbolic link" if path.is_symlink() else "no such file or directory"
            errors.append(PathError(str(path), reason))
        elif path.is_file():
            files.setdefault(os.path.realpath(path), path)
        elif path.is_dir():
            for found in _walk(path, rules, errors):
                files.setdefault(os.path.realpath(found), found)
        else:
            errors.append(PathError(str(path), "not a regular file or directory"))
    return sorted(files.values(), key=lambda p: p.as_posix()), errors


def _walk(top: Path, rules: _IgnoreRules, errors: list[PathError]) -> Iterator[Path]:
    seen_dirs: set[tuple[int, int]] = set()

    def visit(directory: Path) -> Iterator[Path]:
        try:
            info = directory.stat()
        except OSError as exc:
            errors.append(PathError(str(directory), exc.strerror or str(exc)))
            return
        key = (info.st_dev, info.st_ino)
        if key in seen_dirs:
            errors.append(PathError(str(directory), "symbolic link loop; skipped"))
            return
        seen_dirs.add(key)
        pushed = rules.load(directory)
        try:
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError as exc:
                errors.append(PathError(str(directory), exc.strerror or str(exc)))
                return
            for entry in entries:
                child = Path(entry.path)
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    continue
                if is_dir:
                    if entry.name in SKIPPED_DIRS or _is_virtualenv(child) or rules.ignored(child, True):
                        continue
                    yield from visit(child)
                elif entry.name.endswith(SOURCE_SUFFIXES) and not rules.ignored(child, False):
                    if entry.is_symlink() and not child.exists():
                        errors.append(PathError(str(child), "broken symbolic link"))
                        continue
                    yield child
        finally:
            for _ in range(pushed):
                rules.specs.pop()

    yield from visit(top)


def read_source(path: Path) -> bytes:
    """The file's bytes (decoding is the parser's job, so encodings and newlines survive)."""
    with open(path, "rb") as handle:
        return handle.read()
