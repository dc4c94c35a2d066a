"""GL101 dataloader-serial."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.code_shapes import LOADER_BUILT
from gpulint.linter.analysis.consumption import pipeline_consumed
from gpulint.linter.analysis.facts import ACCELERATOR, ONE_PROCESS_PER_GPU, TORCH
from gpulint.linter.analysis.nodes import is_zero, keyword_arg, positional_args
from gpulint.linter.analysis.pytorch import dataloader_dataset, in_memory_dataset, is_dataloader
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import CUDA_SCRIPT
from gpulint.rules.options import NUM_WORKERS, NUM_WORKERS_PER_RANK

ITERABLE_MESSAGE = (
    "DataLoader over an IterableDataset loads batches in the training process; no fix: the dataset does not split its "
    "items with `get_worker_info()`, so every worker would yield every item"
)

# What the message adds where the call itself sets `num_workers=0`.
EXPLICIT_ZERO_NOTE = " (no fix: the call sets `num_workers=0` itself, a value chosen on purpose)"

# In a module that names no accelerator, what is true of the script: the step waits, not a GPU.
_HOST_MESSAGE = "DataLoader loads batches in the training process (no `num_workers`): each step waits for its batch"


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

    A loader over data already in memory -- a `TensorDataset`, a tensor, a list or `range`,
    Lightning's `RandomDataset` / `WikiText2`, a dataset class (of the module, or of another
    module of the project) whose `__getitem__` indexes tensors it holds, or a list of them -- is
    not reported: indexing a tensor is cheaper than handing batches between processes.  Nor is a
    loader never consumed, or only peeked at once
    (`next(iter(loader))` in a demo), in the function that builds it.  In a module that names no
    accelerator the message says what is true there: each step waits for its batch.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader

    def main():
        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        model = Net().cuda()
        train(model, loader)

    if __name__ == "__main__":
        main()
    ```
    Use instead:
    ```python
    import os

    import torch
    from torch.utils.data import DataLoader

    def main():
        loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
        model = Net().cuda()
        train(model, loader)

    if __name__ == "__main__":
        main()
    ```

    ## Fix (unsafe)
    Sets `num_workers=` to the `num-workers` expression (default `min(8, os.cpu_count() or 1)`) and
    imports `os` when the expression uses it.  Unsafe: with workers, the dataset is copied into
    other processes, so it must be picklable, and per-worker random state and open file handles
    behave differently.

    A `num_workers=0` written in the call is a value its author chose -- an evaluation loader over
    cheap synthetic data, a run kept in one process to debug it -- and is reported with no fix (the
    message says so), as an explicit trainer argument is: set the workers yourself where they pay.

    In a module that runs one process per GPU (it uses `torch.distributed` -- `init_process_group`,
    `DistributedDataParallel`, `DistributedSampler` -- or Accelerate: what `torchrun`, `accelerate
    launch` and `mp.spawn` scripts do), every rank starts its own workers, and the default would
    give each rank the whole node (GL605).  There the default divides the node's cores among its
    ranks: `min(8, max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))`
    (`torchrun` and `accelerate launch` set `LOCAL_WORLD_SIZE`; where it is unset, one rank per
    node is assumed).  A `num-workers` the project sets is written as it is.

    The fix is offered only where workers can start under every start method: the loader is built
    under `if __name__ == "__main__":`, or in a function or class reached from there.  Under
    `spawn` (the default on macOS and Windows) and `forkserver` (Linux, from Python 3.14) each
    worker imports the main module again; training code at module level, as in many tutorials,
    then runs again inside the worker, and the worker it starts fails with "An attempt has been
    made to start a new process before the current process has finished its bootstrapping phase".
    There the finding has no fix: move the training code into a `main()` called under the guard
    first.  Nor is there one when the loader hands its workers a lambda, or a function or class
    defined inside a function, directly or in what its dataset was built from
    (`transforms.Lambda(lambda x: x.mul(255))` in the transforms): under `spawn` they cannot be
    pickled into a worker ("Can't pickle local object").

    A loader over an `IterableDataset` of the module that does not split its items between workers
    (`torch.utils.data.get_worker_info()` in the dataset, or a `worker_init_fn`) is reported with
    that reason and no fix: every worker would yield every item, so each batch would arrive once
    per worker.
    """

    code = "GL101"
    name = "dataloader-serial"
    message = "DataLoader loads batches in the training process (no `num_workers`): the GPU waits for every batch"
    requires = {TORCH}
    tokens = ("DataLoader",)
    triggers = ((LOADER_BUILT,),)  # what it reports: a DataLoader built
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
        # data in memory: tensors, lists, `range`, Lightning's demo datasets, a dataset of tensors
        Valid(
            """
            from lightning.pytorch.demos import WikiText2
            from lightning.pytorch.demos.boring_classes import RandomDataset

            class Tokens(Dataset):
                def __init__(self, n):
                    self.data = torch.randint(0, 100, (n, 128))
                def __getitem__(self, index):
                    return self.data[index], self.data[index]

            a = DataLoader(RandomDataset(32, 64), batch_size=2)
            b = DataLoader(range(100), batch_size=8)
            c = DataLoader(torch.randn(100, 3), batch_size=8)
            d = DataLoader(WikiText2(), batch_size=20)
            e = DataLoader(Tokens(1000), batch_size=20)
            samples = [encode(t) for t in texts]
            f = DataLoader(samples, batch_size=8)
            """,
            header=CUDA_SCRIPT,
        ),
        # under torchrun: a dataset class holding a list of (tensor, tensor) pairs, handed to a
        # function that builds the loader (its parameter annotated `Dataset`)
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader, Dataset
            from torch.utils.data.distributed import DistributedSampler
            from torch.distributed import init_process_group

            class MyTrainDataset(Dataset):
                def __init__(self, size):
                    self.size = size
                    self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]
                def __len__(self):
                    return self.size
                def __getitem__(self, index):
                    return self.data[index]

            def prepare_dataloader(dataset: Dataset, batch_size: int):
                return DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset))

            def main():
                init_process_group(backend="nccl")
                train(prepare_dataloader(MyTrainDataset(2048), 32))

            if __name__ == "__main__":
                main()
            """,
            header=CUDA_SCRIPT,
        ),
        # a loader never consumed, or peeked at once in a demo
        Valid(
            """
            def show():
                demo = DataLoader(images, batch_size=16)
                batch = next(iter(demo))
                print(len(demo))
                unused = DataLoader(images, batch_size=16)
                return batch
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
        # absent or zero workers; set ones (a variable, positionally) and **kwargs are the user's
        # choice; a `num_workers=0` written in the call is reported with no fix: a deliberate value
        # (an evaluation loader over cheap synthetic data, a debugging run), as an explicit trainer
        # argument is
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            if __name__ == "__main__":
                device = torch.device("cuda")
                a = DataLoader(ds, batch_size=32)
                b = DataLoader(ds, batch_size=32, num_workers=0)
                c = DataLoader(ds, batch_size=32, num_workers=4)
                d = DataLoader(ds, batch_size=32, num_workers=args.workers)
                e = DataLoader(ds, 32, True, None, None, 4)
                f = DataLoader(ds, **options)
            """,
            "5:9",
            "6:9",
            messages=(
                "DataLoader loads batches in the training process (no `num_workers`): the GPU waits for every batch",
                "DataLoader loads batches in the training process (no `num_workers`): the GPU waits for every batch"
                + EXPLICIT_ZERO_NOTE,
            ),
            fixed="""
            import os

            import torch
            from torch.utils.data import DataLoader
            if __name__ == "__main__":
                device = torch.device("cuda")
                a = DataLoader(ds, batch_size=32, num_workers=min(8, os.cpu_count() or 1))
                b = DataLoader(ds, batch_size=32, num_workers=0)
                c = DataLoader(ds, batch_size=32, num_workers=4)
                d = DataLoader(ds, batch_size=32, num_workers=args.workers)
                e = DataLoader(ds, 32, True, None, None, 4)
                f = DataLoader(ds, **options)
            """,
        ),
        # aliased imports, in functions and methods the main guard reaches
        Invalid(
            """
            import torch.utils.data as tud
            from torch.utils.data import DataLoader as DL
            x = torch.zeros(1).cuda()
            def loaders():
                return tud.DataLoader(ds)
            class Runner:
                def fit(self):
                    return DL(ds)
            def main():
                Runner().fit(loaders())
            if __name__ == "__main__":
                main()
            """,
            "5:12",
            "8:16",
            fixed="""
            import os

            import torch.utils.data as tud
            from torch.utils.data import DataLoader as DL
            x = torch.zeros(1).cuda()
            def loaders():
                return tud.DataLoader(ds, num_workers=min(8, os.cpu_count() or 1))
            class Runner:
                def fit(self):
                    return DL(ds, num_workers=min(8, os.cpu_count() or 1))
            def main():
                Runner().fit(loaders())
            if __name__ == "__main__":
                main()
            """,
        ),
        # the fix imports os once, in its place among the imports, and keeps comments
        Invalid(
            """
            import sys

            import torch
            from torch.utils.data import DataLoader
            def main():
                device = torch.device("cuda")
                loader = DataLoader(ds, batch_size=32)  # keep me
                train(loader)  # and me
            if __name__ == "__main__":
                main()
            """,
            "7:14",
            fixed="""
            import os
            import sys

            import torch
            from torch.utils.data import DataLoader
            def main():
                device = torch.device("cuda")
                loader = DataLoader(
                    ds, batch_size=32, num_workers=min(8, os.cpu_count() or 1)
                )  # keep me
                train(loader)  # and me
            if __name__ == "__main__":
                main()
            """,
        ),
        # host-side: no accelerator needs to be named (and no GPU is said to wait); a keyword
        # dictionary without workers
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader_kwargs = dict(batch_size=64, shuffle=True)
            loader_kwargs["drop_last"] = True
            if __name__ == "__main__":
                train = DataLoader(ds, **loader_kwargs)
                test = DataLoader(ds, **loader_kwargs, num_workers=0)
            """,
            "5:13",
            "6:12",
            messages=(_HOST_MESSAGE, _HOST_MESSAGE + EXPLICIT_ZERO_NOTE),
            fixed="""
            import os

            from torch.utils.data import DataLoader
            loader_kwargs = dict(batch_size=64, shuffle=True)
            loader_kwargs["drop_last"] = True
            if __name__ == "__main__":
                train = DataLoader(ds, **loader_kwargs, num_workers=min(8, os.cpu_count() or 1))
                test = DataLoader(ds, **loader_kwargs, num_workers=0)
            """,
        ),
        # zero workers inside the dictionary: reported, and no fix (a second `num_workers=` would not run)
        Invalid(
            """
            from torch.utils.data import DataLoader
            kwargs = {"batch_size": 64, "num_workers": 0}
            if __name__ == "__main__":
                loader = DataLoader(ds, **kwargs)
            """,
            "4:14",
        ),
        # one process per GPU (torchrun, DDP): the default divides the node's cores among its
        # ranks; a configured expression is written as it is
        Invalid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            from torch.utils.data import DataLoader
            def main():
                torch.distributed.init_process_group("nccl")
                model = DDP(Net().cuda())
                loader = DataLoader(images, batch_size=32)
                train(model, loader)
            if __name__ == "__main__":
                main()
            """,
            "7:14",
            fixed="""
            import os

            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            from torch.utils.data import DataLoader
            def main():
                torch.distributed.init_process_group("nccl")
                model = DDP(Net().cuda())
                loader = DataLoader(
                    images,
                    batch_size=32,
                    num_workers=min(
                        8,
                        max(
                            1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
                        ),
                    ),
                )
                train(model, loader)
            if __name__ == "__main__":
                main()
            """,
        ),
        Invalid(
            """
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            if __name__ == "__main__":
                dist.init_process_group("nccl")
                loader = DataLoader(ds, batch_size=32)
            """,
            "8:14",
            header=CUDA_SCRIPT,
            fixed="""
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            if __name__ == "__main__":
                dist.init_process_group("nccl")
                loader = DataLoader(ds, batch_size=32, num_workers=4)
            """,
            options={"num-workers": "4"},
        ),
        # the configured expression
        Invalid(
            """
            if __name__ == "__main__":
                loader = DataLoader(ds)
            """,
            "5:14",
            header=CUDA_SCRIPT,
            fixed="""
            if __name__ == "__main__":
                loader = DataLoader(ds, num_workers=4)
            """,
            options={"num-workers": "4"},
        ),
        # workers could not start: training at module level, a function nothing calls under the
        # guard, things that cannot be pickled into a worker
        Invalid(
            """
            loader = DataLoader(ds, batch_size=32)
            def helper():
                return DataLoader(ds)
            def main():
                def collate(batch):
                    return batch
                a = DataLoader(ds, collate_fn=lambda b: b)
                b = DataLoader(ds, collate_fn=collate)
                train(a, b)
            main()
            """,
            "4:10",
            "6:12",
            "10:9",
            "11:9",
            header=CUDA_SCRIPT,
        ),
        # a dataset whose transforms hold a lambda: it cannot be pickled into a worker under `spawn`
        Invalid(
            """
            from torchvision import datasets, transforms
            def main():
                transform = transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda x: x.mul(255))])
                train_dataset = datasets.ImageFolder("images", transform)
                loader = DataLoader(train_dataset, batch_size=4)
                for batch in loader:
                    step(batch)
            if __name__ == "__main__":
                main()
            """,
            "8:14",
            header=CUDA_SCRIPT,
        ),
        # an IterableDataset that every worker would replay in full; a sharded one is fixed
        Invalid(
            """
            from torch.utils.data import IterableDataset, get_worker_info
            class Stream(IterableDataset):
                def __iter__(self):
                    yield from range(10)
            class Sharded(Stream):
                def __iter__(self):
                    info = get_worker_info()
                    yield from range(info.id if info else 0, 10, info.num_workers if info else 1)
            if __name__ == "__main__":
                stream = Stream()
                a = DataLoader(stream)
                b = DataLoader(Sharded())
            """,
            "14:9",
            "15:9",
            header=CUDA_SCRIPT,
            fixed="""
            from torch.utils.data import IterableDataset, get_worker_info
            class Stream(IterableDataset):
                def __iter__(self):
                    yield from range(10)
            class Sharded(Stream):
                def __iter__(self):
                    info = get_worker_info()
                    yield from range(info.id if info else 0, 10, info.num_workers if info else 1)
            if __name__ == "__main__":
                stream = Stream()
                a = DataLoader(stream)
                b = DataLoader(Sharded(), num_workers=4)
            """,
            options={"num-workers": "4"},
            messages=(
                ITERABLE_MESSAGE,
                "DataLoader loads batches in the training process (no `num_workers`): the GPU waits for every batch",
            ),
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader(self.ctx, node) or not pipeline_consumed(self.ctx, node):
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
        if dataset is not None and in_memory_dataset(self.ctx, dataset):
            return
        start = self.ctx.workers
        if start.unsharded_iterable(node, dataset):
            self.report(node, message=ITERABLE_MESSAGE)
            return
        if not start.runs_as_main_program(node) or start.unpicklable(node):
            self.report(node)  # workers could not start here (see the docs): no fix
            return
        message = self.message if ACCELERATOR.holds(self.ctx) else _HOST_MESSAGE
        if workers is not None:
            # `num_workers=0` written in the call (a deliberate value: no fix), or inside a `**`
            # dictionary (where a second `num_workers=` would not run)
            if keyword_arg(node, "num_workers") is not None:
                message += EXPLICIT_ZERO_NOTE
            self.report(node, message=message)
            return
        expression, description = self._workers_expression()
        imports = ("import os",) if "os." in expression else ()
        fix = set_keyword(self.ctx, node, "num_workers", expression, Applicability.UNSAFE, description, imports)
        self.report(node, message=message, fix=fix)

    def _workers_expression(self) -> tuple[str, str]:
        """The `num_workers=` value the fix writes, and its description: the `num-workers` option
        when the project sets it; else, in a module that runs one process per GPU (every rank
        starts its own workers, GL605), the node's cores divided among its ranks."""
        if NUM_WORKERS.key not in self.ctx.options and ONE_PROCESS_PER_GPU.holds(self.ctx):
            return NUM_WORKERS_PER_RANK, (
                "Load batches in worker processes, the node's CPU cores divided among its ranks: "
                f"`num_workers={NUM_WORKERS_PER_RANK}`"
            )
        expression = str(self.option(NUM_WORKERS))
        return expression, f"Load batches in worker processes: `num_workers={expression}`"
