"""GL102 dataloader-unpinned."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.consumption import pipeline_consumed
from gpulint.linter.analysis.facts import ACCELERATOR, TORCH
from gpulint.linter.analysis.nodes import is_false, keyword_arg, positional_args
from gpulint.linter.analysis.pytorch import dataloader_dataset, in_memory_dataset, is_dataloader
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import CUDA_SCRIPT


class DataLoaderUnpinned(Rule):
    """
    ## What it finds
    A `DataLoader` without `pin_memory=True` (absent or `False`) in a module that trains on an
    accelerator.  Not over data already in memory (a `TensorDataset`, a tensor, a list, Lightning's
    `RandomDataset`: see GL101), nor for a loader never consumed, or only peeked at once.

    ## Why it is slow
    Copies from pageable host memory to the GPU go through a staging buffer and block the host;
    from pinned (page-locked) memory they run by DMA and can overlap compute when issued with
    `non_blocking=True` (GL104).  Host-to-device copy time typically drops by a third or more.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, num_workers=4)
    model = Net().cuda()
    ```
    Use instead:
    ```python
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True)
    model = Net().cuda()
    ```

    ## Fix (safe)
    Sets `pin_memory=True`.  Pinning changes where batches live in host memory, not their values:
    results are the same.  A `pin_memory=` given as a variable is left alone.
    """

    code = "GL102"
    name = "dataloader-unpinned"
    message = "DataLoader without `pin_memory=True`: host-to-GPU copies are slower and cannot overlap compute"
    requires = {TORCH, ACCELERATOR}
    tokens = ("DataLoader",)
    triggers = (("DataLoader",),)  # the loader's qualified name ends in it (also through an alias)
    fix_applicability = Applicability.SAFE

    VALID = [
        # data in memory; a loader only peeked at once, one never used
        Valid(
            """
            from torch.utils.data import TensorDataset
            from lightning.pytorch.demos.boring_classes import RandomDataset
            a = DataLoader(TensorDataset(x, y), batch_size=32)
            b = DataLoader(RandomDataset(32, 64), batch_size=2)
            c = DataLoader(range(100), batch_size=8)
            def show():
                demo = DataLoader(images, batch_size=16)
                batch = next(iter(demo))
                unused = DataLoader(images, batch_size=16)
                return batch
            """,
            header=CUDA_SCRIPT,
        ),
        # CPU module
        Valid(
            """
            from torch.utils.data import DataLoader
            l = DataLoader(ds, num_workers=2)
            """,
        ),
        # pinned through a keyword dictionary that `.update()` completes
        Valid(
            """
            train_kwargs = {"batch_size": 64}
            if use_cuda:
                train_kwargs.update({"num_workers": 1, "pin_memory": True})
            loader = DataLoader(ds, **train_kwargs)
            """,
            header=CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        # absent or False; a variable is the user's choice
        Invalid(
            """
            a = DataLoader(ds, num_workers=4)
            b = DataLoader(ds, num_workers=4, pin_memory=False)
            c = DataLoader(ds, num_workers=4, pin_memory=True)
            d = DataLoader(ds, num_workers=4, pin_memory=args.pin)
            """,
            "4:5",
            "5:5",
            header=CUDA_SCRIPT,
            fixed="""
            a = DataLoader(ds, num_workers=4, pin_memory=True)
            b = DataLoader(ds, num_workers=4, pin_memory=True)
            c = DataLoader(ds, num_workers=4, pin_memory=True)
            d = DataLoader(ds, num_workers=4, pin_memory=args.pin)
            """,
        ),
        # the device is a parameter (no `cuda` spelled); the dictionary lacks the keyword
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            def evaluate(model, ds, device):
                options = {"batch_size": 100, "num_workers": 2}
                for x, y in DataLoader(ds, **options):
                    model(x.to(device))
            """,
            "6:17",
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def evaluate(model, ds, device):
                options = {"batch_size": 100, "num_workers": 2}
                for x, y in DataLoader(ds, **options, pin_memory=True):
                    model(x.to(device))
            """,
        ),
        # the fix keeps a multi-line layout
        Invalid(
            """
            loader = DataLoader(  # comment kept
                ds,
                batch_size=32,
                num_workers=4,
            )
            """,
            "4:10",
            header=CUDA_SCRIPT,
            fixed="""
            loader = DataLoader(  # comment kept
                ds,
                batch_size=32,
                num_workers=4,
                pin_memory=True,
            )
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader(self.ctx, node) or not pipeline_consumed(self.ctx, node):
            return
        keywords = self.ctx.values.keywords_of(node)
        if keywords is None:
            return  # `**options` this module does not show
        pin = keywords.get("pin_memory")
        if pin is not None and not is_false(pin):
            return
        dataset = dataloader_dataset(node)
        if dataset is not None and in_memory_dataset(self.ctx, dataset):
            return  # batches indexed from memory: no workers, little to gain from pinning
        if len(positional_args(node)) >= 8:
            return  # pin_memory given positionally (8th parameter)
        fix = None
        if pin is None or keyword_arg(node, "pin_memory") is not None:  # (not inside a `**` dictionary)
            fix = set_keyword(
                self.ctx, node, "pin_memory", "True", Applicability.SAFE, "Pin host memory: `pin_memory=True`"
            )
        self.report(node, fix=fix)
