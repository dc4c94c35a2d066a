"""gitignore-style patterns (gpulint/linter/path_patterns.py): the same answers as pathspec's
GitIgnoreSpec, which gpulint used before, for generated patterns and paths, and in time that no
pattern can make explode."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import warnings

import pathspec
import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gpulint.linter.path_patterns import GitIgnore, PatternError, check_pattern
from tests.helpers import ROOT

# Pieces of patterns and of paths, small enough that generated ones meet (a pattern must match
# some of the paths for the comparison to say anything).
SEGMENTS = ["a", "b", "ab", "*", "**", "a*", "*a", "*b*", "?", "a?", "[ab]", "[!a]", "[a-b]", "\\*", "", "[^b]a"]
COMPONENTS = ["a", "b", "ab", "ba", "aa", "*", "a*", ""]
# Any characters at all, for patterns and paths of every shape (but a newline: see `oracle`).
CHARACTERS = "ab*?[]!^-\\/ #.z"


def _classes_never_match_slash(regex: str) -> str:
    """`regex` with each character class also refusing `/`."""
    out, i, in_class = [], 0, False
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            out.append(regex[i : i + 2])
            i += 2
            continue
        if not in_class and char == "[":
            out.append("(?:(?!/)[")
            i += 1
            in_class = True
            for lead in "^]":
                if regex[i : i + 1] == lead:
                    out.append(lead)
                    i += 1
            continue
        if in_class and char == "]":
            in_class = False
            out.append("])")
        else:
            out.append(char)
        i += 1
    return "".join(out)


def oracle(lines: list[str]) -> pathspec.GitIgnoreSpec:
    """pathspec's GitIgnoreSpec, but for the one place where its regular expressions part from git
    and from GitIgnore: a bracket expression (`[!a]`, `[+-0]`) that could match the `/` between
    two components.  (Its other artefact, `.` and `$` around a newline, is kept out of the
    generated paths.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # ("possible nested set": `[[]`)
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        for pattern in spec.patterns:
            if pattern.regex is not None:
                pattern.regex = re.compile(_classes_never_match_slash(pattern.regex.pattern))
    return spec


def readable_by_pathspec(lines: list[str]) -> bool:
    try:
        oracle(lines)
    except (ValueError, re.error):
        return False
    return True


def readable(lines: list[str]) -> bool:
    try:
        for line in lines:
            check_pattern(line)
    except PatternError:
        return False
    return True


def _pattern(segments: list[str], leading: bool, trailing: bool, negated: bool) -> str:
    return "!" * negated + "/" * leading + "/".join(segments) + "/" * trailing


patterns = st.builds(
    _pattern,
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
paths = st.builds(
    lambda components, folder: "/".join(components) + "/" * folder,
    st.lists(st.sampled_from(COMPONENTS[:5]), min_size=1, max_size=5),
    st.booleans(),
)
SETTINGS = hypothesis_settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(st.lists(patterns, min_size=1, max_size=3), st.lists(paths, min_size=1, max_size=8))
@example(["a*", "!ab/"], ["ab/a", "ab/", "a"])
@example(["**/", "!a/**/b"], ["a/b", "a/x/b/", "b"])
@example(["*/", "/a"], ["a", "b/a", "a/b"])
def test_the_same_answers_as_pathspec_for_patterns_of_segments(lines, names):
    assert readable(lines) == readable_by_pathspec(lines)
    if not readable(lines):
        return
    expected, ours = oracle(lines), GitIgnore(lines)
    assert [ours.match_file(name) for name in names] == [expected.match_file(name) for name in names]


@SETTINGS
@given(
    st.lists(st.text(CHARACTERS, max_size=8), min_size=1, max_size=3),
    st.lists(st.text(CHARACTERS, min_size=1, max_size=8), min_size=1, max_size=8),
)
@example(["[z-a]"], ["z"])
@example(["a\\"], ["a"])
@example(["!"], ["a"])
@example(["[!a]b"], ["c/b", "cb"])
def test_the_same_answers_as_pathspec_for_any_characters(lines, names):
    assert readable(lines) == readable_by_pathspec(lines)
    if not readable(lines):
        return
    expected, ours = oracle(lines), GitIgnore(lines)
    names = [re.sub("/+", "/", name).lstrip("/") for name in names]
    assert [ours.match_file(name) for name in names] == [expected.match_file(name) for name in names]


@pytest.mark.parametrize(
    ("lines", "path", "matched"),
    [
        (["build/"], "build/", True),
        (["build/"], "build", False),  # a folder pattern: a file of that name is not matched
        (["build/"], "src/build/x.py", True),
        (["/build"], "src/build", False),  # anchored at the root
        (["docs/_build"], "sub/docs/_build", False),  # an inner slash anchors too
        (["*.pyc", "!keep.pyc"], "a/keep.pyc", False),
        (["a/**/b"], "a/b", True),
        (["a/**/b"], "a/x/y/b", True),
        (["a/**"], "a", False),
        (["a/**"], "a/", True),
        (["\\#x", "#y"], "#x", True),
        (["\\#x", "#y"], "#y", False),  # a comment
        (["x\\ "], "x ", True),  # an escaped trailing space is kept
        (["x  "], "x", True),  # trailing spaces are not
        (["[!a]b"], "c/b", False),  # a bracket never matches the slash (git; pathspec's regex did)
        (["[!a]b"], "cb", True),
        (["a[b"], "a[b", False),  # an unclosed bracket: git drops the pattern
        (["ab\\"], "ab", False),  # a trailing backslash: the .gitignore line is left out
    ],
)
def test_gitignore_examples(lines, path, matched):
    assert GitIgnore(lines).match_file(path) is matched


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("legacy\\", "it ends with a backslash that escapes nothing"),
        ("[z-a].py", "a bracket range runs backwards"),
        ("!", "it names nothing"),
    ],
)
def test_a_pattern_that_cannot_be_read_says_why(pattern, reason):
    with pytest.raises(PatternError, match=re.escape(reason)):
        check_pattern(pattern)


def test_stars_cannot_make_a_match_explode():
    """The pattern that held the walk for minutes, and far worse ones, against long names: each
    answers at once (pathspec's regular expression took 57 s for 8 stars against 60 characters, and
    far longer for each star more).  In a child process with a generous limit, so a
    regression fails instead of hanging the suite."""
    script = textwrap.dedent("""\
        from gpulint.linter.path_patterns import GitIgnore

        many = "*a" * 200 + "*b"
        lines = ["*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", many, many + "/", "/" + many, "**/" + "/**/".join([many] * 4)]
        rules = GitIgnore(lines)
        for name in ["a" * 60 + ".py", "a" * 5000, ("a" * 60 + "/") * 40 + "a" * 60, "a" * 5000 + "/"]:
            assert not rules.match_file(name)
        assert rules.match_file("a" * 5000 + "b")
        print("done")
    """)
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0 and completed.stdout == "done\n", completed.stderr
