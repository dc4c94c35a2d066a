"""Which calls log: `print`, `logging`/`logger.info`, `wandb.log`, TensorBoard `writer.add_*`,
`mlflow.log_*`, NVIDIA's `dllogger.log` -- what per-step logging rules report, and what decides whether a host read only
feeds a log line (then throttling the line is its fix)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.nodes import last_name
from gpulint.linter.analysis.vocabulary import LOG_METHODS

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext


def logging_call_kind(ctx: FileContext, call: cst.Call) -> str | None:
    """What a call logs to (`print`, `logging`, `wandb`, `tensorboard`, `mlflow`, `dllogger`), or None."""
    func = call.func
    if isinstance(func, cst.Name) and func.value == "print" and "print" not in ctx.imports.bindings:
        return "print"
    qualified = ctx.call_qualified_name(call)
    if qualified is not None:
        if qualified.startswith("logging.") and qualified.rsplit(".", 1)[-1] in LOG_METHODS:
            return "logging"
        if qualified == "wandb.log":
            return "wandb"
        if qualified.startswith("mlflow.log_"):
            return "mlflow"
        if qualified == "dllogger.log":
            return "dllogger"
        return None
    if not isinstance(func, cst.Attribute):
        return None
    method, receiver = func.attr.value, func.value
    if method in LOG_METHODS and (
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
