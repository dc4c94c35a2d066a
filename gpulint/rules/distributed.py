"""GL6xx: distributed training -- how gradients and processes are shared between GPUs.

These rules fire on any device except GL602 (gloo is the right backend without CUDA): the
patterns cost the same whichever machine the script is linted for.
"""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.context import FileContext, has_star_kwargs, is_true, keyword_arg
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.analysis.imports import dotted_name
from gpulint.linter.analysis.loops import LOOP_TYPES, SCOPE_TYPES
from gpulint.linter.rule import Rule
from gpulint.linter.analysis.values import last_name
from gpulint.rules.data_pipeline import DATALOADERS
from gpulint.rules.precision import code_without_comments

DATA_PARALLEL = (
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel",
    "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.data_parallel.data_parallel",
)
DDP = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel")
FSDP = (
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
)
ACCELERATORS = ("accelerate.Accelerator", "accelerate.accelerator.Accelerator")
INIT_PROCESS_GROUP = ("torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group")

# Words in a condition that make `gloo` a fallback: no CUDA, no NCCL, or a platform without NCCL.
_FALLBACK_WORDS = re.compile(r"is_available|nccl|platform|win32|windows|darwin|macos|^nt$|os\.name|cpu|cuda|gpu|mps|device", re.IGNORECASE)
# Handling of accumulation under DDP: the context manager, accelerate's wrapper, or the flag.
_SYNC_HANDLED = re.compile(r"no_sync|require_backward_grad_sync|set_requires_gradient_sync|\baccumulate\s*\(|sync_gradients")
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*\.py$|_test\.py$")
_CPU_COUNT = (
    "os.cpu_count",
    "multiprocessing.cpu_count",
    "psutil.cpu_count",
    "os.sched_getaffinity",
    "torch.multiprocessing.cpu_count",
)


def _dotted_words(node: cst.CSTNode) -> set[str]:
    """Names, attribute names, dotted names and string contents anywhere under `node`."""
    words: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            words.add(current.value)
        elif isinstance(current, cst.Attribute):
            dotted = dotted_name(current)
            if dotted:
                words.add(dotted)
            words.add(current.attr.value)
        elif isinstance(current, cst.SimpleString):
            words.add(current.evaluated_value if isinstance(current.evaluated_value, str) else "")
        stack.extend(current.children)
    return words


def _mentions_fallback(node: cst.CSTNode) -> bool:
    return any(_FALLBACK_WORDS.search(word) for word in _dotted_words(node))


def _calls_named(ctx: FileContext, names: tuple[str, ...]) -> list[cst.Call]:
    return [call for call in ctx.index.nodes("Call") if ctx.call_qualified_name(call) in names]


def under_ddp(ctx: FileContext) -> bool:
    """Whether the module trains with one process per GPU (DDP, FSDP, torch.distributed, Accelerate)."""
    cached = ctx.__dict__.get("_gpulint_under_ddp")
    if cached is None:
        cached = ctx.uses("torch.distributed", "accelerate", "torch.utils.data.distributed") or bool(
            _calls_named(ctx, DDP + FSDP + ("torch.utils.data.DistributedSampler",))
        )
        ctx.__dict__["_gpulint_under_ddp"] = cached
    return cached


class DataParallel(Rule):
    """
    ## What it finds
    `torch.nn.DataParallel(model)` (however imported) and the functional
    `torch.nn.parallel.data_parallel(...)`.

    ## Why it is slow
    DataParallel runs every GPU from one Python process: each step it copies the model to every
    GPU, scatters the batch from GPU 0, gathers the outputs back on GPU 0 and computes the loss
    there, with all replicas fighting for the GIL.  GPU 0 becomes the bottleneck and scaling stops
    early; PyTorch recommends DistributedDataParallel instead, even on one machine, and it is
    usually markedly faster from 2 GPUs on.

    ## Example
    ```python
    model = nn.DataParallel(model).cuda()
    ```
    Use instead (one process per GPU, started with `torchrun --nproc_per_node=N`):
    ```python
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    ```

    ## Fix
    None: DDP changes how the program is launched (one process per GPU), how data is split
    (`DistributedSampler`), and what each process logs and saves.
    """

    code = "GL601"
    name = "data-parallel"
    message = "`DataParallel` drives all GPUs from one process; use DistributedDataParallel (one process per GPU)"
    tokens = ("DataParallel", "data_parallel")

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.call_qualified_name(node) in DATA_PARALLEL:
            self.report(node)


