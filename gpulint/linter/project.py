"""What the project around the linted files says that shapes the fixes: the line length its
formatter keeps, and the oldest PyTorch it declares it runs on.

* line length: `[tool.ruff] line-length`, else `[tool.black] line-length`, else 88 (both tools'
  default) -- fixed lines are wrapped to it;
* PyTorch: the lowest version the project's requirements allow for `torch` -- `[project]
  dependencies` and optional dependencies in pyproject.toml, then `requirements*.txt` beside it
  (`torch>=2.1`, `torch==1.13.1`, `torch~=2.2`); a bound that cannot be read, or no `torch`
  requirement at all, means no limit.  `target-torch = "2.1"` in `[tool.gpulint]` says it
  outright, as ruff's `target-version` does for Python.  A fix that needs a newer PyTorch
  (`torch.amp.GradScaler("cuda")` needs 2.3) is then not offered; the finding stays;
* TensorFlow: the lowest version the same requirements allow for `tensorflow` (also
  `tensorflow-cpu`, `tensorflow-gpu`, `tensorflow-macos`), or `target-tensorflow = "2.10"`.  Rules
  about tf.data defaults read it: TensorFlow 2.13 and later inject a final prefetch by themselves.

Also where a file's project starts (`project_root`): the project index reads the whole project a
linted file belongs to, whatever paths the run names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulint.linter.run.safe_files import read_regular_file

DEFAULT_LINE_LENGTH = 88
_REQUIREMENTS_MAX_BYTES = 2**20
_TORCH_REQUIREMENT = re.compile(r"^\s*torch\s*(\[[^\]]*\])?\s*(?P<specs>[^;#]*)", re.IGNORECASE)
_TENSORFLOW_REQUIREMENT = re.compile(
    r"^\s*tensorflow(-cpu|-gpu|-macos)?\s*(\[[^\]]*\])?\s*(?P<specs>([<>=!~][^;#]*)?)(;.*|#.*)?$", re.IGNORECASE
)
_LOWER_BOUND = re.compile(r"(>=|==|~=|===|>)\s*v?(?P<major>\d+)\.(?P<minor>\d+)")


@dataclass(frozen=True)
class ProjectFacts:
    line_length: int = DEFAULT_LINE_LENGTH
    target_torch: tuple[int, int] | None = None  # None: no limit known
    target_tensorflow: tuple[int, int] | None = None  # None: no version known


def project_root(path: Path) -> Path | None:
    """The root of the project `path` (a file or folder) belongs to, found as ruff finds it: the
    nearest folder at or above it that holds a pyproject.toml or a .git; None when there is none."""
    directory = Path(os.path.realpath(path))  # (not resolve(): a symbolic link loop must not raise)
    if not directory.is_dir():
        directory = directory.parent
    for folder in (directory, *directory.parents):
        if (folder / "pyproject.toml").is_file() or (folder / ".git").exists():
            return folder
    return None


def parse_version(text: str) -> tuple[int, int]:
    """`"2.1"` -> (2, 1); raises ValueError for anything else."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)(\.\d+)?\s*", text)
    if match is None:
        raise ValueError(f"not a MAJOR.MINOR version: {text!r}")
    return int(match.group(1)), int(match.group(2))


def torch_lower_bound(requirements: Iterable[str]) -> tuple[int, int] | None:
    """The lowest torch version the requirement lines allow (None: no lower bound among them)."""
    bounds = []
    for line in requirements:
        match = _TORCH_REQUIREMENT.match(line)
        if match is None or re.match(r"^\s*torch[\w.-]", line, re.IGNORECASE):  # torchvision, torch-xla
            continue
        for bound in _LOWER_BOUND.finditer(match.group("specs")):
            bounds.append((int(bound.group("major")), int(bound.group("minor"))))
    return max(bounds) if bounds else None


def tensorflow_lower_bound(requirements: Iterable[str]) -> tuple[int, int] | None:
    """The lowest TensorFlow version the requirement lines allow (None: no lower bound among them)."""
    bounds = []
    for line in requirements:
        match = _TENSORFLOW_REQUIREMENT.match(line.strip())
        if match is None:
            continue  # (tensorflow-datasets, tensorflow-addons: other packages)
        for bound in _LOWER_BOUND.finditer(match.group("specs")):
            bounds.append((int(bound.group("major")), int(bound.group("minor"))))
    return max(bounds) if bounds else None


def facts_from(pyproject: dict[str, Any], directory: Path | None) -> ProjectFacts:
    """The facts of a project from its parsed pyproject.toml (and requirement files in `directory`)."""
    tool = pyproject.get("tool", {})
    line_length = DEFAULT_LINE_LENGTH
    for formatter in ("ruff", "black"):
        value = tool.get(formatter, {}).get("line-length")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            line_length = value
            break
    requirements = list(pyproject.get("project", {}).get("dependencies", []))
    for group in pyproject.get("project", {}).get("optional-dependencies", {}).values():
        requirements.extend(group)
    if directory is not None:
        for path in sorted(directory.glob("requirements*.txt")):
            try:
                text = read_regular_file(path, _REQUIREMENTS_MAX_BYTES, "the size of a requirements file")
            except OSError:
                continue  # a requirements file that cannot be read says nothing about torch
            requirements.extend(text.decode("utf-8", errors="replace").splitlines())
    lines = [r for r in requirements if isinstance(r, str)]
    return ProjectFacts(line_length, torch_lower_bound(lines), tensorflow_lower_bound(lines))
