"""Every rule meets the catalog's standards, and the generated docs are current."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gpulint.linter.analysis.facts import Fact
from gpulint.linter.findings import Applicability
from gpulint.rules import all_rules
from tests.helpers import ROOT

RULES = all_rules()


def test_ids_and_names_are_unique_and_well_formed():
    assert len({r.code for r in RULES}) == len(RULES)
    assert len({r.name for r in RULES}) == len(RULES)
    for rule in RULES:
        assert re.fullmatch(r"GL[1-9]\d\d|GL000", rule.code), rule.code  # (GL000: the file does not parse)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name), rule.name


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_documentation_has_every_section(rule):
    text = rule.explanation()
    for heading in ("## What it finds", "## Why it is slow", "## Example", "## Fix"):
        assert heading in text, f"{rule.code} lacks {heading}"
    fix_heading = re.search(r"## Fix(?: \((safe|unsafe)\))?", text)
    declared = fix_heading.group(1)
    actual = rule.fix_applicability.value if rule.fix_applicability else None
    assert declared == actual, f"{rule.code}: docs say fix {declared}, class says {actual}"
    assert rule.default in ("on", "hint")
    assert rule.message
    if rule.visited_types():  # a rule that reads the tree must say what text it needs (prefilter)
        assert rule.tokens or any(fact.tokens for fact in rule.requires), f"{rule.code} has no prefilter"
    assert all(isinstance(fact, Fact) for fact in rule.requires), f"{rule.code}: requires holds facts"
    assert rule.fix_applicability in (None, Applicability.SAFE, Applicability.UNSAFE)


def test_generated_docs_are_current():
    result = subprocess.run(
        [sys.executable, "scripts/gen_docs.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_summary_is_the_what_it_finds_text(rule):
    text = rule.explanation()
    section = text.split("## What it finds", 1)[1].split("\n\n", 1)[0] if "## What it finds" in text else text
    assert rule.summary() and not rule.summary().startswith("#")
    # The paragraph, and the list it introduces (if any) joined into the sentence.
    intro = " ".join(section.split("\n- ")[0].split("\n* ")[0].split())
    assert rule.summary().startswith(intro.removesuffix(":")) and not rule.summary().endswith(":")


def test_options_are_declared_once_and_validated():
    from gpulint.linter.config import ConfigError, Settings, validate
    from gpulint.rules import rule_options

    options = rule_options()
    assert {"num-workers", "log-every", "eval-every", "checkpoint-every", "steps-per-execution"} <= set(options)
    readers = {key: [r.code for r in RULES if options[key] in r.options] for key in options}
    assert readers["log-every"] == ["GL201", "GL302", "GL706"] and readers["num-workers"] == ["GL101", "GL801"]
    for key, bad in [("num-workers", "min(8,"), ("log-every", 0), ("steps-per-execution", -1)]:
        with pytest.raises(ConfigError, match=key):
            validate(Settings(options={key: bad}))


def test_a_rule_reads_only_the_options_it_declares():
    import libcst as cst

    from gpulint.linter.analysis.context import FileContext
    from gpulint.rules import rules_by_code
    from gpulint.rules.options import LOG_EVERY, NUM_WORKERS

    rule = rules_by_code()["GL201"](FileContext(cst.parse_module(""), "x.py", {"log-every": 7}, frozenset()))
    assert rule.option(LOG_EVERY) == 7
    with pytest.raises(KeyError, match="num-workers"):
        rule.option(NUM_WORKERS)
