"""GL3xx: work that belongs every N steps but runs on every step (validation, logging, checkpoints).

These are frequency rules: they fire on any device, because the time goes whether or not a GPU is
waiting.  Code under an interval guard (`if step % 100 == 0:`), in an `except` handler, or in a
branch that leaves the iteration (`if not torch.isfinite(loss): print(...); continue`) is an event,
not per-step work, and is not reported.
"""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.context import FileContext, dotted_name
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import guard_fix
from gpulint.linter.rule import Rule, RuleOption
from gpulint.linter.analysis.values import last_name
from gpulint.linter.analysis.walk import names_under

_EXITS = (cst.Break, cst.Continue, cst.Return, cst.Raise)

# Names of functions that evaluate a model.  Kept narrow on purpose: `validate_args()` or
# `test_inputs()` are not evaluation, and a false positive costs more than a miss.
_EVALUATION = re.compile(
    r"^_?(run_|do_)?(evaluate|evaluation|validate|validation|eval|val|test)"
    r"(_(model|models|epoch|loop|step|steps|one_epoch|net|network|fn|all|dataset|data|set|split|metrics|accuracy|loss))?$"
)
_LOG_METHODS = frozenset({"info"})
_LOGGING_LABELS = {
    "print": "print()",
    "logging": "logging",
    "wandb": "wandb.log()",
    "tensorboard": "TensorBoard logging",
    "mlflow": "mlflow logging",
}


