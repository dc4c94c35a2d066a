"""Which files are test code: pytest's conventions, or the project's `test-files` patterns.

Test code is not training code.  In a test file gpulint's performance rules are not reported
unless `lint-tests = true` (engine.py counts what it leaves out, the text summary says so), the
fixes that change what tests check are not offered unless `fix-tests = true`, and a loop in a test
never makes library code run per step (the project index, analysis/project.py).

The default patterns are gitignore-style, as `exclude` is: `tests/` is a folder of that name at
any depth, `test_*.py` a file name anywhere.  They are matched by a regular expression compiled
from them once; a project's own `test-files` patterns are matched as the `exclude` patterns are
(gpulint/linter/path_patterns.py, in time no pattern can make grow out of bounds).  Standard
library only otherwise: the configuration imports this before anything is parsed.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from gpulint.linter.path_patterns import GitIgnore

# pytest's file names, and the folders projects keep tests and their helpers in (accelerate's
# `test_utils/` builds the DataLoaders its tests run).
DEFAULT_TEST_FILES = ("tests/", "test/", "testing/", "test_utils/", "test_*.py", "*_test.py", "conftest.py")
# DEFAULT_TEST_FILES, as gitignore matching reads them (tests/test_test_files.py checks the two agree).
_DEFAULT_TEST_PATH = re.compile(r"(^|/)(tests?|testing|test_utils)/|(^|/)(test_[^/]*|[^/]*_test|conftest)\.py$")


def is_test_path(path: str) -> bool:
    """Whether `path` is test code by the default patterns: `test_*.py`, `*_test.py`,
    `conftest.py`, or anything under a `tests/` (`test/`, `testing/`, `test_utils/`) folder."""
    return bool(_DEFAULT_TEST_PATH.search(path.replace("\\", "/")))


def project_relative(path: Path) -> str:
    """`path` relative to the nearest folder above it that holds a `pyproject.toml` or `.git` (its
    project), or as given when there is none: a folder named `tests` above the project must not
    make all of it test code."""
    resolved = Path(os.path.realpath(path))
    project = _project_of(resolved.parent)
    return resolved.relative_to(project).as_posix() if project is not None else path.as_posix()


@lru_cache(maxsize=1024)
def _project_of(folder: Path) -> Path | None:
    if (folder / "pyproject.toml").is_file() or (folder / ".git").exists():
        return folder
    return None if folder.parent == folder else _project_of(folder.parent)


def matches_test_patterns(relative: str, patterns: tuple[str, ...]) -> bool:
    """Whether the project-relative `relative` path matches gitignore-style `patterns`."""
    return _compiled(patterns).match_file(relative.replace("\\", "/"))


@lru_cache(maxsize=8)
def _compiled(patterns: tuple[str, ...]) -> GitIgnore:
    return GitIgnore(patterns)
