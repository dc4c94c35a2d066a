"""GL205 empty-cache-in-loop."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.code_shapes import STEP_LOOP
from gpulint.linter.analysis.facts import STEPS, TORCH
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import TIMED_CUDA_SCRIPT

_EMPTY_CACHE = frozenset(
    {
        "torch.cuda.empty_cache",
        "torch.cuda.memory.empty_cache",
        "torch.xpu.empty_cache",
        "torch.mps.empty_cache",
    }
)


class EmptyCacheInLoop(Rule):
    """
    ## What it finds
    `torch.cuda.empty_cache()` (or its `xpu`/`mps` form) on every training step: in a step loop or
    a step function, unconditionally -- not under an `if` (an interval, a memory threshold, a mode
    setting: a deliberate policy) and not in the handling of a rare event (an `except` for an
    out-of-memory error).  In a loop the code bounds to fewer than 50 steps the finding carries a
    hint and is held back unless hints are shown.

    ## Why it is slow
    PyTorch's caching allocator keeps the memory a step freed so the next step can reuse it without
    asking the driver.  `empty_cache()` hands every unused cached block back (`cudaFree`, which
    waits for the whole device to finish), so the next step has to `cudaMalloc` its activations
    and gradients again -- slow calls that also synchronize.  Every step pays a device-wide sync
    and a round of allocations, and the memory it frees is needed again moments later: it lowers
    the memory other processes see, not what this one needs.

    ## Example
    ```python
    import torch

    model = Net().cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch.cuda.empty_cache()
    ```
    Use instead: let the allocator reuse its cache; empty it, if at all, after a phase that needs
    different memory (after evaluation, before a large one-off allocation):
    ```python
    import torch

    model = Net().cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    ```
    For fragmentation, `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` addresses the cause.

    ## Fix
    None: whether a script needs the call (another process on the GPU, a deliberately small memory
    footprint) is the author's to decide; deleting or throttling it changes the memory the program
    holds.
    """

    code = "GL205"
    name = "empty-cache-in-loop"
    hint_by_default = MOSTLY_NOT_WANTED
    message = (
        "`empty_cache()` on every training step: the allocator's cache is freed (a device-wide sync) "
        "and allocated again each step"
    )
    requires = {TORCH, STEPS}
    tokens = ("empty_cache",)
    triggers = (("empty_cache",), (STEP_LOOP,))  # every call it reports ends in it, run per step
    site_triggers = 1

    VALID = [
        # under an interval guard, after an evaluation, in the handling of an out-of-memory error
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    try:
                        loss = criterion(model(x), y)
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                        continue
                    loss.backward()
                    optimizer.step()
                    if step % 1000 == 0:
                        torch.cuda.empty_cache()
                evaluate(model, val_loader)
                torch.cuda.empty_cache()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # a memory policy under a condition, in a step function
        Valid(
            """
            def train_step(x, y):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if torch.cuda.memory_reserved() > limit:
                    torch.cuda.empty_cache()

            for x, y in loader:
                train_step(x, y)
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # an inference loop; a method of another object named empty_cache
        Valid(
            """
            for x in test_loader:
                preds.append(model(x))
                torch.cuda.empty_cache()
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                cache.empty_cache()
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
                    optimizer.zero_grad()
                    torch.cuda.empty_cache()
            """,
            "10:9",
            header=TIMED_CUDA_SCRIPT,
        ),
        # in a step function called from the loop, through an alias
        Invalid(
            """
            from torch.cuda import empty_cache

            def train_step(x, y):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                empty_cache()

            for x, y in loader:
                train_step(x, y)
            """,
            "10:5",
            header=TIMED_CUDA_SCRIPT,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.call_qualified_name(node) not in _EMPTY_CACHE:
            return
        if self.ctx.loops.per_step_work(node) and not self._conditional(node):
            self.report(node, hint=self.ctx.loops.few_steps_hint(node))

    def _conditional(self, node: cst.Call) -> bool:
        """Under an `if` in its step loop or step function: a deliberate memory policy (`if
        prealloc_mode == "always":`, `if memory_allocated() > limit:`), not a reflex."""
        boundary = self.ctx.loops.step_boundary(node)
        for ancestor in self.ctx.ancestors(node):
            if ancestor is boundary:
                return False
            if isinstance(ancestor, (cst.If, cst.IfExp)):
                return True
        return False
