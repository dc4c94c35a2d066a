"""GL101 dataloader-serial."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.facts import ACCELERATOR, TORCH
from gpulint.linter.analysis.nodes import has_star_kwargs, is_zero, keyword_arg, positional_args
from gpulint.linter.analysis.pytorch import dataloader_dataset, is_dataloader
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.options import NUM_WORKERS


class DataLoaderSerial(Rule):
    """
    ## What it finds
    A `torch.utils.data.DataLoader` created without `num_workers`, or with `num_workers=0`, in a
    module that trains on an accelerator.

    ## Why it is slow
    With no workers, every batch is read, decoded and collated in the training process, between
    two steps, while the GPU waits.  A loader whose per-batch work takes as long as the step halves
    throughput; the PyTorch profiler's TensorBoard plugin flags DataLoader time above 5% of a step.
    Workers prepare the next batches in parallel with compute.

    A loader over a `TensorDataset` (tensors already in memory) is not reported: indexing a tensor
    is cheaper than handing batches between processes.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    model = Net().cuda()
    ```
    Use instead:
    ```python
    import os

    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
    model = Net().cuda()
    ```

    ## Fix (unsafe)
    Sets `num_workers=` to the `num-workers` expression (default `min(8, os.cpu_count() or 1)`) and
    imports `os` when the expression uses it.  Unsafe: with workers, the dataset is copied into
    other processes, so it must be picklable, per-worker random state and open file handles behave
    differently, and under DDP each rank starts its own workers (see GL605).
    """

    code = "GL101"
    name = "dataloader-serial"
    message = "DataLoader loads batches in the training process (no `num_workers`): the GPU waits for every batch"
    requires = {TORCH, ACCELERATOR}
    tokens = ("DataLoader",)
    fix_applicability = Applicability.UNSAFE
    options = (NUM_WORKERS,)

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader(self.ctx, node) or has_star_kwargs(node):
            return
        workers = keyword_arg(node, "num_workers")
        if workers is not None and not is_zero(workers.value):
            return  # set to something: the user's choice (a variable, a CLI argument)
        if len(positional_args(node)) >= 6:
            return  # num_workers given positionally (6th parameter)
        dataset = dataloader_dataset(node)
        if dataset is not None and self.ctx.values.is_kind(dataset, "tensordataset"):
            return
        expression = str(self.option(NUM_WORKERS))
        imports = ("import os",) if "os." in expression else ()
        self.report(
            node,
            fix=set_keyword(
                self.ctx, node, "num_workers", expression, Applicability.UNSAFE,
                f"Load batches in worker processes: `num_workers={expression}`", imports,
            ),
        )