class GlooOnCuda(Rule):
    """
    ## What it finds
    `torch.distributed.init_process_group("gloo")` (or `backend="gloo"`, directly or through a
    variable assigned `"gloo"`) in a module that trains on CUDA.  Gloo chosen as a fallback is not
    reported: `"nccl" if torch.cuda.is_available() else "gloo"`, inside `if sys.platform ==
    "win32":`, after `dist.is_nccl_available()`, or a mixed `"cpu:gloo,cuda:nccl"` string.

    ## Why it is slow
    Gloo all-reduces CUDA tensors by copying them through host memory and the CPU network stack;
    NCCL moves them GPU to GPU over NVLink, PCIe peer-to-peer or GPUDirect RDMA.  For gradient
    all-reduce, NCCL is typically several times faster, and the gap grows with model size and GPU
    count.  PyTorch's documentation: "Use the NCCL backend for distributed GPU training".

    ## Example
    ```python
    dist.init_process_group(backend="gloo")
    model = DDP(model.cuda(rank), device_ids=[rank])
    ```
    Use instead:
    ```python
    dist.init_process_group(backend="nccl")
    ```

    ## Fix (unsafe)
    Replaces the literal `"gloo"` in the call with `"nccl"`.  Unsafe: NCCL needs one GPU per
    process and CUDA tensors for every collective; CPU tensors sent through the group
    (`all_gather_object`, CPU metrics) then fail, and NCCL is not available on Windows or macOS.
    """

    code = "GL602"
    needs_accelerator = True
    name = "gloo-on-cuda"
    message = "the `gloo` backend moves CUDA gradients through host memory; use `nccl` for GPU training"
    tokens = ("gloo",)
    fix_applicability = Applicability.UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.call_qualified_name(node) not in INIT_PROCESS_GROUP or not self.ctx.accelerated:
            return
        if _TEST_PATH.search(self.ctx.path.replace("\\", "/")):
            return  # tests pick gloo on purpose: it runs on CI machines without GPUs
        backend = keyword_arg(node, "backend")
        if backend is None:
            positional = [a for a in node.args if a.keyword is None and not a.star]
            backend = positional[0] if positional else None
        if backend is None:
            return
        value = backend.value
        if _is_gloo(value):
            if not self._is_fallback(value):
                fix = Fix(Applicability.UNSAFE, 'Use the NCCL backend: `"nccl"`', {value: _nccl_string(value)})
                self.report(node, fix=fix)
            return
        key = dotted_name(value)
        if key is None or self._is_fallback(node):
            return
        origins = self.ctx.values.assigned.get(key, ())
        # Every value the variable can hold is a plain "gloo" chosen outside any fallback.
        if origins and all(_is_gloo(origin) and not self._is_fallback(origin) for origin in origins):
            self.report(node)

    def _is_fallback(self, node: cst.CSTNode) -> bool:
        """A conditional expression, an `if`/`elif`/`else` or a `try` around `node` that tests
        for CUDA, NCCL or the platform."""
        child = node
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.IfExp) and _mentions_fallback(ancestor.test):
                return True
            if isinstance(ancestor, cst.If) and child is ancestor.body and _mentions_fallback(ancestor.test):
                return True
            if isinstance(ancestor, cst.Else):
                # `if <cuda/nccl test>: "nccl" else: "gloo"`; the `else` of a platform check
                # (`if win32: gloo else: gloo`) is the ordinary path and not a fallback.
                owner = self.ctx.parent(ancestor)
                if isinstance(owner, cst.If) and _mentions_fallback(owner.test) and "nccl" in _dotted_words(owner.body):
                    return True
            if isinstance(ancestor, cst.ExceptHandler):
                return True  # `except: backend = "gloo"`: NCCL failed, fall back
            if isinstance(ancestor, SCOPE_TYPES):
                return False
            child = ancestor
        return False


