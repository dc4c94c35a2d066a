"""Sources built to break the parser: gpulint reports the file in one line and goes on, and its
own process never dies with the parser (libcst's native parser overflows the stack on deep input)."""

from __future__ import annotations

import sys

import pytest

from tests.hostile.conftest import FIXABLE

HEADER = FIXABLE  # passes the prefilter: the parser sees the file
TOO_MANY_PARENTHESES = "gpulint: error: deep.py: too deeply nested to analyse (too many nested parentheses); skipped"


def nested_calls(depth: int) -> str:
    return HEADER + "x = " + "f(" * depth + "1" + ")" * depth + "\n"


def long_sum(terms: int) -> str:
    return HEADER + "x = " + " + ".join(["a"] * terms) + "\n"


def and_chain(operands: int) -> str:
    return HEADER + "x = " + " and ".join(["a"] * operands) + "\n"


def test_calls_nested_2000_deep(sandbox):
    sandbox.write("deep.py", nested_calls(2000))
    result = sandbox.run("deep.py")
    assert result.returncode == 2
    assert result.error_lines == [TOO_MANY_PARENTHESES]


@pytest.mark.parametrize("flags", [(), ("--fix",)], ids=["lint", "fix"])
def test_calls_nested_2000_deep_in_a_tree_with_two_workers(sandbox, flags):
    sandbox.write("deep.py", nested_calls(2000))
    for index in range(6):
        sandbox.write(f"train_{index}.py")
    result = sandbox.run(".", "--jobs", "2", *flags)
    assert result.returncode == 2
    assert result.error_lines == [TOO_MANY_PARENTHESES]
    assert result.stdout.count("GL101") == 6, "every other file is reported"
    if flags:
        assert all("pin_memory=True" in (sandbox.project / f"train_{i}.py").read_text() for i in range(6))


def test_sum_of_10000_terms(sandbox):
    sandbox.write("sum.py", long_sum(10_000))
    result = sandbox.run("sum.py")
    assert result.returncode == 2
    assert result.error_lines == [
        "gpulint: error: sum.py: too deeply nested to analyse (Python's own parser gives up); skipped"
    ]


def test_boolean_chain_python_accepts_but_the_parser_cannot_take(sandbox):
    sandbox.write("chain.py", and_chain(10_000))  # CPython parses it flat; libcst nests it pairwise
    result = sandbox.run("chain.py")
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: chain.py: too deeply nested to analyse (over 500 levels); skipped"]


def test_nesting_just_under_the_limit_is_analysed(sandbox):
    sandbox.write("sum.py", FIXABLE + "x = " + " + ".join(["a"] * 250) + "\n")
    result = sandbox.run("sum.py")
    assert result.returncode == 1 and not result.stderr
    assert "sum.py:5:10: GL102" in result.stdout


def test_newer_syntax_with_a_chain_that_crashes_the_parser(sandbox):
    # A `type` statement (Python 3.12) and a 20,000-operand chain: before 3.12 CPython rejects the
    # file, so its nesting cannot be measured, and libcst really crashes on it (SIGSEGV).
    sandbox.write("new.py", "type Alias = int\n" + and_chain(20_000))
    sandbox.write("train.py")
    result = sandbox.run(".", "--jobs", "1")
    assert result.returncode == 2
    expected = "the parser crashed (SIGSEGV)" if sys.version_info < (3, 12) else "over 500 levels"
    assert result.error_lines == [result.one_line(expected)]
    assert result.error_lines[0].startswith("gpulint: error: new.py: ")
    assert "train.py:5:10: GL102" in result.stdout


