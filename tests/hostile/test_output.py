"""What gpulint prints: file names cannot inject lines, workflow commands or terminal escapes; the
summary never says all is well next to an error; a diff applies whatever the file's encoding."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from tests.hostile.conftest import FIXABLE, workflow_commands

INJECTED = "x\n::error title=pwned::owned.py"


def test_newline_in_a_file_name_cannot_start_a_workflow_command(sandbox):
    sandbox.write(INJECTED)
    for output_format in ("text", "github"):
        result = sandbox.run(".", "--format", output_format)
        assert result.returncode == 1
        lines = (result.stdout + result.stderr).splitlines()
        assert not any(line.startswith("::error") for line in lines), output_format
    text = sandbox.run(".").stdout
    assert "x\\n::error title=pwned::owned.py:5:10: GL102" in text
    github = sandbox.run(".", "--format", "github").stdout
    assert "file=x%0A%3A%3Aerror title=pwned%3A%3Aowned.py" in github


@pytest.mark.parametrize("output_format", ["json", "sarif", "rdjson", "gitlab"])
def test_json_formats_carry_the_name_escaped(sandbox, output_format):
    sandbox.write(INJECTED)
    result = sandbox.run(".", "--format", output_format)
    assert result.returncode == 1
    assert all(not line.startswith("::") for line in result.stdout.splitlines())
    assert any(value.endswith(INJECTED) for value in _strings(json.loads(result.stdout))), "the name, decoded, is exact"


def _strings(data) -> list[str]:
    if isinstance(data, str):
        return [data]
    values = data.values() if isinstance(data, dict) else data if isinstance(data, list) else []
    return [text for value in values for text in _strings(value)]


def test_terminal_escapes_and_bidi_overrides_in_a_file_name(sandbox):
    sandbox.write("\x1b]0;owned\x07\u202eyp.niart.py")
    result = sandbox.run(".")
    assert result.returncode == 1
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert "\\x1b]0;owned\\x07\\u202eyp.niart.py:5:10: GL102" in result.stdout


def test_file_name_that_is_not_utf8(sandbox):
    (sandbox.project / os.fsdecode(b"caf\xe9.py")).write_text(FIXABLE)
    result = sandbox.run(".")
    assert result.returncode == 1
    assert "caf\\xe9.py:5:10: GL102" in result.stdout
    formats = (["--format", f] for f in ("json", "sarif", "github", "rdjson", "gitlab"))
    for flags in (["--diff"], ["--statistics"], *formats):
        assert sandbox.run(".", *flags).returncode == 1, flags


def test_control_characters_in_error_lines(sandbox):
    os.mkfifo(sandbox.project / INJECTED)
    result = sandbox.run(".")
    assert result.returncode == 2
    assert result.error_lines == [
        "gpulint: error: x\\n::error title=pwned::owned.py: a FIFO, not a regular file; skipped"
    ]
    assert not any(line.startswith("::") for line in result.stderr.splitlines())


def test_diff_headers_quote_a_name_with_control_characters(sandbox):
    sandbox.write(INJECTED)
    result = sandbox.run(".", "--diff")
    assert result.returncode == 1
    assert '--- "a/x\\n::error title=pwned::owned.py"' in result.stdout.splitlines()
    assert not any(line.startswith("::") for line in result.stdout.splitlines())


def test_all_checks_passed_is_not_printed_next_to_an_error(sandbox):
    sandbox.write("clean.py", "print('nothing to see')\n")
    result = sandbox.run("clean.py", "missing.py")
    assert result.returncode == 2
    assert result.error_lines == ["gpulint: error: missing.py: no such file or directory"]
    assert "All checks passed!" not in result.stdout
    assert result.stdout.strip() == "No problems found, but 1 error stopped some checks (see above)."


LATIN1 = FIXABLE.replace("batch_size=32)", "batch_size=32)  # données")


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_diff_of_a_latin1_file_applies(sandbox, tool):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    path = sandbox.project / "train.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\n" + LATIN1).encode("latin-1"))
    original = path.read_bytes()
    diff = sandbox.run(".", "--diff", "--no-cache")
    assert diff.returncode == 1
    fixed = sandbox.run(".", "--fix", "--no-cache")
    assert fixed.returncode == 1
    expected = path.read_bytes()
    assert expected != original and "données".encode("latin-1") in expected
    path.write_bytes(original)
    command = ["patch", "-p1", "--quiet"] if tool == "patch" else ["git", "apply", "-p1", "-"]
    applied = subprocess.run(command, cwd=sandbox.project, input=diff.raw_stdout, capture_output=True, timeout=60)
    assert applied.returncode == 0, applied.stderr.decode(errors="replace")
    assert path.read_bytes() == expected


# -- workflow commands without a newline ----------------------------------------------------------
# The Actions runner takes a line for a command when it begins with `::` past its leading whitespace,
# or holds `##[` anywhere: a file name alone can be one.  Each name has the fixable findings.
COMMAND_NAMES = [
    "::error::start.py",
    "  ::notice::indented.py",
    "##[warning]old-syntax.py",
    "nl\n::warning::x.py",
    "esc\x1b]0;owned\x07.py",
    "\u202eyp.niart.py",
]
# The fixable line quotes the older syntax in a comment (the full format shows it), and lines of a
# string below it are commands as they are (a diff shows them as context).
QUOTING_COMMANDS = (
    FIXABLE.replace("batch_size=32)", "batch_size=32)  # ##[error]from a comment")
    + '"""\n::error::from a string\n##[warning]from a string\n"""\n'
)
IN_ACTIONS = {"GITHUB_ACTIONS": "true"}
ANNOTATION = re.compile(r"::(warning|notice|error) file=[^:]*,line=\d+[^:]*::GL\d{3} ")


