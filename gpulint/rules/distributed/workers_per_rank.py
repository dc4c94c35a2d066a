"""GL605 workers-per-rank."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.code_shapes import LOADER_BUILT
from gpulint.linter.analysis.facts import ONE_PROCESS_PER_GPU, TORCH
from gpulint.linter.analysis.loops import LOOP_TYPES
from gpulint.linter.analysis.nodes import dotted_name, has_star_kwargs, keyword_arg
from gpulint.linter.analysis.pytorch import is_dataloader
from gpulint.linter.analysis.vocabulary import CPU_AFFINITY_CALL, CPU_COUNT_CALLS
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.options import CORES_PER_RANK

_CPU_COUNT = CPU_COUNT_CALLS | {CPU_AFFINITY_CALL}


class WorkersPerRank(Rule):
    """
    ## What it finds
    `DataLoader(num_workers=os.cpu_count())` -- or `multiprocessing.cpu_count()`,
    `len(os.sched_getaffinity(0))`, directly or through a variable -- in a module that runs one
    process per GPU (torch.distributed, DDP, Accelerate).  A count divided by something (the ranks
    per node) or capped with `min(...)` is not reported.

    ## Why it is slow
    Every rank starts that many loader workers: with 8 GPUs on a 64-core node that is 512 worker
    processes on 64 cores.  They fight for the CPU, the caches and memory bandwidth (each worker
    also holds a copy of the dataset object), and input loading gets slower, not faster.

    ## Example
    ```python
    import os

    from torch.utils.data import DataLoader, DistributedSampler

    loader = DataLoader(train_set, sampler=DistributedSampler(train_set), num_workers=os.cpu_count())
    ```
    Use instead:
    ```python
    import os

    from torch.utils.data import DataLoader, DistributedSampler

    workers = (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    loader = DataLoader(train_set, sampler=DistributedSampler(train_set), num_workers=workers)
    ```

    ## Fix (unsafe)
    Divides the count between the ranks of the node:
    `num_workers=max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))`
    (`torchrun` sets `LOCAL_WORLD_SIZE`).  Offered only when the `num_workers=` value itself holds
    the count; an import the old count used and nothing else does (`from multiprocessing import
    cpu_count`) is dropped.  Unsafe: it changes how many worker processes load data.
    """

    code = "GL605"
    name = "workers-per-rank"
    message = (
        "`num_workers` = every CPU core, in every rank: the ranks of a node oversubscribe its CPUs; "
        "divide by the ranks per node"
    )
    requires = {TORCH, ONE_PROCESS_PER_GPU}
    tokens = ("cpu_count", "sched_getaffinity")
    triggers = ((LOADER_BUILT,), ("num_workers",))  # what it reports: a DataLoader built with `num_workers=`
    fix_applicability = Applicability.UNSAFE

    REPLACEMENT = CORES_PER_RANK

    VALID = [
        # not distributed: one process may take every core
        Valid(
            """
            import os
            import multiprocessing as mp
            from torch.utils.data import DataLoader as DL
            a = DL(ds, num_workers=os.cpu_count(), pin_memory=True)
            b = DL(ds, num_workers=mp.cpu_count() - 1, pin_memory=True)
            workers = len(os.sched_getaffinity(0))
            c = DL(ds, num_workers=workers, pin_memory=True)
            """,
        ),
        # divided, capped, literal, a variable, **kwargs
        Valid(
            """
            import os
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            a = DataLoader(ds, num_workers=os.cpu_count() // dist.get_world_size())
            b = DataLoader(ds, num_workers=min(8, os.cpu_count()))
            c = DataLoader(ds, num_workers=4)
            d = DataLoader(ds, num_workers=args.workers)
            e = DataLoader(ds, **kwargs)
            """,
        ),
    ]
    INVALID = [
        # every core, however counted; through a variable (no fix); `mp`, used no more, goes
        Invalid(
            """
            import os
            import multiprocessing as mp
            import torch.distributed as dist
            from torch.utils.data import DataLoader as DL
            a = DL(ds, num_workers=os.cpu_count(), pin_memory=True)
            b = DL(ds, num_workers=mp.cpu_count() - 1, pin_memory=True)
            workers = len(os.sched_getaffinity(0))
            c = DL(ds, num_workers=workers, pin_memory=True)
            """,
            "5:5",
            "6:5",
            "8:5",
            fixed="""
            import os
            import torch.distributed as dist
            from torch.utils.data import DataLoader as DL
            a = DL(
                ds,
                num_workers=max(
                    1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
                ),
                pin_memory=True,
            )
            b = DL(
                ds,
                num_workers=max(
                    1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
                ),
                pin_memory=True,
            )
            workers = len(os.sched_getaffinity(0))
            c = DL(ds, num_workers=workers, pin_memory=True)
            """,
        ),
        # the fix divides between the local ranks and keeps the layout
        Invalid(
            """
            import os
            import torch.distributed as dist
            from torch.utils.data import DataLoader

            loader = DataLoader(
                ds,
                num_workers=os.cpu_count(),  # all of them
                pin_memory=True,
            )
            """,
            "5:10",
            fixed="""
            import os
            import torch.distributed as dist
            from torch.utils.data import DataLoader

            loader = DataLoader(
                ds,
                num_workers=max(
                    1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
                ),  # all of them
                pin_memory=True,
            )
            """,
        ),
        # the CPU-count function imported by name goes with its last use
        Invalid(
            """
            from multiprocessing import cpu_count

            import torch.distributed as dist
            from torch.utils.data import DataLoader

            loader = DataLoader(ds, num_workers=cpu_count())
            """,
            "6:10",
            fixed="""
            import os

            import torch.distributed as dist
            from torch.utils.data import DataLoader

            loader = DataLoader(
                ds,
                num_workers=max(
                    1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
                ),
            )
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader(self.ctx, node) or has_star_kwargs(node):
            return
        workers = keyword_arg(node, "num_workers")
        if workers is None:
            return
        value = workers.value
        if self._all_cores(value):
            fix = Fix(
                Applicability.UNSAFE,
                "Divide the CPU cores between the ranks of the node",
                {value: cst.parse_expression(self.REPLACEMENT)},
                ("import os",),
                # `from multiprocessing import cpu_count` goes with its last use
                unbinds=_called_roots(value),
            )
            self.report(node, fix=fix)
            return
        key = dotted_name(value)
        origins = self.ctx.values.assigned.get(key, ()) if key else ()
        if origins and all(self._all_cores(origin) for origin in origins):
            self.report(node)

    def _all_cores(self, value: cst.BaseExpression) -> bool:
        """An expression holding a CPU-count call, not divided and not capped by `min`."""
        found = False
        stack: list[cst.CSTNode] = [value]
        while stack:
            current = stack.pop()
            if isinstance(current, cst.BinaryOperation) and isinstance(
                current.operator, (cst.Divide, cst.FloorDivide, cst.RightShift)
            ):
                return False
            if isinstance(current, cst.Call):
                qualified = self.ctx.call_qualified_name(current)
                if isinstance(current.func, cst.Name) and current.func.value == "min":
                    return False
                if qualified in _CPU_COUNT:
                    found = True
            if isinstance(current, (cst.Lambda, *LOOP_TYPES)):
                return False
            stack.extend(current.children)
        return found


def _called_roots(value: cst.BaseExpression) -> tuple[str, ...]:
    """The names the calls in `value` start from (`cpu_count` in `cpu_count()`, `mp` in
    `mp.cpu_count() - 1`): the replacement may leave their imports unused."""
    roots = set()
    stack: list[cst.CSTNode] = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            name = dotted_name(current.func)
            if name is not None:
                roots.add(name.split(".")[0])
        stack.extend(current.children)
    return tuple(sorted(roots))
