"""GL1xx: the input pipeline -- how batches get from storage to the GPU."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.context import dotted_name, has_star_kwargs, is_false, is_true, is_zero, keyword_arg
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Rule, RuleOption
from gpulint.linter.analysis.values import target_key
from gpulint.rules.per_step import per_step_work

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
    needs_accelerator = True
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
    needs_accelerator = True
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


# -- GL103 ---------------------------------------------------------------------------------------
_LOOPS = (cst.For, cst.While)
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
# Builtins that take a loader without iterating it.
_NOT_ITERATING = frozenset({"print", "len", "isinstance", "type", "id", "repr", "str", "getattr", "hasattr", "setattr"})
# Methods Lightning (and its DataModules) call once, then iterate every epoch.
_EPOCH_LOADER_HOOKS = frozenset({"train_dataloader", "val_dataloader"})
_DATASET_MUTATORS = frozenset({"set_epoch", "reshuffle", "resample", "update", "set_stage", "set_difficulty"})


def _positional(node: cst.Call) -> list[cst.Arg]:
    return [a for a in node.args if a.keyword is None and not a.star]


def _num_workers(node: cst.Call) -> cst.BaseExpression | None:
    arg = keyword_arg(node, "num_workers")
    if arg is not None:
        return arg.value
    positional = _positional(node)
    return positional[5].value if len(positional) >= 6 else None


def _binding_key(ctx, node: cst.CSTNode) -> str | None:
    """`loader` or `self.loader` when the call is the whole right side of an assignment."""
    parent = ctx.parent(node)
    if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
        target = parent.targets[0].target if isinstance(parent, cst.Assign) else parent.target
        return target_key(target)
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


def _enclosing_function(ctx, node: cst.CSTNode) -> cst.FunctionDef | None:
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            return ancestor
        if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
            return None
    return None


def _in_loop(ctx, node: cst.CSTNode) -> bool:
    """Whether a loop of the same function runs `node` repeatedly."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, _SCOPES):
            return False
        if isinstance(ancestor, _LOOPS) and (child is ancestor.body or (isinstance(ancestor, cst.While) and child is ancestor.test)):
            return True
        child = ancestor
    return False


