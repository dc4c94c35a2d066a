"""GL103 dataloader-respawn."""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.code_shapes import LOADER_BUILT
from gpulint.linter.analysis.facts import TORCH
from gpulint.linter.analysis.loops import is_method, qualname
from gpulint.linter.analysis.nodes import dotted_name, is_false, is_zero, keyword_arg, positional_args
from gpulint.linter.analysis.pytorch import dataloader_dataset, is_dataloader
from gpulint.linter.analysis.values import ValueOrigins, target_key
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.fix.builders import persistent_workers_value, set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import CUDA_SCRIPT

# Builtins that take a loader without iterating it.
_NOT_ITERATING = frozenset({"print", "len", "isinstance", "type", "id", "repr", "str", "getattr", "hasattr", "setattr"})
# Methods Lightning (and its DataModules) call once, then iterate every epoch.
_EPOCH_LOADER_HOOKS = frozenset({"train_dataloader", "val_dataloader"})
# More samples than any run draws: a sampler this long is never exhausted.
_ENDLESS_SAMPLES = 10**8
_DATASET_MUTATORS = frozenset({"set_epoch", "reshuffle", "resample", "update", "set_stage", "set_difficulty"})


# `DataLoader(persistent_workers=)` came with PyTorch 1.7.
_PERSISTENT_WORKERS_SINCE = (1, 7)


