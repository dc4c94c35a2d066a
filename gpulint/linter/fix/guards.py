"""Interval guards: the fix that runs per-step work every N steps, `if <counter> % N == 0:`.

The interval fits the loop (`_interval`):

* a loop that already guards logging by its counter (`if batch_idx % args.log_interval == 0:`)
  lends its condition to the logging guards the fixes add there (one interval, guards that join);
* otherwise a loop whose length the code states (`range(500)`, a default argument, an argparse
  default, a literal list: `LoopModel.iterations`; or a `break` on a count in its body, `if n >
  args.num_iter: break` with `n += 1` in the loop: `_break_bound`) runs the work at least `RUNS_PER_PASS` (10) times
  a pass: the interval is the loop's length / 10 rounded down to 1, 2 or 5 times a power of ten
  (500 steps: every 50), and at most the rule's option (`log-every`, `eval-every`,
  `checkpoint-every`).  Under an interval of 2 a guard would not help (a loop of fewer than 20
  steps): no fix.  A loader's length is known only at run time: there the option is the interval;
* the guard is true on the counter's first value (`enumerate(loader, 1)`: `% 100 == 1`), so every
  pass of the loop runs the work at least once, however short it turns out.

What goes under one guard:

* the statement that holds the finding -- or, when it sits in a loop inside the step that only
  logs (`for name, p in model.named_parameters():` over `if "weight" in name:
  writer.add_scalar(...)`), that whole loop: one guard around it, not one per line
  (`_logging_loop_around`);
* the statements right after it that use a name it assigns (`acc = evaluate(...)` then
  `print(acc)`), so the guarded value is never read unset -- and when such a name is read further
  away, no fix is offered (it could not be written without guessing);
* the read-backs before it whose values only the guarded statements use (`lossf = loss.item()`
  before `print(lossf)`): guarding the print alone would keep the sync every step.  Right before
  it, any side-effect-free assignment; further up, a host read (`d_x = output.mean().item()`) of
  values computed in this step that nothing in between mentions (so it reads the same values
  where it moves to), on a line of its own (no comment or blank line above it to carry along);
* a guard of the loop's own among them (`if step % 100 == 0:` under the `% 1000` a validation
  fix adds) is dissolved into the new one, whose interval is then made a multiple of it: a guard
  is never written inside a coarser one.  Where that cannot be done exactly, no fix.

No guard is written where the step reads back, every step and outside logging, a tensor the
guarded statements read back (`losses.append(loss.item())` below `print(loss.item())`): the step
waits for it anyway, so the guard would save nothing and only silence the output.

No guard is written under a condition that depends on the step's data (`if dones[step]:`, `if
"episode" in info:` -- a name the loop binds, other than its counter): that work runs when the
data says, and gating it on the counter as well would drop the events it logs.

Where guards meet (merge_adjacent_guards, run by the fixer on every fixed block): a guard added
next to another with the same condition -- one added by another fix of the same pass, or one the
code already had -- joins it, so a run of log lines becomes one `if` block, not one each.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from gpulint.linter.analysis.context import STATEMENT_TYPES, FileContext
from gpulint.linter.analysis.logging_calls import enclosing_logging_call, logging_call_kind
from gpulint.linter.analysis.loops import LOOP_TYPES, SCOPE_TYPES, is_interval_condition
from gpulint.linter.analysis.nodes import dotted_name
from gpulint.linter.analysis.walk import iter_children, names_under, nodes_under
from gpulint.linter.findings import Applicability, Fix

# Calls that read a value back to the host (a sync) and change nothing.
_HOST_READS = frozenset({"item", "cpu", "numpy", "tolist"})
# Calls a read-back may also make: tensor methods and builtins that only compute a value.
_PURE_METHODS = _HOST_READS | frozenset(
    {"detach", "clone", "float", "double", "mean", "sum", "max", "min", "norm", "argmax", "format"}
)
_PURE_BUILTINS = frozenset({"float", "int", "str", "round", "abs", "len", "format"})
# Tensor methods whose result, logged, is read back (`writer.add_scalar("grad", p.grad.norm())`).
_REDUCTIONS = frozenset({"norm", "mean", "sum", "std", "var", "max", "min", "abs", "detach"})
# An option that switches output on (`args.print_loss`, `opt.verbose`, `args.debug`).
_SWITCH_NAME = re.compile(r"(^|_)(print|log|logging|verbose|debug|display|show)(_|$)", re.IGNORECASE)

# A guarded statement runs at least this many times a pass of a loop whose length is known.
RUNS_PER_PASS = 10
# The smallest interval worth a guard.
_SMALLEST_INTERVAL = 2
# Where the rule's option goes in an interval's `why` (filled in by `_message`).
_OPTION = "<option>"


@dataclass(frozen=True)
class _Interval:
    """`<counter> % <every> == <remainder>`, as code; `why` says where `every` came from."""

    counter: str
    every: str
    remainder: str
    start: int | None  # the counter's first value; None for a condition taken from the loop's code
    why: str

    @property
    def condition(self) -> str:
        return f"{self.counter} % {self.every} == {self.remainder}"


@dataclass(frozen=True)
class _Plan:
    """What one guard fix writes: `statements` (in source order) under `interval`'s condition, in
    place of `anchor`; the others of `statements` leave their places; those in `dissolved` (the
    loop's own guards) give their bodies instead of themselves."""

    interval: _Interval
    statements: list[cst.BaseStatement]
    anchor: cst.BaseStatement
    dissolved: frozenset[int] = frozenset()


def guard_fix(ctx: FileContext, node: cst.CSTNode, interval_option: str, interval: int, what: str) -> Fix | None:
    """Put the statement holding `node` under `if <counter> % <N> == <first value>:` (see the
    module docstring for N, at most `interval`, and for what joins it).  None when the step loop
    has no counter, is too short for a guard, the statement is under a data-dependent condition,
    the step reads the guarded tensor back anyway, or the guard would leave a value unset that is
    read elsewhere."""
    plan = _plan(ctx, node, interval, adopt_loop_guard=what == "logging")
    if plan is None:
        return None
    return _guard(plan, _message(what, plan.interval, interval_option))


def logging_guard_fix(
    ctx: FileContext, node: cst.CSTNode, interval_option: str, interval: int, node_reads: bool = False
) -> tuple[Fix | None, str | None]:
    """The guard of a log statement (`guard_fix`), offered only where it removes a read of the
    device the step makes every step (`node_reads`: `node` is one, as GL201 found it) and the log
    is not the script's own choice (module docstring): the fix, or None and why there is none
    (None when `guard_fix`'s own reasons rule it out)."""
    why_not = _why_no_logging_guard(ctx, node)
    if why_not is not None:
        return None, why_not
    plan = _plan(ctx, node, interval, adopt_loop_guard=True)
    if plan is None:
        return None, None
    if not node_reads and not _reads_device(ctx, ctx.loops.step_boundary(node), plan.statements):
        span = _span_from_read_back(ctx, plan)
        if span is None:
            return None, "the logged values are not read from the device here (numbers already read back, counters)"
        plan = span
    return _guard(plan, _message("logging", plan.interval, interval_option)), None


def _span_from_read_back(ctx: FileContext, plan: _Plan) -> _Plan | None:
    """The guard that takes in the read-back a log line prints (`lossf = loss.item()` some lines
    above `print(lossf)`) with every line from it to the last one that uses its value, where those
    lines only log or read back (`logger.info("lr %s", lr)` in between, `wandb.log({"loss":
    lossf})` after) and nothing else reads the value: the read then runs every N steps too.  None
    where there is no such read-back."""
    block = ctx.parent(plan.anchor)
    if not isinstance(block, cst.IndentedBlock) or len(plan.statements) != 1:
        return None
    body = list(block.body)
    at = body.index(plan.statements[0])
    logged = names_under(plan.statements[0])
    for start in range(at - 1, -1, -1):
        candidate = body[start]
        names = _bound_names(candidate) & logged
        if not names or not (is_read_back(candidate) and _reads_host(candidate)):
            continue
        users = [i for i in range(start + 1, len(body)) if names_under(body[i]) & names]
        span = body[start : users[-1] + 1]
        if not all(s is candidate or is_read_back(s) or _is_logging_statement(ctx, s) for s in span):
            return None
        if _used_elsewhere(ctx, candidate, names, span) or _read_after(ctx, block, names):
            return None
        loop = ctx.loops.step_boundary(plan.anchor)
        if loop is None or _read_back_kept(ctx, loop, span):  # type: ignore[arg-type]
            return None
        return _Plan(plan.interval, span, span[0])
    return None


def host_read_guard_fix(
    ctx: FileContext, node: cst.CSTNode, interval_option: str, interval: int
) -> tuple[Fix | None, str | None]:
    """The fix of a host read (`.item()`) whose value only feeds logging: the log statement is
    guarded (`print(f"{loss.item()}")`), or the read-back and the log lines that use it (`lossf =
    loss.item()` then `print(lossf)`).  None when the value feeds anything else; with a reason
    where the guard would override the script's own choice (`_why_no_logging_guard`)."""
    if enclosing_logging_call(ctx, node) is not None:
        return logging_guard_fix(ctx, node, interval_option, interval, node_reads=True)
    statement = ctx.statement_of(node)
    if not is_read_back(statement):
        return None, None
    why_not = _why_no_logging_guard(ctx, node)
    if why_not is not None:
        return None, why_not
    plan = _plan(ctx, node, interval, adopt_loop_guard=True)
    if plan is None:
        return None, None
    assert isinstance(statement, cst.BaseStatement)  # the plan holds it: a statement of a block
    message = _message("logging", plan.interval, interval_option)
    statements = plan.statements
    at = statements.index(statement)
    users = statements[at + 1 :]
    condition = "".join(plan.interval.condition.split())
    if len(users) == 1 and isinstance(users[0], cst.If) and _condition(users[0]) == condition:
        # Read just before the guard that logs it: guarding the read joins that guard (the fixer merges them).
        return _guard(_Plan(plan.interval, statements[: at + 1], plan.anchor, plan.dissolved), message), None
    if not users or not all(_is_logging_statement(ctx, s) for s in users):
        return None, None
    return _guard(plan, message), None


def _why_no_logging_guard(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """Why a log at `node` takes no guard whatever it reads: it runs under the script's own switch
    for it (`if args.print_loss:`), or once per epoch of full-batch training (its progress, one
    wait an epoch)."""
    switch = _logging_switch(ctx, node)
    if switch is not None:
        return f"it runs under `{switch}`, the script's own option for it"
    if ctx.loops.one_step_per_epoch(node):
        return "it runs once per epoch of full-batch training, the loop's progress"
    return None


def _logging_switch(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """The option a condition around `node` (inside its step loop) tests that asks for this
    output (`args.print_loss`, `self.verbose`, `opt.debug`), as code; else None."""
    loop = ctx.loops.step_boundary(node)
    for ancestor in ctx.ancestors(node):
        if ancestor is loop or isinstance(ancestor, SCOPE_TYPES):
            break
        if not isinstance(ancestor, cst.If):
            continue
        for test in nodes_under(ancestor.test):
            if isinstance(test, cst.Attribute) and _SWITCH_NAME.search(test.attr.value):
                return _code(test)
    return None


def _reads_device(ctx: FileContext, loop: cst.CSTNode | None, statements: Sequence[cst.BaseStatement]) -> bool:
    """Whether `statements` read a device value back: a `.item()` (or `.cpu()`, `.tolist()`,
    `float(t)`) of a tensor not known to be on the host, or a tensor a logging call formats or
    hands over (`print(f"{loss:.4f}")`, `writer.add_scalar("loss", loss, step)`)."""
    for statement in statements:
        for node in nodes_under(statement):
            if not isinstance(node, cst.Call):
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _HOST_READS:
                if not ctx.values.on_host(func.value):
                    return True
            elif isinstance(func, cst.Name) and func.value in ("float", "int"):
                if node.args and _device_value(ctx, loop, node.args[0].value):
                    return True
            elif logging_call_kind(ctx, node) is not None:
                values = [value for arg in node.args for value in nodes_under(arg.value)]
                if any(_device_value(ctx, loop, value) for value in values if isinstance(value, cst.Name)):
                    return True
                if any(_tensor_result(ctx, value) for value in values):
                    return True
    return False


def _device_value(ctx: FileContext, loop: cst.CSTNode | None, expr: cst.BaseExpression) -> bool:
    """Whether `expr` is a tensor not known to live on the host.  A name the step loop assigns is
    judged by what the loop gives it (`loss = train()` of a function that returns `float(loss)`
    is a number, though the function's own `loss` is a tensor); another by `TensorNames`."""
    tensors = ctx.torch.tensors
    if isinstance(expr, cst.Name) and loop is not None:
        given = [
            node.value
            for node in nodes_under(loop)
            if isinstance(node, cst.Assign) and any(expr.value in names_under(t.target) for t in node.targets)
        ]
        if given:
            return any(
                not _is_host_read(value) and tensors.is_tensor(value) and not ctx.values.on_host(value)
                for value in given
            )
    return tensors.is_tensor(expr) and not ctx.values.on_host(expr)


def _tensor_result(ctx: FileContext, node: cst.CSTNode) -> bool:
    """`outputs.loss`, or a tensor reduction of a value not known to be on the host
    (`p.grad.norm()`, `out.mean()`)."""
    if isinstance(node, cst.Attribute):
        return node.attr.value == "loss"
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr.value in _REDUCTIONS and not ctx.values.on_host(node.func.value)
    return False


def _is_host_read(value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Attribute):
        return func.attr.value in _HOST_READS
    return isinstance(func, cst.Name) and func.value in _PURE_BUILTINS


def _message(what: str, interval: _Interval, option: str) -> str:
    return f"Run {what} every {interval.every} steps ({interval.why.replace(_OPTION, f'`{option}`')})"


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


def _plan(ctx: FileContext, node: cst.CSTNode, configured: int, adopt_loop_guard: bool) -> _Plan | None:
    """The guard to write for the statement holding `node` (module docstring), or None."""
    counter = ctx.loops.step_counter(node)
    loop = ctx.loops.step_boundary(node)
    if counter is None or not isinstance(loop, LOOP_TYPES):
        return None
    statement = ctx.statement_of(node)
    block = ctx.parent(statement)
    if not isinstance(block, cst.IndentedBlock):
        return None  # a one-line `for x in y: stmt` suite: leave it to a person
    assert isinstance(statement, cst.BaseStatement)  # what an indented block holds
    if _under_data_condition(ctx, statement, loop, counter):
        return None
    statement = _logging_loop_around(ctx, statement, loop)
    block = ctx.parent(statement)
    assert isinstance(block, cst.IndentedBlock)  # a loop inside the step loop's indented body
    interval = _interval(ctx, loop, counter, configured, adopt_loop_guard)
    if interval is None:
        return None
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
    moved = _read_backs_before(ctx, loop, body[:start], group)
    statements = moved + group
    if _read_back_kept(ctx, loop, statements):
        return None  # the step waits for that tensor anyway: the guard would only silence the output
    moved_ids = {id(s) for s in moved}
    anchor_at = start
    while anchor_at > 0 and id(body[anchor_at - 1]) in moved_ids:
        anchor_at -= 1
    dissolved: set[int] = set()
    for candidate in statements:
        for inner in nodes_under(candidate):
            if not (isinstance(inner, cst.If) and is_interval_condition(inner.test)):
                continue
            interval = _dissolving(interval, inner) if inner is candidate else None
            if interval is None:
                return None  # a guard of the loop's own that cannot be merged into the new one exactly
            dissolved.add(id(inner))
    return _Plan(interval, statements, body[anchor_at], frozenset(dissolved))


def _logging_loop_around(
    ctx: FileContext, statement: cst.BaseStatement, loop: cst.For | cst.While
) -> cst.BaseStatement:
    """The outermost loop inside the step loop around `statement` whose body only logs (`for name,
    p in model.named_parameters():` over `if "weight" in name: writer.add_scalar(...)`): one guard
    around that loop does what a guard per line would, and skips the loop too.  Else `statement`."""
    lifted = statement
    for ancestor in ctx.ancestors(statement):
        if ancestor is loop or isinstance(ancestor, SCOPE_TYPES):
            break
        if isinstance(ancestor, cst.For) and ancestor.orelse is None and _only_logs(ctx, ancestor.body):
            lifted = ancestor
    return lifted


def _only_logs(ctx: FileContext, suite: cst.BaseSuite) -> bool:
    """Whether every statement of `suite` is a logging call, or an `if` or `for` of only those."""
    return isinstance(suite, cst.IndentedBlock) and all(_logs_only(ctx, statement) for statement in suite.body)


def _logs_only(ctx: FileContext, statement: cst.CSTNode) -> bool:
    if isinstance(statement, cst.If):
        orelse = statement.orelse
        if isinstance(orelse, cst.If):
            return _only_logs(ctx, statement.body) and _logs_only(ctx, orelse)
        return _only_logs(ctx, statement.body) and (orelse is None or _only_logs(ctx, orelse.body))
    if isinstance(statement, cst.For):
        return statement.orelse is None and _only_logs(ctx, statement.body)
    return _is_logging_statement(ctx, statement)


def _interval(
    ctx: FileContext, loop: cst.For | cst.While, counter: str, configured: int, adopt_loop_guard: bool
) -> _Interval | None:
    """The interval of a guard in `loop` (module docstring); None when the loop is too short."""
    if adopt_loop_guard:
        own = {_modulo_parts(node.test, counter) for node in nodes_under(loop.body) if isinstance(node, cst.If)}
        own.discard(None)
        if len(own) == 1:
            (every, remainder), *_ = own  # type: ignore[misc]  # (None discarded above)
            why = f"as the loop's own `if {counter} % {every} == {remainder}:`"
            return _Interval(counter, every, remainder, start=None, why=why)
    every, why = configured, _OPTION
    length = ctx.loops.iterations(loop) if isinstance(loop, cst.For) else None
    if length is None:
        length = _break_bound(ctx, loop)
    if length is not None:
        fitting = _round_down(length // RUNS_PER_PASS)
        if fitting < _SMALLEST_INTERVAL:
            return None
        if fitting < configured:
            every, why = fitting, f"{RUNS_PER_PASS} times over the loop's {length} steps; at most {_OPTION}"
    start = _counter_start(loop, counter)
    return _Interval(counter, str(every), str(start % every), start=start, why=why)


def _read_back_kept(ctx: FileContext, loop: cst.For | cst.While, statements: Sequence[cst.BaseStatement]) -> bool:
    """Whether the step reads back to the host, every step and outside `statements`, a tensor that
    `statements` read back (`losses.append(loss.item())` below the `print(loss.item())` to guard).
    Reads that are throttled already, or that will be (in a logging call or a read-back feeding
    one, which their own fixes guard), do not count."""
    guarded = {_host_read_receiver(node) for statement in statements for node in nodes_under(statement)}
    guarded.discard(None)
    # A tensor a log line formats is read back as surely as one it calls `.item()` on.
    guarded |= {
        name.value
        for statement in statements
        for call in nodes_under(statement)
        if isinstance(call, cst.Call) and logging_call_kind(ctx, call) is not None
        for arg in call.args
        for name in nodes_under(arg.value)
        if isinstance(name, cst.Name) and ctx.torch.tensors.is_tensor(name)
    }
    if not guarded:
        return False
    skipped = {id(statement) for statement in statements}
    stack: list[cst.CSTNode] = [loop.body]
    while stack:
        node = stack.pop()
        if id(node) in skipped or isinstance(node, SCOPE_TYPES):
            continue
        if isinstance(node, cst.If) and is_interval_condition(node.test):
            continue
        if _is_logging_statement(ctx, node) or is_read_back(node):
            continue
        if _host_read_receiver(node) in guarded:
            return True
        stack.extend(iter_children(node))
    return False


def _host_read_receiver(node: cst.CSTNode) -> str | None:
    """The tensor a host read reads back, as code (`loss` of `loss.item()`); None for other nodes."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _HOST_READS:
        return _code(node.func.value)
    return None


def _break_bound(ctx: FileContext, loop: cst.For | cst.While) -> int | None:
    """How many steps a loop runs at most when its body leaves it on a count (`if n > args.num_iter:
    break`, `n += 1` in the loop, the bound known statically), or None."""
    incremented = {
        _code(node.target)
        for node in nodes_under(loop.body)
        if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign) and _is_one(node.value)
    }
    for statement in loop.body.body:
        if not (isinstance(statement, cst.If) and statement.orelse is None and _only_breaks(statement)):
            continue
        test = statement.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            continue
        operator, bound = test.comparisons[0].operator, test.comparisons[0].comparator
        if _code(test.left) not in incremented or not isinstance(operator, (cst.GreaterThan, cst.GreaterThanEqual)):
            continue
        limit = ctx.loops.static_int(bound, statement)
        if limit is not None:
            return limit + 1 if isinstance(operator, cst.GreaterThan) else limit
    return None


def _only_breaks(guard: cst.If) -> bool:
    """`if ...: break`, on one line or two."""
    body = guard.body
    if isinstance(body, cst.SimpleStatementSuite):
        line: Sequence[cst.BaseSmallStatement] = body.body
    elif len(body.body) == 1 and isinstance(body.body[0], cst.SimpleStatementLine):
        line = body.body[0].body
    else:
        return False
    return len(line) == 1 and isinstance(line[0], cst.Break)


def _is_one(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer) and node.evaluated_value == 1


def _round_down(number: int) -> int:
    """The largest of 1, 2 and 5 times a power of ten not above `number` (0 below 1)."""
    if number < 1:
        return 0
    power = 10 ** (len(str(number)) - 1)
    return next(m * power for m in (5, 2, 1) if m * power <= number)


def _counter_start(loop: cst.For | cst.While, counter: str) -> int:
    """The counter's first value: `enumerate(xs, 1)` and `range(1, n)` start at 1; 0 otherwise,
    also where the start is not a literal."""
    iterator = loop.iter if isinstance(loop, cst.For) else None
    if not isinstance(iterator, cst.Call):
        return 0
    callee = dotted_name(iterator.func)
    positional = [arg.value for arg in iterator.args if arg.keyword is None and not arg.star]
    first: cst.BaseExpression | None = None
    if callee == "enumerate":
        keyword = next((arg.value for arg in iterator.args if arg.keyword and arg.keyword.value == "start"), None)
        first = keyword if keyword is not None else (positional[1] if len(positional) > 1 else None)
    elif callee == "range" and len(positional) > 1 and dotted_name(loop.target) == counter:  # type: ignore[union-attr]
        first = positional[0]
    return int(first.evaluated_value) if isinstance(first, cst.Integer) else 0


def _modulo_parts(test: cst.BaseExpression, counter: str) -> tuple[str, str] | None:
    """(interval, remainder) as code, of an interval condition `<counter> % <interval> == <remainder>`."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and is_interval_condition(test)):
        return None
    left, comparison = test.left, test.comparisons[0]
    if not (isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Modulo)):
        return None
    if dotted_name(left.left) != counter or not isinstance(comparison.operator, cst.Equal):
        return None
    return _code(left.right), _code(comparison.comparator)


def _dissolving(interval: _Interval, own: cst.If) -> _Interval | None:
    """`interval` made a multiple of the loop's own guard `own` (`if step % 100 == 0:`), so that
    the new guard implies it and `own` can go; None when that cannot be done exactly."""
    parts = _modulo_parts(own.test, interval.counter)
    if parts is None or own.orelse is not None or not isinstance(own.body, cst.IndentedBlock):
        return None
    if parts == (interval.every, interval.remainder):
        return interval
    if interval.start is None or not all(part.isdigit() for part in (*parts, interval.every)):
        return None
    own_every, own_remainder = int(parts[0]), int(parts[1])
    every = -(-int(interval.every) // own_every) * own_every
    remainder = interval.start % every
    if remainder % own_every != own_remainder:
        return None
    why = f"{interval.why}, a multiple of the loop's own `% {own_every}` guard it takes in"
    return _Interval(interval.counter, str(every), str(remainder), start=interval.start, why=why)


def _under_data_condition(ctx: FileContext, statement: cst.CSTNode, loop: cst.For | cst.While, counter: str) -> bool:
    """Whether an `if` or `while` between `statement` and `loop` tests the step's data: a name
    holding it (`_step_data`: `if done:`, `if "episode" in info:` over this step's `infos`), or an
    item picked by a name the loop binds (`if dones[t]:`).  A filter on a structure (`if "weight" in
    name:` over `model.named_parameters()`) or on the counter (`if step % accum == 0:`) is not."""
    tests = []
    for ancestor in ctx.ancestors(statement):
        if ancestor is loop or isinstance(ancestor, SCOPE_TYPES):
            break
        if isinstance(ancestor, (cst.If, cst.While)):
            tests.append(ancestor.test)
    if not tests:
        return False  # (most findings: the step's names below take two walks of the whole loop)
    data, bound = _step_data(loop, counter), _names_bound_in(loop)
    for test in tests:
        if names_under(test) & data:
            return True
        for node in nodes_under(test):
            if isinstance(node, cst.Subscript) and any(names_under(item) & bound for item in node.slice):
                return True
    return False


def _step_data(loop: cst.For | cst.While, counter: str) -> set[str]:
    """The names holding a step's data: the step loop's own targets (the batch), what its body
    assigns, and the targets of an inner loop over one of those (`for info in infos`) -- not the
    counter, nor the targets of an inner loop over a call (`range(n)`, `named_parameters()`)."""
    data = _target_names(loop.target) if isinstance(loop, cst.For) else set()
    inner_loops = []
    for node in nodes_under(loop.body):
        if isinstance(node, cst.AssignTarget):
            data |= _target_names(node.target)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr)):
            data |= _target_names(node.target)
        elif isinstance(node, cst.AsName):
            data |= _target_names(node.name)
        elif isinstance(node, cst.For):
            inner_loops.append(node)
    for inner in inner_loops:
        if not isinstance(inner.iter, cst.Call) and names_under(inner.iter) & data:
            data |= _target_names(inner.target)
    return data - {counter}


def _names_bound_in(loop: cst.CSTNode) -> set[str]:
    """The variables a loop binds: its targets, and assignments, loop targets and `with ... as`
    names in its body."""
    names: set[str] = set()
    for node in nodes_under(loop):
        if isinstance(node, (cst.For, cst.CompFor)):
            names |= _target_names(node.target)
        elif isinstance(node, cst.AssignTarget):
            names |= _target_names(node.target)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr)):
            names |= _target_names(node.target)
        elif isinstance(node, cst.AsName):
            names |= _target_names(node.name)
    return names


