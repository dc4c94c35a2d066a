"""What loading one item of a DataLoader costs, as far as the code says: the evidence the loader
rules (GL101 workers, GL102 pinning, GL103 persistent workers, GL105 re-iteration) weigh before
saying a loader makes the training process wait.

`ctx.loaders.cost(loader_call)` follows the loader's dataset -- through names, a function of the
module that builds it, `Subset`/`ConcatDataset`/`random_split` -- to what builds it, and sorts it:

* `READS`: an item opens or decodes a file (`open`, `PIL.Image.open`, `cv2.imread`,
  `torchvision.io.read_image`, `torchaudio.load`, `np.load`, `h5py.File`, ...) in the dataset
  class's `__getitem__` (`__iter__` for an IterableDataset, and the methods of the class they
  call), or the dataset is a class known to decode its files (`ImageFolder`, `DatasetFolder`, a
  torchvision dataset given a `transform=`);
* `AUGMENTS`: an item goes through image transforms (torchvision's, albumentations'), applied in
  `__getitem__` or by a dataset given them; a Hugging Face dataset with `with_transform` /
  `set_transform`;
* `TOKENIZES`: `__getitem__` (or the loader's `collate_fn`, a function of the module) calls a
  tokenizer;
* `LIGHT`: small images held in memory (MNIST, CIFAR) only converted to tensors (`ToTensor`,
  `Normalize`): a little work per item, known to be small -- a hint, not evidence;
* `MEMORY`: the items are in memory and an item is an index into them (tensors, lists of token
  ids or prompt strings, `TensorDataset`, a dataset class whose `__getitem__` only indexes what it
  holds, a Hugging Face dataset without a per-item transform);
* `UNKNOWN`: anything else -- a dataset built in another module, a parameter: no evidence.

`ItemCost.evidence` says what was found where ("`__getitem__` decodes an image with
`PIL.Image.open` (line 42)"), for the finding's message.  The same analysis answers what a loader's
run looks like: whether the module runs on the CPU alone (`cpu_only`: a trainer or device written
as "cpu", nothing naming an accelerator), how many batches it loads when the code says so
(`batches_run`: `max_steps=10`, `limit_train_batches=15`, `if i == 15: break`), and whether it
trains a single epoch (`single_epoch`: `max_epochs=1`, `for epoch in range(1)`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.item_work import is_tokenizer_call, is_transform, reader_phrase
from gpulint.linter.analysis.nodes import dotted_name, keyword_arg, last_name, method_name, positional_args
from gpulint.linter.analysis.project import WORKING_DATASET
from gpulint.linter.analysis.pytorch import (
    ACCELERATE_ACCELERATORS,
    DATASET_BASES,
    dataloader_dataset,
    in_memory_dataset,
    is_device_target,
)
from gpulint.linter.analysis.trainers import LIGHTNING_TRAINERS
from gpulint.linter.analysis.values import target_key
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.findings import AUGMENTS_EVERY_ITEM

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

READS, TOKENIZES, MEMORY, UNKNOWN = "reads", "tokenizes", "memory", "unknown"
# (the kind the loader rules give as a finding's evidence that lifts a rule's hold: findings.py)
AUGMENTS = AUGMENTS_EVERY_ITEM
# Items that do a little work, known to be small: not a cost worth a finding, not nothing either.
LIGHT = "light"

# A run that loads this many batches or fewer is a smoke test, a demo or a benchmark of the model:
# what its loader costs is not what a training run pays.
TINY_RUN_BATCHES = 100

# Dataset classes that decode a file for every item whatever they are given.
_DECODING_DATASETS = re.compile(r"^torchvision\.datasets\.(?:folder\.)?(ImageFolder|DatasetFolder|VideoClips)$")
_TORCHVISION_DATASET = re.compile(r"^torchvision\.datasets\.")
# torchvision datasets that hold their (small) images in memory as arrays, and the transforms that
# only turn such an image into a normalized tensor.
_IN_MEMORY_TORCHVISION = re.compile(
    r"^torchvision\.datasets\.(?:mnist\.|cifar\.|svhn\.)?(MNIST|FashionMNIST|KMNIST|EMNIST|QMNIST|CIFAR10|CIFAR100|SVHN)$"
)
_CONVERSIONS = frozenset({"ToTensor", "Normalize", "PILToTensor", "ConvertImageDtype", "ToImage", "ToDtype"})
# Hugging Face datasets: loaded as Arrow tables (memory-mapped); a per-item transform is work.
_HF_DATASETS = re.compile(r"^datasets\.(load_dataset|load_from_disk|Dataset|DatasetDict|IterableDataset)\b")
_HF_ITEM_TRANSFORMS = frozenset({"with_transform", "set_transform"})
# Wrappers whose items are another dataset's: their cost is that dataset's.
_WRAPPERS = frozenset(
    {
        "torch.utils.data.Subset",
        "torch.utils.data.ConcatDataset",
        "torch.utils.data.random_split",
        "torch.utils.data.dataset.Subset",
        "torch.utils.data.dataset.ConcatDataset",
        "torch.utils.data.dataset.random_split",
    }
)
# What an item of a dataset that only indexes memory may still call: conversions and arithmetic.
_CHEAP_CALLS = frozenset(
    "int float len str bool dict list tuple range min max abs zip enumerate sorted isinstance "
    "tensor as_tensor from_numpy array asarray stack cat long float half bfloat16 view reshape "
    "unsqueeze squeeze clone detach numpy tolist get items keys values item copy".split()
)
# Code that may place work on an accelerator (`accelerator=` itself is stripped first: it is also
# how a trainer is told "cpu").
# A device named anywhere in the code (an accelerator library such as Accelerate may still run on the CPU).
_DEVICE_TEXT = re.compile(r"cuda|gpu|xpu|mps|xla|tpu", re.IGNORECASE)
_ACCELERATOR_TEXT = re.compile(r"cuda|gpu|mps|xla|tpu|accelerat|deepspeed", re.IGNORECASE)


@dataclass(frozen=True)
class ItemCost:
    """What loading an item of a dataset costs: `kind` (READS, AUGMENTS, TOKENIZES, MEMORY or
    UNKNOWN) and, for the first three, `evidence`: what the code does, where, in words a message
    can use after "DataLoader loads batches in the training process: "."""

    kind: str
    evidence: str = ""

    @property
    def costly(self) -> bool:
        """An item does real work: reading, decoding, augmenting or tokenizing."""
        return self.kind in (READS, AUGMENTS, TOKENIZES)


_UNKNOWN = ItemCost(UNKNOWN)
_MEMORY = ItemCost(MEMORY)
_SMALL_IMAGES = ItemCost(LIGHT, "its items are small images held in memory, only converted to tensors")

# The hint of a loader whose items' cost is not known (findings.py `RawFinding.hint`).
UNKNOWN_COST_HINT = "what loading an item costs is not visible here"


@dataclass(frozen=True)
class LoaderVerdict:
    """What the loader rules make of a loader's cost (`LoaderCosts.verdict`): `no_cost` (its items
    are indexed from memory: nothing to report), else `evidence` of a real cost for the message,
    or the `hint` that holds the finding back (no evidence: a dataset not visible here, a run of a
    few batches)."""

    no_cost: bool = False
    evidence: str = ""
    hint: str | None = None
    kind: str = UNKNOWN  # the items' ItemCost kind


class LoaderCosts:
    """The item-cost analysis of one module (`ctx.loaders`), each answer computed when asked."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._costs: dict[int, ItemCost] = {}

    def verdict(self, loader: cst.Call) -> LoaderVerdict:
        """`cost` and `batches_run` weighed for one `DataLoader(...)` call."""
        cost = self.cost(loader)
        if cost.kind == MEMORY:
            return LoaderVerdict(no_cost=True, kind=MEMORY)
        batches = self.batches_run(loader)
        if batches is not None and batches <= TINY_RUN_BATCHES:
            plural = "batch" if batches == 1 else "batches"
            return LoaderVerdict(evidence=cost.evidence, hint=f"the run loads only {batches} {plural}", kind=cost.kind)
        if cost.costly:
            return LoaderVerdict(evidence=cost.evidence, kind=cost.kind)
        if cost.kind == LIGHT:
            return LoaderVerdict(hint=cost.evidence, kind=LIGHT)
        return LoaderVerdict(hint=UNKNOWN_COST_HINT)

    # -- items -------------------------------------------------------------------------------
    def cost(self, loader: cst.Call) -> ItemCost:
        """What loading an item of `loader` (a `DataLoader(...)` call) costs; its `collate_fn`,
        when a function of the module that tokenizes, counts too."""
        dataset = dataloader_dataset(loader)
        cost = self.dataset_cost(dataset) if dataset is not None else _UNKNOWN
        if cost.costly:
            return cost
        collate = keyword_arg(loader, "collate_fn")
        if collate is not None:
            found = self._function_work(collate.value, "`collate_fn`")
            if found is not None:
                return found
        return cost

    def dataset_cost(self, dataset: cst.BaseExpression, depth: int = 4) -> ItemCost:
        cached = self._costs.get(id(dataset))
        if cached is None:
            cached = self._costs[id(dataset)] = self._dataset_cost(dataset, depth)
        return cached

    def _dataset_cost(self, dataset: cst.BaseExpression, depth: int) -> ItemCost:
        ctx = self.ctx
        if isinstance(dataset, cst.Call):
            found = self._call_cost(dataset, depth)
            if found is not None:
                return found
        if in_memory_dataset(ctx, dataset):
            return _MEMORY
        if depth <= 0:
            return _UNKNOWN
        if isinstance(dataset, cst.Subscript):
            # `random_split(...)[0]`, `load_dataset(...)["train"]`, `processed["train"]`: a split of
            # what a call builds
            if isinstance(dataset.value, cst.Call):
                found = self._call_cost(dataset.value, depth - 1)
                if found is not None:
                    return found
            elif self._hugging_face(dataset.value):
                return _MEMORY
        origins = ctx.values.origins(dataset)
        if not origins:
            return _UNKNOWN
        costs = [
            self.dataset_cost(origin, depth - 1)
            for origin in origins
            if origin is not dataset and ctx.qualified_name(origin) not in DATASET_BASES  # (an annotation)
        ]
        return next((c for c in costs if c.costly), None) or (
            _MEMORY if costs and all(c.kind == MEMORY for c in costs) else _UNKNOWN
        )

    def _call_cost(self, call: cst.Call, depth: int) -> ItemCost | None:
        """The cost of a dataset a call builds; None when the call says nothing (follow it)."""
        ctx = self.ctx
        qualified = ctx.call_qualified_name(call) or ""
        name = last_name(call.func) or ""
        if _DECODING_DATASETS.match(qualified):
            return ItemCost(READS, f"`{name}` decodes a file for every item ({self._at(call)})")
        if _TORCHVISION_DATASET.match(qualified) and _transform_argument(call) is not None:
            transform = _transform_argument(call)
            assert transform is not None  # (just checked)
            if _IN_MEMORY_TORCHVISION.match(qualified) and self._only_converts(transform):
                return _SMALL_IMAGES  # small images held in memory, only turned into tensors
            return ItemCost(AUGMENTS, f"`{name}` applies its `transform=` to every item ({self._at(call)})")
        if qualified in _WRAPPERS:
            costs = [self.dataset_cost(arg.value, depth - 1) for arg in positional_args(call)[:1]]
            if qualified.endswith("ConcatDataset") and call.args:
                first = call.args[0].value
                elements = first.elements if isinstance(first, (cst.List, cst.Tuple)) else ()
                costs = [self.dataset_cost(el.value, depth - 1) for el in elements] or costs
            return next((c for c in costs if c.costly), costs[0] if costs else _UNKNOWN)
        if isinstance(call.func, cst.Attribute):
            method = call.func.attr.value
            if method in _HF_ITEM_TRANSFORMS:
                return ItemCost(AUGMENTS, f"`.{method}()` runs a transform on every item ({self._at(call)})")
            if self._hugging_face(call):
                return _MEMORY  # rows of an Arrow table: the `.map()` work is done before training
        if isinstance(call.func, cst.Name) and call.func.value not in ctx.imports.bindings:
            cls = self._class(call.func.value)
            if cls is not None:
                return self._class_cost(cls, call)
        facts = ctx.project.callee(dotted_name(call.func))
        if facts is not None and WORKING_DATASET in facts.returns:
            return ItemCost(
                READS,
                f"an item of `{name}` (another module) reads, decodes, transforms or tokenizes ({self._at(call)})",
            )
        return None

    def _only_converts(self, transform: cst.BaseExpression, depth: int = 2) -> bool:
        """Whether a torchvision transform only turns an image into a normalized tensor
        (`Compose([ToTensor(), Normalize(...)])`): no augmentation, no resizing."""
        if isinstance(transform, cst.Call):
            qualified = self.ctx.call_qualified_name(transform) or ""
            if qualified.rsplit(".", 1)[-1] == "Compose" and is_transform(qualified) and transform.args:
                steps = transform.args[0].value
                return isinstance(steps, (cst.List, cst.Tuple)) and all(
                    self._only_converts(element.value, depth) for element in steps.elements
                )
            return is_transform(qualified) and qualified.rsplit(".", 1)[-1] in _CONVERSIONS
        origins = self.ctx.values.origins(transform) if depth > 0 and target_key(transform) is not None else None
        return bool(origins) and all(self._only_converts(origin, depth - 1) for origin in origins or ())

    def _hugging_face(self, expr: cst.BaseExpression, depth: int = 3) -> bool:
        """A chain of calls and subscripts on a Hugging Face dataset (`load_dataset(...)["train"]
        .map(f)`), also through names it was given (`processed = raw.map(f)`)."""
        for _ in range(8):
            if isinstance(expr, cst.Call):
                if _HF_DATASETS.match(self.ctx.call_qualified_name(expr) or ""):
                    return True
                if not isinstance(expr.func, cst.Attribute):
                    return False
                expr = expr.func.value
            elif isinstance(expr, cst.Subscript):
                expr = expr.value
            else:
                origins = self.ctx.values.origins(expr) if depth > 0 and target_key(expr) is not None else None
                return bool(origins) and all(self._hugging_face(o, depth - 1) for o in origins or ())
        return False

    # -- dataset classes of the module -------------------------------------------------------
    def _class(self, name: str) -> cst.ClassDef | None:
        return next((c for c in self.ctx.index.nodes("ClassDef") if c.name.value == name), None)

    def _class_cost(self, cls: cst.ClassDef, built: cst.Call) -> ItemCost:
        """What `__getitem__` (or `__iter__`) of a dataset class of the module does per item."""
        methods = {
            f.name.value: f for f in cls.body.body if isinstance(f, cst.FunctionDef)
        }  # (a class's own methods: a base class of the module is not followed)
        entry = methods.get("__getitem__") or methods.get("__getitems__") or methods.get("__iter__")
        if entry is None:
            return _UNKNOWN
        seen: set[str] = set()
        pending = [entry]
        only_cheap = True
        while pending:
            method = pending.pop()
            if method.name.value in seen:
                continue
            seen.add(method.name.value)
            where = f"`{entry.name.value}`"
            for node in nodes_under(method.body):
                if not isinstance(node, cst.Call):
                    continue
                work = self._work_of(node, where)
                if work is not None:
                    return work
                callee = node.func
                if (
                    isinstance(callee, cst.Attribute)
                    and isinstance(callee.value, cst.Name)
                    and callee.value.value == "self"
                ):
                    attribute = callee.attr.value
                    if attribute in methods:
                        pending.append(methods[attribute])
                        continue
                    if "transform" in attribute.lower():
                        given = _transform_argument(built)
                        if given is not None and not _is_none(given):
                            applies = f"{where} applies `self.{attribute}` to every item"
                            return ItemCost(AUGMENTS, f"{applies} ({self._at(node)})")
                        continue
                if (last_name(callee) or "") not in _CHEAP_CALLS:
                    only_cheap = False
        return _MEMORY if only_cheap and _indexes_only(entry) else _UNKNOWN

    def _work_of(self, call: cst.Call, where: str) -> ItemCost | None:
        """The work one call of an item's code does: a file read, a transform, a tokenizer."""
        ctx = self.ctx
        qualified = ctx.call_qualified_name(call) or ""
        if qualified == "open" and "open" in ctx.imports.bindings:
            qualified = ""
        if not qualified and isinstance(call.func, cst.Name) and call.func.value == "open":
            qualified = "open"
        reader = reader_phrase(qualified)
        if reader is not None:
            return ItemCost(READS, f"{where} {reader} ({self._at(call)})")
        if is_transform(qualified):
            return ItemCost(AUGMENTS, f"{where} applies `{last_name(call.func)}` to every item ({self._at(call)})")
        if _tokenizer_call(call):
            return ItemCost(TOKENIZES, f"{where} tokenizes with `{dotted_name(call.func)}` ({self._at(call)})")
        return None

    def _function_work(self, expr: cst.BaseExpression, where: str) -> ItemCost | None:
        """The work a function of the module given as `expr` (a `collate_fn`) does on a batch."""
        name = dotted_name(expr)
        if name is None or "." in name:
            return None
        function = next((f for f in self.ctx.index.nodes("FunctionDef") if f.name.value == name), None)
        if function is None:
            return None
        for node in nodes_under(function.body):
            if isinstance(node, cst.Call):
                work = self._work_of(node, where)
                if work is not None:
                    return work
        return None

    def _at(self, node: cst.CSTNode) -> str:
        return f"line {self.ctx.positions([node])[node].start.line}"

    # -- the run ---------------------------------------------------------------------------
    @cached_property
    def cpu_only(self) -> bool:
        """Whether the module says it runs on the CPU alone: a Lightning trainer, Fabric or a
        device written as "cpu" (`Trainer(accelerator="cpu")`, `device = torch.device("cpu")`),
        and nothing in its code names an accelerator; or it runs its step under CPU autocast
        (`torch.cpu.amp.autocast()`, `torch.autocast("cpu")`, as Intel's `ipex` recipes do) and
        names no device at all.  A command line's `--cpu` flag or a
        `"cpu"` fallback beside a "cuda" device is not: the run may use a GPU."""
        ctx = self.ctx
        if self._cpu_autocast and not _DEVICE_TEXT.search(ctx.code_without_comments):
            return True  # Intel's CPU recipes: bf16 autocast on the CPU, no device named
        if _ACCELERATOR_TEXT.search(_without_cpu_keywords(ctx.code_without_comments)):
            return False
        for call in ctx.index.nodes("Call"):
            qualified = ctx.call_qualified_name(call) or ""
            if qualified in LIGHTNING_TRAINERS or qualified.endswith("Fabric"):
                accelerator = keyword_arg(call, "accelerator")
                if accelerator is not None and _string(accelerator.value) == "cpu":
                    return True
            if qualified == "torch.device" and call.args and _string(call.args[0].value) == "cpu":
                return True
        return any(
            target_key(target.target) in ("device", "self.device") and _string(assign.value) == "cpu"
            for assign in ctx.index.nodes("Assign")
            for target in assign.targets
        )

    @cached_property
    def _cpu_autocast(self) -> bool:
        for call in self.ctx.index.nodes("Call"):
            qualified = self.ctx.call_qualified_name(call) or ""
            if qualified == "torch.cpu.amp.autocast":
                return True
            if qualified in ("torch.autocast", "torch.amp.autocast"):
                device = keyword_arg(call, "device_type")
                value = device.value if device is not None else call.args[0].value if call.args else None
                if value is not None and _string(value) == "cpu":
                    return True
        return False

    def batches_run(self, loader: cst.Call) -> int | None:
        """How many batches of `loader` the run loads, when the code caps it: a Lightning trainer's
        `max_steps=`, `limit_train_batches=` (an int) or `fast_dev_run=`, or a loop over the
        loader that breaks at a literal count (`if i == 15: break`, `if step >= 15: break`).  None
        when nothing says."""
        caps = [self._trainer_cap]
        key = self._binding(loader)
        for loop in self._fors:
            if (key is not None and _mentions(loop.iter, key)) or _mentions_node(loop.iter, loader):
                caps.append(_break_count(loop))
        known = [cap for cap in caps if cap is not None]
        return min(known) if known else None

    @cached_property
    def _trainer_cap(self) -> int | None:
        for call in self.ctx.index.nodes("Call"):
            if (self.ctx.call_qualified_name(call) or "") not in LIGHTNING_TRAINERS:
                continue
            caps = []
            for keyword in ("max_steps", "limit_train_batches"):
                arg = keyword_arg(call, keyword)
                if arg is not None and isinstance(arg.value, cst.Integer) and arg.value.evaluated_value >= 0:
                    caps.append(int(arg.value.evaluated_value))
            fast = keyword_arg(call, "fast_dev_run")
            if fast is not None:
                if isinstance(fast.value, cst.Integer):
                    caps.append(int(fast.value.evaluated_value))
                elif dotted_name(fast.value) == "True":
                    caps.append(1)
            if caps:
                return min(caps)
        return None

    @cached_property
    def single_epoch(self) -> bool:
        """Whether the module trains one epoch: a Lightning trainer's `max_epochs=1`, or epoch
        loops that all run once (`for epoch in range(1)`, `range(epochs)` with `epochs = 1`)."""
        for call in self.ctx.index.nodes("Call"):
            if (self.ctx.call_qualified_name(call) or "") in LIGHTNING_TRAINERS:
                epochs = keyword_arg(call, "max_epochs")
                if epochs is not None and isinstance(epochs.value, cst.Integer) and epochs.value.evaluated_value == 1:
                    return True
        epoch_loops = [loop for loop in self._fors if "epoch" in (dotted_name(loop.target) or "").lower()]
        return bool(epoch_loops) and all(self._range_of_one(loop.iter) for loop in epoch_loops)

    def _range_of_one(self, expr: cst.BaseExpression) -> bool:
        if not (isinstance(expr, cst.Call) and dotted_name(expr.func) == "range" and len(expr.args) == 1):
            return False
        return self.literal_value(expr.args[0].value) == 1

    def literal_value(self, expr: cst.BaseExpression) -> int | None:
        """The integer `expr` holds when the module says so: a literal, a name only ever given
        one literal, or a command-line option whose `add_argument(..., default=N)` the module
        declares (`args.epochs` with `--epochs` defaulting to 1), or a function of another module
        it calls declares (the project index).  None when not known."""
        if isinstance(expr, cst.Integer):
            return int(expr.evaluated_value)
        if isinstance(expr, cst.Attribute):
            option = expr.attr.value
            if option not in self._option_defaults:
                # a parser another module of the project builds (`parser = get_argument_parser()`)
                return self.ctx.project.options_elsewhere.get(option)
            default = self._option_defaults[option]
            return int(default.evaluated_value) if isinstance(default, cst.Integer) else None
        values = self.ctx.values.origins(expr) if target_key(expr) is not None else None
        literals = {int(v.evaluated_value) for v in values or () if isinstance(v, cst.Integer)}
        return literals.pop() if values and len(literals) == 1 and len(values) == 1 else None

    @cached_property
    def _option_defaults(self) -> dict[str, cst.BaseExpression]:
        """The defaults of the module's command-line options, by the attribute that holds them
        (`parser.add_argument("--num-workers", default=0)` -> `num_workers`); an option declared
        twice with different defaults is left out."""
        defaults: dict[str, cst.BaseExpression] = {}
        conflicting: set[str] = set()
        for option in self.ctx.command_line:
            if option.default is None:
                continue
            name = option.dest
            if name in defaults and self.ctx.code(defaults[name]) != self.ctx.code(option.default):
                conflicting.add(name)
            defaults[name] = option.default
        return {name: value for name, value in defaults.items() if name not in conflicting}

    def prepared_by_accelerate(self, loader: cst.Call) -> bool:
        """Whether the loader goes through an Accelerate `Accelerator`'s `prepare(...)`, whose
        loader copies each batch to the device itself (without `non_blocking` unless configured)."""
        key = self._binding(loader)
        for call in self.ctx.index.nodes("Call"):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "prepare"):
                continue
            if not any(arg.value is loader or (key is not None and target_key(arg.value) == key) for arg in call.args):
                continue
            receiver = func.value
            origins = [receiver, *(self.ctx.values.origins(receiver) or ())]
            if any(
                isinstance(o, cst.Call) and self.ctx.call_qualified_name(o) in ACCELERATE_ACCELERATORS for o in origins
            ):
                return True
        return False

    def items_on_device(self, loader: cst.Call) -> bool:
        """Whether the loader's dataset is a class of the module whose `__getitem__` moves each item
        to the accelerator (`return image.cuda()`, `.to(self.device)`): its batches are there
        already (nothing to pin), and a forked worker could not use CUDA."""
        dataset = dataloader_dataset(loader)
        pending = [dataset] if dataset is not None else []
        seen: set[int] = set()
        while pending:
            expr = pending.pop()
            if id(expr) in seen or len(seen) > 20:
                continue
            seen.add(id(expr))
            if isinstance(expr, cst.Call):
                name = dotted_name(expr.func)
                for cls in self.ctx.index.nodes("ClassDef"):
                    if cls.name.value == name and self._getitem_moves_to_device(cls):
                        return True
            pending.extend(self.ctx.values.origins(expr) or ())
        return False

    def _getitem_moves_to_device(self, cls: cst.ClassDef) -> bool:
        for method in cls.body.body:
            if isinstance(method, cst.FunctionDef) and method.name.value in ("__getitem__", "__getitems__"):
                return any(
                    isinstance(node, cst.Call)
                    and method_name(node) in ("to", "cuda")
                    and is_device_target(self.ctx, node)
                    for node in nodes_under(method.body)
                )
        return False

    @cached_property
    def _fors(self) -> list[cst.For]:
        return self.ctx.index.nodes("For")

    def _binding(self, call: cst.Call) -> str | None:
        parent = self.ctx.parent(call)
        if isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1:
            return target_key(parent.targets[0].target)
        return None


