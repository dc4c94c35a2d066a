"""What gpulint prints: file names cannot inject lines, workflow commands or terminal escapes; the
summary never says all is well next to an error; a diff applies whatever the file's encoding."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.hostile.conftest import FIXABLE

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
