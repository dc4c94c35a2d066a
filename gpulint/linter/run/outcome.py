"""What a run is asked to do (RunOptions) and what it gives back: one FileOutcome per file, and
the RunResult of the whole run that reporters render."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulint.linter.engine import FileResult
from gpulint.linter.run.files import PathError


@dataclass(frozen=True)
class RunOptions:
    """What to do with each file.  Which fixes are allowed is the settings' `unsafe_fixes`."""

    fix: bool = False  # write fixed files
    diff: bool = False  # compute the diff fixes would make, write nothing
    with_edits: bool = False  # attach text edits to fixable findings (json, sarif, review)


@dataclass
class FileOutcome:
    result: FileResult
    diff: str | None = None  # unified diff (with --diff), or None
    fixed: int = 0  # fixes applied (written with --fix, or shown with --diff)
    errors: list[str] = field(default_factory=list)  # one-line problems with this file


@dataclass
class RunResult:
    outcomes: list[FileOutcome] = field(default_factory=list)
    path_errors: list[PathError] = field(default_factory=list)

    @property
    def findings(self):
        return [f for o in self.outcomes for f in o.result.findings]

    @property
    def errors(self) -> list[str]:
        lines = [f"{e.path}: {e.reason}" for e in self.path_errors]
        for outcome in self.outcomes:
            lines.extend(outcome.errors)
        return lines
