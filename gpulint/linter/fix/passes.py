"""Fix a source pass after pass: lint, apply the allowed fixes that do not overlap, check that the
result parses, and lint again, until nothing fixable is left.

What a run reports as fixed is counted in findings, not fixes: of the findings the source had, how
many of each rule the fixed source no longer has.  The fixes applied can be more (a fix makes a
finding that the next pass fixes: pinning a loader's memory makes its copies want
`non_blocking=True`) or fewer (one fix removes two findings, or a finding whose fix overlapped
another's is gone once that one is applied), and a user compares "Fixed N" with what the lint
found, not with what the fixer did.

The loop is bounded; a fix that never settles, or one that breaks the syntax, is reported and the
source is left as it was.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.parse import SyntaxErrorInSource, parse
from gpulint.linter.engine import Linter
from gpulint.linter.findings import RawFinding
from gpulint.linter.fix.fixer import allowed, apply_fixes, non_overlapping

if TYPE_CHECKING:
    from gpulint.linter.analysis.project import ModuleView

MAX_PASSES = 10


@dataclass
class FixOutcome:
    source: bytes  # the fixed source (the input when nothing was applied)
    applied: int = 0  # fixes applied, over all passes
    applied_codes: list[str] = field(default_factory=list)  # the rule code of each applied fix
    # The findings the fixes removed: the rule code of each (what `Fixed N problems` counts).
    fixed_codes: list[str] = field(default_factory=list)
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
    found: Counter[str] | None = None  # the rule of each finding the input has
    for _ in range(MAX_PASSES):
        analysis = linter.analyze(outcome.source, path, project)
        if analysis is None:
            return outcome
        if found is None:
            found = Counter(f.code for f in analysis.findings)
        fixable = [f for f in analysis.findings if f.fix is not None and allowed(f.fix, unsafe)]
        fixes = [f.fix for f in _in_source_order(analysis.ctx, fixable) if f.fix is not None]
        if not fixes:
            return _count_fixed(outcome, found, analysis.findings)
        chosen = non_overlapping(analysis.ctx, fixes)
        new_module = apply_fixes(analysis.ctx, chosen, linter.settings.line_length, linter.settings.layout)
        new_source = new_module.bytes
        try:
            parse(new_source)
        except SyntaxErrorInSource as exc:
            codes = ", ".join(sorted({f.code for f in analysis.findings if f.fix in chosen}))
            outcome.errors.append(
                f"{path}: fix for {codes} produced code that does not parse ({exc}); file left unchanged"
            )
            outcome.source, outcome.applied, outcome.applied_codes = source, 0, []
            return outcome
        if new_source == outcome.source:
            outcome.errors.append(f"{path}: a fix made no change; stopping")
            return _count_fixed(outcome, found, analysis.findings)
        outcome.source = new_source
        outcome.applied += len(chosen)
        applied = {id(fix) for fix in chosen}
        outcome.applied_codes += [f.code for f in analysis.findings if id(f.fix) in applied]
    analysis = linter.analyze(outcome.source, path, project)
    if analysis is not None and any(f.fix and allowed(f.fix, unsafe) for f in analysis.findings):
        outcome.errors.append(f"{path}: fixes did not settle after {MAX_PASSES} passes; file left unchanged")
        outcome.source, outcome.applied, outcome.applied_codes = source, 0, []
        return outcome
    return _count_fixed(outcome, found, analysis.findings if analysis is not None else [])


def _count_fixed(outcome: FixOutcome, found: Counter[str] | None, now: list[RawFinding]) -> FixOutcome:
    """`outcome` with the findings its fixes removed: of those `found` in the input, the ones of
    each rule the fixed source (whose findings are `now`) no longer has."""
    if outcome.changed and found is not None:
        outcome.fixed_codes = sorted((found - Counter(f.code for f in now)).elements())
    return outcome


def _in_source_order(ctx: FileContext, findings: list[RawFinding]) -> list[RawFinding]:
    """The findings by where they are in the file, so that of two fixes of one statement the first
    finding's goes first (the other is re-linted in the next pass)."""
    order = {id(node): index for index, node in enumerate(ctx.index.ordered)}

    def position(finding: RawFinding) -> int:
        node: cst.CSTNode | None = finding.node
        while node is not None and id(node) not in order:
            node = ctx.parent(node)
        return order[id(node)] if node is not None else -1

    return sorted(findings, key=position)
