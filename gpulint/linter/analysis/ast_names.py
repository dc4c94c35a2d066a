"""What a name or attribute chain spells in CPython's syntax tree (the `ast` module's), for the code
that reads that tree instead of libcst's: the project index, the trigger filter's code shapes, the
interval decision's reader and the option expressions of the configuration.  (`nodes.py` holds
the same for libcst's tree.)"""

from __future__ import annotations

import ast


def dotted_name(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of names, None for anything else (a call, a subscript... in the chain)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def last_name(node: ast.AST) -> str | None:
    """The rightmost name of a name or attribute (`c` for `a.b.c`), None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None
