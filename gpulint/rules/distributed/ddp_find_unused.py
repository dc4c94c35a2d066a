"""GL604 ddp-find-unused."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.nodes import is_true, keyword_arg, last_name
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid


class DdpFindUnused(Rule):
    """
    ## What it finds
    `find_unused_parameters=True` given to `DistributedDataParallel`, Lightning's `DDPStrategy`,
    Accelerate's `DistributedDataParallelKwargs`, `ddp_find_unused_parameters=True` in Hugging
    Face `TrainingArguments`, and the `strategy="ddp_find_unused_parameters_true"` string.

    ## Why it is slow
    With the flag, DDP walks the autograd graph from the outputs after every forward pass to find
    parameters that will get no gradient, and cannot start all-reducing a gradient bucket until it
    knows which parameters are missing.  PyTorch's documentation warns of the extra overhead; it
    is commonly 5-20% of step time, for nothing when every parameter is used.

    ## Example
    ```python
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(model, device_ids=[rank], find_unused_parameters=True)
    ```
    Use instead:
    ```python
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(model, device_ids=[rank])
    ```

    ## Fix
    None: when some parameters really get no gradient (frozen branches, conditional heads), DDP
    without the flag fails at the next step; only a person (or a run with
    `TORCH_DISTRIBUTED_DEBUG=DETAIL`) can tell.  Remove it if training runs without it.
    """

    code = "GL604"
    name = "ddp-find-unused"
    fix_api = frozenset({"torch"})
    hint_by_default = MOSTLY_NOT_WANTED
    message = (
        "`find_unused_parameters=True` makes DDP traverse the autograd graph every step; "
        "drop it unless parameters are really unused"
    )
    tokens = ("find_unused_parameters",)

    KEYWORDS = {"find_unused_parameters", "ddp_find_unused_parameters"}
    # Callees that configure DDP (by their last name: aliases and re-exports vary).  Anything else
    # given the keyword -- a registry that *offers* the option, a test helper -- is not a choice.
    CALLEES = re.compile(r"DDP|DistributedDataParallel|Strategy$|TrainingArguments$|Kwargs$|^Trainer$|^Fabric$")
    triggers = ((*sorted(KEYWORDS), "strategy"),)  # the keyword it reports
    site_triggers = 1

    VALID = [
        Valid(
            """
            from torch.nn.parallel import DistributedDataParallel as DDP
            a = DDP(model, find_unused_parameters=False)
            b = DDP(model, find_unused_parameters=args.find_unused)
            # find_unused_parameters=True is slow
            # Lightning registering the strategy it offers is not a choice of it:
            strategy_registry.register("ddp_find_unused_parameters_true", cls, find_unused_parameters=True)
            """,
        ),
    ]
    INVALID = [
        # every spelling
        Invalid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            from lightning.pytorch.strategies import DDPStrategy
            from accelerate.utils import DistributedDataParallelKwargs
            import lightning as L
            from transformers import TrainingArguments
            a = DDP(model, find_unused_parameters=True)
            b = DDPStrategy(find_unused_parameters=True)
            c = DistributedDataParallelKwargs(find_unused_parameters=True)
            d = L.Trainer(strategy="ddp_find_unused_parameters_true")
            e = TrainingArguments("out", ddp_find_unused_parameters=True)
            f = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0], find_unused_parameters=True)
            """,
            "7:5",
            "8:5",
            "9:5",
            "10:5",
            "11:5",
            "12:5",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        callee = last_name(node.func) or ""
        if not self.CALLEES.search(callee):
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in self.KEYWORDS and is_true(arg.value):
                self.report(node)
                return
        strategy = keyword_arg(node, "strategy")
        if strategy is not None and isinstance(strategy.value, cst.SimpleString):
            if strategy.value.evaluated_value == "ddp_find_unused_parameters_true":
                self.report(node)
