"""GL2xx: host-device synchronisation -- the CPU waiting for the GPU inside the step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.findings import Applicability
from gpulint.linter.fixes import guard_fix
from gpulint.linter.rule import Rule
from gpulint.rules.per_step import PerStepLogging, enclosing_logging_call, per_step_work

SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist"})


def _earlier_sync_in_chain(call: cst.Call) -> bool:
    """`x.cpu().numpy()`: the `.cpu()` already synced; report the chain once, at its first sync."""
    node = call.func.value if isinstance(call.func, cst.Attribute) else None
    while node is not None:
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in SYNC_METHODS:
                return True
            node = node.func
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return False
    return False


class HostSyncInLoop(Rule):
    """
    ## What it finds
    `.item()`, `.cpu()`, `.numpy()` and `.tolist()` on a tensor inside a training step loop, not
    under an interval guard, in a module that trains on an accelerator.

    ## Why it is slow
    CUDA runs asynchronously: the host queues kernels and moves on.  Reading a value back to the
    host makes it wait until every queued kernel has finished, so the next step's kernels cannot be
    queued while this one runs and the GPU idles between steps.  One `.item()` per step commonly
    costs 5-20% of step time on small models, more with several.

    ## Example
    ```python
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    ```
    Use instead: accumulate on the device and read it back every N steps:
    ```python
        total_loss += loss.detach()
        if step % 100 == 0:
            print(total_loss.item() / (step + 1))
    ```

    ## Fix (unsafe)
    Where the value only feeds a logging call (`print(f"{loss.item()}")`), the statement is wrapped
    in `if <step counter> % <log-every> == 0:`, as GL302 does.  Elsewhere (the value feeds the
    computation) there is no automatic fix.  Unsafe: the program prints less often.
    """

    code = "GL201"
    name = "host-sync-in-loop"
    message = "`.{method}()` in the training loop makes the CPU wait for the GPU every step"
    tokens = (".item(", ".cpu(", ".numpy(", ".tolist(")
    fix_applicability = Applicability.UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS):
            return
        if not (self.ctx.uses_torch and self.ctx.accelerated) or _earlier_sync_in_chain(node):
            return
        if not per_step_work(self.ctx, node):
            return
        fix = None
        if enclosing_logging_call(self.ctx, node) is not None:
            interval = self.ctx.options.get("log-every", PerStepLogging.options["log-every"].default)
            fix = guard_fix(self.ctx, node, "log-every", interval, "logging")
        self.report(node, message=self.message.format(method=func.attr.value), fix=fix)
