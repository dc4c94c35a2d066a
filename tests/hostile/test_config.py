"""Configuration that arrives with the repository: broken, of the wrong type, or trying to plant
code through an option gpulint writes into files."""

from __future__ import annotations

import os

import pytest

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
    # GL101 adds workers only under the main guard (where they can start under spawn).
    main = FIXABLE.replace("loader = ", 'if __name__ == "__main__":\n    loader = ')
    path = sandbox.write("train.py", main)
    result = sandbox.run(".", "--fix", "--unsafe-fixes")
    assert result.returncode == 0, result.stderr
    assert "num_workers=max(1, len(os.sched_getaffinity(0)) // 2)" in path.read_text()


# -- patterns, limits and shapes a repository's configuration cannot use against the run ----------

# Against a file named by sixty `a`s, the backtracking regular expression pathspec translated such a
# pattern to took 0.9 s at 6 stars and 57 s at 8, on two busy cores; this one has 15.
MANY_STARS = "*a" * 14 + "*b"
SIXTY_AS = "a" * 60 + ".py"


def test_a_pattern_with_many_stars_cannot_hold_the_walk(sandbox):
    sandbox.write("pyproject.toml", f'[tool.gpulint]\nexclude = ["{MANY_STARS}"]\ntest-files = ["{MANY_STARS}"]\n')
    sandbox.write(f"{SIXTY_AS[:-3]}/.gitignore", MANY_STARS + "\n" + MANY_STARS + "/\n")
    sandbox.write(SIXTY_AS)
    sandbox.write(f"{SIXTY_AS[:-3]}/{SIXTY_AS}")
    result = sandbox.run(".", "--no-cache")
    assert result.returncode == 1, result.stderr  # linted (the pattern matches neither), in time
    assert f"{SIXTY_AS}:5:10: GL102" in result.stdout


def test_a_per_file_ignores_pattern_with_many_stars_cannot_hold_the_run(sandbox):
    sandbox.write("pyproject.toml", f'[tool.gpulint.per-file-ignores]\n"{MANY_STARS}" = ["GL102"]\n')
    sandbox.write(SIXTY_AS)
    result = sandbox.run(".", "--no-cache")
    assert result.returncode == 1 and f"{SIXTY_AS}:5:10: GL102" in result.stdout


