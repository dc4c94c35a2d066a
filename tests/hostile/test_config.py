"""Configuration that arrives with the repository: broken, of the wrong type, or trying to plant
code through an option gpulint writes into files."""

from __future__ import annotations

import os

from tests.hostile.conftest import FIXABLE

IGNORE_TABLE = '[tool.gpulint]\nignore = ["GL102", "GL104"]\n'


def found(sandbox) -> str:
    """The configuration file as gpulint names the one it found (its real path)."""
    return os.path.join(os.path.realpath(sandbox.project), "pyproject.toml")


def test_pyproject_with_a_syntax_error_is_exit_2_and_nothing_is_fixed(sandbox):
    sandbox.write("pyproject.toml", '[project]\nname = "x"\nversion = 1.0.0\n\n' + IGNORE_TABLE)
    path = sandbox.write("train.py")
    result = sandbox.run(".", "--fix")
    assert result.returncode == 2
    assert result.error_lines == [result.one_line(f"{found(sandbox)}:3:")]
    assert ": invalid TOML: " in result.error_lines[0]
    assert path.read_text() == FIXABLE


def test_broken_pyproject_that_cannot_hold_our_table_is_not_ours_to_report(sandbox):
    sandbox.write("pyproject.toml", '[project]\nname = "x"\nversion = 1.0.0\n')
    sandbox.write("train.py")
    result = sandbox.run(".")
    assert result.returncode == 1 and not result.stderr


def test_tool_gpulint_of_the_wrong_type(sandbox):
    sandbox.write("pyproject.toml", "[tool]\ngpulint = 3\n")
    sandbox.write("train.py")
    result = sandbox.run(".")
    assert result.returncode == 2
    assert result.error_lines == [
        f"gpulint: error: {found(sandbox)}: `[tool] gpulint` must be a table ([tool.gpulint]), not an integer"
    ]


def test_tool_of_the_wrong_type(sandbox):
    sandbox.write("pyproject.toml", 'tool = "gpulint"\n')
    sandbox.write("train.py")
    result = sandbox.run(".", "--config", "pyproject.toml")
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: pyproject.toml: `tool` must be a table, not a string"]


def test_pyproject_that_is_not_utf8(sandbox):
    (sandbox.project / "pyproject.toml").write_bytes(b'[tool.gpulint]\n# caf\xe9\nignore = ["GL102"]\n')
    sandbox.write("train.py")
    result = sandbox.run(".")
    assert result.returncode == 2
    assert result.error_lines == [
        f"gpulint: error: {found(sandbox)}:2: not UTF-8 text (byte 0xe9); TOML files are UTF-8"
    ]


def test_per_file_ignores_of_the_wrong_type(sandbox):
    sandbox.write("pyproject.toml", '[tool.gpulint.per-file-ignores]\n"train.py" = 3\n')
    sandbox.write("train.py")
    result = sandbox.run(".")
    assert result.returncode == 2
    assert result.error_lines == [
        f"gpulint: error: {found(sandbox)}: `per-file-ignores` entry 'train.py' must be a list of rule ids"
    ]


def test_num_workers_that_runs_code_is_refused(sandbox):
    marker = sandbox.project / "pwned"
    sandbox.write("pyproject.toml", f"[tool.gpulint]\nnum-workers = \"__import__('os').system('touch {marker}')\"\n")
    path = sandbox.write("train.py")
    result = sandbox.run(".", "--fix", "--unsafe-fixes")
    assert result.returncode == 2
    assert result.error_lines == [result.one_line("`num-workers` = \"__import__('os').system(")]
    assert "is not accepted: only integers, names, arithmetic" in result.error_lines[0]
    assert path.read_text() == FIXABLE and not marker.exists()


def test_num_workers_call_outside_the_grammar_is_refused(sandbox):
    sandbox.write("pyproject.toml", '[tool.gpulint]\nnum-workers = "os.system(8)"\n')
    path = sandbox.write("train.py")
    result = sandbox.run(".", "--fix", "--unsafe-fixes")
    assert result.returncode == 2
    assert "the call `os.system(...)` is not allowed" in result.one_line("num-workers")
    assert path.read_text() == FIXABLE


def test_num_workers_in_the_grammar_is_written(sandbox):
    sandbox.write("pyproject.toml", '[tool.gpulint]\nnum-workers = "max(1, len(os.sched_getaffinity(0)) // 2)"\n')
    path = sandbox.write("train.py")
    result = sandbox.run(".", "--fix", "--unsafe-fixes")
    assert result.returncode == 0, result.stderr
    assert "num_workers=max(1, len(os.sched_getaffinity(0)) // 2)" in path.read_text()
