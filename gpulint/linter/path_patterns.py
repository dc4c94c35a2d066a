"""gitignore-style path patterns, matched in time proportional to the path times the pattern,
whatever the pattern holds.

They arrive with a repository: its `.gitignore` files, and the `exclude` and `test-files`
settings of its configuration.  Translated to a regular expression, as pathspec translates them,
a pattern with many stars makes Python's backtracking engine try every way of sharing a name out
between them: against one file named by sixty `a`s, `*a*a*a*a*a*b` (6 stars) took 0.9 s and
`*a*a*a*a*a*a*a*b` (8 stars) 57 s, and each further star multiplies the time again.

Here a pattern is cut at its stars into pieces of fixed length, and each piece is placed at the
first place it fits after the one before: as a star may take any run of characters, a piece
placed further on would leave no more room for the rest, so no placement is tried twice (the
classic greedy wildcard match).  `**` is a star over whole path components, matched the same way
one level up, each component by its own pattern.

`GitIgnore` reads patterns as pathspec's `GitIgnoreSpec` reads them (git's rules: `!` negates, a
leading or inner slash anchors, a trailing slash matches folders, `**` any run of folders), and
decides between them as it does (the last pattern that matches the path itself wins, else the
last that matches a folder above it); tests/test_path_patterns.py compares the two over generated
patterns and paths.  Where pathspec's regular expressions part from git, this follows git: a
bracket expression never matches the `/` between two components, and a newline in a name is a
character like any other.

(`per-file-ignores` keys are fnmatch patterns, which CPython since 3.9 translates without
backtracking over its stars: config.py matches them with fnmatch.)

Standard library only: the configuration imports this before anything is parsed.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any


class PatternError(ValueError):
    """A pattern that cannot be read: it ends in a lone backslash, holds a bracket range whose ends
    are reversed, or is a bare `!`."""


# A piece: the text between two stars, a string when it holds no wildcard (matched by the string
# methods, in C), else its elements, each a literal character, _ANY character, or the test of a
# bracket expression.
_Piece = str | tuple[object, ...]
_ANY = object()


def _element_matches(element: object, char: str) -> bool:
    if element is _ANY:
        return True
    if isinstance(element, str):
        return element == char
    return element(char)  # type: ignore[operator]


def _piece_at(piece: _Piece, text: str, position: int) -> bool:
    if isinstance(piece, str):
        return text.startswith(piece, position)
    if position + len(piece) > len(text):
        return False
    return all(_element_matches(element, text[position + k]) for k, element in enumerate(piece))


def _piece_find(piece: _Piece, text: str, start: int, end: int) -> int:
    """The first position from `start` where `piece` fits before `end`, or -1."""
    if isinstance(piece, str):
        return text.find(piece, start, end)
    return next((p for p in range(start, end - len(piece) + 1) if _piece_at(piece, text, p)), -1)


def _placed_in_order(
    pieces: Sequence, length: int, at: Callable[[Any, int], bool], find: Callable[[Any, int, int], int]
) -> bool:
    """Whether `pieces` (at least two: what lies between stars) cover a sequence of `length`: the
    first at its start, the last at its end, each other one at its first fit after the one before."""
    first, last = pieces[0], pieces[-1]
    end = length - len(last)
    if end < len(first) or not at(first, 0) or not at(last, end):
        return False
    position = len(first)
    for piece in pieces[1:-1]:
        found = find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


class Wildcard:
    """A pattern of characters, wildcards and stars, matched against a whole string by
    `fullmatch`.  The common shapes (a name, `prefix*suffix`) are string comparisons."""

    __slots__ = ("fullmatch", "name", "pieces")

    def __init__(self, pieces: tuple[_Piece, ...]) -> None:
        self.pieces = pieces  # what lies between stars: one piece when there is no star
        # The one string it matches, when it holds neither star nor wildcard.
        self.name = pieces[0] if len(pieces) == 1 and isinstance(pieces[0], str) else None
        self.fullmatch: Callable[[str], bool]
        if self.name is not None:
            self.fullmatch = self.name.__eq__
        elif len(pieces) == 1:
            only = pieces[0]
            self.fullmatch = lambda text: len(text) == len(only) and _piece_at(only, text, 0)
        elif len(pieces) == 2 and isinstance(pieces[0], str) and isinstance(pieces[1], str):
            prefix, suffix = pieces[0], pieces[1]
            shortest = len(prefix) + len(suffix)
            self.fullmatch = lambda text: len(text) >= shortest and text.startswith(prefix) and text.endswith(suffix)
        else:
            self.fullmatch = self._placed

    def _placed(self, text: str) -> bool:
        return _placed_in_order(
            self.pieces,
            len(text),
            lambda piece, position: _piece_at(piece, text, position),
            lambda piece, start, end: _piece_find(piece, text, start, end),
        )


_STAR = object()  # a star in a list of elements


def _wildcard(elements: Iterable[object]) -> Wildcard:
    """A Wildcard from elements and _STAR markers."""
    pieces: list[list[object]] = [[]]
    for element in elements:
        if element is _STAR:
            pieces.append([])
        else:
            pieces[-1].append(element)
    return Wildcard(tuple(_piece(elements) for elements in pieces))


def _piece(elements: list[object]) -> _Piece:
    texts = [element for element in elements if isinstance(element, str)]
    return "".join(texts) if len(texts) == len(elements) else tuple(elements)


def _class_test(expression: str) -> Callable[[str], bool]:
    """The test of one character by a regular expression of one character class (raises re.error)."""
    with warnings.catch_warnings():
        # ("possible nested set" for `[[]`: Python reads it as a literal bracket today)
        warnings.simplefilter("ignore", FutureWarning)
        compiled = re.compile(expression)
    return lambda char: compiled.match(char) is not None


_ANY_COMPONENT = Wildcard(("", ""))


class _BracketUnclosed(Exception):
    """A `[` without its `]`: git discards such a pattern."""


_NONEMPTY = Wildcard(((_ANY,), ""))  # a segment that is a lone `*`: a component of one character or more


def _segment_wildcard(segment: str) -> tuple[Wildcard, bool]:
    """One component's pattern (a backslash escapes the next character; `?` and `[...]` test one
    character, `*` any run), and whether it holds a bracket range that cannot be read.  Raises
    _BracketUnclosed, and PatternError for a trailing backslash."""
    if segment == "*":
        return _NONEMPTY, False
    elements: list[object] = []
    bad_range = False
    escaped = False
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        i += 1
        if escaped:
            escaped = False
            elements.append(char)
        elif char == "\\":
            escaped = True
        elif char == "*":
            if not elements or elements[-1] is not _STAR:
                elements.append(_STAR)
        elif char == "?":
            elements.append(_ANY)
        elif char == "[":
            j = i
            if j < n and segment[j] in "!^":
                j += 1
            if j < n and segment[j] == "]":
                j += 1
            while j < n and segment[j] != "]":
                j += 1
            if j >= n:
                raise _BracketUnclosed
            negated = segment[i] in "!^"
            body = segment[i + negated : j + 1]
            # Backslashes are literal inside brackets; a range is as Python's character classes
            # read it (`a-z`; `-` first or last is literal; `]` first is literal).
            try:
                elements.append(_class_test("[" + "^" * negated + body.replace("\\", "\\\\")))
            except re.error:
                bad_range = True
            i = j + 1
        else:
            elements.append(char)
    if escaped:
        raise PatternError("it ends with a backslash that escapes nothing")
    return _wildcard(elements), bad_range


class _Components:
    """A pattern of path components, `match`ed against a path's: the Wildcards between `**`s,
    each run matched against consecutive components.  The common shapes (a name at any depth, a
    name in a folder above) are direct tests."""

    __slots__ = ("match", "pieces")

    def __init__(self, items: Iterable[object]) -> None:
        pieces: list[tuple[Wildcard, ...]] = [()]
        for item in items:
            if item is _STAR:
                pieces.append(())
            else:
                pieces[-1] += (item,)  # type: ignore[operator]
        self.pieces = tuple(pieces)
        self.match: Callable[[list[str]], bool]
        shape = tuple(len(piece) for piece in self.pieces)
        if shape == (0, 1):  # `**/name`: the last component
            last = self.pieces[1][0].fullmatch
            self.match = lambda components: last(components[-1])
        elif shape == (0, 2, 0) and self.pieces[1][1] is _ANY_COMPONENT:  # `**/name/**`: one above the last
            name = self.pieces[1][0].fullmatch
            self.match = lambda components: any(map(name, components[:-1]))
        elif len(self.pieces) == 1:
            only = self.pieces[0]
            self.match = lambda components: len(components) == len(only) and self._at(only, components, 0)
        else:
            self.match = self._placed

    @staticmethod
    def _at(piece: tuple[Wildcard, ...], components: list[str], position: int) -> bool:
        if position + len(piece) > len(components):
            return False
        return all(wildcard.fullmatch(components[position + k]) for k, wildcard in enumerate(piece))

    def _placed(self, components: list[str]) -> bool:
        def find(piece: tuple[Wildcard, ...], start: int, end: int) -> int:
            return next((p for p in range(start, end - len(piece) + 1) if self._at(piece, components, p)), -1)

        return _placed_in_order(
            self.pieces, len(components), lambda piece, position: self._at(piece, components, position), find
        )


@dataclass(frozen=True)
class _Rule:
    """One gitignore pattern, compiled: the components it matches (`whole`: the path's, all of
    them), or with `deeper` the components of a folder above the path (there is more after)."""

    include: bool  # False for a `!` negation
    directory: bool  # a folder pattern (it ends in `/`): it matches only what is below a folder
    whole: _Components | None  # None: the pattern only matches below a folder (`foo/`, `foo/**`)
    deeper: _Components | None  # None: the pattern matches every path (`*`) or every path below a folder (`*/`)
    # For `*`, `**`, `*/` and `**/`: "any" (every path) or "slash" (every path below a folder).
    everything: str | None = None
    # A name the pattern spells out (`build` in `build/`): a path without a component of that
    # name is not matched, which is most paths for most patterns, found without matching.
    needs: str | None = None

    def strength(self, path: str, components: list[str], weak_enough: bool) -> int:
        """0: no match; 1: a match of a folder above the path, through a folder pattern, or one
        that says the path goes on; 2: a match of the path itself.  Only 2 is worked out when
        not `weak_enough` (a match of 1 is already known)."""
        if self.everything is not None:
            hit = bool(path) if self.everything == "any" else "/" in path
            return (1 if self.directory else 2) if hit else 0
        if self.whole is not None:
            if self.whole.match(components):
                return 2
            if not weak_enough:
                return 0
            return 1 if self.deeper is not None and self.deeper.match(components) else 0
        if self.directory and not weak_enough:
            return 0
        hit = self.deeper is not None and self.deeper.match(components)
        return (1 if self.directory else 2) if hit else 0


def _compile_rule(line: str) -> _Rule | None:
    """A gitignore line as a rule; None for a line that matches nothing (blank, a comment, `/`, an
    unclosed bracket).  Raises PatternError."""
    if not line.endswith("\\ "):  # (an escaped trailing space is kept)
        line = line.rstrip()
    if not line or line.startswith("#") or line == "/":
        return None
    include = not line.startswith("!")
    if not include:
        line = line[1:]
    segments = line.split("/")
    directory = not segments[-1]
    if not segments[0]:
        del segments[0]  # a leading slash anchors the pattern at the root
    elif len(segments) == 1 or (len(segments) == 2 and not segments[1]):
        if segments[0] != "**":
            segments.insert(0, "**")  # a single name matches at any depth
    if not segments:
        raise PatternError("it names nothing")
    if not segments[-1]:
        segments[-1] = "**"  # a trailing slash: what is below the folder
    collapsed = [segments[0]]
    for segment in segments[1:]:
        if not (segment == "**" and collapsed[-1] == "**"):
            collapsed.append(segment)
    segments = collapsed

    if segments == ["**"] and directory:
        return _Rule(include, True, None, None, "slash")  # `**/`: every path below a folder
    if segments in (["**"], ["**", "*"]):
        return _Rule(include, False, None, None, "any")  # `**`, `*`: every path
    if segments == ["**", "*", "**"]:
        return _Rule(include, directory, None, None, "slash")  # `*/`, `**/*/**`: every path below a folder

    items: list[object] = []
    bad_range = False
    open_end = True  # the path may end at the last segment (else: it goes on below it)
    for index, segment in enumerate(segments):
        if segment == "**":
            if index == len(segments) - 1:
                open_end = False
            else:
                items.append(_STAR)
            continue
        try:
            wildcard, bad = _segment_wildcard(segment)
        except _BracketUnclosed:
            return None
        bad_range = bad_range or bad
        items.append(wildcard)
    if bad_range:
        raise PatternError("a bracket range runs backwards")
    deeper = _Components((*items, _ANY_COMPONENT, _STAR))
    names = [item.name for item in items if isinstance(item, Wildcard) and item.name is not None]
    whole = _Components(items) if open_end else None
    return _Rule(include, directory, whole, deeper, needs=names[0] if names else None)


def check_pattern(pattern: str) -> None:
    """Raise PatternError, saying why, for a pattern that cannot be read (a configuration's
    patterns are checked when it is read: a typo there is an error, not a pattern left out)."""
    _compile_rule(pattern)


class GitIgnore:
    """gitignore-style patterns, in order.  A pattern that cannot be read is left out, as git
    leaves it out of a .gitignore."""

    def __init__(self, lines: Iterable[str]) -> None:
        rules = []
        for line in lines:
            try:
                rule = _compile_rule(line)
            except PatternError:
                continue
            if rule is not None:
                rules.append(rule)
        self._rules = tuple(reversed(rules))  # the last pattern that matches decides

    def match_file(self, path: str) -> bool:
        """Whether `path` (relative, `/`-separated; ending in `/` for a folder) is matched: by the
        last pattern that matches the path itself, else by the last that matches a folder above it."""
        path = path.replace(os.sep, "/") if os.sep != "/" else path
        if path.startswith("/"):
            path = path[1:]
        elif path.startswith("./"):
            path = path[2:]
        components = path.split("/")
        names = set(components)
        decided: bool | None = None
        strongest = 0
        for rule in self._rules:
            if rule.needs is not None and rule.needs not in names:
                continue
            strength = rule.strength(path, components, strongest == 0)
            if strength > strongest:
                decided, strongest = rule.include, strength
                if strength == 2:
                    break
        return bool(decided)
