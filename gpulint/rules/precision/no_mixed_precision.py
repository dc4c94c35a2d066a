"""GL401 no-mixed-precision."""

from __future__ import annotations

from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.rule import Invalid, Rule, Valid


class NoMixedPrecision(Rule):
    """
    ## What it finds
    A module that trains a PyTorch model on an accelerator with its own loop (a `.backward()` in a
    step loop) and never uses mixed precision: no `torch.autocast`, no `GradScaler`, no bf16/fp16,
    no `--amp` flag.  Reported once, at the first `.backward()` of the step loop.  Modules whose
    precision is set elsewhere (Accelerate, Fabric, DeepSpeed, Lightning modules) are not reported.

    ## Why it is slow
    In fp32 the tensor cores sit mostly idle: an A100 does 19.5 TFLOPS in fp32 (156 with TF32) and
    312 TFLOPS in bf16/fp16, and half-width activations halve the memory traffic.  Training under
    autocast is typically 1.5-3x faster on Volta and newer GPUs, with the same accuracy for almost
    every model.

    ## Example
    ```python
    import torch

    model = Net().cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    Use instead:
    ```python
    import torch

    model = Net().cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix
    None: where the autocast region starts and ends (forward and loss, not the backward or the
    optimizer step), bf16 versus fp16 with a `GradScaler`, and which layers must stay in fp32 are
    decisions about the model that a linter cannot make.  A hint: off by default, on with
    `--select GL401` (or `ALL`).
    """

    code = "GL401"
    name = "no-mixed-precision"
    message = "training runs in fp32 with no autocast/AMP: bf16 or fp16 mixed precision is typically 1.5-3x faster on tensor cores"
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("backward",)
    default = "hint"

    def finish(self) -> None:
        backward_calls = self.ctx.torch.own_loop_backward_calls
        if backward_calls and not self.ctx.torch.uses_mixed_precision:
            self.report(backward_calls[0])
