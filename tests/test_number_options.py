"""Options that take a number with a fraction (timeouts, durations, prices, rates): `nan`, `inf` and
negative numbers are usage errors, where `float()` would take them and a timeout of nan would never
fire (gpulint/cli/options.py `positive_number`, `non_negative_number`)."""

from __future__ import annotations

import argparse
import math

import pytest

from gpulint.cli import COMMANDS, command_parser
from gpulint.cli.options import non_negative_number, positive_number
from tests.helpers import run_cli

NUMBER_TYPES = (positive_number, non_negative_number)


def _number_options() -> list[tuple[str, argparse.Action]]:
    return [
        (name, action)
        for name in COMMANDS
        for action in command_parser(name)._actions
        if action.type is float or action.type in NUMBER_TYPES
    ]


def test_every_option_with_a_fraction_uses_the_shared_type():
    found = _number_options()
    assert {(name, action.option_strings[0]) for name, action in found} >= {
        ("profile", "--timeout"),
        ("profile", "--seconds"),
        ("profile", "--peak-tflops"),
        ("verify", "--timeout"),
        ("scale", "--timeout"),
        ("server", "--time-limit"),
    }
    assert [(name, action.option_strings) for name, action in found if action.type is float] == []


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "1e400", "-1", "abc", ""])
def test_nan_infinities_negatives_and_words_are_refused(text):
    for number in NUMBER_TYPES:
        with pytest.raises(argparse.ArgumentTypeError, match=f"must be a number .*, not {text!r}"):
            number(text)


def test_zero_is_refused_where_it_makes_no_sense_and_numbers_are_read():
    with pytest.raises(argparse.ArgumentTypeError, match="must be a number above 0, not '0'"):
        positive_number("0")
    assert non_negative_number("0") == 0.0
    assert positive_number("2.5") == 2.5 and positive_number("1e3") == 1000.0
    assert math.isfinite(positive_number("1e300"))


@pytest.mark.parametrize(
    "args",
    [
        ["profile", "--timeout", "nan", "--", "python", "train.py"],
        ["profile", "--seconds", "inf", "--", "python", "train.py"],
        ["profile", "--peak-tflops", "nan", "--", "python", "train.py"],
        ["profile", "--fail-on-regression", "-5", "--", "python", "train.py"],
        ["verify", "train.py", "--timeout", "nan"],
        ["scale", "--timeout", "inf", "--nproc", "1,2", "--", "train.py"],
        ["server", "--time-limit", "nan"],
    ],
)
def test_the_commands_refuse_them_with_a_usage_error(args, capsys):
    at = next(
        index
        for index, arg in enumerate(args)
        if arg in ("--timeout", "--seconds", "--peak-tflops", "--fail-on-regression", "--time-limit")
    )
    code, out, err = run_cli(args, capsys)
    assert code == 2 and out == ""
    assert f"argument {args[at]}: must be a number" in err and f"not {args[at + 1]!r}" in err