class DataLoaderRespawn(Rule):
    """
    ## What it finds
    A `DataLoader` with worker processes (`num_workers` set and not 0) and without
    `persistent_workers=True`, whose batches are iterated again and again: in a loop inside an
    epoch loop, by a function called from a loop, passed to a call inside a loop, or returned by
    `train_dataloader()` / `val_dataloader()` (Lightning iterates those every epoch).

    ## Why it is slow
    Without persistent workers, every `for batch in loader` starts `num_workers` new processes,
    each of which re-imports and unpickles the dataset (and its transforms) before the first batch
    arrives, and tears them down at the end of the epoch.  With 8 workers and a heavy dataset object
    that is seconds to tens of seconds of an idle GPU at the start of every epoch (and of every
    validation pass), repeated for the whole run.

    ## Example
    ```python
    loader = DataLoader(train_set, batch_size=64, num_workers=8, pin_memory=True)
    for epoch in range(epochs):
        for x, y in loader:
            ...
    ```
    Use instead:
    ```python
    loader = DataLoader(train_set, batch_size=64, num_workers=8, pin_memory=True, persistent_workers=True)
    ```

    ## Fix (safe)
    Adds `persistent_workers=True` when `num_workers` is a positive literal, or
    `persistent_workers=<num_workers> > 0` when it is a variable (`persistent_workers=True` with
    zero workers raises).  Batches, their order and the sampler's shuffling are the same (the
    sampler runs in the main process, so `sampler.set_epoch()` still works).  The fix is unsafe
    when the module changes the dataset between epochs (`dataset.set_epoch(...)`, or assigns its
    attributes in a loop): persistent workers keep the copy they started with and would not see
    the change; and when `num_workers` is an expression that is not a plain name.
    """

    code = "GL103"
    needs_accelerator = True
    name = "dataloader-respawn"
    message = "DataLoader workers are started again every epoch; set `persistent_workers=True`"
    tokens = ("DataLoader",)
    fix_applicability = Applicability.SAFE

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.loaders: list[tuple[cst.Call, str | None, cst.BaseExpression]] = []
        self.fors: list[cst.For] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader_call(self, node) or not self.ctx.accelerated or has_star_kwargs(node):
            return
        workers = _num_workers(node)
        if workers is None or is_zero(workers):
            return  # GL101's finding: no workers to keep
        persistent = keyword_arg(node, "persistent_workers")
        if persistent is not None and not is_false(persistent.value):
            return
        if _in_loop(self.ctx, node):
            return  # a new loader each time round: keeping its workers would not help
        self.loaders.append((node, _binding_key(self.ctx, node), workers))

    def visit_For(self, node: cst.For) -> None:
        self.fors.append(node)

    def finish(self) -> None:
        if not self.loaders:
            return
        for call, key, workers in self.loaders:
            if self._reiterated(call, key):
                self.report(call, fix=self._fix(call, workers))

    def _reiterated(self, call: cst.Call, key: str | None) -> bool:
        if key is None:
            parent = self.ctx.parent(call)
            function = _enclosing_function(self.ctx, call)
            return isinstance(parent, cst.Return) and function is not None and function.name.value in _EPOCH_LOADER_HOOKS
        called_in_loops = self._functions_called_in_loops()
        for loop in self.fors:
            if not _mentions(loop.iter, key):
                continue
            if _in_loop(self.ctx, loop):
                return True
            function = _enclosing_function(self.ctx, loop)
            if function is not None and function.name.value in called_in_loops:
                return True
        for other in self.ctx.index.nodes("Call"):
            name = (dotted_name(other.func) or "").rsplit(".", 1)[-1]
            if name in _NOT_ITERATING or other is call:
                continue
            if any(target_key(arg.value) == key for arg in other.args) and _in_loop(self.ctx, other):
                return True
        return False

    def _functions_called_in_loops(self) -> set[str]:
        cached = getattr(self, "_called", None)
        if cached is None:
            cached = set()
            for other in self.ctx.index.nodes("Call"):
                func = other.func
                name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
                if name and _in_loop(self.ctx, other):
                    cached.add(name)
            self._called = cached
        return cached

    def _fix(self, call: cst.Call, workers: cst.BaseExpression):
        message = "Keep worker processes alive between epochs: `persistent_workers=True`"
        if isinstance(workers, cst.Integer):
            value, applicability = "True", Applicability.SAFE
        elif dotted_name(workers) is not None:
            value, applicability = f"{self.ctx.code(workers)} > 0", Applicability.SAFE
        else:
            value, applicability = "True", Applicability.UNSAFE
        if self._dataset_changes(call):
            applicability = Applicability.UNSAFE
        return set_keyword(self.ctx, call, "persistent_workers", value, applicability, message)

    def _dataset_changes(self, call: cst.Call) -> bool:
        """Whether the module changes the loader's dataset inside a loop (an epoch-dependent dataset)."""
        dataset = _dataset_argument(call)
        key = target_key(dataset) if dataset is not None else None
        if key is None:
            return False
        for other in self.ctx.index.nodes("Call"):
            func = other.func
            if isinstance(func, cst.Attribute) and target_key(func.value) == key and func.attr.value in _DATASET_MUTATORS:
                return True
        for assign in self.ctx.index.nodes("Assign"):
            for target in assign.targets:
                node = target.target
                if isinstance(node, cst.Attribute) and target_key(node.value) == key and _in_loop(self.ctx, assign):
                    return True
        return False


# -- GL104 ---------------------------------------------------------------------------------------
# Parameters of a step function that hold a batch (`def train_step(model, batch, optimizer)`).
_BATCH_PARAM = re.compile(r"batch|^(inputs?|targets?|labels?|images?|imgs?|samples?|data|x|y|xb|yb|features|tokens|input_ids|masks?)$", re.I)
# Receivers that are models, not batches (GL202's business).
MODULE_NAME = re.compile(
    r"(^|_)(model|net|network|module|encoder|decoder|backbone|head|teacher|student|ema|critic|actor|policy"
    r"|generator|discriminator|classifier|transformer|unet|vae|lm)s?$",
    re.I,
)
_HOST_DEVICES = re.compile(r"""^[rbuRBU]*['"](cpu|meta)\b""")


