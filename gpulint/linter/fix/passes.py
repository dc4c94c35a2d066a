"""Fix a source pass after pass: lint, apply the allowed fixes that do not overlap, check that the
result parses, and lint again, until nothing fixable is left.

The loop is bounded; a fix that never settles, or one that breaks the syntax, is reported and the
source is left as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpulint.linter.analysis.parse import SyntaxErrorInSource, parse
from gpulint.linter.engine import Linter
from gpulint.linter.fix.fixer import allowed, apply_fixes, non_overlapping

if TYPE_CHECKING:
    from gpulint.linter.analysis.project import ModuleView

MAX_PASSES = 10


@dataclass
class FixOutcome:
    source: bytes  # the fixed source (the input when nothing was applied)
    applied: int = 0
    # What went wrong, as one line: a fix that broke parsing or never settled.  Nothing is written then.
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.applied > 0


def fix_source(linter: Linter, source: bytes, path: str, unsafe: bool, project: ModuleView | None = None) -> FixOutcome:
    """Apply fixes to a source until none is left (linting it with what the project index says
    about it).  Raises SyntaxErrorInSource if the input does not parse (the caller reports it as a
    finding)."""
    outcome = FixOutcome(source)
    for _ in range(MAX_PASSES):
        analysis = linter.analyze(outcome.source, path, project)
        if analysis is None:
            return outcome
        fixes = [f.fix for f in analysis.findings if f.fix is not None and allowed(f.fix, unsafe)]
        if not fixes:
            return outcome
        chosen = non_overlapping(analysis.ctx, fixes)
        new_module = apply_fixes(analysis.ctx, chosen)
        new_source = new_module.bytes
        try:
            parse(new_source)
        except SyntaxErrorInSource as exc:
            codes = ", ".join(sorted({f.code for f in analysis.findings if f.fix in chosen}))
            outcome.errors.append(f"{path}: fix for {codes} produced code that does not parse ({exc}); file left unchanged")
            outcome.source, outcome.applied = source, 0
            return outcome
        if new_source == outcome.source:
            outcome.errors.append(f"{path}: a fix made no change; stopping")
            return outcome
        outcome.source = new_source
        outcome.applied += len(chosen)
    analysis = linter.analyze(outcome.source, path, project)
    if analysis is not None and any(f.fix and allowed(f.fix, unsafe) for f in analysis.findings):
        outcome.errors.append(f"{path}: fixes did not settle after {MAX_PASSES} passes; file left unchanged")
        outcome.source, outcome.applied = source, 0
    return outcome


