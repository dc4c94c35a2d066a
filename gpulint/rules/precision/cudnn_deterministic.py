"""GL406 cudnn-deterministic."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.analysis.nodes import is_true
from gpulint.linter.rule import Invalid, Rule, Valid


class CudnnDeterministic(Rule):
    """
    ## What it finds
    `torch.backends.cudnn.deterministic = True`, set unconditionally (not under an `if`, such as
    `if args.deterministic:` or `if args.seed is not None:`) in a module that trains on an
    accelerator.

    ## Why it is slow
    Deterministic mode restricts cuDNN to convolution algorithms that give bit-identical results
    from run to run, which rules out many of the fastest ones (and autotuning, `cudnn.benchmark`).
    Convolution-heavy training is often noticeably slower -- 10% and more is common, depending on
    the model and the GPU.  Reproducibility is a deliberate choice, and sometimes the right one:
    this hint only asks that it be one, made for the runs that need it rather than for every run.

    ## Example
    ```python
    import torch

    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    model = Net().cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    ```
    Use instead: make reproducibility an option, off for ordinary runs:
    ```python
    import torch

    torch.manual_seed(0)
    if args.deterministic:
        torch.backends.cudnn.deterministic = True
    model = Net().cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    ```

    ## Fix
    None: whether a run must be reproducible is the author's decision.  A hint: off by default.
    """

    code = "GL406"
    name = "cudnn-deterministic"
    message = (
        "`cudnn.deterministic = True` restricts convolutions to slower deterministic kernels on every run; "
        "fine where reproducibility is wanted, otherwise make it an option"
    )
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("deterministic",)
    triggers = (("deterministic",),)  # the setting it reports
    default = "hint"

    VALID = [
        # behind a flag or a condition; set to False; no accelerator
        Valid(
            """
            import torch
            import torch.backends.cudnn as cudnn
            device = torch.device("cuda")

            if args.seed is not None:
                cudnn.deterministic = True
            torch.backends.cudnn.deterministic = args.deterministic
            torch.backends.cudnn.deterministic = False
            for x, y in loader:
                loss = model(x.to(device)).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        Valid(
            """
            import torch
            torch.backends.cudnn.deterministic = True
            for x, y in loader:
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torch.backends.cudnn as cudnn
            device = torch.device("cuda")

            def set_seed(seed):
                torch.manual_seed(seed)
                cudnn.deterministic = True
                cudnn.benchmark = False

            torch.backends.cudnn.deterministic = True
            for x, y in loader:
                loss = model(x.to(device)).sum()
                loss.backward()
                optimizer.step()
            """,
            "7:5",
            "10:1",
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        if not is_true(node.value):
            return
        for target in node.targets:
            if self.ctx.qualified_name(target.target) != "torch.backends.cudnn.deterministic":
                continue
            if any(isinstance(ancestor, (cst.If, cst.IfExp)) for ancestor in self.ctx.ancestors(node)):
                return  # a deliberate, conditional choice
            self.report(target.target)