def _root_name(expr: cst.BaseExpression) -> str | None:
    """`batch` for `batch`, `batch["x"]`, `batch.x`, `batch[0].x`."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        names: set[str] = set()
        for element in target.elements:
            names |= _target_names(element.value)
        return names
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


def _is_plain_view(expr: cst.BaseExpression, names: set[str]) -> bool:
    """`batch`, `batch["x"]`, `batch.x`, `(batch[0], batch[1])`: the batch itself, not a result."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return bool(expr.elements) and all(_is_plain_view(el.value, names) for el in expr.elements)
    return isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)) and _root_name(expr) in names


def is_device_target(ctx, call: cst.Call) -> bool:
    """Whether `.to(...)` / `.cuda(...)` moves to a (possibly) accelerator device, not to a dtype,
    a memory format or the host."""
    func = call.func
    if func.attr.value == "cuda":
        return True
    device = keyword_arg(call, "device")
    positional = _positional(call)
    target = device.value if device is not None else positional[0].value if positional else None
    if target is None:
        return False
    if isinstance(target, cst.SimpleString):
        return not _HOST_DEVICES.match(target.value)
    qualified = ctx.qualified_name(target)
    if qualified and qualified.startswith("torch.") and qualified != "torch.device":
        return False  # a dtype: torch.float16
    if isinstance(target, cst.Call):
        name = ctx.call_qualified_name(target)
        if name == "torch.device" and target.args and isinstance(target.args[0].value, cst.SimpleString):
            return not _HOST_DEVICES.match(target.args[0].value.value)
    return True


