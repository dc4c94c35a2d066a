"""One fast pre-order walk of a libcst tree.

libcst's visitor machinery (`module.visit`) rebuilds every node's children on the way out and costs
several times the parse on real code.  Rules here only read the tree, so this walk iterates the
dataclass fields of each node directly, skips the whitespace/comment/punctuation fields that no rule
looks at, and records what later stages need: each node's parent, and the nodes of the types that
rules and the shared analyses subscribe to, in source order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any, Literal, overload

import libcst as cst

from gpulint.linter.analysis.nodes import dotted_name

# Fields that hold only formatting (whitespace, comments, parentheses, commas) or plain strings.
# Skipping them is where most of the walk's speed comes from: they are the bulk of the tree.
_SKIPPED_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "leading_lines",
        "lines_after_decorators",
        "trailing_whitespace",
        "header",
        "footer",
        "equal",
        "colon",
        "dot",
        "star",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "whitespace",
        "newline",
        "encoding",
        "default_indent",
        "default_newline",
        "has_trailing_newline",
        "indent",
        "asynchronous",
        "prefix",
        "quote",
        "value",  # only skipped where it is a str; node-valued `value` fields are kept (see below)
    }
)

_fields_cache: dict[type, tuple[str, ...]] = {}


def _child_fields(node_type: type) -> tuple[str, ...]:
    fields = _fields_cache.get(node_type)
    if fields is None:
        names = []
        for f in dataclasses.fields(node_type):
            name = f.name
            if name.startswith("whitespace") or name.startswith("_"):
                continue
            if name in _SKIPPED_FIELDS and name != "value":
                continue
            names.append(name)
        fields = _fields_cache[node_type] = tuple(names)
    return fields


# What a field's value is, by its type: a libcst node (_NODE), a sequence that may hold nodes
# (_SEQUENCE) or neither (_OTHER: a string, None, a sentinel).  `isinstance(value, cst.CSTNode)`
# goes through the ABC machinery on every call, and the walks ask it for every field of every node.
_OTHER, _NODE, _SEQUENCE = 0, 1, 2
_value_kinds: dict[type, int] = {}


def _kind_of(value_type: type) -> int:
    kind = _value_kinds.get(value_type)
    if kind is None:
        if issubclass(value_type, cst.CSTNode):
            kind = _NODE
        elif value_type is tuple or value_type is list:
            kind = _SEQUENCE
        else:
            kind = _OTHER
        _value_kinds[value_type] = kind
    return kind


def iter_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Semantic children of a node, in source order (formatting nodes left out)."""
    found = []
    kinds = _value_kinds
    node_type = type(node)
    for name in _fields_cache.get(node_type) or _child_fields(node_type):
        value = getattr(node, name)
        kind = kinds.get(type(value))
        if kind is None:
            kind = _kind_of(type(value))
        if kind == _NODE:
            found.append(value)
        elif kind == _SEQUENCE:
            for item in value:
                item_kind = kinds.get(type(item))
                if item_kind == _NODE or (item_kind is None and _kind_of(type(item)) == _NODE):
                    found.append(item)
    return found


def nodes_under(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every semantic node under it (formatting nodes left out), in no set order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(iter_children(current))


def names_under(node: cst.CSTNode) -> set[str]:
    """Every identifier under `node` (variables and attribute names: `a.b` gives {"a", "b"})."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.add(current.value)
        else:
            stack.extend(iter_children(current))
    return found


class TreeIndex:
    """Parents and per-type node lists for one module, filled by a single walk."""

    def __init__(
        self, module: cst.Module, wanted_types: frozenset[str], listed_types: frozenset[str] = frozenset()
    ) -> None:
        """`wanted_types`: listed by type and in `ordered`; `listed_types`: by type only (the
        analyses look them up, no rule visits them)."""
        self.module = module
        self.parents: dict[int, cst.CSTNode] = {}
        self.by_type: dict[str, list[cst.CSTNode]] = {name: [] for name in wanted_types | listed_types}
        # Every wanted node in pre-order, for dispatching rules in source order.
        self.ordered: list[cst.CSTNode] = []
        self._walk(module, wanted_types, listed_types - wanted_types)

    def _walk(self, root: cst.CSTNode, wanted: frozenset[str], listed: frozenset[str]) -> None:
        parents = self.parents
        by_type = self.by_type
        ordered = self.ordered
        # An explicit stack instead of recursion: deep expressions (long string concatenations in
        # generated code) would otherwise hit Python's recursion limit.  Each child's parent is
        # noted as it is pushed.
        stack: list[cst.CSTNode] = [root]
        pop, push = stack.pop, stack.extend
        while stack:
            node = pop()
            type_name = type(node).__name__
            if type_name in wanted:
                by_type[type_name].append(node)
                ordered.append(node)
            elif type_name in listed:
                by_type[type_name].append(node)
            children = iter_children(node)
            if children:
                for child in children:
                    parents[id(child)] = node
                children.reverse()
                push(children)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(id(node))

    def ancestors(self, node: cst.CSTNode) -> Iterable[cst.CSTNode]:
        parent = self.parents.get(id(node))
        while parent is not None:
            yield parent
            parent = self.parents.get(id(parent))

    # The lists are filled by class name, so "Call" holds only cst.Call nodes: the overloads say so
    # for the names the analyses and rules ask for.
    @overload
    def nodes(self, type_name: Literal["Assign"]) -> list[cst.Assign]: ...
    @overload
    def nodes(self, type_name: Literal["AugAssign"]) -> list[cst.AugAssign]: ...
    @overload
    def nodes(self, type_name: Literal["Call"]) -> list[cst.Call]: ...
    @overload
    def nodes(self, type_name: Literal["ClassDef"]) -> list[cst.ClassDef]: ...
    @overload
    def nodes(self, type_name: Literal["For"]) -> list[cst.For]: ...
    @overload
    def nodes(self, type_name: Literal["FunctionDef"]) -> list[cst.FunctionDef]: ...
    @overload
    def nodes(self, type_name: Literal["Import"]) -> list[cst.Import]: ...
    @overload
    def nodes(self, type_name: Literal["ImportFrom"]) -> list[cst.ImportFrom]: ...
    @overload
    def nodes(self, type_name: Literal["Name"]) -> list[cst.Name]: ...
    @overload
    def nodes(self, type_name: Literal["Return"]) -> list[cst.Return]: ...
    @overload
    def nodes(self, type_name: Literal["SimpleString"]) -> list[cst.SimpleString]: ...
    @overload
    def nodes(self, type_name: str) -> list[cst.CSTNode]: ...
    def nodes(self, type_name: str) -> list[Any]:
        return self.by_type.get(type_name, [])


def words_under(node: cst.CSTNode) -> set[str]:
    """Every identifier, dotted name and string value under `node` (`torch.cuda.is_available()`
    gives "torch", "cuda", "is_available", "torch.cuda", "torch.cuda.is_available")."""
    words: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            words.add(current.value)
        elif isinstance(current, cst.Attribute):
            dotted = dotted_name(current)
            if dotted:
                words.add(dotted)
            words.add(current.attr.value)
        elif isinstance(current, cst.SimpleString):
            words.add(current.evaluated_value if isinstance(current.evaluated_value, str) else "")
        stack.extend(iter_children(current))
    return words
