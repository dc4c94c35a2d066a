"""Interval conditions: whether an `if` test throttles what it guards by a step counter.

`if step % 100 == 0:`, `if not step % log_every:`, `if i == 0:`, `if step >= next_eval:`,
`if should_log(step):`, `if is_last_batch:` each pick a few steps of a loop; work under them does
not run every step.  `if step % 100:` (true on 99 steps of 100), `if (step + 1) % accum_steps ==
0:` (gradient accumulation: every few steps is the training step itself) and `if rank == 0:` do not
throttle.

The decision is made on either tree: the loop model asks it of libcst nodes (`analysis/loops.py`),
the project index of CPython's (`analysis/project.py`, which must not import libcst: building the
index of a tree where no rule may fire parses nothing with libcst).  One decision, written once
against `ExpressionReader`, the few questions it asks of an expression; each tree has a reader
(`AST_READER` here, `loops.CST_READER`).  The two trees differ where the decision could notice,
and the readers even that out: libcst nests an `and`/`or` chain pairwise from the left where
CPython keeps one list of operands; an attribute's and a keyword argument's names are `Name` nodes
in libcst and strings in CPython; `True`, `False` and `None` are names in libcst.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any, Protocol

from gpulint.linter.analysis.ast_names import dotted_name

# Names of an interval's bounds: `step >= next_eval`, `it > last_log + every`.
THROTTLE_NAME = re.compile(r"next|last|prev|interval|every|freq|period|log_at|eval_at|save_at", re.IGNORECASE)
# Step counters: `step == n - 1` picks one step of the loop.
COUNTER_NAME = re.compile(
    r"(^|_)(i|it|iter|iters|iteration|step|steps|idx|index|epoch|count|counter|update|updates)$", re.IGNORECASE
)
# Flags that are true on one step: `is_last_batch`, `final_step`, `gradient_state.end_of_dataloader`.
ONE_STEP_FLAG = re.compile(r"(^|_)(first|last|final|end)(_|$)", re.IGNORECASE)
# Gradient-accumulation counts: `step % accum_steps == 0` is every optimizer step, not a throttle.
ACCUMULATION_NAME = re.compile(r"accum|grad_acc|gradient_acc|update_freq|micro", re.IGNORECASE)

# The comparison operators the decision tells apart; any other is OTHER.
EQUAL, NOT_EQUAL, ORDER, OTHER = "==", "!=", "<>", "other"


class ExpressionReader(Protocol):
    """What the decision asks of an expression node of one kind of tree."""

    def boolean(self, node: Any) -> tuple[str, Any, Any] | None:
        """("and" | "or", left, right) for a boolean operation, nested pairwise from the left."""

    def negated(self, node: Any) -> Any | None:
        """The operand of `not x`."""

    def modulo(self, node: Any) -> tuple[Any, Any] | None:
        """(left, right) of `left % right`."""

    def is_string(self, node: Any) -> bool:
        """A string or bytes literal, f-strings and implicit concatenations included."""

    def comparison(self, node: Any) -> tuple[Any, list[tuple[str, Any]]] | None:
        """(left, [(operator, right), ...]) of a comparison chain; operators EQUAL, NOT_EQUAL,
        ORDER (`<`, `<=`, `>`, `>=`) or OTHER."""

    def call(self, node: Any) -> tuple[Any, list[tuple[bool, Any]]] | None:
        """(function, [(starred, value), ...]) of a call, its arguments in source order (keyword
        arguments included)."""

    def dotted(self, node: Any) -> str | None:
        """`a.b.c` for a name or attribute chain, else None."""

    def is_name(self, node: Any) -> bool:
        """A name or an attribute (libcst's kind of name: `True` and `None` are names)."""

    def integer(self, node: Any) -> int | None:
        """The value of an integer literal (not a bool), else None."""

    def names(self, node: Any) -> set[str]:
        """Every identifier under the node: variables, attribute names, keyword names."""


def is_interval_condition(reader: ExpressionReader, test: Any) -> bool:
    """Whether an `if` condition throttles by a counter (see the module docstring)."""
    if reader.boolean(test) is not None:
        return holds_anywhere(reader, test, lambda node: is_interval_condition(reader, node))
    operand = reader.negated(test)
    if operand is not None:
        return _is_modulo(reader, operand)  # `if not step % 100:`
    if _is_modulo(reader, test):
        return False  # `if step % 100:` is true on 99 steps of 100: not a throttle
    compared = reader.comparison(test)
    if compared is not None:
        left, comparisons = compared
        for operator, right in comparisons:
            if operator in (EQUAL, NOT_EQUAL) and (reader.modulo(left) or reader.modulo(right)):
                # `step % 100 == 0` throttles; `(step + 1) % accum_steps == 0` does not.
                return operator == EQUAL and (_is_modulo(reader, left) or _is_modulo(reader, right))
            if operator == EQUAL:
                # `i == 0`, `step == n - 1`: a counter hitting one value.  A rank check is not a throttle.
                names = reader.names(left) | reader.names(right)
                if any("rank" in n.lower() or "local" in n.lower() for n in names):
                    return False
                literal = reader.integer(right) is not None or reader.integer(left) is not None
                if literal or any(COUNTER_NAME.search(n) for n in names):
                    return True
            if operator == ORDER:
                if any(THROTTLE_NAME.search(n) for n in reader.names(left) | reader.names(right)):
                    return True
            left = right
        return False
    called = reader.call(test)
    if called is not None:
        if _is_tensorflow_interval(reader, *called):
            return True
        # Trainers' own throttles: `accelerator.sync_gradients`-style flags are not, but
        # `should_log(step)` / `is_log_step()` helpers are named for it.
        name = (reader.dotted(called[0]) or "").rsplit(".", 1)[-1].lower()
        return name.startswith(("should_", "is_log", "is_eval", "time_to_")) or bool(ONE_STEP_FLAG.search(name))
    if reader.is_name(test):
        return bool(ONE_STEP_FLAG.search((reader.dotted(test) or "").rsplit(".", 1)[-1]))
    return False


def holds_anywhere(reader: ExpressionReader, test: Any, check: Callable[[Any], bool]) -> bool:
    """`check` on a condition, through `and` (either side throttles) and `or` (both must, or one
    does and the other picks one step: `step % 100 == 0 or last_batch`, `... or i == max_steps`)."""
    operation = reader.boolean(test)
    if operation is None:
        return check(test)
    operator, left_operand, right_operand = operation
    left, right = holds_anywhere(reader, left_operand, check), holds_anywhere(reader, right_operand, check)
    if operator == "and":
        return left or right
    # `or`: both sides throttle, or one does and the other at least picks one step
    return (left and (right or is_interval_condition(reader, right_operand))) or (
        right and is_interval_condition(reader, left_operand)
    )


def _is_modulo(reader: ExpressionReader, node: Any) -> bool:
    """`counter % interval`, where the interval is not a gradient-accumulation count."""
    operands = reader.modulo(node)
    if operands is None:
        return False
    left, right = operands
    if reader.is_string(left):
        return False  # string formatting, not arithmetic
    return not any(ACCUMULATION_NAME.search(n) for n in reader.names(right))


def _is_tensorflow_interval(reader: ExpressionReader, function: Any, arguments: list[tuple[bool, Any]]) -> bool:
    """`tf.equal(optimizer.iterations % 100, 0)`: `step % n == 0` written as a TensorFlow op (the
    condition itself reads the tensor back: GL706 reports that; what it guards runs every n steps)."""
    name = reader.dotted(function) or ""
    if name.rsplit(".", 1)[-1] != "equal" or len(arguments) != 2 or any(starred for starred, _ in arguments):
        return False
    (_, left), (_, right) = arguments
    return (_is_modulo(reader, left) and reader.integer(right) == 0) or (
        _is_modulo(reader, right) and reader.integer(left) == 0
    )


class _AstReader:
    """`ExpressionReader` for CPython's syntax tree."""

    def boolean(self, node: ast.AST) -> tuple[str, ast.AST, ast.AST] | None:
        if not isinstance(node, ast.BoolOp):
            return None
        # libcst's pairing: `a or b or c` is `(a or b) or c`.
        left = node.values[0] if len(node.values) == 2 else ast.BoolOp(op=node.op, values=node.values[:-1])
        return ("and" if isinstance(node.op, ast.And) else "or"), left, node.values[-1]

    def negated(self, node: ast.AST) -> ast.AST | None:
        return node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) else None

    def modulo(self, node: ast.AST) -> tuple[ast.AST, ast.AST] | None:
        return (node.left, node.right) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) else None

    def is_string(self, node: ast.AST) -> bool:
        return isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
        )

    def comparison(self, node: ast.AST) -> tuple[ast.AST, list[tuple[str, ast.AST]]] | None:
        if not isinstance(node, ast.Compare):
            return None
        return node.left, [
            (_AST_OPERATORS.get(type(op), OTHER), right) for op, right in zip(node.ops, node.comparators, strict=True)
        ]

    def call(self, node: ast.AST) -> tuple[ast.AST, list[tuple[bool, ast.AST]]] | None:
        if not isinstance(node, ast.Call):
            return None
        # Positional arguments come before keyword ones unless one is starred (`f(a=1, *rest)`),
        # and a starred argument is all the decision needs to know of such a call.
        arguments: list[tuple[bool, ast.AST]] = [
            *((isinstance(a, ast.Starred), a.value if isinstance(a, ast.Starred) else a) for a in node.args),
            *((k.arg is None, k.value) for k in node.keywords),
        ]
        return node.func, arguments

    def dotted(self, node: ast.AST) -> str | None:
        return dotted_name(node)

    def is_name(self, node: ast.AST) -> bool:
        return isinstance(node, (ast.Name, ast.Attribute)) or (
            isinstance(node, ast.Constant) and (node.value is None or type(node.value) is bool)
        )

    def integer(self, node: ast.AST) -> int | None:
        return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None

    def names(self, node: ast.AST) -> set[str]:
        found: set[str] = set()
        for child in ast.walk(node):
            if isinstance(child, ast.Name):
                found.add(child.id)
            elif isinstance(child, ast.Attribute):
                found.add(child.attr)
            elif isinstance(child, ast.keyword) and child.arg is not None:
                found.add(child.arg)
            elif isinstance(child, ast.arg):
                found.add(child.arg)
            elif isinstance(child, ast.Constant) and (child.value is None or type(child.value) is bool):
                found.add(repr(child.value))
        return found


_AST_OPERATORS = {
    ast.Eq: EQUAL,
    ast.NotEq: NOT_EQUAL,
    ast.Lt: ORDER,
    ast.LtE: ORDER,
    ast.Gt: ORDER,
    ast.GtE: ORDER,
}

AST_READER: ExpressionReader = _AstReader()
