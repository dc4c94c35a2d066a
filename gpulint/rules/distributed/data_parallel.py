"""GL601 data-parallel."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.facts import TORCH
from gpulint.linter.rule import Invalid, Rule, Valid

DATA_PARALLEL = (
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel",
    "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.data_parallel.data_parallel",
)


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

    ## Fix
    None: DDP changes how the program is launched (one process per GPU), how data is split
    (`DistributedSampler`), and what each process logs and saves.
    """

    code = "GL601"
    name = "data-parallel"
    message = "`DataParallel` drives all GPUs from one process; use DistributedDataParallel (one process per GPU)"
    requires = {TORCH}
    tokens = ("DataParallel", "data_parallel")
    triggers = (tuple(sorted({name.rsplit(".", 1)[1] for name in DATA_PARALLEL})),)  # what it reports ends in one

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
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.call_qualified_name(node) in DATA_PARALLEL:
            self.report(node)