def in_event_branch(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Whether `node` sits in an `except` handler or in an `if` branch that ends the iteration
    (break/continue/return/raise), between it and its step loop."""
    boundary = ctx.loops.step_boundary(node)
    child = node
    for ancestor in ctx.ancestors(node):
        if ancestor is boundary:
            return False
        if isinstance(ancestor, cst.ExceptHandler):
            return True
        if isinstance(ancestor, (cst.If, cst.Else)) and isinstance(child, cst.IndentedBlock):
            for statement in child.body:
                if isinstance(statement, cst.SimpleStatementLine) and any(isinstance(s, _EXITS) for s in statement.body):
                    return True
        child = ancestor
    return False


def logging_call_kind(ctx: FileContext, call: cst.Call) -> str | None:
    """What a call logs to (`print`, `logging`, `wandb`, `tensorboard`, `mlflow`), or None."""
    func = call.func
    if isinstance(func, cst.Name) and func.value == "print" and "print" not in ctx.imports.bindings:
        return "print"
    qualified = ctx.call_qualified_name(call)
    if qualified is not None:
        if qualified.startswith("logging.") and qualified.rsplit(".", 1)[-1] in _LOG_METHODS:
            return "logging"
        if qualified == "wandb.log":
            return "wandb"
        if qualified.startswith("mlflow.log_"):
            return "mlflow"
        return None
    if not isinstance(func, cst.Attribute):
        return None
    method, receiver = func.attr.value, func.value
    if method in _LOG_METHODS and (
        ctx.values.is_kind(receiver, "logger") or re.search(r"(^|_)(log|logger)$", last_name(receiver) or "", re.I)
    ):
        return "logging"
    if method.startswith("add_") and (
        ctx.values.is_kind(receiver, "summarywriter") or "writer" in (last_name(receiver) or "").lower()
    ):
        return "tensorboard"
    if method == "log" and ctx.values.is_kind(receiver, "wandbrun"):
        return "wandb"
    return None


def enclosing_logging_call(ctx: FileContext, node: cst.CSTNode) -> cst.Call | None:
    """The logging call whose arguments hold `node` (`print(f"{loss.item()}")`), if any."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.Call) and logging_call_kind(ctx, ancestor):
            return ancestor
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return None
    return None


def per_step_work(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Runs every step, unthrottled, and not as the handling of a rare event."""
    return ctx.loops.per_step_unguarded(node) and not in_event_branch(ctx, node)


class PerStepValidation(Rule):
    """
    ## What it finds
    A call that evaluates the model -- `evaluate(...)`, `validate(...)`, `run_validation(...)`,
    `model.eval()` -- inside a training step loop, not under an interval guard.

    ## Why it is slow
    Validation runs a whole pass over the validation set.  Doing it after every optimizer step
    multiplies the cost of training by the size of the validation set over the batch size; even a
    small validation set usually costs more than the step itself.  The GPU does useful training work
    only a fraction of the time.

    ## Example
    ```python
    for step, batch in enumerate(train_loader):
        loss = model(batch).loss
        loss.backward()
        optimizer.step()
        val_loss = evaluate(model, val_loader)
    ```
    Use instead:
    ```python
        if step % 1000 == 0:
            val_loss = evaluate(model, val_loader)
    ```

    ## Fix (unsafe)
    Wraps the statement in `if <step counter> % <eval-every> == 0:` (statements right after it that
    use its result move under the guard too).  Offered only when the loop has a step counter
    (`enumerate`, `range`, or a `+= 1` counter) and only for evaluation functions; `model.eval()`
    starts a block of statements that must move together, which is left to a person.  Unsafe: it
    changes how often validation runs and what the program prints.
    """

    code = "GL301"
    needs_step = True
    name = "per-step-validation"
    message = "validation runs on every training step; run it every N steps or once per epoch"
    tokens = ("eval", "valid", "test")
    fix_applicability = Applicability.UNSAFE
    options = {"eval-every": RuleOption(1000, "Interval (in steps) the GL301 fix guards validation with.", int)}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        is_mode_switch = isinstance(func, cst.Attribute) and func.attr.value == "eval" and not node.args
        name = last_name(func) or ""
        is_evaluation = not is_mode_switch and bool(_EVALUATION.match(name)) and not (
            isinstance(func, cst.Name) and name == "eval"  # the builtin eval()
        )
        if not (is_mode_switch or is_evaluation):
            return
        if not per_step_work(self.ctx, node):
            return
        fix = None
        if is_evaluation:
            interval = self.option("eval-every")
            fix = guard_fix(self.ctx, node, "eval-every", interval, "validation")
        self.report(node, fix=fix)


class PerStepLogging(Rule):
    """
    ## What it finds
    `print(...)`, `logging`/`logger.info(...)`, `wandb.log(...)`, TensorBoard `writer.add_*(...)`
    and `mlflow.log_*(...)` inside a training step loop, not under an interval guard.

    ## Why it is slow
    Each call formats strings, writes to a terminal, file or socket, and usually reads the loss back
    from the GPU to do it (a host-device sync, GL201), so the GPU drains its queue every step.  With
    steps of tens of milliseconds, a print and a `.item()` per step can cost 10-30% of throughput.

    ## Example
    ```python
    for step, (x, y) in enumerate(loader):
        ...
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")
    ```
    Use instead:
    ```python
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    ```

    ## Fix (unsafe)
    Wraps the statement in `if <step counter> % <log-every> == 0:`.  Offered only when the loop has
    a step counter.  Unsafe: the program prints or logs less often.  Warnings and errors
    (`logger.warning`), code in `except` handlers and branches that `continue`/`break` are events,
    not per-step logging, and are not reported.
    """

    code = "GL302"
    needs_step = True
    name = "per-step-logging"
    message = "logging runs on every training step; log every N steps"
    tokens = ("print", "log", "add_", "wandb", "mlflow")
    fix_applicability = Applicability.UNSAFE
    options = {"log-every": RuleOption(100, "Interval (in steps) the GL302 and GL201 fixes guard logging with.", int)}

    def visit_Call(self, node: cst.Call) -> None:
        kind = logging_call_kind(self.ctx, node)
        if kind is None or not per_step_work(self.ctx, node):
            return
        interval = self.option("log-every")
        self.report(
            node,
            message=f"{_LOGGING_LABELS[kind]} runs on every training step; log every N steps",
            fix=guard_fix(self.ctx, node, "log-every", interval, "logging"),
        )


# Methods that write a checkpoint whatever their receiver.
_SAVE_METHODS = frozenset({"save_pretrained", "save_state", "save_checkpoint", "save_model", "save_weights"})
# `.save(...)` is a checkpoint only on these receivers (an image's or an array's `.save` is not).
_SAVE_RECEIVER = re.compile(r"(^|_)(model|net|module|fabric|accelerator|trainer|checkpoint|ckpt|checkpointer|manager|engine)s?$", re.I)
_SAVE_FUNCTIONS = frozenset({"torch.save", "safetensors.torch.save_file", "safetensors.torch.save_model"})


def _best_condition(ctx: FileContext, node: cst.CSTNode) -> bool:
    """`if acc > best_acc: save(...)`: saving on improvement is an event, not per-step work."""
    boundary = ctx.loops.step_boundary(node)
    for ancestor in ctx.ancestors(node):
        if ancestor is boundary:
            return False
        if isinstance(ancestor, cst.If):
            names = {n.lower() for n in names_under(ancestor.test)}
            if any("best" in n or "improv" in n for n in names):
                return True
    return False


class PerStepCheckpoint(Rule):
    """
    ## What it finds
    A checkpoint written inside a training step loop, not under an interval guard:
    `torch.save(...)`, `model.save_pretrained(...)`, `accelerator.save_state(...)`,
    `trainer.save_checkpoint(...)`, Keras `model.save(...)` / `save_weights(...)`.

    ## Why it is slow
    A checkpoint copies every weight (and the optimizer state, often twice the weights) from the
    GPU to the host and writes it to disk: for a 1 GB model with Adam, about 3 GB per save, seconds
    per step on local disk and far more on network storage -- while the GPU waits.  Saving on
    improvement (`if acc > best_acc:`), in `except` handlers or before a `break` is an event and is
    not reported.

    ## Example
    ```python
    for step, (x, y) in enumerate(loader):
        ...
        optimizer.step()
        torch.save(model.state_dict(), "checkpoint.pt")
    ```
    Use instead:
    ```python
        if step % 1000 == 0:
            torch.save(model.state_dict(), "checkpoint.pt")
    ```

    ## Fix (unsafe)
    Wraps the statement in `if <step counter> % <checkpoint-every> == 0:` (default 1000).  Offered
    only when the loop has a step counter.  Unsafe: fewer checkpoints are written, so a crash loses
    more work and the files on disk differ.
    """

    code = "GL303"
    needs_step = True
    name = "per-step-checkpoint"
    message = "a checkpoint is written on every training step; save every N steps"
    tokens = ("save",)
    fix_applicability = Applicability.UNSAFE
    options = {"checkpoint-every": RuleOption(1000, "Interval (in steps) the GL303 fix guards checkpoints with.", int)}

    def visit_Call(self, node: cst.Call) -> None:
        if not self._is_checkpoint(node) or not per_step_work(self.ctx, node) or _best_condition(self.ctx, node):
            return
        interval = self.option("checkpoint-every")
        self.report(node, fix=guard_fix(self.ctx, node, "checkpoint-every", interval, "checkpointing"))

    def _is_checkpoint(self, node: cst.Call) -> bool:
        qualified = self.ctx.call_qualified_name(node)
        if qualified is not None:
            return qualified in _SAVE_FUNCTIONS
        func = node.func
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value in _SAVE_METHODS:
            return True
        return func.attr.value == "save" and bool(_SAVE_RECEIVER.search(last_name(func.value) or ""))
