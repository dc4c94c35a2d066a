"""GL601 data-parallel."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.facts import TORCH
from gpulint.linter.analysis.nodes import last_name
from gpulint.linter.analysis.pytorch import wraps_for_ranks
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid

DATA_PARALLEL = (
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel",
    "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.data_parallel.data_parallel",
)

# Calls that warn a person (`warnings.warn`, `logger.warning`, `logging.warn`, `warning_once`).
_WARNINGS = frozenset({"warn", "warning", "warn_once", "warning_once"})
# What a warning says when it points to the distributed alternative.
_RECOMMENDS_DDP = re.compile(r"DistributedDataParallel|\bDDP\b|distributed|torchrun", re.IGNORECASE)
# A flag that asks for DataParallel by name (`if args.data_parallel:`, `if self.use_dp:`).
_DATA_PARALLEL_FLAG = re.compile(r"data_?parallel|(^|_)dp($|_)|multi_?gpu", re.IGNORECASE)
# DeepSpeed's entry points: the model they take is trained one process per GPU.
_DEEPSPEED = frozenset({"deepspeed.initialize", "deepspeed.init_inference"})
# Code that runs a model for inference: no gradients, nothing for DDP to all-reduce.
_INFERENCE = re.compile(r"\bno_grad\b|\binference_mode\b|\.eval\(\)")


class DataParallel(Rule):
    """
    ## What it finds
    `torch.nn.DataParallel(model)` (however imported) and the functional
    `torch.nn.parallel.data_parallel(...)`.

    ## Why it is slow
    DataParallel runs every GPU from one Python process: each step it copies the model to every
    GPU, scatters the batch from GPU 0, gathers the outputs back on GPU 0 and computes the loss
    there, with all replicas fighting for the GIL.  GPU 0 becomes the bottleneck and scaling stops
    early; PyTorch recommends DistributedDataParallel instead, even on one machine, and it is
    usually markedly faster from 2 GPUs on.

    ## Example
    ```python
    import torch.nn as nn

    model = nn.DataParallel(model).cuda()
    ```
    Use instead (one process per GPU, started with `torchrun --nproc_per_node=N`):
    ```python
    import os

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    ```

    A `DataParallel` the code offers as a fallback -- in the `else` of a branch that wraps the
    model in DistributedDataParallel, or next to a warning that recommends DDP (`warnings.warn`,
    `logger.warning` in the same block or an enclosing one) -- is a hint: the author knows, and the
    distributed path is the one their runs take.  So is one under a flag that asks for it by name
    (`if args.data_parallel:`: an opt-in), and one in a module that takes no training step and
    runs its model under `no_grad`/`inference_mode`/`.eval()` (inference: there are no gradients
    for DistributedDataParallel to all-reduce), and one in a module that hands its model to
    DeepSpeed (`deepspeed.initialize`: its launcher runs one process per GPU, and DataParallel is
    a single-GPU pass-through or a leftover path).  Hints are held back unless hints are shown.

    ## Fix
    None: DDP changes how the program is launched (one process per GPU), how data is split
    (`DistributedSampler`), and what each process logs and saves.
    """

    code = "GL601"
    name = "data-parallel"
    hint_by_default = MOSTLY_NOT_WANTED
    message = "`DataParallel` drives all GPUs from one process; use DistributedDataParallel (one process per GPU)"
    requires = {TORCH}
    tokens = ("DataParallel", "data_parallel")
    triggers = (tuple(sorted({name.rsplit(".", 1)[1] for name in DATA_PARALLEL})),)  # what it reports ends in one
    site_triggers = 1  # (the call it reports is named through this module's own imports)

    VALID = [
        Valid(
            """
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel
            ok = isinstance(model, nn.DataParallel)  # a type check, not a wrap
            m = DistributedDataParallel(model)
            s = "nn.DataParallel(model)"
            """,
        ),
    ]
    INVALID = [
        # however imported, and the functional form
        Invalid(
            """
            import torch
            import torch.nn as nn
            from torch.nn import DataParallel as DP
            from torch.nn.parallel import data_parallel
            a = nn.DataParallel(model)
            b = DP(model)
            c = torch.nn.parallel.DataParallel(model)
            d = data_parallel(model, inputs)
            """,
            "5:5",
            "6:5",
            "7:5",
            "8:5",
        ),
        # fallbacks the code knows about: after a warning that recommends DDP, in the `else` of a
        # DDP branch -- hints; a warning about something else is no such sign
        Invalid(
            """
            import logging
            import warnings
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            logger = logging.getLogger(__name__)
            if n_gpu > 1:
                warnings.warn("DataParallel is slow: launch with torchrun for DistributedDataParallel")
                model = torch.nn.DataParallel(model)
            if args.local_rank != -1:
                model = DDP(model, device_ids=[args.local_rank])
            elif n_gpu > 1:
                model = torch.nn.DataParallel(model)
            def wrap(model):
                logger.warning(f"Using {n_gpu} GPUs with DataParallel; DDP is recommended")
                return torch.nn.DataParallel(model)
            if n_gpu > 1:
                logger.warning("this model is large")
                model = torch.nn.DataParallel(model)
            """,
            "8:13",
            "12:13",
            "15:12",
            "18:13",
            hints=(
                "a fallback the code warns about: its warning recommends DistributedDataParallel",
                "a fallback: the other branch of its `if` wraps the model in DistributedDataParallel",
                "a fallback the code warns about: its warning recommends DistributedDataParallel",
                MOSTLY_NOT_WANTED,
            ),
        ),
        # an opt-in flag that names it; inference only (no training step, the model under no_grad)
        Invalid(
            """
            import torch
            if args.data_parallel:
                model = torch.nn.DataParallel(model)
            if args.gpus > 1:
                model = torch.nn.DataParallel(model)
            """,
            "3:13",
            "5:13",
            hints=("an opt-in: the code wraps only when `args.data_parallel` asks for it", MOSTLY_NOT_WANTED),
        ),
        Invalid(
            """
            import deepspeed
            import torch
            def get_model(args):
                return torch.nn.DataParallel(build(args))
            engine, optimizer, _, _ = deepspeed.initialize(args=args, model=get_model(args))
            for batch in loader:
                engine.backward(engine(batch))
                engine.step()
            """,
            "4:12",
            hints=("the module hands its model to DeepSpeed, whose launcher runs one process per GPU",),
        ),
        Invalid(
            """
            import torch
            featurizer = torch.nn.DataParallel(encoder.cuda()).eval()
            with torch.no_grad():
                for images in loader:
                    features.append(featurizer(images).cpu())
            """,
            "2:14",
            hints=("inference: the module takes no training step, so there are no gradients for DDP to all-reduce",),
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.call_qualified_name(node) in DATA_PARALLEL:
            self.report(node, hint=self._fallback(node))

    def _fallback(self, call: cst.Call) -> str | None:
        """Why the `DataParallel` is a fallback the code knows about, an opt-in or inference, or
        None (the docs)."""
        if not self.ctx.loops.step_calls and not self.ctx.project.steps_elsewhere:
            if _INFERENCE.search(self.ctx.code_without_comments):
                return "inference: the module takes no training step, so there are no gradients for DDP to all-reduce"
        if any(self.ctx.call_qualified_name(c) in _DEEPSPEED for c in self.ctx.index.nodes("Call")):
            return "the module hands its model to DeepSpeed, whose launcher runs one process per GPU"
        child: cst.CSTNode = call
        for ancestor in self.ctx.ancestors(call):
            if isinstance(ancestor, cst.If) and child is ancestor.body and self._asks_for_it(ancestor.test):
                return f"an opt-in: the code wraps only when `{self.ctx.code(ancestor.test)}` asks for it"
            if isinstance(ancestor, cst.If) and child is not ancestor.body and child is not ancestor.test:
                if self._wraps_in_ddp(ancestor.body):
                    return "a fallback: the other branch of its `if` wraps the model in DistributedDataParallel"
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)) and self._warns_for_ddp(ancestor):
                return "a fallback the code warns about: its warning recommends DistributedDataParallel"
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return None
            child = ancestor
        return None

    @staticmethod
    def _asks_for_it(test: cst.BaseExpression) -> bool:
        """A plain flag (`args.data_parallel`, `self.use_dp`) that names DataParallel."""
        return isinstance(test, (cst.Name, cst.Attribute)) and bool(_DATA_PARALLEL_FLAG.search(last_name(test) or ""))

    def _wraps_in_ddp(self, block: cst.CSTNode) -> bool:
        return any(isinstance(node, cst.Call) and wraps_for_ranks(self.ctx, node) for node in nodes_under(block))

    def _warns_for_ddp(self, block: cst.IndentedBlock | cst.Module) -> bool:
        """A warning among the block's own statements (not in a nested block) that recommends DDP."""
        for statement in block.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for node in nodes_under(statement):
                if (
                    isinstance(node, cst.Call)
                    and last_name(node.func) in _WARNINGS
                    and any(
                        isinstance(text, (cst.SimpleString, cst.FormattedStringText))
                        and _RECOMMENDS_DDP.search(self.ctx.code(text))
                        for arg in node.args
                        for text in nodes_under(arg)
                    )
                ):
                    return True
        return False
