"""The expressions a configuration may have gpulint write into the user's code.

GL101 and its trainer twin write the `num-workers` option verbatim as `num_workers=<expression>`.
The option comes from a `pyproject.toml`, which arrives with the repository, so it must not be a
way to plant code in the files `--fix` rewrites.  It is checked against a small grammar (the
Python parser reads it; nothing evaluates it):

    expression := integer | name | name.attribute... | expression OP expression | -expression
                | expression or expression | expression and expression | (expression)
                | min(expression, ...) | max(expression, ...)
                | os.cpu_count() | len(os.sched_getaffinity(0))
    OP         := + - * / // %

Names are plain or dotted references (`args.workers`), never dunders; the only calls are the four
above.  Anything else is refused with the reason.
"""

from __future__ import annotations

import ast
import re

from gpulint.linter.analysis.ast_names import dotted_name

MAX_LENGTH = 200
# Letters, digits, spaces, dots, commas, parentheses and arithmetic: no quotes, comments, newlines,
# backslashes, brackets or keywords other than `or`/`and` can get through to the parser.
_CHARACTERS = re.compile(r"^[A-Za-z0-9_ .,()+\-*/%]+$")
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


class UnsafeExpression(ValueError):
    """An expression outside the grammar; `str()` says what is not allowed."""


def check_worker_expression(text: str) -> None:
    """Raise UnsafeExpression unless `text` is in the grammar above."""
    if len(text) > MAX_LENGTH:
        raise UnsafeExpression(f"longer than {MAX_LENGTH} characters")
    if not _CHARACTERS.match(text):
        raise UnsafeExpression(
            "only integers, names, arithmetic, min/max, os.cpu_count() and len(os.sched_getaffinity(0)) are allowed"
        )
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise UnsafeExpression(f"not a Python expression ({exc.msg})") from None
    _check(tree.body)


def _check(node: ast.expr) -> None:
    if isinstance(node, ast.Constant):
        if type(node.value) is not int:
            raise UnsafeExpression(f"the constant {node.value!r} is not an integer")
        return
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = dotted_name(node)
        if name is None:
            raise UnsafeExpression("attributes are allowed only on names")
        if any(part.startswith("__") for part in name.split(".")):
            raise UnsafeExpression(f"`{name}`: double-underscore names are not allowed")
        return
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, _OPERATORS):
            raise UnsafeExpression("the arithmetic allowed is + - * / // %")
        _check(node.left)
        _check(node.right)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check(node.operand)
        return
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value)
        return
    if isinstance(node, ast.Call):
        _check_call(node)
        return
    raise UnsafeExpression(f"{type(node).__name__} expressions are not allowed")


def _check_call(node: ast.Call) -> None:
    function = dotted_name(node.func)
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise UnsafeExpression(f"`{function}(...)` takes positional arguments only")
    if function in ("min", "max") and node.args:
        for argument in node.args:
            _check(argument)
        return
    if function == "os.cpu_count" and not node.args:
        return
    if function == "len" and len(node.args) == 1 and _is_affinity_call(node.args[0]):
        return
    raise UnsafeExpression(
        f"the call `{function or 'expression'}(...)` is not allowed "
        "(only min, max, os.cpu_count() and len(os.sched_getaffinity(0)))"
    )


def _is_affinity_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and dotted_name(node.func) == "os.sched_getaffinity"
        and not node.keywords
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and type(node.args[0].value) is int
        and node.args[0].value == 0
    )
