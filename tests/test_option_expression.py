"""`num-workers` is written into the user's code: only the small grammar gets through."""

from __future__ import annotations

import pytest

from gpulint.linter.config import ConfigError, Settings, validate
from gpulint.linter.option_expression import UnsafeExpression, check_worker_expression


@pytest.mark.parametrize(
    "text",
    [
        "4",
        "min(8, os.cpu_count() or 1)",
        "max(1, (os.cpu_count() or 1) // 2)",
        "len(os.sched_getaffinity(0))",
        "args.num_workers",
        "cfg.data.workers * 2 - 1",
        "-1 + 2 * 3 % 2",
    ],
)
def test_accepted(text):
    check_worker_expression(text)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("__import__('os').system('id')", "only integers"),
        ("__import__", "double-underscore"),
        ("x.__class__", "double-underscore"),
        ("os.system(1)", "the call `os.system(...)` is not allowed"),
        ("eval(1)", "the call `eval(...)`"),
        ("len(x)", "the call `len(...)`"),
        ("os.cpu_count(1)", "the call `os.cpu_count(...)`"),
        ("os.sched_getaffinity(0)", "the call `os.sched_getaffinity(...)`"),
        ("min()", "the call `min(...)`"),
        ("min(*a)", "positional arguments only"),
        ("f()()", "the call `expression(...)`"),
        ("a ** b", "the arithmetic allowed"),
        ("a if b else c", "IfExp"),
        ("1.5", "not an integer"),
        ("True", "not an integer"),
        ("1  # comment", "only integers"),
        ("1\n2", "only integers"),
        ("[1][0]", "only integers"),
        ("lambda: 1", "only integers"),
        ("min(8,", "not a Python expression"),
        ("1 +" + " 1 +" * 100 + " 1", "longer than 200 characters"),
    ],
)
def test_refused(text, reason):
    with pytest.raises(UnsafeExpression, match=reason.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        check_worker_expression(text)


def test_configuration_refuses_an_unsafe_value():
    with pytest.raises(ConfigError, match=r"`num-workers` = 'os.system\(8\)' is not accepted"):
        validate(Settings(options={"num-workers": "os.system(8)"}))
