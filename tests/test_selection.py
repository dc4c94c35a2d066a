""" "Did you mean": a rule id or name that matches no rule gets the closest one, wherever rules are
named (command-line selection options, the configuration file, `gpulint rule`)."""

from __future__ import annotations

import pytest

from gpulint.linter.catalog import RULES
from gpulint.linter.config import ConfigError, load_settings
from gpulint.linter.selection import closest, did_you_mean, not_one_rule, prefix_matches
from tests.helpers import run_cli


@pytest.mark.parametrize(
    "typed, meant",
    [
        ("GL3O2", "GL302"),  # a letter O for the zero
        ("gl1o1", "GL101"),
        ("GL1l1", "GL101"),  # a letter l for the one
        ("GL2O", "GL20"),  # a prefix, read the same way
        ("GL3022", "GL302"),  # one extra digit
        ("per-step-loging", "per-step-logging"),
        ("dataloader_serial", "dataloader-serial"),  # the Python spelling of a name
        ("Dataloader-Serail", "dataloader-serial"),
    ],
)
def test_the_closest_rule_is_suggested(typed, meant):
    assert closest(typed, RULES)[0] == meant
    assert did_you_mean(typed, RULES) == f" (did you mean {meant!r}?)"


@pytest.mark.parametrize("typed", ["GL999", "GL5", "XYZ", "completely-unrelated-words"])
def test_nothing_is_suggested_when_nothing_is_close(typed):
    assert did_you_mean(typed, RULES) == ""


def test_suggestions_come_from_the_rules_given():
    class Local:
        code, name = "ACME101", "acme-slow-reader"

    assert did_you_mean("ACME1O1", [Local()]) == " (did you mean 'ACME101'?)"
    assert did_you_mean("acme-slow-raeder", [Local()]) == " (did you mean 'acme-slow-reader'?)"


def test_a_prefix_names_the_rules_it_selects():
    assert prefix_matches("GL20", RULES) == ["GL201", "GL202", "GL203", "GL204", "GL205"]
    message = not_one_rule("GL20", RULES)
    assert "selects 5 rules" in message and "GL201 (host-sync-in-loop)" in message and "GL205" in message


@pytest.mark.parametrize(
    "args",
    [
        ["--select", "GL3O2"],
        ["--ignore", "GL3O2"],
        ["--extend-select", "GL3O2"],
        ["rules", "--select", "GL3O2"],
    ],
)
def test_command_line_selection_suggests(args, capsys, tmp_path):
    target = [] if args[0] == "rules" else [str(tmp_path)]
    code, _, err = run_cli([*args, *target], capsys)
    assert code == 2
    assert "unknown rule selector 'GL3O2' (did you mean 'GL302'?)" in err


@pytest.mark.parametrize(
    "body",
    [
        'select = ["GL3O2"]',
        'extend-select = ["GL3O2"]',
        'ignore = ["GL3O2"]',
        'per-file-ignores = { "scripts/*.py" = ["GL3O2"] }',
    ],
)
def test_configuration_suggests(tmp_path, body):
    path = tmp_path / "pyproject.toml"
    path.write_text(f"[tool.gpulint]\n{body}\n")
    with pytest.raises(ConfigError, match=r"unknown rule selector 'GL3O2' \(did you mean 'GL302'\?\)"):
        load_settings(path)


def test_gpulint_rule_suggests_an_id_or_a_name(capsys):
    code, out, err = run_cli(["rule", "GL3O2"], capsys)
    assert code == 2 and out == ""
    assert "no rule 'GL3O2' (did you mean 'GL302'?)" in err
    code, _, err = run_cli(["rule", "dataloader-serail"], capsys)
    assert code == 2 and "did you mean 'dataloader-serial'?" in err


def test_gpulint_rule_with_a_prefix_lists_what_it_selects(capsys):
    code, _, err = run_cli(["rule", "GL20"], capsys)
    assert code == 2
    assert "'GL20' selects 5 rules, not one" in err
    assert "`gpulint rule GL201`" in err and "GL203 (host-tensor-then-copy)" in err
