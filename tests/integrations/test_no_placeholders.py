"""What a person reads -- every rule's findings in every output format, SARIF's rule descriptions,
review comments and the rule listings -- never shows a message template's `{placeholder}`, nor a
sentence that stops where its list should begin ("...on an accelerator:" and nothing)."""

from __future__ import annotations

import json
import re

import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.reporters import FORMATS, ReportSettings, render
from gpulint.linter.run.outcome import FileOutcome, RunResult
from gpulint.review.comments import comment_body
from gpulint.rules import all_rules
from gpulint.rules.docs import rules_table

RULES = all_rules()


def _placeholders(rule) -> set[str]:
    return set(re.findall(r"\{(\w+)\}", rule.message))


def _outside_code(text: str) -> str:
    return re.sub(r"`[^`]*`", "", text)


def _assert_readable(text: str, rule, where: str) -> None:
    for name in _placeholders(rule):
        assert "{" + name + "}" not in text, f"{rule.code} shows `{{{name}}}` in {where}: {text[:200]}"
    assert not re.search(r"\{\w+\}", _outside_code(text)), f"{rule.code}: a placeholder in {where}: {text[:200]}"
    for sentence in re.split(r"\n\s*\n", text):
        assert not sentence.rstrip().endswith(":"), f"{rule.code}: {where} stops before its list: {sentence[-120:]}"


def _result(rule) -> RunResult:
    """The findings of the rule's own Invalid cases, as a run would give them (fix edits included)."""
    outcomes = []
    for number, case in enumerate(rule.INVALID):
        linter = Linter(Settings(select=[rule.code, *case.select], unsafe_fixes=True, options=dict(case.options)))
        result = linter.lint_source(case.source.encode(), f"case{number}.py", with_edits=True)
        result.findings = [f for f in result.findings if f.code == rule.code]
        outcomes.append(FileOutcome(result))
    return RunResult(outcomes)


@pytest.mark.parametrize("rule", [r for r in RULES if r.INVALID], ids=lambda r: r.code)
def test_findings_read_well_in_every_format(rule):
    result = _result(rule)
    assert result.findings, f"{rule.code} has no Invalid case that reports"
    settings = ReportSettings(Settings(unsafe_fixes=True))
    for name in FORMATS:
        output = render(name, result, settings)
        if name in ("json", "sarif", "rdjson", "gitlab"):
            texts = list(_prose(json.loads(output)))
        else:  # (the `full` format's quoted source lines, `12 | code`, are the user's code, not prose)
            texts = [line for line in output.splitlines() if not re.match(r"\s*\d+ \| ", line)]
        for text in texts:
            _assert_readable(text, rule, f"--format {name}")
    for finding in result.findings:
        _assert_readable(comment_body(finding, "0" * 32, None), rule, "a review comment")


# Keys whose strings are what a person reads (code in fix edits, paths and ids are not).
_PROSE_KEYS = {"message", "text", "description"}
_CODE_KEYS = {"insertedContent", "content", "replacements", "suggestions", "edits"}


def _prose(value, key=None):
    if isinstance(value, str):
        if key in _PROSE_KEYS:
            yield value
    elif isinstance(value, dict):
        for inner_key, item in value.items():
            if inner_key not in _CODE_KEYS:
                yield from _prose(item, inner_key)
    elif isinstance(value, list):
        for item in value:
            yield from _prose(item, key)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_descriptions_and_listings_read_well(rule):
    _assert_readable(rule.short_description(), rule, "the short description")
    _assert_readable(rule.summary(), rule, "the summary")
    row = next(line for line in rules_table().splitlines() if f"[{rule.code}]" in line)
    _assert_readable(row, rule, "the README's rules table")
