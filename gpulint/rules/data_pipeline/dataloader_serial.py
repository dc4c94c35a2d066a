"""GL101 dataloader-serial."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.facts import TORCH
from gpulint.linter.analysis.nodes import is_zero, keyword_arg, positional_args
from gpulint.linter.analysis.pytorch import dataloader_dataset, is_dataloader
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import CUDA_SCRIPT
from gpulint.rules.options import NUM_WORKERS


class DataLoaderSerial(Rule):
    """
    ## What it finds
    A `torch.utils.data.DataLoader` created without `num_workers`, or with `num_workers=0` (also
    through a `**kwargs` dictionary built in the module).  The rule is about the host: it applies
    whether or not the module names an accelerator.

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
    requires = {TORCH}
    tokens = ("DataLoader",)
    fix_applicability = Applicability.UNSAFE
    options = (NUM_WORKERS,)

    VALID = [
        # workers set through a keyword dictionary built in the module
        Valid(
            """
            from torch.utils.data import DataLoader
            train_kwargs = {"batch_size": 64}
            cuda_kwargs = {"num_workers": 2, "pin_memory": True}
            train_kwargs.update(cuda_kwargs)
            loader = DataLoader(ds, **train_kwargs)
            """,
        ),
        # tensors already in memory
        Valid(
            """
            from torch.utils.data import TensorDataset
            ds = TensorDataset(x, y)
            loader = DataLoader(ds, batch_size=32)
            """,
            header=CUDA_SCRIPT,
        ),
        # text in comments and strings
        Valid(
            """
            # loader = DataLoader(ds)
            doc = "DataLoader(ds) without workers"
            """,
            header=CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        # absent or zero workers; set ones (a variable, positionally) and **kwargs are the user's choice
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda")
            a = DataLoader(ds, batch_size=32)
            b = DataLoader(ds, batch_size=32, num_workers=0)
            c = DataLoader(ds, batch_size=32, num_workers=4)
            d = DataLoader(ds, batch_size=32, num_workers=args.workers)
            e = DataLoader(ds, 32, True, None, None, 4)
            f = DataLoader(ds, **options)
            """,
            "4:5", "5:5",
            fixed="""
            import os
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda")
            a = DataLoader(ds, batch_size=32, num_workers=min(8, os.cpu_count() or 1))
            b = DataLoader(ds, batch_size=32, num_workers=min(8, os.cpu_count() or 1))
            c = DataLoader(ds, batch_size=32, num_workers=4)
            d = DataLoader(ds, batch_size=32, num_workers=args.workers)
            e = DataLoader(ds, 32, True, None, None, 4)
            f = DataLoader(ds, **options)
            """,
        ),
        # aliased imports
        Invalid(
            """
            import torch.utils.data as tud
            from torch.utils.data import DataLoader as DL
            x = torch.zeros(1).cuda()
            a = tud.DataLoader(ds)
            b = DL(ds)
            """,
            "4:5", "5:5",
            fixed="""
            import os
            import torch.utils.data as tud
            from torch.utils.data import DataLoader as DL
            x = torch.zeros(1).cuda()
            a = tud.DataLoader(ds, num_workers=min(8, os.cpu_count() or 1))
            b = DL(ds, num_workers=min(8, os.cpu_count() or 1))
            """,
        ),
        # the fix imports os once and keeps comments
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda")
            loader = DataLoader(ds, batch_size=32)  # keep me
            other = 1  # and me
            """,
            "4:10",
            fixed="""
            import os
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda")
            loader = DataLoader(ds, batch_size=32, num_workers=min(8, os.cpu_count() or 1))  # keep me
            other = 1  # and me
            """,
        ),
        # host-side: no accelerator needs to be named; a keyword dictionary without workers
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader_kwargs = dict(batch_size=64, shuffle=True)
            loader_kwargs["drop_last"] = True
            train = DataLoader(ds, **loader_kwargs)
            test = DataLoader(ds, **loader_kwargs, num_workers=0)
            """,
            "4:9", "5:8",
            fixed="""
            import os
            from torch.utils.data import DataLoader
            loader_kwargs = dict(batch_size=64, shuffle=True)
            loader_kwargs["drop_last"] = True
            train = DataLoader(ds, **loader_kwargs, num_workers=min(8, os.cpu_count() or 1))
            test = DataLoader(ds, **loader_kwargs, num_workers=min(8, os.cpu_count() or 1))
            """,
        ),
        # zero workers inside the dictionary: reported, and no fix (a second `num_workers=` would not run)
        Invalid(
            """
            from torch.utils.data import DataLoader
            kwargs = {"batch_size": 64, "num_workers": 0}
            loader = DataLoader(ds, **kwargs)
            """,
            "3:10",
        ),
        # the configured expression
        Invalid(
            "loader = DataLoader(ds, num_workers=0)\n",
            "4:10",
            header=CUDA_SCRIPT,
            fixed="loader = DataLoader(ds, num_workers=4)\n",
            options={'num-workers': '4'},
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader(self.ctx, node):
            return
        keywords = self.ctx.values.keywords_of(node)
        if keywords is None:
            return  # `**options` this module does not show
        workers = keywords.get("num_workers")
        if workers is not None and not is_zero(workers):
            return  # set to something: the user's choice (a variable, a CLI argument)
        if len(positional_args(node)) >= 6:
            return  # num_workers given positionally (6th parameter)
        dataset = dataloader_dataset(node)
        if dataset is not None and self.ctx.values.is_kind(dataset, "tensordataset"):
            return
        fix = None
        if workers is None or keyword_arg(node, "num_workers") is not None:  # (not inside a `**` dictionary)
            expression = str(self.option(NUM_WORKERS))
            imports = ("import os",) if "os." in expression else ()
            fix = set_keyword(
                self.ctx, node, "num_workers", expression, Applicability.UNSAFE,
                f"Load batches in worker processes: `num_workers={expression}`", imports,
            )
        self.report(node, fix=fix)
