"""Text from the tree is printed with control characters escaped; diff headers are quoted as git
quotes them."""

from __future__ import annotations

import os
import subprocess

import pytest

from gpulint.linter.printable import printable, quote_diff_path


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
