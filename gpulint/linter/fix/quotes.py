"""The quotes of the strings a fix writes (`"cpu"` in `torch.amp.autocast("cpu", ...)`).

They are those the project's formatter writes (`Settings.quote_style`: ruff's `quote-style`, black's
double quotes; project.py `quote_style_from`), and where no formatter setting says, those most of
the file's own one-line strings use (ties: double, as ruff and black write them): a fix in a file
of single-quoted strings writes `'cpu'` beside its `'cuda'`, as the author would, and a project
formatted with `quote-style = "single"` gets no change its formatter would undo.  Strings the fix
keeps from the file stay as written, and a string that would need escaping in the other quotes
(`"it's"`) keeps its own.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from gpulint.linter.findings import Fix

_QUOTES = {"single": "'", "double": '"'}


class _Strings(cst.CSTVisitor):
    """The one-line strings of a tree, by identity."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.SimpleString] = []

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.found.append(node)


def _strings(nodes: Iterable[object]) -> list[cst.SimpleString]:
    collector = _Strings()
    for node in nodes:
        if isinstance(node, cst.FlattenSentinel):
            for inner in node.nodes:
                inner.visit(collector)
        elif isinstance(node, cst.CSTNode):
            node.visit(collector)
    return collector.found


def _quote_of(node: cst.SimpleString) -> str | None:
    """`'` or `"` for a one-line string without triple quotes; None for a triple-quoted one."""
    body = node.value[len(node.prefix) :]
    if body[:3] in ('"""', "'''"):
        return None
    return body[0]


def _restyled(node: cst.SimpleString, quote: str) -> cst.SimpleString:
    prefix = node.prefix
    inner = node.value[len(prefix) + 1 : -1]
    if _quote_of(node) in (None, quote) or quote in inner or "\\" in inner:
        return node  # (a change that would need escaping is not a change of style)
    return node.with_changes(value=f"{prefix}{quote}{inner}{quote}")


class _Restyle(cst.CSTTransformer):
    def __init__(self, written: set[int], quote: str) -> None:
        super().__init__()
        self.written = written
        self.quote = quote

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.SimpleString:
        return _restyled(updated_node, self.quote) if id(original_node) in self.written else updated_node


def restyle_fix_strings(
    module_strings: Iterable[cst.SimpleString], fixes: Iterable[Fix], quote_style: str | None
) -> None:
    """Write the strings each fix adds to a module in the project's quotes (the module's
    docstring); the strings it keeps from the module (`module_strings`: every one-line string of
    its tree, as the file's index holds them) are left as they are."""
    wanted = _QUOTES.get(quote_style or "")
    fixes = list(fixes)
    added: dict[int, list[cst.SimpleString]] = {}
    for index, fix in enumerate(fixes):
        strings = [s for s in _strings(fix.replacements.values()) if _quote_of(s) not in (None, wanted)]
        if strings:
            added[index] = strings
    if not added:
        return  # (most fixes write no string, or already the configured quotes)
    original = list(module_strings)
    kept = {id(node) for node in original}
    if wanted is None:
        quotes = [_quote_of(node) for node in original]
        wanted = "'" if quotes.count("'") > quotes.count('"') else '"'
    for index, strings in added.items():
        written = {id(s) for s in strings if id(s) not in kept and _quote_of(s) != wanted}
        if not written:
            continue
        fix = fixes[index]
        restyle = _Restyle(written, wanted)
        fix.replacements = {
            target: _visited(replacement, restyle, written) for target, replacement in fix.replacements.items()
        }


def _visited(replacement, restyle: _Restyle, written: set[int]):
    """`replacement` with its written strings restyled; the same object when it holds none."""
    if not any(id(s) in written for s in _strings([replacement])):
        return replacement
    if isinstance(replacement, cst.FlattenSentinel):
        return cst.FlattenSentinel([node.visit(restyle) for node in replacement.nodes])
    return replacement.visit(restyle)
