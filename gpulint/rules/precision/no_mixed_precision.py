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
    message = (
        "training runs in fp32 with no autocast/AMP: "
        "bf16 or fp16 mixed precision is typically 1.5-3x faster on tensor cores"
    )
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("backward",)
    triggers = ((".backward(",),)  # it reports a training loop's `.backward()` (or the optimizer)
    default = "hint"

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
        # autocast anywhere
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
        # an --amp flag counts as handled
        Valid(
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

            use_amp = args.amp
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
            "9:9",
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
            "6:5",
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
            "9:9",
        ),
        # compile and TF32 leave mixed precision to do
        Invalid(
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
            "11:9",
        ),
    ]

    def finish(self) -> None:
        torch = self.ctx.torch
        backward_calls = [] if torch.precision_set_elsewhere else torch.own_loop_backward_calls
        if backward_calls and not torch.uses_mixed_precision:
            self.report(backward_calls[0])
