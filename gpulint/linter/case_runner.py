"""Run a rule's own cases (VALID and INVALID on the rule class: gpulint/linter/rule.py, and the
Example of its docs) and say what failed.  The one implementation behind tests/test_rule_cases.py
(the built-in rules) and `gpulint test-rules` (a project's local rules).

A case runs with only its rule selected (plus the rules it names in `select`), by id, so its
findings held back as hints are shown.  A Valid case has no finding of the rule, hint or not; an
Invalid case has findings exactly at its "row:column" positions (with `hints`, exactly those hints), and,
with `fixed`, fixes (unsafe ones included) that turn it into exactly `fixed` -- code that parses,
that a second run leaves alone, and where nothing fixable is left.  The docs' Example is reported,
their "Use instead" code is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.rule import Invalid

if TYPE_CHECKING:
    from gpulint.linter.findings import Finding
    from gpulint.linter.local_rules import LocalRuleSet
    from gpulint.linter.rule import Case, Rule


@dataclass
class CaseResult:
    rule: type[Rule]
    label: str  # "VALID[1]", "INVALID[2]": which case of the rule, numbered from 1
    failures: list[str]  # empty when the case passed


def linter_for(rule: type[Rule], case: Case, local_rules: LocalRuleSet | None = None) -> Linter:
    settings = Settings(select=[rule.code, *case.select], options=dict(case.options), local_rules=local_rules)
    settings.target_tensorflow = case.target_tensorflow
    settings.target_torch = case.target_torch
    settings.target_lightning = case.target_lightning
    settings.documented_tensorflow = case.documented_tensorflow
    settings.framework = case.framework
    return Linter(settings)


def findings_of(linter: Linter, rule: type[Rule], source: str, path: str) -> list[Finding]:
    """The rule's findings in `source` (another selected rule's are not the case's business)."""
    return [f for f in linter.lint_source(source.encode(), path).findings if f.code == rule.code]


def valid_failures(rule: type[Rule], case: Case, local_rules: LocalRuleSet | None = None) -> list[str]:
    found = findings_of(linter_for(rule, case, local_rules), rule, case.source, case.path)
    return [f"reported at {f.location.row}:{f.location.column}: {f.message}" for f in found]


def invalid_failures(rule: type[Rule], case: Invalid, local_rules: LocalRuleSet | None = None) -> list[str]:
    from gpulint.linter.fix.passes import fix_source  # (only cases with fixes need the fixer)

    linter = linter_for(rule, case, local_rules)
    found = findings_of(linter, rule, case.source, case.path)
    where = [f"{f.location.row}:{f.location.column}" for f in found]
    if where != list(case.findings):
        return [f"expected findings at {', '.join(case.findings)}; found {', '.join(where) or 'none'}"]
    if case.messages is not None and [f.message for f in found] != list(case.messages):
        return [f"expected messages {list(case.messages)}; found {[f.message for f in found]}"]
    # (a case lists the hints its findings carry, None where a default run shows the finding: for a
    # rule that is a hint by default, its reason where the finding holds no evidence that lifts it)
    hints = [f.hint for f in found]
    if case.hints is not None and hints != list(case.hints):
        return [f"expected hints {list(case.hints)}; found {hints}"]
    offered = [f.fix for f in found if f.fix is not None]
    if case.fixed is None:
        return ["a fix is offered: say what it makes of the code (`fixed=`)"] if offered else []
    applicability = case.applicability or rule.fix_applicability
    if not offered:
        return ["`fixed=` is given but no finding offers a fix"]
    if not all(fix.applicability is applicability for fix in offered):
        return [f"every fix offered must be {applicability.value if applicability else 'declared'}"]
    outcome = fix_source(linter, case.source.encode(), case.path, unsafe=True)
    if outcome.errors:
        return [f"fixing failed: {error}" for error in outcome.errors]
    if outcome.source.decode() != case.fixed:
        return ["the fixed code is not `fixed`:\n" + _diff(case.fixed, outcome.source.decode())]
    # A second pass applies nothing: the fix is idempotent and no fixable finding is left.
    again = fix_source(linter, outcome.source, case.path, unsafe=True)
    if again.applied or again.errors:
        return ["the fixed code still has something to fix"]
    return []


def docs_examples(rule: type[Rule]) -> tuple[str, str | None] | None:
    """The first code block of the docs' Example section, and the one after "Use instead" (None
    when the docs say it in words); None when the docs have no Example with code."""
    if "## Example" not in rule.explanation():
        return None
    section = rule.explanation().split("## Example", 1)[1].split("\n## ", 1)[0]
    example, _, rest = section.partition("Use instead")
    blocks = re.findall(r"```python\n(.*?)```", example, re.S)
    instead = re.findall(r"```python\n(.*?)```", rest, re.S)
    return (blocks[0], instead[0] if instead else None) if blocks else None


def docs_example_failures(rule: type[Rule], local_rules: LocalRuleSet | None = None) -> list[str]:
    """The docs' Example must be reported and their "Use instead" not (every rule selected)."""
    examples = docs_examples(rule)
    if examples is None:
        return []
    # The rule named as well: a rule that is a hint by default (Rule.hint_by_default) shows its
    # findings where it is named.  Its Example must still be a finding with evidence of a cost: a
    # finding held back for another reason (no evidence) is not reported.
    linter = Linter(Settings(select=["ALL", rule.code], local_rules=local_rules))

    def reported(source: str) -> list[Finding]:
        found = findings_of(linter, rule, source, "example.py")
        return [f for f in found if f.hint is None or f.hint == rule.hint_by_default]

    example, use_instead = examples
    failures = [] if reported(example) else ["the docs' Example is not reported"]
    if use_instead is not None and reported(use_instead):
        failures.append('the docs\' "Use instead" code is reported')
    return failures


def _diff(expected: str, actual: str) -> str:
    import difflib

    lines = difflib.unified_diff(
        expected.splitlines(keepends=True), actual.splitlines(keepends=True), "expected", "fixed by the rule"
    )
    return "".join(lines).rstrip("\n")


def run_cases(rules: Iterable[type[Rule]], local_rules: LocalRuleSet | None = None) -> Iterator[CaseResult]:
    """Every case of every rule, in order; a rule without VALID or INVALID cases, or whose code
    raises on a case, is a failure (said in one line, not a traceback)."""
    for rule in rules:
        if not rule.VALID or not rule.INVALID:
            missing = " and ".join(kind for kind in ("VALID", "INVALID") if not getattr(rule, kind))
            yield CaseResult(rule, missing, [f"the rule has no {missing} cases: nothing tests it"])
        numbered: list[tuple[str, int, Case]] = [("VALID", n, c) for n, c in enumerate(rule.VALID, 1)]
        numbered += [("INVALID", n, c) for n, c in enumerate(rule.INVALID, 1)]
        for kind, number, case in numbered:
            try:
                if isinstance(case, Invalid):
                    failures = invalid_failures(rule, case, local_rules)
                else:
                    failures = valid_failures(rule, case, local_rules)
            except Exception as exc:  # noqa: BLE001 - a rule that crashes fails its case
                failures = [f"raised {exc.__class__.__name__}: {exc}"]
            yield CaseResult(rule, f"{kind}[{number}]", failures)
        if docs_examples(rule) is not None:
            try:
                failures = docs_example_failures(rule, local_rules)
            except Exception as exc:  # noqa: BLE001
                failures = [f"raised {exc.__class__.__name__}: {exc}"]
            yield CaseResult(rule, "docs Example", failures)
