"""GL407 channels-last."""

from __future__ import annotations

from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.rule import Invalid, Rule, Valid


class ChannelsLast(Rule):
    """
    ## What it finds
    A module that trains a 2-D convolutional network (it builds `nn.Conv2d` layers or a
    torchvision CNN) on an accelerator with its own loop (it takes optimizer steps), in mixed precision (autocast, a
    GradScaler, bf16/fp16), and never uses the `channels_last` memory format.  Reported once, at
    the optimizer's construction (or the first `.backward()`).

    ## Why it is slow
    Tensor-core convolutions in fp16/bf16 work on NHWC data.  Given PyTorch's default NCHW
    (`contiguous_format`) tensors, cuDNN transposes inputs and outputs around every convolution, or
    falls back to slower kernels.  With the model's weights and the inputs in `channels_last`, the
    convolutions run on NHWC directly; NVIDIA and PyTorch report 8-35% faster training for CNNs
    under AMP on Volta and newer GPUs.

    ## Example
    ```python
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU()).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x.cuda()).mean()
        loss.backward()
        optimizer.step()
    ```
    Use instead:
    ```python
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU()).cuda()
    model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        x = x.cuda().to(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).mean()
        loss.backward()
        optimizer.step()
    ```

    ## Fix
    None: the model and its 4-D inputs must both be converted, and which tensors are 4-D images is
    not known from the code.  Custom ops that assume contiguous NCHW tensors (`.view()` after a
    convolution) need a look.  A hint: off by default.
    """

    code = "GL407"
    name = "channels-last"
    message = (
        "a CNN trained in mixed precision in the default NCHW memory format: "
        "`channels_last` lets tensor-core convolutions skip layout transposes"
    )
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("backward",)
    triggers = ((".backward(",),)  # it reports a training loop's `.backward()` (or the optimizer)
    default = "hint"

    VALID = [
        # channels_last already used; fp32 (no mixed precision); no 2-D convolution here
        Valid(
            """
            import torch
            import torch.nn as nn

            model = nn.Conv2d(3, 8, 3).cuda().to(memory_format=torch.channels_last)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn as nn

            model = nn.Conv2d(3, 8, 3).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn as nn

            model = nn.Sequential(nn.Conv1d(80, 8, 3), nn.Linear(8, 2)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        # a library module: it builds an optimizer for its callers and times backward passes, but
        # takes no optimizer step (yolov5's utils/torch_utils.py)
        Valid(
            """
            import torch
            import torch.nn as nn
            from torch.cuda.amp import autocast

            def smart_optimizer(model, lr=0.01):
                return torch.optim.SGD(model.parameters(), lr=lr)

            def profile(x, ops, n=10):
                conv = nn.Conv2d(3, 8, 3).cuda()
                for _ in range(n):
                    y = conv(x.cuda().half())
                    y.sum().backward()
            """,
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torchvision

            model = torchvision.models.resnet50().cuda()
            scaler = torch.amp.GradScaler("cuda")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            """,
            "7:13",
        ),
    ]

    def finish(self) -> None:
        torch = self.ctx.torch
        backward_calls = torch.own_loop_backward_calls
        if (
            not backward_calls
            or not torch.steps_an_optimizer
            or 2 not in torch.convolution_dims
            or not torch.uses_mixed_precision
        ):
            return
        if "channels_last" in self.ctx.code_without_comments:
            return
        optimizer = torch.optimizer_construction
        self.report(optimizer if optimizer is not None else backward_calls[0])
