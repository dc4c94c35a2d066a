"""Dataclasses to JSON-ready data and back, checked against their type hints.

The result cache stores outcomes as data, never as objects: `to_data` turns a dataclass tree into
dicts, lists, strings and numbers, and `from_data` rebuilds it only if every value has the type its
field declares (a dataclass's fields, exactly; `list[X]`, `tuple[X, ...]`, `set[X]`,
`frozenset[X]`, `dict[str, X]`, `X | None`, enums by value, and a bare `dict` as a JSON object).
Anything else raises ShapeError, so a damaged or crafted entry is refused, never half-built and
never executed.  Following the hints means a field added to a dataclass is stored with no change
here.

`load_json` parses JSON that someone else may have written (a cache entry, a run history's
metadata): Python's parser recurses once per level of nesting, so the depth is measured first,
without recursing, and deeper text is refused with a ShapeError instead of a RecursionError.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import itertools
import json
import re
import types
import typing
from typing import Any

# Deeper JSON than this is not something gpulint wrote (a finding is four levels deep).
MAX_DEPTH = 32


class ShapeError(ValueError):
    """Data that does not have the declared shape."""


# A backslash and the character it escapes (inside a string; outside one it is invalid JSON, which
# the parser refuses after the depth is measured), then a string without escapes, then what is not
# a bracket: each pattern a single pass, with no backtracking a crafted text could make quadratic.
_ESCAPED = re.compile(r"\\.", re.DOTALL)
_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_NESTING = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How deeply the arrays and objects of JSON `text` nest (0 for a scalar), counted on the
    brackets outside strings, without parsing and without recursion."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", _ESCAPED.sub("", text)))
    return max(itertools.accumulate(map(_NESTING.__getitem__, brackets)), default=0)


def load_json(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads(text)`, for text nested at most `max_depth` deep; ShapeError (a ValueError, as
    json's own errors are) for deeper text."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    # (fewer opening brackets than the bound, in strings or not, cannot nest deeper: no scan)
    if text.count("[") + text.count("{") > max_depth and json_depth(text) > max_depth:
        raise ShapeError(f"JSON nested deeper than {max_depth} levels")
    return json.loads(text)


def to_data(value: Any) -> Any:
    """A dataclass tree as JSON-ready values (sets become sorted lists, enums their values)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(to_data(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [to_data(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_data(v) for k, v in value.items()}
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def from_data(kind: Any, data: Any, depth: int = 0) -> Any:
    """`data` rebuilt as `kind`; ShapeError when any part does not fit."""
    if depth > MAX_DEPTH:
        raise ShapeError("nested too deeply")
    if kind is Any:
        return _json_value(data, depth)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return from_data(option, data, depth)
            except ShapeError:
                continue
        raise ShapeError(f"{data!r:.40} fits none of {kind}")
    if kind is type(None):
        if data is not None:
            raise ShapeError("expected null")
        return None
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _dataclass(kind, data, depth)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(data)
        except ValueError:
            raise ShapeError(f"{data!r:.40} is not a {kind.__name__}") from None
    if origin in (list, tuple, set, frozenset):
        if not isinstance(data, list):
            raise ShapeError(f"expected a list for {kind}")
        item = args[0] if args else Any
        return origin(from_data(item, v, depth + 1) for v in data)
    if kind is dict or origin is dict:
        if not isinstance(data, dict):
            raise ShapeError(f"expected an object for {kind}")
        value_kind = args[1] if args else Any
        return {k: from_data(value_kind, v, depth + 1) for k, v in data.items()}
    if kind in (str, int, float, bool):
        # bool is an int in Python, and an int is a valid float in JSON: only the exact type fits,
        # save ints where floats are declared.
        if type(data) is kind or (kind is float and type(data) is int):
            return data
        raise ShapeError(f"{data!r:.40} is not {kind.__name__}")
    raise ShapeError(f"cannot rebuild {kind}")


def _dataclass(cls: type, data: Any, depth: int) -> Any:
    if not isinstance(data, dict):
        raise ShapeError(f"expected an object for {cls.__name__}")
    hints = _hints(cls)
    if set(data) != set(hints):
        raise ShapeError(f"{cls.__name__} fields differ: {sorted(set(data) ^ set(hints))}")
    return cls(**{name: from_data(hint, data[name], depth + 1) for name, hint in hints.items()})


def _json_value(data: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise ShapeError("nested too deeply")
    if data is None or type(data) in (str, int, float, bool):
        return data
    if isinstance(data, list):
        return [_json_value(v, depth + 1) for v in data]
    if isinstance(data, dict):
        return {k: _json_value(v, depth + 1) for k, v in data.items()}
    raise ShapeError(f"{type(data).__name__} is not a JSON value")
