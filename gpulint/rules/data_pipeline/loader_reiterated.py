"""GL105 loader-reiterated."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.facts import TORCH
from gpulint.linter.analysis.nodes import dotted_name
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import CUDA_SCRIPT


class LoaderReiterated(Rule):
    """
    ## What it finds
    A `DataLoader` iterated only to count or peek at it: `len(list(loader))` (or `tuple`), and
    `next(iter(loader))` inside a loop.

    ## Why it is slow
    `list(loader)` loads, decodes and collates the whole dataset to count batches that
    `len(loader)` knows for free.  `next(iter(loader))` starts a fresh iterator: with workers, that
    spawns `num_workers` processes, which each prefetch `prefetch_factor` batches, to use one batch
    and throw the rest away -- every time round the loop.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader

    train_loader = DataLoader(train_set, batch_size=64, num_workers=8)
    val_loader = DataLoader(val_set, batch_size=64, num_workers=8)
    model = Net().cuda()
    for epoch in range(epochs):
        steps = len(list(train_loader))
        sample = next(iter(val_loader))
    ```
    Use instead:
    ```python
    import torch
    from torch.utils.data import DataLoader

    train_loader = DataLoader(train_set, batch_size=64, num_workers=8)
    val_loader = DataLoader(val_set, batch_size=64, num_workers=8)
    model = Net().cuda()
    sample = next(iter(val_loader))  # once, before the loop
    for epoch in range(epochs):
        steps = len(train_loader)
    ```

    ## Fix
    None: `len(loader)` differs from counting batches for an `IterableDataset` or a sampler
    without a length, and moving a `next(iter(...))` out of a loop changes which batch is used.
    """

    code = "GL105"
    name = "loader-reiterated"
    message = "DataLoader iterated just to {what}: every call loads batches (and starts workers) again"
    title = "DataLoader iterated just to count or sample it: every call loads batches (and starts workers) again"
    requires = {TORCH}
    tokens = ("DataLoader",)

    VALID = [
        # one peek before the loop, len(), not a loader
        Valid(
            """
            loader = DataLoader(ds, num_workers=4)
            first = next(iter(loader))
            n = len(loader)
            for epoch in range(3):
                it = iter(loader)
                cached = len(list(files))
                other = next(iter(items))
            """,
            header=CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        Invalid(
            """
            loader = DataLoader(ds, num_workers=4)
            n = len(list(loader))
            for epoch in range(3):
                first = next(iter(loader))
                m = len(tuple(loader))
            """,
            "5:5",
            "7:13",
            "8:9",
            header=CUDA_SCRIPT,
        ),
        # host-side: no accelerator needs to be named
        Invalid(
            """
            from torch.utils.data import DataLoader
            l = DataLoader(d)
            n = len(list(l))
            """,
            "3:5",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        outer = dotted_name(node.func)
        if outer not in ("len", "next") or len(node.args) != 1 or "len" in self.ctx.imports.bindings:
            return
        inner = node.args[0].value
        if not (isinstance(inner, cst.Call) and len(inner.args) == 1 and not inner.args[0].star):
            return
        inner_name = dotted_name(inner.func)
        wanted = ("list", "tuple") if outer == "len" else ("iter",)
        if inner_name not in wanted:
            return
        if not self.ctx.values.is_kind(inner.args[0].value, "dataloader"):
            return
        if outer == "len":
            self.report(node, message=self.message.format(what="count its batches (use `len(loader)`)"))
        elif self.ctx.in_loop(node):
            self.report(node, message=self.message.format(what="take one batch, inside a loop"))