class DataLoaderRespawn(Rule):
    """
    ## What it finds
    A `DataLoader` with worker processes (`num_workers` set and not 0) and without
    `persistent_workers=True`, whose batches are iterated again and again: in a loop inside an
    epoch loop, by a function called from a loop, passed to a call inside a loop, or returned by
    `train_dataloader()` / `val_dataloader()` (Lightning iterates those every epoch) -- also a
    loader a function or method of the module builds and returns (`def make_loader(ds): return
    DataLoader(...)`), followed to the name its caller keeps it in.  A function a loop calls that
    builds its loader on every call, itself or through such a factory into a name of its own
    (`data = self.load_data(files)`, once per split), iterates a new loader each time: its workers
    start once for their one pass, and it is not reported.  The workers may be any value
    that is not 0: a literal, a command line's, a configuration's attribute
    (`num_workers=self.config.workers`).  Keywords may come through a `**kwargs` dictionary built
    in the module.  The rule is about the host: it applies whether or not the module names an
    accelerator.  A run of a single epoch (Lightning's `max_epochs=1`, an epoch loop over
    `range(1)`, or over `range(args.epochs)` where `--epochs` defaults to 1, declared in the module
    or by a function of another module it calls for its parser: `parser = get_argument_parser()`)
    starts its workers once, and is not reported.  Where the workers come from a command-line option that defaults to
    0 (`num_workers=args.dataloader_num_workers`), none start unless the run asks for them: the
    finding is a hint, held back unless hints are shown.

    ## Why it is slow
    Without persistent workers, every `for batch in loader` starts `num_workers` new processes,
    each of which re-imports and unpickles the dataset (and its transforms) before the first batch
    arrives, and tears them down at the end of the epoch.  With 8 workers and a heavy dataset object
    that is seconds to tens of seconds of an idle GPU at the start of every epoch (and of every
    validation pass), repeated for the whole run.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, num_workers=8, pin_memory=True)
    for epoch in range(epochs):
        for x, y in loader:
            train_step(x.cuda(), y.cuda())
    ```
    Use instead:
    ```python
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, num_workers=8, pin_memory=True, persistent_workers=True)
    for epoch in range(epochs):
        for x, y in loader:
            train_step(x.cuda(), y.cuda())
    ```

    ## Fix (safe)
    Adds `persistent_workers=True` when `num_workers` is positive on every run (a positive
    literal, `multiprocessing.cpu_count()`, or an expression such as GL101's `min(8, os.cpu_count()
    or 1)`), and
    `persistent_workers=<num_workers> > 0` for any other value (`persistent_workers=True` with
    zero workers raises "persistent_workers option needs num_workers > 0": `--workers 0` must keep
    working).  Batches, their order and the sampler's shuffling are the same (the sampler runs in
    the main process, so `sampler.set_epoch()` still works).  No fix where the module
    changes the dataset between epochs (`dataset.set_epoch(...)`, or assigns its attributes in a
    loop): persistent workers keep the copy they started with and would not see the change; none
    either where the project supports a PyTorch older than 1.7, which lacks the keyword.  The fix
    is unsafe when
    `num_workers` is an expression that is not a plain name (it is evaluated twice).  The `=` is
    spaced as the call's own keywords are (`num_workers = 4` gets `persistent_workers = True`).

    Workers that come through a `**` dictionary may be there on some paths only (the common
    `if use_cuda: train_kwargs.update({"num_workers": 1, ...})`): the fix asks the dictionary,
    `persistent_workers=train_kwargs.get("num_workers", 0) > 0`, which holds on every path, even
    where the workers are a literal.  With several `**` dictionaries, or one that is not a name,
    it writes `persistent_workers=True` and is unsafe.
    """

    code = "GL103"
    name = "dataloader-respawn"
    message = "DataLoader workers are started again every epoch; set `persistent_workers=True`"
    requires = {TORCH}
    tokens = ("DataLoader",)
    triggers = ((LOADER_BUILT,),)  # what it reports: a DataLoader built
    site_triggers = 1  # (here: the module's own import table names the call a DataLoader)
    fix_applicability = Applicability.SAFE

    VALID = [
        # one epoch unless the command line asks for more
        Valid(
            """
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--epochs", type=int, default=1)
            args = parser.parse_args()
            loader = DataLoader(ds, num_workers=4, pin_memory=True)
            for epoch in range(args.epochs):
                for x, y in loader:
                    model(x.to(device)).sum().backward()
            """,
            header=CUDA_SCRIPT,
        ),
        # a single epoch: Lightning's `max_epochs=1`, an epoch loop that runs once
        Valid(
            """
            import lightning as L

            loader = DataLoader(ds, num_workers=4, pin_memory=True)
            trainer = L.Trainer(max_epochs=1)
            trainer.fit(model, loader)
            for epoch in range(1):
                for x, y in loader:
                    trainer.validate(model, loader)
            """,
            header=CUDA_SCRIPT,
        ),
        Valid(
            """
            epochs = 1
            loader = DataLoader(ds, num_workers=4, pin_memory=True)
            for epoch in range(epochs):
                for x, y in loader:
                    model(x.to(device)).sum().backward()
            """,
            header=CUDA_SCRIPT,
        ),
        Valid(
            """
            loader = DataLoader(ds, num_workers=4, pin_memory=True, persistent_workers=True)
            for epoch in range(10):
                for x, y in loader:
                    loss = model(x.to(device, non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
            """,
            header=CUDA_SCRIPT,
        ),
        # no workers: GL101's
        Valid(
            """
            loader = DataLoader(ds, num_workers=0, pin_memory=True)
            for epoch in range(10):
                for x, y in loader:
                    loss = model(x.to(device, non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
            """,
            header=CUDA_SCRIPT,
        ),
        # a single pass
        Valid(
            """
            loader = DataLoader(ds, num_workers=4)
            for x, y in loader:
                model(x).sum().backward()
            """,
            header=CUDA_SCRIPT,
        ),
        # a new loader each epoch
        Valid(
            """
            for epoch in range(10):
                loader = DataLoader(ds, num_workers=4)
                for x in loader:
                    model(x).sum().backward()
            """,
            header=CUDA_SCRIPT,
        ),
        # a loader the per-epoch function builds itself is a new one on every call
        Valid(
            """
            def validate(model, ds):
                loader = DataLoader(ds, num_workers=2)
                for x in loader:
                    model(x)

            for epoch in range(10):
                validate(model, val_set)
            """,
            header=CUDA_SCRIPT,
        ),
        # nor is one it gets from a factory: each split's call builds and iterates its own loader
        Valid(
            """
            class Featurizer:
                def load_data(self, files):
                    loader = DataLoader(FilesDataset(files), batch_size=32, num_workers=8)
                    return loader

                def iterate(self, files):
                    data = self.load_data(files)
                    for batch in data:
                        yield model(batch.cuda())

                def process_splits(self):
                    for split in self.splits:
                        for features in self.iterate(self.files(split)):
                            write(features)
            """,
            header=CUDA_SCRIPT,
        ),
        # a sampler that is never exhausted: one pass is the whole run
        Valid(
            """
            sampler = torch.utils.data.RandomSampler(ds, replacement=True, num_samples=int(1e10))
            loader = DataLoader(ds, sampler=sampler, num_workers=4)
            it = iter(loader)
            while True:
                try:
                    batch = next(it)
                except StopIteration:
                    it = iter(loader)
                    batch = next(it)
                model(batch).sum().backward()
                optimizer.step()
            """,
            header=CUDA_SCRIPT,
        ),
        # print and len do not iterate
        Valid(
            """
            loader = DataLoader(ds, num_workers=4)
            for epoch in range(3):
                print(len(loader), loader)
            """,
            header=CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        # workers from an option that defaults to 0: a hint (no workers start unless asked for)
        Invalid(
            """
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--dataloader-num-workers", type=int, default=0)
            args = parser.parse_args()
            loader = DataLoader(ds, num_workers=args.dataloader_num_workers, pin_memory=True)
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device)).sum().backward()
            """,
            "8:10",
            header=CUDA_SCRIPT,
            hints=("`args.dataloader_num_workers` defaults to 0: no workers start unless the run asks for them",),
            fixed="""
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--dataloader-num-workers", type=int, default=0)
            args = parser.parse_args()
            loader = DataLoader(
                ds,
                num_workers=args.dataloader_num_workers,
                pin_memory=True,
                persistent_workers=args.dataloader_num_workers > 0,
            )
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device)).sum().backward()
            """,
        ),
        # a loader a factory function (or method) of the module returns, iterated every epoch by
        # its caller; workers read from a configuration's attribute
        Invalid(
            """
            def make_loader(ds):
                return DataLoader(ds, batch_size=32, num_workers=4, pin_memory=True)

            class Trainer:
                def __init__(self, config):
                    self.config = config
                def loader(self, ds):
                    return DataLoader(ds, batch_size=32, num_workers=self.config.workers)
                def fit(self, ds, epochs):
                    self.train_loader = self.loader(ds)
                    for epoch in range(epochs):
                        for x, y in self.train_loader:
                            step(x.to(device), y.to(device))

            def main():
                loader = make_loader(train_set)
                for epoch in range(10):
                    for x, y in loader:
                        step(x.to(device), y.to(device))
            """,
            "5:12",
            "11:16",
            header=CUDA_SCRIPT,
            fixed="""
            def make_loader(ds):
                return DataLoader(
                    ds, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True
                )

            class Trainer:
                def __init__(self, config):
                    self.config = config
                def loader(self, ds):
                    return DataLoader(
                        ds,
                        batch_size=32,
                        num_workers=self.config.workers,
                        persistent_workers=self.config.workers > 0,
                    )
                def fit(self, ds, epochs):
                    self.train_loader = self.loader(ds)
                    for epoch in range(epochs):
                        for x, y in self.train_loader:
                            step(x.to(device), y.to(device))

            def main():
                loader = make_loader(train_set)
                for epoch in range(10):
                    for x, y in loader:
                        step(x.to(device), y.to(device))
            """,
        ),
        # iterated every epoch
        Invalid(
            """
            loader = DataLoader(ds, num_workers=4, pin_memory=True)
            for epoch in range(10):
                for x, y in loader:
                    loss = model(x.to(device, non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
            """,
            "4:10",
            header=CUDA_SCRIPT,
            fixed="""
            loader = DataLoader(ds, num_workers=4, pin_memory=True, persistent_workers=True)
            for epoch in range(10):
                for x, y in loader:
                    loss = model(x.to(device, non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # a variable worker count
        Invalid(
            """
            loader = DataLoader(ds, num_workers=args.workers, pin_memory=True)
            for epoch in range(10):
                for x, y in loader:
                    loss = model(x.to(device, non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
            """,
            "4:10",
            header=CUDA_SCRIPT,
            fixed="""
            loader = DataLoader(
                ds, num_workers=args.workers, pin_memory=True, persistent_workers=args.workers > 0
            )
            for epoch in range(10):
                for x, y in loader:
                    loss = model(x.to(device, non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # an expression: guarded too, and unsafe (it is evaluated twice)
        Invalid(
            """
            loader = DataLoader(ds, num_workers=int(opt.workers))
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            "4:10",
            header=CUDA_SCRIPT,
            fixed="""
            loader = DataLoader(
                ds, num_workers=int(opt.workers), persistent_workers=int(opt.workers) > 0
            )
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            applicability=Applicability.UNSAFE,
        ),
        # a count positive on every run (GL101's default, the usable cores): `True`, safe
        Invalid(
            """
            import os
            loader = DataLoader(ds, num_workers=min(8, os.cpu_count() or 1))
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            cores = DataLoader(ds, num_workers=len(os.sched_getaffinity(0)))
            for epoch in range(10):
                for x, y in cores:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            "5:10",
            "9:9",
            header=CUDA_SCRIPT,
            fixed="""
            import os
            loader = DataLoader(
                ds, num_workers=min(8, os.cpu_count() or 1), persistent_workers=True
            )
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            cores = DataLoader(
                ds, num_workers=len(os.sched_getaffinity(0)), persistent_workers=True
            )
            for epoch in range(10):
                for x, y in cores:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
        ),
        # `os` that is not the os module: its count is not trusted
        Invalid(
            """
            loader = DataLoader(ds, num_workers=os.cpu_count() or 1)
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            "4:10",
            header=CUDA_SCRIPT,
            fixed="""
            loader = DataLoader(
                ds, num_workers=os.cpu_count() or 1, persistent_workers=(os.cpu_count() or 1) > 0
            )
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            applicability=Applicability.UNSAFE,
        ),
        # multiprocessing's CPU count is never zero nor None: no comparison; the `=` is spaced as the
        # call's own keywords are
        Invalid(
            """
            from multiprocessing import cpu_count
            loader = DataLoader(ds, batch_size = 32, num_workers = cpu_count())
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            "5:10",
            header=CUDA_SCRIPT,
            fixed="""
            from multiprocessing import cpu_count
            loader = DataLoader(
                ds, batch_size = 32, num_workers = cpu_count(), persistent_workers = True
            )
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
        ),
        # `max(0, n)` may be zero: compared, not assumed
        Invalid(
            """
            loader = DataLoader(ds, num_workers=max(0, n))
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            "4:10",
            header=CUDA_SCRIPT,
            fixed="""
            loader = DataLoader(ds, num_workers=max(0, n), persistent_workers=max(0, n) > 0)
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            applicability=Applicability.UNSAFE,
        ),
        # host-side (no accelerator named); workers from an attribute: the fix keeps zero workers working
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            class Data:
                def val_dataloader(self):
                    return DataLoader(self.val, num_workers=self.workers)
            """,
            "6:16",
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            class Data:
                def val_dataloader(self):
                    return DataLoader(
                        self.val, num_workers=self.workers, persistent_workers=self.workers > 0
                    )
            """,
        ),
        # workers through a keyword dictionary: the dictionary is asked at run time
        Invalid(
            """
            class Data:
                def train_dataloader(self):
                    kwargs = {"batch_size": 8, "num_workers": self.workers}
                    return DataLoader(self.train, **kwargs)
            """,
            "7:16",
            header=CUDA_SCRIPT,
            fixed="""
            class Data:
                def train_dataloader(self):
                    kwargs = {"batch_size": 8, "num_workers": self.workers}
                    return DataLoader(
                        self.train, **kwargs, persistent_workers=kwargs.get("num_workers", 0) > 0
                    )
            """,
        ),
        # workers added on the accelerator branch only: `True` would raise on a CPU-only machine
        Invalid(
            """
            train_kwargs = {"batch_size": 32}
            if use_accel:
                train_kwargs.update({"num_workers": 1, "pin_memory": True, "shuffle": True})
            loader = DataLoader(ds, **train_kwargs)
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            "7:10",
            header=CUDA_SCRIPT,
            fixed="""
            train_kwargs = {"batch_size": 32}
            if use_accel:
                train_kwargs.update({"num_workers": 1, "pin_memory": True, "shuffle": True})
            loader = DataLoader(
                ds, **train_kwargs, persistent_workers=train_kwargs.get("num_workers", 0) > 0
            )
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
        ),
        # two dictionaries: which one holds the workers is not known; `True`, unsafe
        Invalid(
            """
            base = {"batch_size": 32}
            extra = {"num_workers": 2}
            loader = DataLoader(ds, **base, **extra)
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            "6:10",
            header=CUDA_SCRIPT,
            fixed="""
            base = {"batch_size": 32}
            extra = {"num_workers": 2}
            loader = DataLoader(ds, **base, **extra, persistent_workers=True)
            for epoch in range(10):
                for x, y in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
            """,
            applicability=Applicability.UNSAFE,
        ),
        # iterated by a function called from a loop
        Invalid(
            """
            class Runner:
                def __init__(self):
                    self.loader = DataLoader(ds, num_workers=4)
                def train_epoch(self):
                    for batch in self.loader:
                        self.model(batch).sum().backward()
                def fit(self):
                    for epoch in range(3):
                        self.train_epoch()
            """,
            "6:23",
            header=CUDA_SCRIPT,
            fixed="""
            class Runner:
                def __init__(self):
                    self.loader = DataLoader(ds, num_workers=4, persistent_workers=True)
                def train_epoch(self):
                    for batch in self.loader:
                        self.model(batch).sum().backward()
                def fit(self):
                    for epoch in range(3):
                        self.train_epoch()
            """,
        ),
        # passed to a call inside a loop
        Invalid(
            """
            val_loader = DataLoader(ds, num_workers=4)
            for epoch in range(3):
                acc = evaluate(model, val_loader)
                print(len(val_loader))
            """,
            "4:14",
            header=CUDA_SCRIPT,
            fixed="""
            val_loader = DataLoader(ds, num_workers=4, persistent_workers=True)
            for epoch in range(3):
                acc = evaluate(model, val_loader)
                print(len(val_loader))
            """,
        ),
        # returned by a Lightning hook that is called every epoch
        Invalid(
            """
            class Data:
                def train_dataloader(self):
                    return DataLoader(self.train, num_workers=8)
                def test_dataloader(self):
                    return DataLoader(self.test, num_workers=8)
            """,
            "6:16",
            header=CUDA_SCRIPT,
            fixed="""
            class Data:
                def train_dataloader(self):
                    return DataLoader(self.train, num_workers=8, persistent_workers=True)
                def test_dataloader(self):
                    return DataLoader(self.test, num_workers=8)
            """,
        ),
        # the dataset changes between epochs (a method, or an attribute the training loop
        # assigns every step): persistent workers would keep their first copy, so no fix
        Invalid(
            """
            loader = DataLoader(ds, num_workers=4)
            for epoch in range(10):
                ds.set_epoch(epoch)
                for x in loader:
                    model(x).sum().backward()
            train_loader = DataLoader(train_dataset, num_workers=4)
            for epoch in range(10):
                for step, x in enumerate(train_loader):
                    train_dataset.prop_tokens_to_load = step / 100
                    model(x).sum().backward()
            """,
            "4:10",
            "9:16",
            header=CUDA_SCRIPT,
            messages=(
                "DataLoader workers are started again every epoch; set `persistent_workers=True` (no fix: the code "
                "changes the loader's dataset between epochs)",
            )
            * 2,
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.loaders: list[tuple[cst.Call, str | None, cst.BaseExpression, dict[str, cst.BaseExpression]]] = []
        self.fors: list[cst.For] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader(self.ctx, node):
            return
        keywords = self.ctx.values.keywords_of(node)
        if keywords is None:
            return  # `**options` this module does not show
        workers = _num_workers(node, keywords)
        if workers is None or is_zero(workers):
            return  # GL101's finding: no workers to keep
        persistent = keywords.get("persistent_workers")
        if persistent is not None and not is_false(persistent):
            return
        if self.ctx.in_loop(node):
            return  # a new loader each time round: keeping its workers would not help
        if _never_exhausted(keywords.get("sampler"), self.ctx.values):
            return  # its one pass is the whole run: workers start once
        self.loaders.append((node, self._binding_key(node), workers, keywords))

    def visit_For(self, node: cst.For) -> None:
        self.fors.append(node)

    def finish(self) -> None:
        if self.loaders and self.ctx.loaders.single_epoch:
            return  # one epoch (`max_epochs=1`, `for epoch in range(1)`): the workers start once
        for call, key, workers, keywords in self.loaders:
            if not self._reiterated(call, key):
                continue
            if self._dataset_changes(call):
                # Persistent workers keep the copy of the dataset they started with: the change
                # the loop makes between epochs would never reach them.
                message = f"{self.message} (no fix: the code changes the loader's dataset between epochs)"
                self.report(call, message=message)
                continue
            hint = None
            if self.ctx.loaders.literal_value(workers) == 0:
                # `num_workers=args.workers` whose option defaults to 0: no workers unless asked for
                hint = f"`{self.ctx.code(workers)}` defaults to 0: no workers start unless the run asks for them"
            self.report(call, fix=self._fix(call, workers, keywords), hint=hint)

    def _binding_key(self, node: cst.CSTNode) -> str | None:
        """`loader` or `self.loader` when the call is the whole right side of an assignment."""
        parent = self.ctx.parent(node)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            target = parent.targets[0].target if isinstance(parent, cst.Assign) else parent.target
            return target_key(target)
        return None

    def _reiterated(self, call: cst.Call, key: str | None) -> bool:
        if self._returned_to_an_epoch_loop(call, key):
            return True
        if key is None:
            parent = self.ctx.parent(call)
            function = self.ctx.enclosing_function(call)
            if isinstance(parent, cst.Return) and function is not None and function.name.value in _EPOCH_LOADER_HOOKS:
                return True
        elif self._key_reiterated(call, key):
            return True
        # A loader a function of the module returns (`def make_loader(ds): return DataLoader(...)`):
        # what its callers here do with it.
        return any(self._key_reiterated(call, received) for received in self._factory_results(call, key))

    def _factory_results(self, call: cst.Call, key: str | None) -> list[str]:
        """The names the module's calls of the function around `call` store its result in, when
        the function returns the loader (`loader = make_loader(ds)`, `self.train_loader =
        self.loader(ds)`)."""
        function = self.ctx.enclosing_function(call)
        if function is None:
            return []
        returns_loader = any(
            node.value is not None
            and (node.value is call or (key is not None and target_key(node.value) == key))
            and self.ctx.enclosing_function(node) is function
            for node in self.ctx.index.nodes("Return")
        )
        if not returns_loader:
            return []
        name = f"self.{function.name.value}" if is_method(self.ctx.index, function) else function.name.value
        received = []
        for assign in self.ctx.index.nodes("Assign"):
            value = assign.value
            if isinstance(value, cst.Call) and self.ctx.values.function_key(value) == name:
                received += [k for t in assign.targets if (k := target_key(t.target)) is not None and k != key]
        return received

    def _key_reiterated(self, call: cst.Call, key: str) -> bool:
        """Whether the loader under `key` is iterated again and again: in a loop inside a loop, in
        a function a loop calls, or handed to a call inside a loop."""
        for loop in self.fors:
            if not _mentions(loop.iter, key):
                continue
            if self.ctx.in_loop(loop):
                return True
            function = self.ctx.enclosing_function(loop)
            if function is None or function.name.value not in self._functions_called_in_loops:
                continue
            # A loader the function builds itself, or gets from a factory into a name of its
            # own, is a new one on every call: each call's workers start once for its one pass.
            if self.ctx.enclosing_function(call) is not function and not self._built_per_call(function, key):
                return True
        for other in self.ctx.index.nodes("Call"):
            name = (dotted_name(other.func) or "").rsplit(".", 1)[-1]
            if name in _NOT_ITERATING or other is call:
                continue
            if any(target_key(arg.value) == key for arg in other.args) and self.ctx.in_loop(other):
                return True
        return False

    def _built_per_call(self, function: cst.FunctionDef, key: str) -> bool:
        """Whether `key` is a local name of `function` given the result of a call there (`data =
        self.load_data(files)`): every call of the function iterates a loader of its own."""
        if "." in key or any(
            isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == key for n in node.names)
            for node in nodes_under(function)
        ):
            return False
        return any(
            isinstance(assign.value, cst.Call)
            and self.ctx.enclosing_function(assign) is function
            and any(target_key(target.target) == key for target in assign.targets)
            for assign in self.ctx.index.nodes("Assign")
        )

    def _returned_to_an_epoch_loop(self, call: cst.Call, key: str | None) -> bool:
        """Whether the function around the loader returns it (alone, or at a position of a tuple)
        to another module of the project that iterates it again and again (the project index)."""
        reiterated = self.ctx.project.reiterated
        function = self.ctx.enclosing_function(call)
        if not reiterated or function is None:
            return False
        name = qualname(self.ctx.index, function)
        positions = {position for owner, position in reiterated if owner == name}
        if not positions:
            return False
        for node in self.ctx.index.nodes("Return"):
            if node.value is None or self.ctx.enclosing_function(node) is not function:
                continue
            returned = node.value
            items = (
                [(i, el.value) for i, el in enumerate(returned.elements)]
                if isinstance(returned, cst.Tuple)
                else [(None, returned)]
            )
            for position, value in items:
                if position in positions and (value is call or (key is not None and target_key(value) == key)):
                    return True
        return False

    @cached_property
    def _functions_called_in_loops(self) -> set[str]:
        called = set()
        for other in self.ctx.index.nodes("Call"):
            func = other.func
            name = (
                func.value
                if isinstance(func, cst.Name)
                else func.attr.value
                if isinstance(func, cst.Attribute)
                else None
            )
            if name and self.ctx.in_loop(other):
                called.add(name)
        return called

    def _fix(self, call: cst.Call, workers: cst.BaseExpression, keywords: dict[str, cst.BaseExpression]) -> Fix | None:
        if "persistent_workers" in keywords and keyword_arg(call, "persistent_workers") is None:
            return None  # set to False inside a `**` dictionary: a second keyword would not run
        in_call = any(arg.value is workers for arg in call.args)
        message = "Keep worker processes alive between epochs: `persistent_workers=True`"
        if in_call:
            value = persistent_workers_value(self.ctx, workers)
            # A name is read twice for free; an expression (`int(opt.workers)`) is evaluated twice.
            read_twice_for_free = value == "True" or dotted_name(workers) is not None
            applicability = Applicability.SAFE if read_twice_for_free else Applicability.UNSAFE
        else:
            # Workers from a keyword dictionary the code may fill on some paths only
            # (`if use_cuda: kwargs.update({"num_workers": 1})`): the dictionary is asked at run time.
            asked = _persistent_from_dictionary(call)
            value = asked if asked is not None else "True"
            applicability = Applicability.SAFE if asked is not None else Applicability.UNSAFE
        fix = set_keyword(self.ctx, call, "persistent_workers", value, applicability, message)
        return replace(fix, min_torch=_PERSISTENT_WORKERS_SINCE)

    def _dataset_changes(self, call: cst.Call) -> bool:
        """Whether the module changes the loader's dataset inside a loop (an epoch-dependent dataset)."""
        dataset = dataloader_dataset(call)
        key = target_key(dataset) if dataset is not None else None
        if key is None:
            return False
        for other in self.ctx.index.nodes("Call"):
            func = other.func
            if (
                isinstance(func, cst.Attribute)
                and target_key(func.value) == key
                and func.attr.value in _DATASET_MUTATORS
            ):
                return True
        for assign in self.ctx.index.nodes("Assign"):
            for target in assign.targets:
                node = target.target
                if isinstance(node, cst.Attribute) and target_key(node.value) == key and self.ctx.in_loop(assign):
                    return True
        return False


def _persistent_from_dictionary(call: cst.Call) -> str | None:
    """`kwargs.get("num_workers", 0) > 0` for `DataLoader(ds, **kwargs)`: true on exactly the paths
    where the dictionary holds workers.  None when the call has several `**` dictionaries or one
    that is not a name (which one holds the workers, or how to read it, is not known)."""
    dictionaries = [arg.value for arg in call.args if arg.star == "**"]
    name = dotted_name(dictionaries[0]) if len(dictionaries) == 1 else None
    return f'{name}.get("num_workers", 0) > 0' if name is not None else None


def _num_workers(node: cst.Call, keywords: dict[str, cst.BaseExpression]) -> cst.BaseExpression | None:
    if "num_workers" in keywords:
        return keywords["num_workers"]
    positional = positional_args(node)
    return positional[5].value if len(positional) >= 6 else None


def _never_exhausted(sampler: cst.BaseExpression | None, values: ValueOrigins) -> bool:
    """A sampler drawing so many samples (`RandomSampler(ds, replacement=True,
    num_samples=int(1e10))`) that its loader's one pass is the whole run."""
    if sampler is not None and not isinstance(sampler, cst.Call):
        origins = values.origins(sampler) or ()
        return any(isinstance(origin, cst.Call) and _never_exhausted(origin, values) for origin in origins)
    if not isinstance(sampler, cst.Call):
        return False
    count = keyword_arg(sampler, "num_samples")
    return count is not None and (_literal_number(count.value) or 0) >= _ENDLESS_SAMPLES


def _literal_number(expr: cst.BaseExpression) -> float | None:
    """`1e10`, `int(1e10)`, `10**9`: a number written as a literal."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Name)
        and expr.func.value == "int"
        and len(expr.args) == 1
    ):
        return _literal_number(expr.args[0].value)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power):
        base, power = _literal_number(expr.left), _literal_number(expr.right)
        return base**power if base is not None and power is not None and power < 64 else None
    return None


def _mentions(expr: cst.CSTNode, key: str) -> bool:
    """Whether `expr` refers to `key` as a whole name (`loader`, `enumerate(loader)`, `tqdm(self.loader)`)."""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        current = stack.pop()
        if target_key(current) == key:
            return True
        if isinstance(current, cst.Call):
            stack.extend(arg.value for arg in current.args)
        elif isinstance(current, (cst.Tuple, cst.List)):
            stack.extend(el.value for el in current.elements)
    return False
