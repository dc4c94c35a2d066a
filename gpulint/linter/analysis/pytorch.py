"""What gpulint knows about PyTorch code: the API names rules match, and the per-file analyses
several rules share -- which names hold tensors, whether the module trains a model with its own
loop, whether it runs one process per GPU."""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.nodes import keyword_arg, last_name, method_name, positional_args
from gpulint.linter.analysis.project import RANK_WRAPPERS
from gpulint.linter.analysis.values import target_key
from gpulint.linter.analysis.vocabulary import (
    CONVOLUTION_LAYER,
    LOSSY_NAME,
    MODULE_NAME,
    TENSOR_METHODS,
    TORCH_NOT_TENSOR,
)

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

DATALOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
DDP = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel")
FSDP = (
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
)
ACCELERATE_ACCELERATORS = ("accelerate.Accelerator", "accelerate.accelerator.Accelerator")
# A call that wraps a model for data parallel training by its name: `DDP(...)`, `smart_DDP(...)`,
# `MMDistributedDataParallel(...)`, `FSDP(...)`, `fully_shard(...)` (a project's or a library's).
_RANK_WRAPPER_NAME = re.compile(r"DDP|DistributedDataParallel|FullyShardedDataParallel|FSDP|fully_shard")
# A module that builds a graph neural network from a graph library's layers.
_GRAPH_LIBRARY_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:torch_geometric|dgl)\b", re.MULTILINE)
# Why model-wide speed-ups (TF32, torch.compile) show no evidence of a real gain in such a module.
GRAPH_NETWORK_HINT = (
    "a graph network: its step is sparse message passing and small layers, where TF32 matmuls gain little and "
    "torch.compile recompiles for each graph size"
)


def builds_graph_network(ctx: FileContext) -> bool:
    """Whether the module imports a graph library's layers (PyTorch Geometric, DGL)."""
    return _GRAPH_LIBRARY_IMPORT.search(ctx.code_without_comments) is not None


_HOST_DEVICES = re.compile(r"""^[rbuRBU]*['"](cpu|meta)\b""")

# Frameworks whose configuration, not the script, sets precision; and those that can compile.
_SETS_PRECISION = ("accelerate", "lightning", "deepspeed", "colossalai", "composer")
_SETS_COMPILATION = ("accelerate", "deepspeed", "colossalai", "composer")
_MIXED_PRECISION_TEXT = re.compile(
    r"autocast|grad_?scaler|bfloat16|float16|\bhalf\b|(?<![a-z0-9])amp(?![a-z])|mixed.precision|"
    r"(?<![a-z0-9])(fp16|bf16)(?![a-z0-9])",
    re.IGNORECASE,
)


def is_dataloader(ctx: FileContext, call: cst.Call) -> bool:
    return ctx.call_qualified_name(call) in DATALOADERS


def dataloader_dataset(call: cst.Call) -> cst.BaseExpression | None:
    """The dataset a `DataLoader(...)` call loads from (first positional or `dataset=`)."""
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
        if arg.keyword is not None and arg.keyword.value == "dataset":
            return arg.value
    return None


