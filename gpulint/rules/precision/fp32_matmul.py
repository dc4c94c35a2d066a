"""GL404 fp32-matmul."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import insert_before
from gpulint.linter.rule import Invalid, Rule, Valid

_TF32_TEXT = re.compile(r"tf32|float32_matmul_precision|fp32_precision", re.IGNORECASE)


class Fp32Matmul(Rule):
    """
    ## What it finds
    A module that trains a PyTorch model on an accelerator with its own loop, in fp32 (no mixed
    precision: see GL401), without enabling TF32 for matrix multiplications:
    no `torch.set_float32_matmul_precision("high")`, `torch.backends.cuda.matmul.allow_tf32 = True`
    or `fp32_precision = "tf32"`.  Reported once, at the optimizer's construction (or the first
    `.backward()`).  Under autocast most matmuls are already bf16/fp16, so it is not reported there.

    ## Why it is slow
    PyTorch has defaulted to exact fp32 matmuls since 1.12.  On Ampere and newer GPUs TF32 tensor
    cores run them up to 8x faster (A100: 19.5 TFLOPS fp32, 156 TFLOPS TF32) with a 10-bit mantissa
    that deep-learning training tolerates.

    ## Example
    ```python
    import torch

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    Use instead:
    ```python
    import torch

    torch.set_float32_matmul_precision("high")
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix (unsafe)
    Inserts `torch.set_float32_matmul_precision("high")` before the reported statement.  Unsafe:
    results change in the last bits (a 10-bit mantissa for matmul inputs).  A hint: off by default.
    """

    code = "GL404"
    name = "fp32-matmul"
    message = "fp32 training without TF32: `torch.set_float32_matmul_precision(\"high\")` makes matmuls up to 8x faster on Ampere+"
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("backward",)
    default = "hint"
    fix_applicability = Applicability.UNSAFE

    def finish(self) -> None:
        torch = self.ctx.torch
        backward_calls = torch.own_loop_backward_calls
        if not backward_calls or torch.uses_mixed_precision:
            return
        if _TF32_TEXT.search(self.ctx.code_without_comments):
            return
        optimizer = torch.optimizer_construction
        node = optimizer if optimizer is not None else backward_calls[0]
        statement = self.ctx.statement_of(node)
        fix = None
        if isinstance(statement, cst.SimpleStatementLine) and isinstance(self.ctx.parent(statement), (cst.IndentedBlock, cst.Module)):
            text, imports = self.ctx.reference("torch.set_float32_matmul_precision")
            fix = insert_before(
                statement, f'{text}("high")', Applicability.UNSAFE, 'Enable TF32 matmuls: `torch.set_float32_matmul_precision("high")`', imports
            )
        self.report(node, fix=fix)
