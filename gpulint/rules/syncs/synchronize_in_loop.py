"""GL204 synchronize-in-loop."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.code_shapes import STEP_LOOP
from gpulint.linter.analysis.facts import STEPS, TORCH
from gpulint.linter.analysis.nodes import last_name
from gpulint.linter.analysis.vocabulary import TIMER_NAME
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import TIMED_CUDA_SCRIPT

_SYNCHRONIZE = frozenset(
    {
        "torch.cuda.synchronize",
        "torch.accelerator.synchronize",
        "torch.xpu.synchronize",
        "torch.mps.synchronize",
    }
)
_STREAM_GETTERS = frozenset(
    {"torch.cuda.current_stream", "torch.cuda.default_stream", "torch.accelerator.current_stream"}
)


class SynchronizeInLoop(Rule):
    """
    ## What it finds
    `torch.cuda.synchronize()` (or `torch.accelerator.synchronize()`, a stream's `.synchronize()`)
    inside a training step loop, not under an interval guard, where the loop does not time
    anything (no `time.perf_counter()`, `time.time()` or CUDA event timing in the loop, nor in the
    loop that calls the step function holding it, nor in a function of the project the loop calls).
    Where the timer's code is not in sight (a class of a module not linted), the statement right
    after the synchronize says it: a call of a timer, by its name (`ips = perf_meter.update(n)`,
    `timer.lap()`), reads the time the synchronize waited for, and the synchronize is not reported.
    In a loop the code bounds to fewer than 50 steps the finding carries a hint and is held back
    unless hints are shown.

    ## Why it is slow
    A synchronize makes the host wait until the GPU has finished every queued kernel.  The host can
    no longer run ahead and queue the next step while this one computes, so each step pays the
    Python overhead of queuing on top of the GPU time: often 10-30% of step time on models with
    small kernels.  Correct PyTorch code never needs it for correctness on one stream.

    ## Example
    ```python
    import torch

    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
    ```
    Use instead: delete the call, or keep it only where you time steps.

    ## Fix
    None: a synchronize may guard work with other streams or an external library, which only a
    person can rule out.  Loops that time steps need it and are not reported.
    """

    code = "GL204"
    name = "synchronize-in-loop"
    hint_by_default = MOSTLY_NOT_WANTED
    message = "`synchronize()` in the training loop makes the CPU wait for the GPU every step"
    requires = {TORCH, STEPS}
    tokens = ("synchronize",)
    triggers = (("synchronize",), (STEP_LOOP,))  # every call it reports ends in it, run per step
    site_triggers = 1

    VALID = [
        # the loop times its steps
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    torch.cuda.synchronize()
                    elapsed = time.perf_counter() - start
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        torch.cuda.synchronize()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # a step function whose calling loop times each step
        Valid(
            """
            class Trainer:
                def train_step(self, x, y):
                    loss = criterion(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
                    torch.cuda.synchronize()
                    return loss

            def run(step_fn, loader):
                for x, y in loader:
                    start = time.time()
                    step_fn(x, y)
                    durations.append(time.time() - start)

            run(trainer.train_step, loader)
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # a timer of another module reads the time right after the synchronize
        Valid(
            """
            from utils import PerformanceMeter
            perf_meter = PerformanceMeter()
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    perf_meter.reset_current_lap()
                    loss = model(batch).sum()
                    loss.backward()
                    optimizer.step()
                    torch.cuda.synchronize()
                    ips = perf_meter.update(batch_size)
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # after the loop
        Valid(
            """
            for x in loader:
                model(x).sum().backward()
                opt.step()
            torch.cuda.synchronize()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    s = torch.cuda.current_stream()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    torch.cuda.synchronize()
                    torch.cuda.current_stream().synchronize()
            """,
            "9:9",
            "10:37",
            header=TIMED_CUDA_SCRIPT,
        ),
        # what follows the synchronize is no timer (and not right after it: a log line between)
        Invalid(
            """
            from utils import PerformanceMeter, MetricLogger
            perf_meter = PerformanceMeter()
            metric_logger = MetricLogger()
            for step, batch in enumerate(loader):
                loss = model(batch).sum()
                loss.backward()
                optimizer.step()
                torch.cuda.synchronize()
                metric_logger.update(loss=loss)
                ips = perf_meter.update(batch_size)
            """,
            "11:5",
            header=TIMED_CUDA_SCRIPT,
        ),
        # aliased import
        Invalid(
            """
            from torch.cuda import synchronize as sync
            import torch
            import time
            device = torch.device("cuda")
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    sync()
            """,
            "10:9",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qualified = self.ctx.call_qualified_name(node)  # also `from torch.cuda import synchronize`
        if qualified is None and isinstance(func, cst.Attribute) and func.attr.value == "synchronize":
            if isinstance(func.value, cst.Call) and self.ctx.call_qualified_name(func.value) in _STREAM_GETTERS:
                qualified = "torch.cuda.synchronize"  # torch.cuda.current_stream().synchronize()
        if qualified not in _SYNCHRONIZE:
            return
        if not self.ctx.loops.per_step_work(node) or self.ctx.loops.times_steps(node):
            return
        if self._timer_reads_next(node):
            return
        self.report(node, hint=self.ctx.loops.few_steps_hint(node))

    def _timer_reads_next(self, node: cst.Call) -> bool:
        """Whether the statement right after the synchronize calls a timer, by its name (`ips =
        perf_meter.update(n)`, `timer.lap()`): where the timer's code is not in the run (a class of
        a module not linted) its name is what says it reads the clock the synchronize made measure
        the GPU.  (A project function the index sees reading a clock already makes the loop a
        timing loop: `times_steps`.)"""
        statement = self.ctx.statement_of(node)
        block = self.ctx.parent(statement)
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)) or statement not in body:
            return False
        position = body.index(statement)
        if position + 1 >= len(body):
            return False
        following = body[position + 1]
        for call in nodes_under(following):
            if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
                continue
            receiver = last_name(call.func.value) or ""
            if TIMER_NAME.search(receiver) or TIMER_NAME.search(call.func.attr.value):
                return True
        return False