def _transform_argument(call: cst.Call) -> cst.BaseExpression | None:
    for keyword in ("transform", "transforms"):
        arg = keyword_arg(call, keyword)
        if arg is not None:
            return arg.value
    return None


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _tokenizer_call(call: cst.Call) -> bool:
    """`tokenizer(text)`, `self.tokenizer.encode(text)`, `tok(text, ...)`."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return is_tokenizer_call(func.attr.value, func.attr.value, last_name(func.value))
    return is_tokenizer_call(last_name(func), None, None)


def _indexes_only(method: cst.FunctionDef) -> bool:
    """What `__getitem__` returns is read from what the dataset holds: every return reads
    `self.<attr>` (indexed, or converted), and nothing in it opens a `with` block."""
    returns = [n for n in nodes_under(method.body) if isinstance(n, cst.Return)]
    if not returns or any(isinstance(n, cst.With) for n in nodes_under(method.body)):
        return False
    return all(r.value is not None and _reads_self(r.value) for r in returns)


def _reads_self(expr: cst.CSTNode) -> bool:
    return any(
        isinstance(node, cst.Subscript) or (isinstance(node, cst.Name) and node.value == "self")
        for node in nodes_under(expr)
    ) or isinstance(expr, (cst.Subscript, cst.Name))


def _string(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _without_cpu_keywords(code: str) -> str:
    # `accelerator="cpu"` spells "accelerat" without naming one.
    return re.sub(r"\baccelerator\s*=", "", code)


def _mentions(expr: cst.BaseExpression, key: str) -> bool:
    return any(target_key(node) == key for node in [expr, *nodes_under(expr)] if isinstance(node, cst.BaseExpression))


def _mentions_node(expr: cst.BaseExpression, wanted: cst.CSTNode) -> bool:
    return expr is wanted or any(node is wanted for node in nodes_under(expr))


def _break_count(loop: cst.For) -> int | None:
    """The count a loop breaks at when it says so: `if i == 15: break` / `if i >= 15: break` (or
    `> 14`) on the loop's counter or a counter it increments.  None when it does not."""
    for node in nodes_under(loop.body):
        if not isinstance(node, cst.If) or not _breaks(node):
            continue
        test = node.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            continue
        comparison = test.comparisons[0]
        bound = comparison.comparator
        if not isinstance(bound, cst.Integer):
            continue
        value = int(bound.evaluated_value)
        if isinstance(comparison.operator, (cst.Equal, cst.GreaterThanEqual)):
            return value + 1 if isinstance(comparison.operator, cst.Equal) else value
        if isinstance(comparison.operator, cst.GreaterThan):
            return value + 1
    return None


def _breaks(branch: cst.If) -> bool:
    body = branch.body
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in statement.body):
            return True
        if isinstance(statement, cst.SimpleStatementSuite) and any(isinstance(s, cst.Break) for s in statement.body):
            return True
    return False
