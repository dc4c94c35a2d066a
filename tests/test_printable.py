"""Text from the tree is printed with control characters escaped; diff headers are quoted as git
quotes them."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from gpulint.linter.printable import (
    fenced_from_the_runner,
    json_without_workflow_commands,
    no_workflow_commands,
    printable,
    quote_diff_path,
)


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("train.py", "train.py"),
        ("a\nb.py", "a\\nb.py"),
        ("a\r\tb", "a\\r\\tb"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("\x7f\x85", "\\x7f\\x85"),
        ("\u202eyp.txt", "\\u202eyp.txt"),
        ("line\u2028sep", "line\\u2028sep"),
        (os.fsdecode(b"caf\xe9.py"), "caf\\xe9.py"),
        ("café\\n.py", "café\\n.py"),  # text that is already printable is not touched, backslashes included
        ("##[error]x.py", "##\\x5berror]x.py"),  # the runner's older command syntax, anywhere in a line
        ("a ###[b] #[c] [##]", "a ###\\x5bb] #[c] [##]"),
    ],
)
def test_printable(raw, shown):
    assert printable(raw) == shown
    assert printable(printable(raw)) == shown


def test_diff_paths_are_quoted_as_git_quotes_them(tmp_path):
    name = 'a\n"b\\c\tcafé.py'
    quoted = quote_diff_path(f"a/{name}")
    assert quoted == '"a/a\\n\\"b\\\\c\\tcaf\\303\\251.py"'
    assert quote_diff_path("a/plain.py") == "a/plain.py"
    # git itself writes the same header for such a file
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / name).write_text("x\n")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    diff = subprocess.run(["git", "diff", "--cached"], cwd=tmp_path, check=True, capture_output=True).stdout.decode()
    assert f"+++ {quote_diff_path('b/' + name)}" in diff.splitlines()


@pytest.mark.parametrize(
    "text, shown",
    [
        ("::error::x.py:1:5: GL101", "./::error::x.py:1:5: GL101"),
        ("  ::error::x.py", "./  ::error::x.py"),  # the runner trims leading whitespace; `./` keeps the path
        ("ok\n::a\r::b\r\n\t::c", "ok\n./::a\r./::b\r\n./\t::c"),  # the runner ends lines at CR too
        ("\u3000::wide", "./\u3000::wide"),
        ("x::y\n: :z\n", "x::y\n: :z\n"),
    ],
)
def test_no_line_begins_a_workflow_command(text, shown):
    assert no_workflow_commands(text) == shown
    assert no_workflow_commands(shown) == shown


def test_json_keeps_its_data_but_not_the_older_command_syntax():
    data = {"path": "##[error]x.py", "lines": ["::error::y", "###["]}
    text = json_without_workflow_commands(json.dumps(data, indent=2))
    assert "##[" not in text and json.loads(text) == data


def test_verbatim_output_is_fenced_only_in_github_actions(monkeypatch):
    diff = b"--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-::error::old\n+::error::new"
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert fenced_from_the_runner(diff) == diff
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert fenced_from_the_runner(b"") == b""
    first, *body, last = fenced_from_the_runner(diff).split(b"\n")[:-1]
    token = first.removeprefix(b"::stop-commands::")
    assert len(token) == 32 and last == b"::" + token + b"::" and b"\n".join(body) == diff
    assert fenced_from_the_runner(diff).split(b"\n")[0] != first


def test_a_diff_header_never_holds_the_older_command_syntax():
    assert quote_diff_path("a/##[error]x.py") == '"a/##\\133error]x.py"'
