"""What a run is asked to do (RunOptions) and what it gives back: one FileOutcome per file, the
RunResult of the whole run that reporters render, and the lines that say what went wrong."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulint.linter.engine import FileResult
from gpulint.linter.printable import printable
from gpulint.linter.run.files import PathError
from gpulint.linter.run.safe_files import NotLintable, WriteRefused, WriteScope


@dataclass(frozen=True)
class RunOptions:
    """What to do with each file.  Which fixes are allowed is the settings' `unsafe_fixes`."""

    fix: bool = False  # write fixed files
    diff: bool = False  # compute the diff fixes would make, write nothing
    with_edits: bool = False  # attach text edits to fixable findings (json, sarif, review)
    # Build the project index (analysis/project.py) over the run's files and the project modules
    # they import, and give each module its view.
    project_index: bool = True
    # Where --fix may write (None: anywhere).  `run` sets it from the paths it is given; it decides
    # where results go, not what they are, so it is not part of the cache key.
    write_scope: WriteScope | None = field(default=None, metadata={"changes_results": False})


@dataclass
class FileOutcome:
    result: FileResult
    diff: str | None = None  # unified diff (with --diff), or None
    fixed: int = 0  # fixes applied (written with --fix, or shown with --diff)
    # The rule of each finding those fixes removed: the problems `Fixed N` and --show-fixes count
    # (fix/passes.py: a fix may remove two findings, or make one the next pass fixes).
    fixed_codes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one-line problems with this file


@dataclass
class RunResult:
    outcomes: list[FileOutcome] = field(default_factory=list)
    path_errors: list[PathError] = field(default_factory=list)
    # Lines about the run that do not make it fail (a cache folder refused, leftovers removed).
    warnings: list[str] = field(default_factory=list)

    @property
    def findings(self):
        return [f for o in self.outcomes for f in o.result.findings]

    @property
    def held_back(self) -> int:
        """How many findings were held back as hints (no evidence of a real cost; engine.py)."""
        return sum(o.result.held_back for o in self.outcomes)

    @property
    def errors(self) -> list[str]:
        """One line per problem, safe to print (control characters in file names escaped)."""
        lines = [f"{e.path}: {e.reason}" for e in self.path_errors]
        for outcome in self.outcomes:
            lines.extend(outcome.errors)
        return [printable(line) for line in lines]


def diff_output(result: RunResult) -> bytes:
    """The `--diff` text of a run as the bytes to write to standard output."""
    return "".join(o.diff for o in result.outcomes if o.diff).encode("utf-8", "surrogateescape")


def read_problem(name: str, exc: OSError) -> str:
    """The line for a file that was not read: why it was skipped, or the system's reason."""
    if isinstance(exc, NotLintable):
        return f"{name}: {exc}"
    return f"{name}: cannot read: {exc.strerror or exc}"


def write_problem(name: str, exc: OSError, what: str = "fixes") -> str:
    """The line for changes (`what`) that were not written: gpulint's refusal, or the system's reason."""
    if isinstance(exc, WriteRefused):
        return f"{name}: {what} {exc}"
    return f"{name}: cannot write {what}: {exc.strerror or exc}"