def test_a_raised_size_limit_in_the_repository_is_refused_with_a_warning(sandbox):
    sandbox.write("pyproject.toml", '[tool.gpulint]\nmax-file-size = "64MiB"\n')
    sandbox.write("huge.py", "x = 1\n" * (3 * 2**20 // 6))
    result = sandbox.run(".", "--no-cache")
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: huge.py: larger than max-file-size (3.0 MiB > 2.0 MiB); skipped"]
    warning = result.one_line("gpulint: warning: ")
    assert f"{found(sandbox)}: `max-file-size` = '64MiB' is above the default limit (2.0 MiB)" in warning


def test_a_raised_size_limit_in_a_configuration_named_on_the_command_line_applies(sandbox):
    sandbox.write("pyproject.toml", '[tool.gpulint]\nmax-file-size = "64MiB"\n')
    sandbox.write("huge.py", "x = 1\n" * (3 * 2**20 // 6))
    result = sandbox.run(".", "--no-cache", "--config", "pyproject.toml")
    assert result.returncode == 0 and not result.stderr


@pytest.mark.parametrize("key", ["max-syntax-nodes", "max-findings-per-file"])
def test_a_raised_work_budget_in_the_repository_is_refused_with_a_warning(sandbox, key):
    sandbox.write("pyproject.toml", f"[tool.gpulint]\n{key} = 100000000\n")
    sandbox.write("train.py")
    result = sandbox.run(".", "--no-cache")
    assert result.returncode == 1
    assert f"`{key}` = 100000000 is above the default limit" in result.one_line("gpulint: warning: ")


DEEP = "[" * 3000 + "]" * 3000


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (f'[tool.gpulint]\nselect = ["GL1"]\n[tool.other]\nx = {DEEP}\n', ":4:105: arrays or inline tables nested"),
        ('[tool.gpulint]\nlocal-rules = ["rules\\u0000.py"]\n', ": `local-rules` holds a NUL character"),
        ('[tool.gpulint]\nhistory = "runs\\u0000.db"\n', ": `history` holds a NUL character"),
        ('[tool.gpulint]\nexclude = ["[z-a].py"]\n', ": `exclude` pattern '[z-a].py' cannot be read: a bracket range"),
        ('[tool.gpulint]\ntest-files = ["tests\\\\"]\n', ": `test-files` pattern 'tests\\\\' cannot be read: it ends"),
        ('[tool.gpulint]\nexclude = ["!"]\n', ": `exclude` pattern '!' cannot be read: it names nothing"),
    ],
)
def test_a_configuration_that_cannot_be_used_is_one_error_line(sandbox, body, message):
    sandbox.write("pyproject.toml", body)
    path = sandbox.write("train.py")
    result = sandbox.run(".", "--fix")
    assert result.returncode == 2
    assert result.error_lines == [result.one_line(f"gpulint: error: {found(sandbox)}{message}")]
    assert path.read_text() == FIXABLE


@pytest.mark.parametrize(
    "body",
    [
        f"[tool.other]\nx = {DEEP}\n",  # not ours, and it cannot hold our table: passed over
        "tool = 3\n",
        "[tool]\nruff = 3\n",
        "[tool]\nblack = 3\n",
        '[tool.ruff]\nline-length = "long"\n',
        "[project]\ndependencies = 5\n",
        "[project]\noptional-dependencies = 5\n",
        "[project.optional-dependencies]\ncuda = 5\n",
        "[project]\nrequires-python = 5\n",
        "project = 3\n",
        "[project]\nname = 5\n",
        '[project]\nname = ["keras"]\n',
        "[tool.ruff]\nformat = 3\n",
        '[tool.ruff.format]\nquote-style = ["single"]\n',
        "[tool.black]\nskip-string-normalization = 3\n",
    ],
)
def test_other_tools_tables_of_another_shape_are_passed_over(sandbox, body):
    """gpulint reads hints from these (line length, the PyTorch required): a value of another shape
    gives none, and stops nothing."""
    sandbox.write("pyproject.toml", body)
    sandbox.write("train.py")
    result = sandbox.run(".", "--no-cache")
    assert result.returncode == 1 and not result.stderr
    assert "train.py:5:10: GL102" in result.stdout


@pytest.mark.parametrize(
    "name, text",
    [
        ("ruff.toml", "line-length = [\n"),  # does not parse
        ("ruff.toml", "format = 3\n"),
        ("setup.cfg", "[metadata]\nname = %(dist)s\n"),  # an interpolation that goes nowhere
        ("setup.py", "setup(" + "(" * 400_000 + 'name="keras"'),
        (".ruff.toml", f"x = {DEEP}\n"),
        ("setup.cfg", "[flake8\nmax-line-length = 100\n"),
        ("tox.ini", "[flake8]\nmax-line-length = %(wide)s\n"),  # an interpolation that goes nowhere
        (".style.yapf", "[style]\ncolumn_limit = 1e9\n"),
        (".pre-commit-config.yaml", "  " + " " * 400_000 + "- id: black\n" + "-" * 400_000),
    ],
)
def test_other_tools_files_that_cannot_be_read_are_passed_over(sandbox, name, text):
    """gpulint reads the line length from formatters' and linters' own files beside the project:
    one that does not parse, or holds what those tools would refuse, gives no hint and stops
    nothing; a long line in them costs one pass."""
    sandbox.write(name, text)
    sandbox.write("train.py")
    result = sandbox.run(".", "--no-cache")
    assert result.returncode == 1 and not result.stderr
    assert "train.py:5:10: GL102" in result.stdout


@pytest.mark.parametrize("table", ["[tool]\nruff = 3\n", "[project]\ndependencies = 5\n"])
def test_other_tools_tables_of_another_shape_beside_ours_are_passed_over(sandbox, table):
    sandbox.write("pyproject.toml", table + IGNORE_TABLE)
    sandbox.write("train.py")
    result = sandbox.run(".", "--no-cache")
    assert result.returncode == 1 and not result.stderr
    assert "GL101" in result.stdout and "GL102" not in result.stdout  # our table applies


def test_a_gitignore_line_that_cannot_be_read_is_left_out_as_git_leaves_it(sandbox):
    sandbox.write(".gitignore", "legacy\\\n[z-a].py\n!\nskipped.py\n")
    sandbox.write("skipped.py")
    sandbox.write("train.py")
    result = sandbox.run(".", "--no-cache")
    assert result.returncode == 1 and not result.stderr
    assert "train.py:5:10" in result.stdout and "skipped.py" not in result.stdout
