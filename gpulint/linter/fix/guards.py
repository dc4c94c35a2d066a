"""Interval guards: the fix that runs per-step work every N steps, `if <counter> % N == 0:`.

What goes under one guard:

* the statement that holds the finding;
* the statements right after it that use a name it assigns (`acc = evaluate(...)` then
  `print(acc)`), so the guarded value is never read unset -- and when such a name is read further
  away, no fix is offered (it could not be written without guessing);
* the read-backs right before it whose values only the guarded statements use (`lossf =
  loss.item()` before `print(lossf)`): guarding the print alone would keep the sync every step.

Where guards meet (merge_adjacent_guards, run by the fixer on every fixed block): a guard added
next to another with the same condition -- one added by another fix of the same pass, or one the
code already had -- joins it, so a run of log lines becomes one `if` block, not one each.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from gpulint.linter.analysis.context import STATEMENT_TYPES, FileContext
from gpulint.linter.analysis.logging_calls import enclosing_logging_call, logging_call_kind
from gpulint.linter.analysis.walk import iter_children, names_under, nodes_under
from gpulint.linter.findings import Applicability, Fix

# Calls that read a value back to the host (a sync) and change nothing.
_HOST_READS = frozenset({"item", "cpu", "numpy", "tolist"})
# Calls a read-back may also make: tensor methods and builtins that only compute a value.
_PURE_METHODS = _HOST_READS | frozenset(
    {"detach", "clone", "float", "double", "mean", "sum", "max", "min", "norm", "argmax", "format"}
)
_PURE_BUILTINS = frozenset({"float", "int", "str", "round", "abs", "len", "format"})


def guard_fix(ctx: FileContext, node: cst.CSTNode, interval_option: str, interval: int, what: str) -> Fix | None:
    """Put the statement holding `node` under `if <counter> % <interval> == 0:` (see the module
    docstring for what joins it).  None when the step loop has no counter, or the guard would
    leave a value unset that is read elsewhere."""
    group = _guarded_group(ctx, node)
    if group is None:
        return None
    counter, statements = group
    return _guard(
        statements, f"{counter} % {interval} == 0", f"Run {what} every {interval} steps (`{interval_option}`)"
    )


def host_read_guard_fix(ctx: FileContext, node: cst.CSTNode, interval_option: str, interval: int) -> Fix | None:
    """The fix of a host read (`.item()`) whose value only feeds logging: the log statement is
    guarded (`print(f"{loss.item()}")`), or the read-back and the log lines that use it (`lossf =
    loss.item()` then `print(lossf)`).  None when the value feeds anything else."""
    if enclosing_logging_call(ctx, node) is not None:
        return guard_fix(ctx, node, interval_option, interval, "logging")
    statement = ctx.statement_of(node)
    if not is_read_back(statement):
        return None
    group = _guarded_group(ctx, node)
    if group is None:
        return None
    counter, statements = group
    assert isinstance(statement, cst.BaseStatement)  # the group holds it: a statement of a block
    condition = f"{counter} % {interval} == 0"
    message = f"Run logging every {interval} steps (`{interval_option}`)"
    at = statements.index(statement)
    users = statements[at + 1 :]
    if len(users) == 1 and isinstance(users[0], cst.If) and _condition(users[0]) == "".join(condition.split()):
        # Read just before the guard that logs it: guarding the read joins that guard (the fixer merges them).
        return _guard(statements[: at + 1], condition, message)
    if not users or not all(_is_logging_statement(ctx, s) for s in users):
        return None
    return _guard(statements, condition, message)


def is_read_back(statement: cst.CSTNode) -> bool:
    """`name = <expression>` whose value is computed without side effects (names, attributes,
    arithmetic, f-strings, tensor reductions, `.item()`, `float()`): moving it under a guard
    changes nothing but how often it runs."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    small = statement.body[0]
    return (
        isinstance(small, cst.Assign)
        and all(isinstance(t.target, (cst.Name, cst.Tuple)) for t in small.targets)
        and _pure(small.value)
    )


def _pure(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute):
            if func.attr.value not in _PURE_METHODS or not _pure(func.value):
                return False
        elif not (isinstance(func, cst.Name) and func.value in _PURE_BUILTINS):
            return False
        return all(_pure(arg.value) for arg in node.args)
    if isinstance(node, (cst.Lambda, cst.Await, cst.Yield, cst.NamedExpr, cst.BaseComp)):
        return False
    return all(_pure(child) for child in iter_children(node) if isinstance(child, cst.BaseExpression))


def _is_logging_statement(ctx: FileContext, statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.Call)
        and logging_call_kind(ctx, statement.body[0].value) is not None
    )


