"""What a single node spells: names, call arguments and literals.  Pure functions of the node, with
no knowledge of the rest of the module (that is FileContext's)."""

from __future__ import annotations

import libcst as cst


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None (calls, subscripts, ... break the chain)."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def last_name(expr: cst.BaseExpression) -> str | None:
    """The rightmost name of `a.b.c` (`c`), or of a call's receiver chain; None otherwise."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    dotted = dotted_name(expr)
    return dotted.rsplit(".", 1)[-1] if dotted else None


def method_name(call: cst.Call) -> str | None:
    """`step` for `optimizer.step()`; None for a call of a plain name."""
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional_args(call: cst.Call) -> list[cst.Arg]:
    """The arguments given by position (not `*args`, not keywords)."""
    return [arg for arg in call.args if arg.keyword is None and not arg.star]


def has_star_kwargs(call: cst.Call) -> bool:
    """`f(**options)` may set any keyword: rules cannot know what it holds."""
    return any(arg.star == "**" for arg in call.args)


def is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def is_zero(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer) and node.evaluated_value == 0


def int_literal(arg: cst.Arg | None) -> int | None:
    """The value of an argument written as an integer literal."""
    if arg is not None and isinstance(arg.value, cst.Integer):
        return int(arg.value.evaluated_value)
    return None


def string_literal(arg: cst.Arg | None) -> str | None:
    """The value of an argument written as a (non-f-)string literal."""
    if arg is not None and isinstance(arg.value, cst.SimpleString):
        return str(arg.value.evaluated_value)
    return None