def _command_tree(sandbox) -> None:
    for name in COMMAND_NAMES:
        sandbox.write(name, QUOTING_COMMANDS)


def _no_control_characters(output: str) -> None:
    for char in ("\x1b", "\x07", "\u202e"):
        assert char not in output, (char, output)


def test_file_names_and_source_cannot_print_a_workflow_command(sandbox):
    """Before, `::error::start.py:5:10: GL102 ...` opened every finding line of that file."""
    _command_tree(sandbox)
    findings = json.loads(sandbox.run(".", "--format", "json", "--no-cache").stdout)
    assert len(findings) == 2 * len(COMMAND_NAMES)
    for flags in (
        ["--format", "full"],
        ["--format", "concise"],
        ["--format", "json"],
        ["--format", "sarif"],
        ["--format", "rdjson"],
        ["--format", "gitlab"],
        ["--statistics"],
        ["--show-fixes", "--diff"],
    ):
        result = sandbox.run(".", *flags, env=IN_ACTIONS)
        assert result.returncode == 1, (flags, result.stderr)
        output = result.stdout + "\n" + result.stderr
        commands = workflow_commands(output)
        if "--diff" in flags:  # the file's own lines, fenced (below)
            assert commands[0].startswith("::stop-commands::") and len(commands) == 2, output
        else:
            assert commands == [], (flags, output)
        _no_control_characters(output)
    concise = sandbox.run(".", "--format", "concise").stdout
    assert "\n./::error::start.py:5:10: GL102" in concise
    assert "\n./  ::notice::indented.py:5:10: GL102" in concise  # the same file: `./` goes first
    assert "\n##\\x5bwarning]old-syntax.py:5:10: GL102" in concise
    full = sandbox.run(".", "--format", "full").stdout
    assert "# ##\\x5berror]from a comment" in full

    github = sandbox.run(".", "--format", "github")
    commands = workflow_commands(github.stdout)
    assert len(commands) == len(findings) and all(ANNOTATION.match(c) for c in commands), github.stdout
    _no_control_characters(github.stdout)

    # Fixing prints the list of what changed; the files themselves keep their names.
    fixed = sandbox.run(".", "--fix", "--show-fixes", env=IN_ACTIONS)
    assert workflow_commands(fixed.stdout + "\n" + fixed.stderr) == [], fixed.stdout + fixed.stderr
    assert sorted(os.listdir(sandbox.project)) == sorted([*COMMAND_NAMES, ".gpulint_cache", "pyproject.toml"])


def test_a_diff_is_fenced_from_the_runner_in_github_actions_and_still_applies(sandbox):
    """A diff prints the file's lines as they are, so that it applies: in a GitHub Actions job they
    go between `::stop-commands::` and a token the file cannot know."""
    path = sandbox.write("train.py", QUOTING_COMMANDS)
    sandbox.write("::error::start.py", QUOTING_COMMANDS)
    plain = sandbox.run(".", "--diff", "--no-cache")
    assert plain.returncode == 1
    assert not plain.stdout.startswith("::")  # outside Actions the diff is only the diff
    assert " ::error::from a string" in plain.stdout.splitlines()  # (what the fence is for)

    result = sandbox.run(".", "--diff", "--no-cache", env=IN_ACTIONS)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    token = lines[0].removeprefix("::stop-commands::")
    assert len(token) == 32 and lines[-1] == f"::{token}::" and token not in plain.stdout
    assert workflow_commands(result.stdout + "\n" + result.stderr) == [lines[0], lines[-1]]
    assert lines[1:-1] == plain.stdout.splitlines()
    another = sandbox.run(".", "--diff", "--no-cache", env=IN_ACTIONS)
    assert another.stdout.splitlines()[0] != lines[0]  # a new token each run

    original = path.read_bytes()
    fixed = sandbox.run("train.py", "--fix", "--no-cache")
    expected = path.read_bytes()
    assert fixed.returncode == 1 and expected != original
    for tool in ("patch", "git"):
        if shutil.which(tool) is None:
            continue
        for name in ("train.py", "::error::start.py"):
            (sandbox.project / name).write_bytes(original)
        command = ["patch", "-p1", "--quiet"] if tool == "patch" else ["git", "apply", "-p1", "-"]
        applied = subprocess.run(command, cwd=sandbox.project, input=result.raw_stdout, capture_output=True, timeout=60)
        assert applied.returncode == 0, applied.stderr.decode(errors="replace")
        assert path.read_bytes() == expected
        assert (sandbox.project / "::error::start.py").read_bytes() == expected
