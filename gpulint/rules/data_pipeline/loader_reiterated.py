"""GL105 loader-reiterated."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.facts import TORCH
from gpulint.linter.analysis.nodes import dotted_name, is_zero, positional_args
from gpulint.linter.analysis.pytorch import is_dataloader
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import CUDA_SCRIPT

# The message for a loader built here without workers: each call loads batches, starts no process.
_WITHOUT_WORKERS = "DataLoader iterated just to {what}: every call loads its batches again"


class LoaderReiterated(Rule):
    """
    ## What it finds
    A `DataLoader` iterated only to count or peek at it: `len(list(loader))` (or `tuple`), and
    `next(iter(loader))` inside a loop -- also in an epoch function, one that iterates the same
    loader and is called from a loop of the module (`b_sz = len(next(iter(self.train_data))[0])`
    at the top of `_run_epoch`).

    ## Why it is slow
    `list(loader)` loads, decodes and collates the whole dataset to count batches that
    `len(loader)` knows for free.  `next(iter(loader))` starts a fresh iterator: with workers, that
    spawns `num_workers` processes, which each prefetch `prefetch_factor` batches, to use one batch
    and throw the rest away -- every time round the loop.  The message says that workers start
    again only where they may: not for a loader built here without `num_workers` (or with 0).

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
    message = "DataLoader iterated just to {what}: every call loads batches and starts its workers again"
    title = "DataLoader iterated just to count or sample it: every call loads batches (and starts workers) again"
    requires = {TORCH}
    tokens = ("DataLoader",)
    # what it reports, here; the loader's qualified name ends in it (also through an alias, an
    # annotation) -- or another module makes the loader
    triggers = (("len(list(", "len(tuple(", "next(iter("), ("DataLoader",))
    site_triggers = 1

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
        # a peek in a function called once, and in one that does not iterate the loader
        Valid(
            """
            loader = DataLoader(ds, num_workers=4)

            def fit(loader):
                sample = next(iter(loader))
                for x, y in loader:
                    step(x, y)

            def show(loader):
                return next(iter(loader))

            fit(loader)
            for epoch in range(3):
                show(loader)
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
        # once per epoch: a peek in the function that runs each epoch over the same loader
        Invalid(
            """
            class Trainer:
                def __init__(self, train_data: DataLoader):
                    self.train_data = train_data

                def _run_epoch(self, epoch):
                    b_sz = len(next(iter(self.train_data))[0])
                    for source, targets in self.train_data:
                        self._run_batch(source, targets)

                def train(self, max_epochs):
                    for epoch in range(max_epochs):
                        self._run_epoch(epoch)
            """,
            "9:20",
            header=CUDA_SCRIPT,
        ),
        # host-side: no accelerator needs to be named; a loader without workers starts none
        Invalid(
            """
            from torch.utils.data import DataLoader
            l = DataLoader(d)
            n = len(list(l))
            w = DataLoader(d, num_workers=8)
            for epoch in range(3):
                first = next(iter(w))
            """,
            "3:5",
            "6:13",
            messages=(
                "DataLoader iterated just to count its batches (use `len(loader)`): every call loads its batches again",
                "DataLoader iterated just to take one batch, inside a loop: every call loads batches and starts its "
                "workers again",
            ),
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
        loader = inner.args[0].value
        if outer == "len":
            what = "count its batches (use `len(loader)`)"
        elif self.ctx.in_loop(node):
            what = "take one batch, inside a loop"
        elif self._in_epoch_function(node, loader):
            what = "take one batch, every epoch"
        else:
            return
        message = self.message.format(what=what)
        if not self._has_workers(loader):
            message = _WITHOUT_WORKERS.format(what=what)
        self.report(node, message=message)

    def _has_workers(self, loader: cst.BaseExpression) -> bool:
        """Whether the loader may start worker processes: a `DataLoader(...)` it comes from sets
        `num_workers` to something other than 0, or where it comes from is not seen here."""
        calls = self._loader_calls(loader, 3)
        if calls is None:
            return True
        for call in calls:
            keywords = self.ctx.values.keywords_of(call)
            workers = keywords.get("num_workers") if keywords is not None else None
            if keywords is None or (workers is not None and not is_zero(workers)) or len(positional_args(call)) >= 6:
                return True
        return False

    def _loader_calls(self, expr: cst.BaseExpression, depth: int) -> list[cst.Call] | None:
        """The `DataLoader(...)` calls `expr` holds; None when one of its origins is something else."""
        if isinstance(expr, cst.Call) and is_dataloader(self.ctx, expr):
            return [expr]
        origins = self.ctx.values.origins(expr) if depth > 0 else None
        if not origins:
            return None
        found: list[cst.Call] = []
        for origin in origins:
            calls = self._loader_calls(origin, depth - 1)
            if calls is None:
                return None
            found += calls
        return found

    def _in_epoch_function(self, node: cst.Call, loader: cst.BaseExpression) -> bool:
        """`node` is in a function that iterates `loader` (`for x, y in loader:`) and that a loop of
        this module calls: the function runs once per epoch, and so does the peek."""
        function = self.ctx.enclosing_function(node)
        loader_name = dotted_name(loader)
        if function is None or loader_name is None:
            return False
        iterates_loader = any(
            isinstance(loop, cst.For)
            and dotted_name(loop.iter) == loader_name
            and self.ctx.enclosing_function(loop) is function
            for loop in nodes_under(function)
        )
        if not iterates_loader:
            return False
        name = function.name.value
        return any(
            isinstance(call.func, (cst.Name, cst.Attribute))
            and (dotted_name(call.func) or "").rsplit(".", 1)[-1] == name
            and self.ctx.in_loop(call)
            for call in self.ctx.index.nodes("Call")
        )
