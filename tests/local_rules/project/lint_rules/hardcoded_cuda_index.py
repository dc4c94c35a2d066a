"""ACME001 hardcoded-cuda-index: a team rule kept in the project (docs/local-rules.md)."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.facts import TORCH
from gpulint.linter.analysis.nodes import int_literal, method_name, positional_args, string_literal
from gpulint.linter.rule import Invalid, Rule, Valid

_INDEXED_CUDA = re.compile(r"^cuda:\d+$")


class HardcodedCudaIndex(Rule):
    """
    ## What it finds
    A GPU picked by a number written into the code: `torch.device("cuda:1")`, `.to("cuda:0")`,
    `.cuda(0)`.

    ## Why it is slow
    Under `torchrun` every process runs the same code, so every rank puts its model on the same
    GPU: they share one device while the others idle.  Use the process's local rank
    (`int(os.environ["LOCAL_RANK"])`), or `"cuda"` after `torch.cuda.set_device(local_rank)`.

    ## Example
    ```python
    import torch

    model = Net().to("cuda:0")
    ```
    Use instead:
    ```python
    import os
    import torch

    model = Net().to(f"cuda:{int(os.environ['LOCAL_RANK'])}")
    ```

    ## Fix
    None: which rank variable to use is the team's choice.
    """

    code = "ACME001"
    name = "hardcoded-cuda-index"
    message = "GPU index written into the code: every rank of a multi-GPU run uses the same GPU"
    requires = {TORCH}
    tokens = ("cuda",)
    triggers = ((".to(", ".cuda(", "device"),)  # what it reports is one of these calls

    VALID = [
        Valid('model = Net().to("cuda")\n', header="import torch\n"),
        Valid("device = torch.device(f'cuda:{local_rank}')\nmodel = Net().cuda(local_rank)\n", header="import torch\n"),
    ]
    INVALID = [
        Invalid(
            """
            device = torch.device("cuda:1")
            model = model.to("cuda:0")
            other = other.cuda(0)
            """,
            "2:10",
            "3:9",
            "4:9",
            header="import torch\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        args = positional_args(node)
        first = args[0] if args else None
        if self.ctx.call_qualified_name(node) == "torch.device" or method_name(node) == "to":
            text = string_literal(first)
            if text is not None and _INDEXED_CUDA.match(text):
                self.report(node)
        elif method_name(node) == "cuda" and int_literal(first) is not None:
            self.report(node)