# Datasets that hold their samples in memory as tensors: Lightning's demo datasets.
_IN_MEMORY_DATASETS = re.compile(
    r"^(lightning\.pytorch|pytorch_lightning|lightning)\.demos\..*(RandomDataset|RandomDictDataset|WikiText2)$"
)
_IN_MEMORY_DATASET_NAME = re.compile(r"^Random\w*Dataset$")
_IN_MEMORY_BUILTINS = frozenset({"range", "list", "tuple", "dict"})
# The abstract dataset class, as a parameter's annotation names it (an origin of the parameter).
DATASET_BASES = frozenset({"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})


def in_memory_dataset(
    ctx: FileContext, expr: cst.BaseExpression, depth: int = 3, following: frozenset[str] = frozenset()
) -> bool:
    """Whether a loader's dataset holds its samples in memory, ready to index: a `TensorDataset`, a
    tensor, a list, tuple or `range`, Lightning's demo datasets (`RandomDataset`, `WikiText2`), a
    class of this module whose `__getitem__` indexes tensors it built -- or a name only ever given
    one.  Loading a batch there is indexing and collating in memory: workers would only add the
    cost of handing batches between processes, and pinning buys little."""
    if isinstance(expr, (cst.List, cst.Tuple, cst.ListComp, cst.Dict)):
        return True
    values = ctx.values
    if ctx.qualified_name(expr) in DATASET_BASES:
        return True  # `dataset: Dataset`, a parameter's annotation: says nothing either way
    if values.is_kind(expr, "tensordataset") or ctx.torch.tensors.is_tensor(expr) or values.on_host(expr):
        return True
    if isinstance(expr, cst.Call):
        qualified = ctx.call_qualified_name(expr) or ""
        if _IN_MEMORY_DATASETS.match(qualified):
            return True
        func = expr.func
        if isinstance(func, cst.Name):
            if func.value in _IN_MEMORY_BUILTINS and func.value not in ctx.imports.bindings:
                return True
            if func.value not in ctx.imports.bindings:
                return _in_memory_class(ctx, func.value)
        return False
    key = target_key(expr)
    if key is not None and key in following:
        return True  # a name given itself (`f(dataset)` into a parameter `dataset`): nothing new
    if depth <= 0:
        return False
    origins = values.origins(expr)
    following = following | {key} if key is not None else following
    return bool(origins) and all(in_memory_dataset(ctx, origin, depth - 1, following) for origin in origins or ())


def _in_memory_class(ctx: FileContext, name: str) -> bool:
    """A dataset class of this module named like a synthetic one (`RandomDataset`), or whose
    `__getitem__` returns `self.<attr>[...]` of tensors it builds itself."""
    for cls in ctx.index.nodes("ClassDef"):
        if cls.name.value != name:
            continue
        if _IN_MEMORY_DATASET_NAME.match(name):
            return True
        getitem = next(
            (f for f in ctx.index.nodes("FunctionDef") if f.name.value == "__getitem__" and _defined_in(ctx, f, cls)),
            None,
        )
        if getitem is None:
            return False
        returns = [r.value for r in ctx.index.nodes("Return") if r.value is not None and _defined_in(ctx, r, getitem)]
        return bool(returns) and all(_indexes_own_tensor(ctx, value) for value in returns)
    return False


def _defined_in(ctx: FileContext, node: cst.CSTNode, owner: cst.CSTNode) -> bool:
    return any(ancestor is owner for ancestor in ctx.ancestors(node))


def _indexes_own_tensor(ctx: FileContext, value: cst.BaseExpression) -> bool:
    """`self.data[index]`, or a tuple of those, where `self.data` only ever holds a tensor, or a
    list of tensors or of tuples of them (`[(torch.rand(20), torch.rand(1)) for _ in range(n)]`)."""
    if isinstance(value, cst.Tuple):
        return bool(value.elements) and all(_indexes_own_tensor(ctx, el.value) for el in value.elements)
    if not (isinstance(value, cst.Subscript) and isinstance(value.value, cst.Attribute)):
        return False
    holder = value.value
    if not (isinstance(holder.value, cst.Name) and holder.value.value == "self"):
        return False
    assigned = ctx.values.assigned.get(f"self.{holder.attr.value}", [])
    return bool(assigned) and all(_holds_tensors(ctx, v) for v in assigned)


def _holds_tensors(ctx: FileContext, value: cst.BaseExpression) -> bool:
    """A tensor, or a list or tuple (written out or built by a comprehension) of tensors or of
    tuples of them."""
    if isinstance(value, cst.ListComp):
        return _holds_tensors(ctx, value.elt)
    if isinstance(value, (cst.List, cst.Tuple)):
        elements = value.elements
        return bool(elements) and all(
            not isinstance(el, cst.StarredElement) and _holds_tensors(ctx, el.value) for el in elements
        )
    return ctx.torch.tensors.is_tensor(value) or ctx.values.on_host(value)


def is_device_target(ctx: FileContext, call: cst.Call) -> bool:
    """Whether `.to(...)` / `.cuda(...)` moves to a (possibly) accelerator device, not to a dtype,
    a memory format or the host."""
    func = call.func
    assert isinstance(func, cst.Attribute)  # callers pass method calls: `.to(...)`, `.cuda(...)`
    if func.attr.value == "cuda":
        return True
    device = keyword_arg(call, "device")
    positional = positional_args(call)
    target = device.value if device is not None else positional[0].value if positional else None
    if target is None:
        return False
    if isinstance(target, cst.SimpleString):
        return not _HOST_DEVICES.match(target.value)
    qualified = ctx.qualified_name(target)
    if qualified and qualified.startswith("torch.") and qualified != "torch.device":
        return False  # a dtype: torch.float16
    if isinstance(target, cst.Attribute) and target.attr.value == "dtype":
        return False  # another tensor's dtype: `m.to(x.dtype)`
    if isinstance(target, cst.Call):
        name = ctx.call_qualified_name(target)
        if name == "torch.device" and target.args and isinstance(target.args[0].value, cst.SimpleString):
            return not _HOST_DEVICES.match(target.args[0].value.value)
    return True


class TorchAnalysis:
    """The PyTorch analyses of one module (`ctx.torch`), each computed when first asked."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    @cached_property
    def tensors(self) -> TensorNames:
        return TensorNames(self.ctx)

    @cached_property
    def optimizer_construction(self) -> cst.Call | None:
        """The first call that builds an optimizer (`torch.optim.AdamW(model.parameters(), ...)`)."""
        for call in self.ctx.index.nodes("Call"):
            if self.ctx.values.is_kind(call, "optimizer"):
                return call
        return None

    @cached_property
    def own_loop_backward_calls(self) -> list[cst.Call]:
        """The `.backward()` step calls, in source order, of a module that trains a model with its
        own loop; empty when the module is anything else (a library helper, evaluation code, a
        LightningModule whose loop is Lightning's).  Whether precision or compilation is set by a
        framework's configuration instead is `precision_set_elsewhere` / `compilation_set_elsewhere`."""
        ctx = self.ctx
        loops = ctx.loops
        if loops.lightning_steps or not loops.step_loops:
            return []
        # A training script updates weights: it builds an optimizer or takes optimizer steps
        # (one from `model.configure_optimizers()` or a parameter); helpers that only call
        # `.backward()` (library utilities, gradient checks) are not one.
        if self.optimizer_construction is None and not self.steps_an_optimizer:
            return []
        return [
            call
            for call in ctx.index.nodes("Call")
            if isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "backward"
            and loops.is_step_call(call)
            and loops.per_step(call)
        ]

    @cached_property
    def steps_an_optimizer(self) -> bool:
        """Whether the module takes optimizer steps in a step loop (`optimizer.step()`,
        `scaler.step(optimizer)`): it trains, rather than only running `.backward()` (a profiler, a
        gradient check) next to an optimizer it builds for someone else."""
        loops = self.ctx.loops
        return any(
            method_name(call) == "step" and loops.is_step_call(call) and loops.per_step(call)
            for call in self.ctx.index.nodes("Call")
        )

    @cached_property
    def convolution_dims(self) -> frozenset[int]:
        """The dimensions of the convolutions the module builds (1, 2, 3): `nn.Conv2d`,
        `nn.ConvTranspose3d`, `F.conv1d`, or a torchvision CNN (`torchvision.models.resnet50()`,
        2-D).  Empty when it builds none here (a model imported from another module is not seen)."""
        dims = set()
        for call in self.ctx.index.nodes("Call"):
            qualified = self.ctx.call_qualified_name(call) or ""
            match = CONVOLUTION_LAYER.match(qualified)
            if match:
                dims.add(int(match.group(1)))
            elif TORCHVISION_CNN.match(qualified):
                dims.add(2)
        return frozenset(dims)

    @cached_property
    def precision_set_elsewhere(self) -> bool:
        """Whether a framework's configuration sets mixed precision (Accelerate, Lightning and
        Fabric, DeepSpeed, ...): the script does not."""
        return self.ctx.uses(*_SETS_PRECISION)

    @cached_property
    def compilation_set_elsewhere(self) -> bool:
        """Whether a framework's configuration can compile the model (Accelerate's and DeepSpeed's
        dynamo settings, ...).  Lightning and Fabric leave `torch.compile` to the script."""
        return self.ctx.uses(*_SETS_COMPILATION)

    @cached_property
    def uses_mixed_precision(self) -> bool:
        """Any mention of mixed precision outside a comment: autocast, a GradScaler, bf16/fp16, an
        `--amp` flag (a hint the user has already considered is noise)."""
        return bool(_MIXED_PRECISION_TEXT.search(self.ctx.code_without_comments))

    @cached_property
    def one_process_per_gpu(self) -> bool:
        """Whether the module trains with one process per GPU (DDP, FSDP, torch.distributed,
        Accelerate)."""
        ctx = self.ctx
        if ctx.uses("torch.distributed", "accelerate", "torch.utils.data.distributed"):
            return True
        wrappers = DDP + FSDP + ("torch.utils.data.DistributedSampler",)
        return any(ctx.call_qualified_name(call) in wrappers for call in ctx.index.nodes("Call"))


# torchvision's convolutional classification models.
TORCHVISION_CNN = re.compile(
    r"^torchvision\.models\.(?:[a-z_0-9]+\.)?(resnet|resnext|wide_resnet|vgg|densenet|mobilenet|efficientnet|regnet"
    r"|convnext|alexnet|googlenet|inception|squeezenet|shufflenet|mnasnet)"
)


def wraps_for_ranks(ctx: FileContext, call: cst.Call) -> bool:
    """Whether `call` wraps a model for data parallel training, one process per GPU: a DDP, FSDP or
    Accelerate constructor (project.RANK_WRAPPERS), or a function named for one."""
    return ctx.call_qualified_name(call) in RANK_WRAPPERS or bool(_RANK_WRAPPER_NAME.search(last_name(call.func) or ""))


# -- which expressions are tensors ---------------------------------------------------------------
class TensorNames:
    """Names in a module that hold tensors, by a small flow-insensitive analysis: the receiver of
    `.backward()` (the loss), names assigned from `torch.*` calls, from a criterion
    (`criterion(out, y)`), from `outputs.loss`, or from tensor arithmetic on other tensor names."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.names: set[str] = set()
        for call in ctx.index.nodes("Call"):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "backward":
                key = _name_key(func.value)
                if key:
                    self.names.add(key)
        pairs: list[tuple[str, cst.BaseExpression]] = []
        for assign in ctx.index.nodes("Assign"):
            for target in assign.targets:
                key = _name_key(target.target)
                if key:
                    pairs.append((key, assign.value))
        for aug in ctx.index.nodes("AugAssign"):
            key = _name_key(aug.target)
            if key:
                pairs.append((key, aug.value))
        changed = True
        while changed:
            changed = False
            for key, value in pairs:
                if key not in self.names and self.is_tensor(value):
                    self.names.add(key)
                    changed = True

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        key = _name_key(expr)
        if key is not None:
            return key in self.names
        if isinstance(expr, cst.Attribute):
            return expr.attr.value == "loss"  # `outputs.loss` (Hugging Face model outputs)
        if isinstance(expr, cst.Subscript):
            return self.is_tensor(expr.value)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_tensor(expr.left) or self.is_tensor(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_tensor(expr.expression)
        if isinstance(expr, cst.Call):
            qualified = self.ctx.call_qualified_name(expr)
            if qualified is not None:
                rest = qualified[len("torch.") :] if qualified.startswith("torch.") else None
                if rest is None:
                    return False
                if rest.startswith("nn.functional."):
                    return True
                return "." not in rest and not TORCH_NOT_TENSOR.match(rest)
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_METHODS:
                receiver = func.value
                if isinstance(receiver, cst.Comparison):
                    return self.is_tensor(receiver.left) or any(
                        self.is_tensor(c.comparator) for c in receiver.comparisons
                    )
                return self.is_tensor(receiver)
            # `criterion(out, y)` returns the loss, `model(x)` / `self.net(x)` the outputs.
            callee = last_name(func) or ""
            return bool(LOSSY_NAME.search(callee) or MODULE_NAME.search(callee))
        return False


def _name_key(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return f"self.{expr.attr.value}"
    return None