def _is_gloo(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "gloo"


def _nccl_string(node: cst.SimpleString) -> cst.SimpleString:
    return node.with_changes(value=node.value.replace("gloo", "nccl"))


class DdpAccumulationSync(Rule):
    """
    ## What it finds
    Gradient accumulation under DistributedDataParallel, FSDP or Accelerate -- `loss.backward()`
    on every micro-batch, `optimizer.step()` only under `if (step + 1) % accum_steps == 0:` --
    without skipping the gradient all-reduce on the micro-batches in between: no `model.no_sync()`,
    no `accelerator.accumulate(model)`, no `require_backward_grad_sync` toggle anywhere in the
    module.  Reported at the `.backward()` call.

    ## Why it is slow
    DDP all-reduces every gradient during every `backward()`.  With k micro-batches per optimizer
    step, k-1 of those all-reduces are thrown away: communication grows k-fold, and on a
    bandwidth-bound job the step time grows almost as much.  `no_sync()` accumulates locally and
    communicates once, on the last micro-batch.

    ## Example
    ```python
    for step, batch in enumerate(loader):
        loss = model(batch) / accum_steps
        loss.backward()
        if (step + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```
    Use instead:
    ```python
    for step, batch in enumerate(loader):
        sync = (step + 1) % accum_steps == 0
        with model.no_sync() if not sync else contextlib.nullcontext():
            loss = model(batch) / accum_steps
            loss.backward()
        if sync:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Fix
    None: the forward pass must move into the `no_sync()` block too (DDP decides at forward time),
    which restructures the loop body.
    """

    code = "GL603"
    needs_step = True
    name = "ddp-accumulation-sync"
    message = "gradient accumulation under DDP all-reduces gradients on every micro-batch; wrap the non-final ones in `model.no_sync()`"
    tokens = ("DistributedDataParallel", "FullyShardedDataParallel", "Accelerator")

    def finish(self) -> None:
        if not _calls_named(self.ctx, DDP + FSDP + ACCELERATORS):
            return
        if _SYNC_HANDLED.search(code_without_comments(self.ctx)):
            return
        reported: set[int] = set()
        for call in self.ctx.index.nodes("Call"):
            if not self._is_optimizer_step(call):
                continue
            loop = self.ctx.loops.step_boundary(call)
            guard = self._accumulation_guard(call, loop)
            if loop is None or guard is None or id(loop) in reported:
                continue
            backward = self._backward_outside(loop, guard)
            if backward is not None:
                reported.add(id(loop))
                self.report(backward)

    def _is_optimizer_step(self, call: cst.Call) -> bool:
        func = call.func
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value == "step"
            and self.ctx.loops.is_direct_step_call(call)
        )

    def _accumulation_guard(self, call: cst.Call, loop: cst.CSTNode | None) -> cst.If | None:
        """The `if` between the optimizer step and its loop that skips it on some iterations (a
        modulo test, or a test naming an accumulation count)."""
        if loop is None:
            return None
        child: cst.CSTNode = call
        for ancestor in self.ctx.ancestors(call):
            if ancestor is loop:
                return None
            if isinstance(ancestor, cst.If) and child is ancestor.body and _counts_micro_batches(ancestor.test):
                return ancestor
            child = ancestor
        return None

    def _backward_outside(self, loop: cst.CSTNode, guard: cst.If) -> cst.Call | None:
        """The first `.backward()` that runs on every iteration of `loop`, not under `guard`."""
        for call in self.ctx.index.nodes("Call"):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "backward"):
                continue
            if self.ctx.loops.step_boundary(call) is not loop:
                continue
            if not any(a is guard for a in self.ctx.ancestors(call)):
                return call
        return None


_ACCUMULATION_WORDS = re.compile(r"accum|grad_acc|gradient_acc|update_freq|micro", re.IGNORECASE)


