"""Every rule's own cases (VALID and INVALID on the rule class) and the Example of its docs.

A case runs with only its rule selected (plus the rules it names in `select`).  A Valid case has
no finding of the rule; an Invalid case has findings exactly at its "row:column" positions and,
with `fixed`, fixes (unsafe ones included) that turn it into exactly `fixed` -- code that parses,
that a second run leaves alone, and where nothing fixable is left.
"""

from __future__ import annotations

import re

import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.fix.passes import fix_source
from gpulint.linter.rule import Case, Invalid, Rule, Valid
from gpulint.rules import all_rules

RULES = all_rules()


def _params(kind: type[Case]) -> list:
    return [
        pytest.param(rule, case, id=f"{rule.code}-{kind.__name__.lower()}-{number}")
        for rule in RULES
        for number, case in enumerate(rule.VALID if kind is Valid else rule.INVALID, start=1)
    ]


def _linter(rule: type[Rule], case: Case) -> Linter:
    return Linter(Settings(select=[rule.code, *case.select], options=dict(case.options)))


def _findings(linter: Linter, rule: type[Rule], source: str, path: str) -> list:
    return [f for f in linter.lint_source(source.encode(), path).findings if f.code == rule.code]


@pytest.mark.parametrize("rule, case", _params(Valid))
def test_valid_case_has_no_finding(rule, case):
    found = _findings(_linter(rule, case), rule, case.source, case.path)
    assert not found, [f"{f.location.row}:{f.location.column} {f.message}" for f in found]


@pytest.mark.parametrize("rule, case", _params(Invalid))
def test_invalid_case_is_reported_where_expected_and_fixed_exactly(rule, case):
    linter = _linter(rule, case)
    found = _findings(linter, rule, case.source, case.path)
    assert [f"{f.location.row}:{f.location.column}" for f in found] == list(case.findings)
    if case.messages is not None:
        assert [f.message for f in found] == list(case.messages)
    offered = [f.fix for f in found if f.fix is not None]
    if case.fixed is None:
        assert not offered, "a fix is offered: say what it makes of the code (`fixed=`)"
        return
    applicability = case.applicability or rule.fix_applicability
    assert offered and all(fix.applicability is applicability for fix in offered)
    outcome = fix_source(linter, case.source.encode(), case.path, unsafe=True)
    assert not outcome.errors
    assert outcome.source.decode() == case.fixed
    # A second pass applies nothing: the fix is idempotent and no fixable finding is left.
    again = fix_source(linter, outcome.source, case.path, unsafe=True)
    assert again.applied == 0 and not again.errors, "the fixed code still has something to fix"


def _docs_examples(rule: type[Rule]) -> tuple[str, str | None]:
    """The first code block of the docs' Example section, and the one after "Use instead" (None
    when the docs say it in words)."""
    section = rule.explanation().split("## Example", 1)[1].split("\n## ", 1)[0]
    example, _, rest = section.partition("Use instead")
    blocks = re.findall(r"```python\n(.*?)```", example, re.S)
    instead = re.findall(r"```python\n(.*?)```", rest, re.S)
    return blocks[0], instead[0] if instead else None


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_docs_example_fires_and_use_instead_is_clean(rule):
    linter = Linter(Settings(select=["ALL"]))
    example, use_instead = _docs_examples(rule)
    assert _findings(linter, rule, example, "example.py"), f"the Example of {rule.code} does not fire"
    if use_instead is not None:
        assert not _findings(linter, rule, use_instead, "example.py"), f"the Use instead of {rule.code} fires"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_every_rule_has_cases_and_shows_its_fix(rule):
    assert rule.VALID and rule.INVALID, f"{rule.code} needs VALID and INVALID cases"
    if rule.fix_applicability is not None:
        assert any(case.fixed is not None for case in rule.INVALID), f"{rule.code}: no case shows what its fix writes"
