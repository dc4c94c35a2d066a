"""analysis/context.py `without_comments`: the text the rules search for mentions (`--amp`,
`torch.backends.cudnn.benchmark`, `no_sync`) -- the source less its comments, strings kept whole.
It must drop what Python's tokenizer calls a comment and nothing else."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

from gpulint.linter.analysis.context import without_comments

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "source, expected",
    [
        ("x = 1  # use amp\n", "x = 1  \n"),
        ('s = "a # b"  # c\n', 's = "a # b"  \n'),
        ("s = 'a # b'\n", "s = 'a # b'\n"),
        ('t = """\n# inside a docstring\n"""  # after\n', 't = """\n# inside a docstring\n"""  \n'),
        ("t = '''it's # kept'''\n", "t = '''it's # kept'''\n"),
        ('u = "quote \\" # kept"  # gone\n', 'u = "quote \\" # kept"  \n'),
        ('v = r"\\\\"  # gone\n', 'v = r"\\\\"  \n'),
        ('w = f"{x}#{y}"\n', 'w = f"{x}#{y}"\n'),
        ('b = b"#"  # gone\n', 'b = b"#"  \n'),
        ('c = "a\\\n# still the string"\n', 'c = "a\\\n# still the string"\n'),
        ("x = a + \\\n    b  # gone\n", "x = a +     b  \n"),
        ("# only a comment\nprint(1)\n", "\nprint(1)\n"),
        ('e = ""  # empty\nf = """"quoted" """\n', 'e = ""  \nf = """"quoted" """\n'),
    ],
)
def test_comments_go_strings_stay(source, expected):
    assert without_comments(source) == expected


def tokens_without_comments(source: str) -> str:
    return " ".join(
        t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type != tokenize.COMMENT
    )


@pytest.mark.parametrize("folder", ["fixtures", "tests/fixed_scripts", "tests/runtime", "gpulint"])
def test_the_tokenizer_drops_the_same_text(folder):
    # Python's tokenizer is the reference: without whitespace, what is left of each file must be
    # the same text (the tokens' strings), comments and line continuations gone.
    compared = 0
    for path in sorted((ROOT / folder).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        reference = "".join(tokens_without_comments(source).split())
        assert "".join(without_comments(source).split()) == reference, path
        compared += "#" in source
    assert compared > 0  # (files with comments were compared)