def _counts_micro_batches(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.BooleanOperation):
        return _counts_micro_batches(test.left) or _counts_micro_batches(test.right)
    if isinstance(test, cst.UnaryOperation):
        return _counts_micro_batches(test.expression)
    words = _dotted_words(test)
    if any(_ACCUMULATION_WORDS.search(w) for w in words):
        return True
    # `(i + 1) % 4 == 0` around the optimizer step (and not around the backward) is accumulation.
    stack: list[cst.CSTNode] = [test]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.BinaryOperation) and isinstance(current.operator, cst.Modulo):
            return True
        stack.extend(current.children)
    return False


class DdpFindUnused(Rule):
    """
    ## What it finds
    `find_unused_parameters=True` given to `DistributedDataParallel`, Lightning's `DDPStrategy`,
    Accelerate's `DistributedDataParallelKwargs`, `ddp_find_unused_parameters=True` in Hugging
    Face `TrainingArguments`, and the `strategy="ddp_find_unused_parameters_true"` string.

    ## Why it is slow
    With the flag, DDP walks the autograd graph from the outputs after every forward pass to find
    parameters that will get no gradient, and cannot start all-reducing a gradient bucket until it
    knows which parameters are missing.  PyTorch's documentation warns of the extra overhead; it
    is commonly 5-20% of step time, for nothing when every parameter is used.

    ## Example
    ```python
    model = DDP(model, device_ids=[rank], find_unused_parameters=True)
    ```
    Use instead:
    ```python
    model = DDP(model, device_ids=[rank])
    ```

    ## Fix
    None: when some parameters really get no gradient (frozen branches, conditional heads), DDP
    without the flag fails at the next step; only a person (or a run with
    `TORCH_DISTRIBUTED_DEBUG=DETAIL`) can tell.  Remove it if training runs without it.
    """

    code = "GL604"
    name = "ddp-find-unused"
    message = "`find_unused_parameters=True` makes DDP traverse the autograd graph every step; drop it unless parameters are really unused"
    tokens = ("find_unused_parameters",)

    KEYWORDS = {"find_unused_parameters", "ddp_find_unused_parameters"}
    # Callees that configure DDP (by their last name: aliases and re-exports vary).  Anything else
    # given the keyword -- a registry that *offers* the option, a test helper -- is not a choice.
    CALLEES = re.compile(r"DDP|DistributedDataParallel|Strategy$|TrainingArguments$|Kwargs$|^Trainer$|^Fabric$")

    def visit_Call(self, node: cst.Call) -> None:
        callee = last_name(node.func) or ""
        if not self.CALLEES.search(callee):
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in self.KEYWORDS and is_true(arg.value):
                self.report(node)
                return
        strategy = keyword_arg(node, "strategy")
        if strategy is not None and isinstance(strategy.value, cst.SimpleString):
            if strategy.value.evaluated_value == "ddp_find_unused_parameters_true":
                self.report(node)


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
    loader = DataLoader(train_set, sampler=DistributedSampler(train_set), num_workers=os.cpu_count())
    ```
    Use instead:
    ```python
    workers = (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    loader = DataLoader(train_set, sampler=DistributedSampler(train_set), num_workers=workers)
    ```

    ## Fix (unsafe)
    Divides the count between the ranks of the node:
    `num_workers=max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))`
    (`torchrun` sets `LOCAL_WORLD_SIZE`).  Offered only when the `num_workers=` value itself holds
    the count.  Unsafe: it changes how many worker processes load data.
    """

    code = "GL605"
    name = "workers-per-rank"
    message = "`num_workers` = every CPU core, in every rank: the ranks of a node oversubscribe its CPUs; divide by the ranks per node"
    tokens = ("cpu_count", "sched_getaffinity")
    fix_applicability = Applicability.UNSAFE

    REPLACEMENT = 'max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))'

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.call_qualified_name(node) not in DATALOADERS or has_star_kwargs(node):
            return
        workers = keyword_arg(node, "num_workers")
        if workers is None or not under_ddp(self.ctx):
            return
        value = workers.value
        if self._all_cores(value):
            fix = Fix(Applicability.UNSAFE, "Divide the CPU cores between the ranks of the node", {value: cst.parse_expression(self.REPLACEMENT)}, ("import os",))
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
            if isinstance(current, cst.BinaryOperation) and isinstance(current.operator, (cst.Divide, cst.FloorDivide, cst.RightShift)):
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
