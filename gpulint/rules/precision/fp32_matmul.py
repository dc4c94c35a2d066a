"""GL404 fp32-matmul."""

from __future__ import annotations

import re

from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import setting_before_training
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
    results change in the last bits (a 10-bit mantissa for matmul inputs).  Needs PyTorch 1.12: not
    offered to a project whose requirements allow an older one.  A hint: off by default.
    """

    code = "GL404"
    name = "fp32-matmul"
    message = (
        'fp32 training without TF32: `torch.set_float32_matmul_precision("high")` '
        "makes matmuls up to 8x faster on Ampere+"
    )
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("backward",)
    triggers = ((".backward(",),)  # only for a training loop's `.backward()` calls
    default = "hint"
    fix_applicability = Applicability.UNSAFE

    VALID = [
        # no accelerator
        Valid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # Accelerate sets precision and compilation
        Valid(
            """
            import torch
            from accelerate import Accelerator
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # so does Lightning
        Valid(
            """
            import torch
            import lightning as L
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # a library helper that calls backward (timm, transformers): no optimizer, no loop
        Valid(
            """
            import torch
            class ApexScaler:
                def __call__(self, loss, optimizer):
                    loss.backward()
                    optimizer.step()
            x = torch.zeros(1).cuda()
            """,
        ),
        # a gradient check: no optimizer
        Valid(
            """
            import torch
            def check(layer):
                for _ in range(3):
                    out = layer(torch.ones(2, device="cuda"))
                    out.sum().backward()
            """,
        ),
        # an evaluation loop alone
        Valid(
            """
            import torch
            model = torch.nn.Linear(2, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                print(model(x))
            """,
        ),
        # under autocast the matmuls are not fp32
        Valid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            model = torch.compile(model)
            torch.set_float32_matmul_precision("high")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
    ]
    INVALID = [
        # plain fp32 training: reported once, where the fix belongs
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
            "5:13",
            fixed="""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            torch.set_float32_matmul_precision("high")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # a step function called from a loop
        Invalid(
            """
            import torch
            model = torch.nn.Linear(2, 2).cuda()
            opt = torch.optim.AdamW(model.parameters())
            def train_step(batch):
                loss = model(batch).sum()
                loss.backward()
                opt.step()
            for batch in loader:
                train_step(batch)
            """,
            "3:7",
            fixed="""
            import torch
            model = torch.nn.Linear(2, 2).cuda()
            torch.set_float32_matmul_precision("high")
            opt = torch.optim.AdamW(model.parameters())
            def train_step(batch):
                loss = model(batch).sum()
                loss.backward()
                opt.step()
            for batch in loader:
                train_step(batch)
            """,
        ),
        # a comment does not count as handled
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()

            # TODO: try autocast and torch.compile and tf32
            """,
            "5:13",
            fixed="""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            torch.set_float32_matmul_precision("high")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()

            # TODO: try autocast and torch.compile and tf32
            """,
        ),
        # the fix goes before the optimizer and keeps the rest
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            # three epochs are enough
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
            "5:13",
            fixed="""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            torch.set_float32_matmul_precision("high")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            # three epochs are enough
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
    ]

    def finish(self) -> None:
        torch = self.ctx.torch
        backward_calls = [] if torch.precision_set_elsewhere else torch.own_loop_backward_calls
        if not backward_calls or torch.uses_mixed_precision:
            return
        if _TF32_TEXT.search(self.ctx.code_without_comments):
            return
        node, fix = setting_before_training(
            self.ctx,
            backward_calls,
            "torch.set_float32_matmul_precision",
            '{target}("high")',
            'Enable TF32 matmuls: `torch.set_float32_matmul_precision("high")`',
            min_torch=(1, 12),
        )
        self.report(node, fix=fix)