def _bound_names(statement: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            targets = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                targets = [small.target]
            for target in targets:
                names |= names_under(target)
    return names


def _guarded_group(ctx: FileContext, node: cst.CSTNode) -> tuple[str, list[cst.BaseStatement]] | None:
    """(the step counter, the statements of one block that go under the guard), or None."""
    counter = ctx.loops.step_counter(node)
    if counter is None:
        return None
    statement = ctx.statement_of(node)
    block = ctx.parent(statement)
    if not isinstance(block, cst.IndentedBlock):
        return None  # a one-line `for x in y: stmt` suite: leave it to a person
    assert isinstance(statement, cst.BaseStatement)  # what an indented block holds
    body = list(block.body)
    start = body.index(statement)
    group = [statement]
    bound = _bound_names(statement)
    for following in body[start + 1 :]:
        if bound and names_under(following) & bound:
            group.append(following)
            bound |= _bound_names(following)
        else:
            break
    rest = body[start + len(group) :]
    if bound and (any(names_under(s) & bound for s in rest + body[:start]) or _read_after(ctx, block, bound)):
        return None
    return counter, _read_backs_before(ctx, body[:start], group) + group


def _read_backs_before(
    ctx: FileContext, before: Sequence[cst.BaseStatement], group: list[cst.BaseStatement]
) -> list[cst.BaseStatement]:
    """The read-backs right before `group` whose names nothing but the statements after them (up
    to the end of the group) uses."""
    taken: list[cst.BaseStatement] = []
    for candidate in reversed(before):
        names = _bound_names(candidate)
        if not is_read_back(candidate) or not names:
            break
        users = [*taken, *group]
        if not any(names & names_under(user) for user in users) or _used_elsewhere(
            ctx, candidate, names, [candidate, *users]
        ):
            break
        taken.insert(0, candidate)
    return taken


def _used_elsewhere(ctx: FileContext, anchor: cst.CSTNode, names: set[str], inside: Sequence[cst.CSTNode]) -> bool:
    """Whether a name of `names` occurs in the function (or module) around `anchor` outside the
    statements `inside`."""
    scope: cst.CSTNode = ctx.enclosing_function(anchor) or ctx.module
    skip = {id(s) for s in inside}
    stack: list[cst.CSTNode] = [scope]
    while stack:
        current = stack.pop()
        if id(current) in skip:
            continue
        if isinstance(current, cst.Name) and current.value in names:
            return True
        stack.extend(iter_children(current))
    return False


def _read_after(ctx: FileContext, block: cst.IndentedBlock, names: set[str]) -> bool:
    """Whether statements after the block (up to the function's end) read any of `names`."""
    child: cst.CSTNode = block
    for ancestor in ctx.ancestors(block):
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            statements: list[cst.CSTNode] = list(ancestor.body)
            if child in statements:
                index = statements.index(child)
                if any(names_under(s) & names for s in statements[index + 1 :]):
                    return True
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            break
        child = ancestor
    return False


def _guard(statements: list[cst.BaseStatement], condition: str, message: str) -> Fix:
    first = statements[0]
    assert isinstance(first, STATEMENT_TYPES)  # the two kinds of statement
    body = [first.with_changes(leading_lines=()), *statements[1:]]
    guard = cst.If(
        test=cst.parse_expression(condition), body=cst.IndentedBlock(body=body), leading_lines=first.leading_lines
    )
    replacements: dict = {first: guard}
    for extra in statements[1:]:
        replacements[extra] = cst.RemovalSentinel.REMOVE
    return Fix(Applicability.UNSAFE, message, replacements)


# -- guards that meet ------------------------------------------------------------------------------


def merge_adjacent_guards(body: Sequence[cst.BaseStatement], new: set[int]) -> list[cst.BaseStatement] | None:
    """`body` with each run of adjacent `if` blocks that test the same condition, one of them in
    `new` (by id: added by a fix), made one block; None when there is none to merge."""
    merged: list[cst.BaseStatement] = []
    changed = False
    for statement in body:
        previous = merged[-1] if merged else None
        if (
            isinstance(previous, cst.If)
            and isinstance(statement, cst.If)
            and (id(previous) in new or id(statement) in new)
            and _joinable(previous, statement)
        ):
            joined = _join(previous, statement)
            new.add(id(joined))
            merged[-1] = joined
            changed = True
        else:
            merged.append(statement)
    return merged if changed else None


def _condition(guard: cst.If) -> str:
    return "".join(cst.Module([]).code_for_node(guard.test).split())


def _joinable(first: cst.If, second: cst.If) -> bool:
    if first.orelse is not None or second.orelse is not None:
        return False
    if not isinstance(first.body, cst.IndentedBlock) or not isinstance(second.body, cst.IndentedBlock):
        return False
    if _condition(first) != _condition(second):
        return False
    # The first block must not change what the condition reads (`step += 1` in it).
    return not names_under(first.test) & set().union(*(_assigned(s) for s in first.body.body))


def _assigned(statement: cst.CSTNode) -> set[str]:
    names = set()
    for node in nodes_under(statement):
        if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
            names |= names_under(node.target)
    return names


def _join(first: cst.If, second: cst.If) -> cst.If:
    assert isinstance(first.body, cst.IndentedBlock) and isinstance(second.body, cst.IndentedBlock)  # _joinable
    moved = list(second.body.body)
    head = moved[0]
    assert isinstance(head, STATEMENT_TYPES)  # the two kinds of statement
    # The comments and blank lines above the second `if` stay above its first statement.
    moved[0] = head.with_changes(leading_lines=[*second.leading_lines, *head.leading_lines])
    return first.with_changes(body=first.body.with_changes(body=[*first.body.body, *moved]))