def _target_names(target: cst.CSTNode) -> set[str]:
    """The variables an assignment target binds (`a`, `a, (b, c)`, `*rest`; not `x.a` or `x[i]`)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(_target_names(element.value) for element in target.elements))
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


def _read_backs_before(
    ctx: FileContext, loop: cst.CSTNode, before: Sequence[cst.BaseStatement], group: list[cst.BaseStatement]
) -> list[cst.BaseStatement]:
    """The read-backs before `group` (in source order) whose names nothing but the statements
    after them (up to the end of the group) uses: those right before it, then host reads further
    up that can move down unchanged (module docstring)."""
    taken: list[cst.BaseStatement] = []
    passed: list[cst.BaseStatement] = []  # statements between a candidate and the group that stay
    step_values: set[str] | None = None
    for candidate in reversed(before):
        names = _bound_names(candidate)
        users = [*taken, *group]
        movable = (
            is_read_back(candidate)
            and bool(names)
            and any(names & names_under(user) for user in users)
            and not _used_elsewhere(ctx, candidate, names, [candidate, *users])
        )
        if movable and passed:
            if step_values is None:
                step_values = _names_bound_in(loop)
            reads = _values_read(candidate)
            movable = (
                _reads_host(candidate)
                and isinstance(candidate, cst.SimpleStatementLine)
                and not candidate.leading_lines
                and reads <= step_values
                and not any(names_under(s) & reads for s in passed)
            )
        if movable:
            taken.insert(0, candidate)
        else:
            passed.append(candidate)
    return taken


def _reads_host(statement: cst.CSTNode) -> bool:
    return any(_host_read_receiver(node) is not None for node in nodes_under(statement))


def _values_read(statement: cst.BaseStatement) -> set[str]:
    """The variables a read-back's value reads (`output` in `output.mean().item()`; not the
    methods or builtins it calls)."""
    assert isinstance(statement, cst.SimpleStatementLine)  # is_read_back
    small = statement.body[0]
    assert isinstance(small, cst.Assign)  # is_read_back
    names: set[str] = set()
    stack: list[cst.CSTNode] = [small.value]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            names.add(node.value)
        elif isinstance(node, cst.Attribute):
            stack.append(node.value)
        elif isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute):
                stack.append(node.func.value)
            stack.extend(arg.value for arg in node.args)
        else:
            stack.extend(iter_children(node))
    return names


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


def _guard(plan: _Plan, message: str) -> Fix:
    anchor = plan.anchor
    assert isinstance(anchor, STATEMENT_TYPES)  # the two kinds of statement
    body: list[cst.BaseStatement] = []
    for statement in plan.statements:
        assert isinstance(statement, STATEMENT_TYPES)  # the two kinds of statement
        # The anchor's comments and blank lines go above the guard; a dissolved `if`'s stay above
        # its first statement.
        above = () if statement is anchor else statement.leading_lines
        if id(statement) not in plan.dissolved:
            body.append(statement.with_changes(leading_lines=above))
            continue
        assert isinstance(statement, cst.If) and isinstance(statement.body, cst.IndentedBlock)  # _dissolving
        inner = list(statement.body.body)
        head = inner[0]
        assert isinstance(head, STATEMENT_TYPES)  # the two kinds of statement
        inner[0] = head.with_changes(leading_lines=[*above, *head.leading_lines])
        body.extend(inner)
    first = body[0]
    assert isinstance(first, STATEMENT_TYPES)  # the two kinds of statement
    body[0] = first.with_changes(leading_lines=())
    guard = cst.If(
        test=cst.parse_expression(plan.interval.condition),
        body=cst.IndentedBlock(body=body),
        leading_lines=anchor.leading_lines,
    )
    replacements: dict = {plan.anchor: guard}
    for extra in plan.statements:
        if extra is not plan.anchor:
            replacements[extra] = cst.RemovalSentinel.REMOVE
    return Fix(Applicability.UNSAFE, message, replacements)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


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
    return "".join(_code(guard.test).split())


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
