"""Every rule's own cases (VALID and INVALID on the rule class) and the Example of its docs.

The cases run through gpulint/linter/case_runner.py, the same code `gpulint test-rules` runs a
project's local rules with (it says what a Valid and an Invalid case must do).
"""

from __future__ import annotations

import pytest

from gpulint.linter.case_runner import docs_example_failures, docs_examples, invalid_failures, valid_failures
from gpulint.linter.rule import Case, Invalid, Valid
from gpulint.rules import all_rules

RULES = all_rules()


def _params(kind: type[Case]) -> list:
    return [
        pytest.param(rule, case, id=f"{rule.code}-{kind.__name__.lower()}-{number}")
        for rule in RULES
        for number, case in enumerate(rule.VALID if kind is Valid else rule.INVALID, start=1)
    ]


@pytest.mark.parametrize("rule, case", _params(Valid))
def test_valid_case_has_no_finding(rule, case):
    assert not valid_failures(rule, case)


@pytest.mark.parametrize("rule, case", _params(Invalid))
def test_invalid_case_is_reported_where_expected_and_fixed_exactly(rule, case):
    assert not invalid_failures(rule, case)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_docs_example_fires_and_use_instead_is_clean(rule):
    assert docs_examples(rule) is not None, f"the docs of {rule.code} have no Example"
    assert not docs_example_failures(rule)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_every_rule_has_cases_and_shows_its_fix(rule):
    assert rule.VALID and rule.INVALID, f"{rule.code} needs VALID and INVALID cases"
    if rule.fix_applicability is not None:
        assert any(case.fixed is not None for case in rule.INVALID), f"{rule.code}: no case shows what its fix writes"
