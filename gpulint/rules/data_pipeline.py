"""GL1xx: the input pipeline -- how batches get from storage to the GPU."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.context import has_star_kwargs, is_false, is_zero, keyword_arg
from gpulint.linter.findings import Applicability
from gpulint.linter.fixes import set_keyword
from gpulint.linter.rule import Rule, RuleOption

DATALOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")


def is_dataloader_call(rule: Rule, node: cst.Call) -> bool:
    return rule.ctx.call_qualified_name(node) in DATALOADERS


def _dataset_argument(node: cst.Call) -> cst.BaseExpression | None:
    for arg in node.args:
        if arg.keyword is None and not arg.star:
            return arg.value
        if arg.keyword is not None and arg.keyword.value == "dataset":
            return arg.value
    return None


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
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    ```
    Use instead:
    ```python
    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
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
    tokens = ("DataLoader",)
    fix_applicability = Applicability.UNSAFE
    options = {
        "num-workers": RuleOption(
            "min(8, os.cpu_count() or 1)",
            "Python expression GL101's fix writes as `num_workers=`.",
        )
    }

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader_call(self, node) or not self.ctx.accelerated or has_star_kwargs(node):
            return
        workers = keyword_arg(node, "num_workers")
        if workers is not None and not is_zero(workers.value):
            return  # set to something: the user's choice (a variable, a CLI argument)
        if len([a for a in node.args if a.keyword is None and not a.star]) >= 6:
            return  # num_workers given positionally (6th parameter)
        dataset = _dataset_argument(node)
        if dataset is not None and self.ctx.values.is_kind(dataset, "tensordataset"):
            return
        expression = str(self.option("num-workers"))
        imports = ("import os",) if "os." in expression else ()
        self.report(
            node,
            fix=set_keyword(
                self.ctx, node, "num_workers", expression, Applicability.UNSAFE,
                f"Load batches in worker processes: `num_workers={expression}`", imports,
            ),
        )


class DataLoaderUnpinned(Rule):
    """
    ## What it finds
    A `DataLoader` without `pin_memory=True` (absent or `False`) in a module that trains on an
    accelerator.

    ## Why it is slow
    Copies from pageable host memory to the GPU go through a staging buffer and block the host;
    from pinned (page-locked) memory they run by DMA and can overlap compute when issued with
    `non_blocking=True` (GL104).  Host-to-device copy time typically drops by a third or more.

    ## Example
    ```python
    loader = DataLoader(train_set, batch_size=64, num_workers=4)
    ```
    Use instead:
    ```python
    loader = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True)
    ```

    ## Fix (safe)
    Sets `pin_memory=True`.  Pinning changes where batches live in host memory, not their values:
    results are the same.  A `pin_memory=` given as a variable is left alone.
    """

    code = "GL102"
    name = "dataloader-unpinned"
    message = "DataLoader without `pin_memory=True`: host-to-GPU copies are slower and cannot overlap compute"
    tokens = ("DataLoader",)
    fix_applicability = Applicability.SAFE

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader_call(self, node) or not self.ctx.accelerated or has_star_kwargs(node):
            return
        pin = keyword_arg(node, "pin_memory")
        if pin is not None and not is_false(pin.value):
            return
        if len([a for a in node.args if a.keyword is None and not a.star]) >= 8:
            return  # pin_memory given positionally (8th parameter)
        self.report(
            node,
            fix=set_keyword(self.ctx, node, "pin_memory", "True", Applicability.SAFE, "Pin host memory: `pin_memory=True`"),
        )