# A worker that dies on one file (as on a parser crash that no check foresaw): the file is reported,
# every other file is linted, the run ends.
CRASHING_WORKER_SCRIPT = """
import os, signal, sys
import gpulint.linter.run.process as runner
original = runner.process_source
def process_source(linter, source, name, options, *project):
    if name.endswith("crash.py"):
        os.kill(os.getpid(), signal.SIGSEGV)
    return original(linter, source, name, options, *project)
runner.process_source = process_source
from gpulint.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("flags", [(), ("--fix",)], ids=["lint", "fix"])
def test_worker_that_dies_costs_only_its_file(sandbox, flags):
    sandbox.write("crash.py")
    for index in range(12):
        sandbox.write(f"train_{index:02}.py")
    result = sandbox.run(".", "--jobs", "2", "--no-cache", *flags, script=CRASHING_WORKER_SCRIPT)
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: crash.py: could not be analysed: the parser crashed; skipped"]
    assert result.stdout.count("GL101") == 12
    if flags:
        assert all("pin_memory=True" in (sandbox.project / f"train_{i:02}.py").read_text() for i in range(12))
        assert "pin_memory" not in (sandbox.project / "crash.py").read_text()


def test_deep_notebook_cell(sandbox):
    import json

    cells = [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": FIXABLE},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": and_chain(10_000)},
    ]
    notebook = {"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    sandbox.write("deep.ipynb", json.dumps(notebook))
    result = sandbox.run("deep.ipynb")
    assert result.returncode == 2
    assert result.error_lines == [result.one_line("deep.ipynb: too deeply nested to analyse")]


def test_indentation_python_refuses(sandbox):
    body = "".join("    " * i + "if a:\n" for i in range(120)) + "    " * 120 + "pass\n"
    sandbox.write("indent.py", HEADER + body)
    result = sandbox.run("indent.py")
    assert result.returncode == 2
    assert result.error_lines == [
        "gpulint: error: indent.py: too deeply nested to analyse (too many levels of indentation); skipped"
    ]


def test_null_bytes_in_source(sandbox):
    sandbox.write("nul.py", FIXABLE + "x = 1\x00\n" + "# padding\n" * 60)
    sandbox.write("train.py")
    result = sandbox.run(".")
    assert result.returncode == 1, result.stderr
    assert "nul.py:" in result.stdout and "train.py:5:10: GL102" in result.stdout


# -- work per file: budgets of syntax nodes and findings (docs/safety.md, "Work per file") --------


def training_lines(count: int) -> str:
    """A training loop that logs a synced loss `count` times per step: two findings per line."""
    lines = "".join(f"        print('loss {i}', loss.item())\n" for i in range(count))
    return (
        "import torch\n\n\ndef train(model, loader, optimizer):\n    model.cuda()\n"
        "    for step, batch in enumerate(loader):\n        loss = model(batch.cuda())\n"
        "        loss.backward()\n        optimizer.step()\n" + lines
    )


def test_file_over_the_syntax_node_budget_is_skipped(sandbox):
    sandbox.write("pyproject.toml", "[tool.gpulint]\nmax-syntax-nodes = 300\n")
    sandbox.write("train.py")  # under 500 bytes: never measured (it cannot be deep)
    sandbox.write("big.py", training_lines(40))
    result = sandbox.run(".")
    assert result.returncode == 2
    assert result.error_lines == [
        "gpulint: error: big.py: too large to analyse (more than 300 syntax nodes, the max-syntax-nodes budget);"
        " skipped"
    ]
    assert "train.py:5:10: GL102" in result.stdout and "big.py" not in result.stdout


def test_file_over_the_findings_budget_is_skipped(sandbox):
    sandbox.write("pyproject.toml", "[tool.gpulint]\nmax-findings-per-file = 50\n")
    sandbox.write("train.py")
    sandbox.write("many.py", training_lines(40))  # 81 findings
    result = sandbox.run(".", "--format", "json")
    assert result.returncode == 2
    assert result.error_lines == [
        "gpulint: error: many.py: too many findings to report (81, over the max-findings-per-file budget of 50);"
        " skipped"
    ]
    assert "many.py" not in result.stdout and "train.py" in result.stdout


def test_a_file_within_the_budgets_is_linted_whole(sandbox):
    sandbox.write("many.py", training_lines(40))
    result = sandbox.run("many.py", "--format", "json")
    assert result.returncode == 1 and not result.stderr
    assert result.stdout.count('"code": "GL201"') == 40