class BlockingHostToDeviceCopy(Rule):
    """
    ## What it finds
    A batch moved to the accelerator with `.to(device)` or `.cuda()` inside a training step loop
    without `non_blocking=True`.  A batch is what the step loop iterates (`for x, y in loader`),
    what is unpacked or indexed from it (`x, y = batch`, `batch["input_ids"]`, the values of a
    `{k: v.to(device) for k, v in batch.items()}`), or a batch parameter of a step function.

    ## Why it is slow
    A blocking copy makes the host wait until the copy has finished before it can queue the
    forward pass, so the copy and the previous step's kernels cannot overlap.  From pinned memory
    (`pin_memory=True`, GL102) a `non_blocking=True` copy is a DMA transfer queued on the stream:
    the host goes on queuing kernels, and the copy of a large image batch (milliseconds over PCIe)
    disappears behind compute.

    ## Example
    ```python
    for x, y in loader:
        x, y = x.to(device), y.to(device)
    ```
    Use instead:
    ```python
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    ```

    ## Fix (safe)
    Adds `non_blocking=True`.  Safe for host-to-device copies of batches: the copy is queued on
    the current CUDA stream, so every kernel that later reads the device tensor runs after it, and
    any host read of a device tensor synchronizes first (PyTorch's guide "A guide on good usage of
    non_blocking and pin_memory()").  From pageable memory the copy simply stays synchronous.  The
    one hazard -- writing into the pinned *source* tensor before the copy has run -- does not arise
    for batches, which the loader creates fresh for every step; copies of other tensors (reused
    buffers, device-to-host copies) are not reported.
    """

    code = "GL104"
    needs_accelerator = True
    needs_step = True
    name = "blocking-h2d-copy"
    message = "batch copied to the GPU without `non_blocking=True`: the host waits for every copy"
    tokens = (".to(", ".cuda(")
    fix_applicability = Applicability.SAFE

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._batch_names: dict[int, set[str]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda")):
            return
        if not (self.ctx.uses_torch and self.ctx.accelerated) or has_star_kwargs(node):
            return
        blocking = keyword_arg(node, "non_blocking")
        if blocking is not None and not is_false(blocking.value):
            return
        if func.attr.value == "cuda" and len(_positional(node)) >= 2:
            return  # `.cuda(device, True)`: non_blocking given positionally
        if func.attr.value == "to" and any(is_true(a.value) for a in _positional(node)[1:]):
            return  # `.to(device, torch.float, True)`
        if not is_device_target(self.ctx, node) or not per_step_work(self.ctx, node):
            return
        receiver = func.value
        root = _root_name(receiver)
        if root is None or MODULE_NAME.search(last_attr(receiver) or root):
            return
        if not self._is_batch(node, root):
            return
        self.report(
            node,
            fix=set_keyword(self.ctx, node, "non_blocking", "True", Applicability.SAFE, "Copy asynchronously: `non_blocking=True`"),
        )

    def _is_batch(self, node: cst.Call, root: str) -> bool:
        # A comprehension over the batch: `{k: v.to(device) for k, v in batch.items()}`.
        boundary = self.ctx.loops.step_boundary(node)
        names = self._names_for(boundary)
        for ancestor in self.ctx.ancestors(node):
            if ancestor is boundary:
                break
            if isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
                comp = ancestor.for_in
                while comp is not None:
                    iterated = comp.iter
                    if isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute):
                        iterated = iterated.func.value  # batch.items()
                    if root in _target_names(comp.target) and _root_name(iterated) in names:
                        return True
                    comp = comp.inner_for_in
        return root in names

    def _names_for(self, boundary: cst.CSTNode | None) -> set[str]:
        if boundary is None:
            return set()
        names = self._batch_names.get(id(boundary))
        if names is not None:
            return names
        names = set()
        if isinstance(boundary, cst.For):
            names |= _target_names(boundary.target)
        elif isinstance(boundary, cst.FunctionDef):
            names |= {p.name.value for p in boundary.params.params if _BATCH_PARAM.search(p.name.value)}
        assigns = [a for a in self.ctx.index.nodes("Assign") if self.ctx.loops.step_boundary(a) is boundary]
        changed = True
        while changed:  # `x, y = batch`, `inputs = batch["x"]`, `batch = next(it)`
            changed = False
            for assign in assigns:
                value = assign.value
                from_next = isinstance(value, cst.Call) and dotted_name(value.func) == "next"
                if from_next or _is_plain_view(value, names):
                    for target in assign.targets:
                        new = _target_names(target.target) - names
                        if new:
                            names |= new
                            changed = True
        self._batch_names[id(boundary)] = names
        return names


def last_attr(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Name):
        return expr.value
    return None


# -- GL105 ---------------------------------------------------------------------------------------
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
    for epoch in range(epochs):
        steps = len(list(train_loader))
        sample = next(iter(val_loader))
    ```
    Use instead:
    ```python
    steps = len(train_loader)
    sample = next(iter(val_loader))  # once, before the loop
    ```

    ## Fix
    None: `len(loader)` differs from counting batches for an `IterableDataset` or a sampler
    without a length, and moving a `next(iter(...))` out of a loop changes which batch is used.
    """

    code = "GL105"
    name = "loader-reiterated"
    message = "DataLoader iterated just to {what}: every call loads batches (and starts workers) again"
    tokens = ("DataLoader",)

    def visit_Call(self, node: cst.Call) -> None:
        outer = dotted_name(node.func)
        if outer not in ("len", "next") or len(node.args) != 1 or "len" in self.ctx.imports.bindings:
            return
        inner = node.args[0].value
        if not (isinstance(inner, cst.Call) and len(inner.args) == 1 and not inner.args[0].star):
            return
        inner_name = dotted_name(inner.func)
        wanted = ("list", "tuple") if outer == "len" else ("iter",)
        if inner_name not in wanted or not self.ctx.accelerated:
            return
        if not self.ctx.values.is_kind(inner.args[0].value, "dataloader"):
            return
        if outer == "len":
            self.report(node, message=self.message.format(what="count its batches (use `len(loader)`)"))
        elif _in_loop(self.ctx, node):
            self.report(node, message=self.message.format(what="take one batch, inside a loop"))
