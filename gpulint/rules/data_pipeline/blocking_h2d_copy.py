"""GL104 blocking-h2d-copy."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.code_shapes import STEP_LOOP
from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.dali import iterator_outputs
from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.analysis.nodes import (
    dotted_name,
    has_star_kwargs,
    is_false,
    is_true,
    keyword_arg,
    last_name,
    method_name,
    positional_args,
)
from gpulint.linter.analysis.project import NOT_A_BATCH
from gpulint.linter.analysis.pytorch import ACCELERATE_ACCELERATORS, is_dataloader, is_device_target
from gpulint.linter.analysis.vocabulary import MODULE_NAME, SYNC_METHODS
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.findings import Applicability, Fix, RawFinding
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import CUDA_SCRIPT

# Methods whose result stays where the tensor is (on the host for a batch).
_VIEW_METHODS = frozenset(
    "reshape view flatten squeeze unsqueeze permute transpose contiguous float double half long int bool "
    "bfloat16 clone".split()
)
# Methods that take one item out of a batch dictionary (`batch.pop("input_ids")`): still the batch.
_ITEM_METHODS = frozenset({"pop", "get"})
# Parameters of a step function that hold a batch (`def train_step(model, batch, optimizer)`).
_BATCH_PARAM = re.compile(
    r"batch|^(inputs?|targets?|labels?|images?|imgs?|samples?|data|x|y|xb|yb|features|tokens|input_ids|masks?)$", re.I
)


class BlockingHostToDeviceCopy(Rule):
    """
    ## What it finds
    A batch moved to the accelerator with `.to(device)`, `.cuda()` or `.type(torch.cuda.LongTensor)`
    inside a training step loop without `non_blocking=True` (also a view of it, `x.reshape(...)`, or
    a slice, in a loop nested in the loop over batches).  A tensor an earlier statement of the step
    already moved is not copied again and is not reported, nor is a copy in a module where
    Accelerate places the batches (an `Accelerator` with `device_placement` left on, its default,
    and `accelerator.prepare(loader)`: the prepared loader yields batches already on the device),
    nor a copy of an output of a DALI iterator (`DALIGenericIterator`, `DALIClassificationIterator`)
    that the module's pipeline makes on the GPU -- a `device="mixed"` decoder, a `device="gpu"`
    operator or one given a GPU input, `.gpu()` -- or whose device the module does not show: DALI
    hands GPU outputs over as CUDA tensors.  Outputs the pipeline makes on the host (the reader's
    labels) are reported.
    A batch is what the step loop iterates
    (`for x, y in loader`), what is unpacked or indexed from it (`x, y = batch`, `batch["input_ids"]`,
    `batch.pop("input_ids")`, the values of a `{k: v.to(device) for k, v in batch.items()}`), or a
    batch parameter of a step function.  Copies in one statement (`x, y = x.to(d), y.to(d)`) are one
    finding that counts them, with one fix for all.  Where the module names no GPU (it moves the
    batch to a device it is handed, which may be the host) the message says "the device".

    Held back unless hints are shown (a hint on the finding says why): a copy in a loop the code
    bounds to fewer than 50 steps, and one in a step that reads a tensor back every step
    (`loss.item()`, `float(loss)`): the host then waits for the device to drain anyway, so the next
    copy starts with nothing queued for it to overlap.

    ## Why it is slow
    A blocking copy makes the host wait until the copy has finished before it can queue the
    forward pass, so the copy and the previous step's kernels cannot overlap.  From pinned memory
    (`pin_memory=True`, GL102) a `non_blocking=True` copy is a DMA transfer queued on the stream:
    the host goes on queuing kernels, and the copy of a large image batch (milliseconds over PCIe)
    disappears behind compute.

    ## Example
    ```python
    import torch

    device = torch.device("cuda")
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    Use instead:
    ```python
    import torch

    device = torch.device("cuda")
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix (safe)
    Adds `non_blocking=True`.  Safe for host-to-device copies of batches: the copy is queued on
    the current CUDA stream, so every kernel that later reads the device tensor runs after it, and
    any host read of a device tensor synchronizes first (PyTorch's guide "A guide on good usage of
    non_blocking and pin_memory()").  From pageable memory the copy simply stays synchronous.  The
    one hazard -- writing into the pinned *source* tensor before the copy has run -- does not arise
    for batches, which the loader creates fresh for every step; copies of other tensors (reused
    buffers, device-to-host copies) are not reported.

    No fix for a `.to()` copy in a project that defines a class with its own `to()` method taking
    no `non_blocking` (DETR's `NestedTensor.to(self, device)`, in this module or another module of
    the project): the batch may be one of its objects, and the keyword would raise TypeError on
    the first step.  The message names the class.

    `non_blocking=True` overlaps the copy with compute only from pinned memory.  Where the module
    builds a loader without `pin_memory=True`, the fix's description says to pin it too; the GL102
    fix does so where the loader's batches are worth pinning (`--fix --select GL102,GL104`).
    Unpinned, the copy stays synchronous: the fix changes nothing, for better or worse.
    """

    code = "GL104"
    name = "blocking-h2d-copy"
    message = "batch copied to the GPU without `non_blocking=True`: the host waits for every copy"
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = (".to(", ".cuda(")
    triggers = ((".to(", ".cuda(", ".type("), (STEP_LOOP,))  # the copy it reports, run per step
    site_triggers = 1
    fix_applicability = Applicability.SAFE

    VALID = [
        # Accelerate already placed the batch
        Valid(
            """
            from accelerate import Accelerator
            accelerator = Accelerator()
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for x, y in loader:
                x = x.to(accelerator.device)
                loss = criterion(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
            """,
            header=CUDA_SCRIPT,
        ),
        # asynchronous already, a dtype, the host, the model, not the batch, throttled
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    x = x.to(device, non_blocking=True)
                    y = y.cuda(non_blocking=True)
                    x = x.to(torch.float16)
                    y = y.to("cpu")
                    model.to(device)
                    w = weights.to(device)
                    if step % 100 == 0:
                        z = x.to(device)
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            header=CUDA_SCRIPT,
        ),
        # an evaluation loop takes no step
        Valid(
            """
            for x, y in val_loader:
                pred = model(x.to(device))
            """,
            header=CUDA_SCRIPT,
        ),
        # already on the device: an earlier statement of the step moved it
        Valid(
            """
            for images, targets in loader:
                targets = targets.type(torch.cuda.LongTensor, non_blocking=True)
                if use_gpu:
                    targets = targets.cuda()
                loss = criterion(model(images.cuda(non_blocking=True)), targets)
                loss.backward()
                optimizer.step()
            """,
            header=CUDA_SCRIPT,
        ),
        # an output a DALI pipeline makes on the GPU (a "mixed" decoder, an operator of a GPU
        # input, `.gpu()`): the iterator hands it over as a CUDA tensor
        Valid(
            """
            from nvidia.dali import fn, pipeline_def
            from nvidia.dali.pipeline import Pipeline
            from nvidia.dali.plugin.pytorch import DALIClassificationIterator, DALIGenericIterator

            @pipeline_def
            def train_pipeline(root):
                jpegs, labels = fn.readers.file(file_root=root, name="Reader")
                images = fn.decoders.image(jpegs, device="mixed")
                return fn.crop_mirror_normalize(images, crop=(224, 224)), labels.gpu()

            class ValPipe(Pipeline):
                def __init__(self, root):
                    super().__init__(64, 4, 0)
                    self.input = ops.readers.File(file_root=root)
                    self.decode = ops.decoders.Image(device="cpu")
                def define_graph(self):
                    jpegs, labels = self.input()
                    return self.decode(jpegs).gpu(), labels

            loader = DALIGenericIterator(train_pipeline(batch_size=64, root="train"), ["images", "labels"])
            for data in loader:
                images = data[0]["images"]
                images = images.cuda()
                labels = data[0]["labels"].long().cuda()
                model(images, labels).backward()
                optimizer.step()
            val_loader = DALIClassificationIterator([ValPipe("val")])
            for data in val_loader:
                model(data[0]["data"].cuda(), labels).backward()
                optimizer.step()
            """,
            header=CUDA_SCRIPT,
        ),
        # no accelerator in the module: the only device is the host
        Valid(
            """
            import torch
            dev = torch.device("cpu")
            for x in loader:
                x = x.to(dev)
                model(x).sum().backward()
                opt.step()
            """,
        ),
    ]
    INVALID = [
        # Accelerate told not to place batches
        Invalid(
            """
            from accelerate import Accelerator
            accelerator = Accelerator(device_placement=False)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for x, y in loader:
                x = x.to(accelerator.device)
                loss = criterion(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
            """,
            "8:9",
            header=CUDA_SCRIPT,
            fixed="""
            from accelerate import Accelerator
            accelerator = Accelerator(device_placement=False)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for x, y in loader:
                x = x.to(accelerator.device, non_blocking=True)
                loss = criterion(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
            """,
        ),
        # a DALI output made on the host (the reader's labels, a "cpu" decoder), and every
        # output of a pipeline that makes none on the GPU
        Invalid(
            """
            from nvidia.dali import fn, pipeline_def
            from nvidia.dali.plugin.pytorch import DALIClassificationIterator, DALIGenericIterator

            @pipeline_def
            def train_pipeline(root):
                jpegs, labels = fn.readers.file(file_root=root, name="Reader")
                images = fn.decoders.image(jpegs, device="mixed")
                return images, labels

            @pipeline_def
            def cpu_pipeline(root):
                jpegs, labels = fn.readers.file(file_root=root)
                return fn.decoders.image(jpegs, device="cpu"), labels

            loader = DALIGenericIterator(train_pipeline(batch_size=64, root="train"), ["images", "labels"])
            for data in loader:
                labels = data[0]["labels"].long().cuda()
                model(data[0]["images"], labels).backward()
                optimizer.step()
            for data in DALIClassificationIterator(cpu_pipeline(batch_size=64, root="train")):
                batch = data[0]
                model(batch["data"].cuda(), batch["label"]).backward()
                optimizer.step()
            """,
            "20:39",
            "25:25",
            header=CUDA_SCRIPT,
            fixed="""
            from nvidia.dali import fn, pipeline_def
            from nvidia.dali.plugin.pytorch import DALIClassificationIterator, DALIGenericIterator

            @pipeline_def
            def train_pipeline(root):
                jpegs, labels = fn.readers.file(file_root=root, name="Reader")
                images = fn.decoders.image(jpegs, device="mixed")
                return images, labels

            @pipeline_def
            def cpu_pipeline(root):
                jpegs, labels = fn.readers.file(file_root=root)
                return fn.decoders.image(jpegs, device="cpu"), labels

            loader = DALIGenericIterator(train_pipeline(batch_size=64, root="train"), ["images", "labels"])
            for data in loader:
                labels = data[0]["labels"].long().cuda(non_blocking=True)
                model(data[0]["images"], labels).backward()
                optimizer.step()
            for data in DALIClassificationIterator(cpu_pipeline(batch_size=64, root="train")):
                batch = data[0]
                model(batch["data"].cuda(non_blocking=True), batch["label"]).backward()
                optimizer.step()
            """,
        ),
        # a legacy typed copy, a view of the batch, a rank as the device, a nested loop over keys,
        # a slice moved inside a loop over chunks of the batch
        Invalid(
            """
            def train(model, loader, optimizer, rank, chunk):
                for batch in loader:
                    labels = batch["labels"].type(torch.cuda.LongTensor)
                    images = batch["images"].reshape(8, -1).to(rank)
                    for key in batch:
                        batch[key] = batch[key].to(rank)
                    tokens = batch["tokens"]
                    for start in range(0, tokens.size(1), chunk):
                        piece = tokens[:, start:start + chunk].to(rank, torch.long)
                        model(images, piece, labels).sum().backward()
                    optimizer.step()
            """,
            "6:34",
            "7:49",
            "9:37",
            "12:52",
            header=CUDA_SCRIPT,
            fixed="""
            def train(model, loader, optimizer, rank, chunk):
                for batch in loader:
                    labels = batch["labels"].type(torch.cuda.LongTensor, non_blocking=True)
                    images = batch["images"].reshape(8, -1).to(rank, non_blocking=True)
                    for key in batch:
                        batch[key] = batch[key].to(rank, non_blocking=True)
                    tokens = batch["tokens"]
                    for start in range(0, tokens.size(1), chunk):
                        piece = tokens[:, start:start + chunk].to(
                            rank, torch.long, non_blocking=True
                        )
                        model(images, piece, labels).sum().backward()
                    optimizer.step()
            """,
        ),
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    x = x.to(device)
                    y = y.cuda()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            "6:13",
            "7:13",
            header=CUDA_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    x = x.to(device, non_blocking=True)
                    y = y.cuda(non_blocking=True)
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # views of the batch and a dict comprehension over it
        Invalid(
            """
            for batch in loader:
                inputs, labels = batch
                inputs = inputs.to(device)
                ids = batch["input_ids"].to(device)
                batch = {k: v.to(device) for k, v in batch.items()}
                model(inputs).loss.backward()
                optimizer.step()
            """,
            "6:14",
            "7:30",
            "8:17",
            header=CUDA_SCRIPT,
            fixed="""
            for batch in loader:
                inputs, labels = batch
                inputs = inputs.to(device, non_blocking=True)
                ids = batch["input_ids"].to(device, non_blocking=True)
                batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
                model(inputs).loss.backward()
                optimizer.step()
            """,
        ),
        # items taken out of a batch dictionary
        Invalid(
            """
            for batch in loader:
                input_ids = batch.pop("input_ids").to(device)
                mask = batch.pop("attention_mask")
                mask = mask.to(device)
                loss = model(input_ids, mask, **batch).loss
                loss.backward()
                optimizer.step()
            """,
            "5:40",
            "7:12",
            header=CUDA_SCRIPT,
            fixed="""
            for batch in loader:
                input_ids = batch.pop("input_ids").to(device, non_blocking=True)
                mask = batch.pop("attention_mask")
                mask = mask.to(device, non_blocking=True)
                loss = model(input_ids, mask, **batch).loss
                loss.backward()
                optimizer.step()
            """,
        ),
        # three copies in one statement: one finding that counts them, one fix for all; a module
        # that names no GPU (it moves the batch to a device it is handed) says "the device"
        Invalid(
            """
            def train(model, loader, optimizer, device):
                for x, y, w in loader:
                    x, y, w = x.to(device), y.to(device), w.to(device)
                    loss = (model(x, w) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
            """,
            "4:19",
            header="import torch\n",
            messages=(
                "3 batch tensors copied in one statement to the device without `non_blocking=True`: the host waits "
                "for every copy",
            ),
            fixed="""
            def train(model, loader, optimizer, device):
                for x, y, w in loader:
                    x, y, w = (
                        x.to(device, non_blocking=True),
                        y.to(device, non_blocking=True),
                        w.to(device, non_blocking=True),
                    )
                    loss = (model(x, w) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # a project class with its own `to(self, device)` (DETR's `NestedTensor`): `non_blocking=`
        # would raise TypeError on a batch of it, so `.to()` copies get no fix (`.cuda()` still does)
        Invalid(
            """
            class NestedTensor:
                def __init__(self, tensors, mask):
                    self.tensors, self.mask = tensors, mask
                def to(self, device):
                    return NestedTensor(self.tensors.to(device), self.mask.to(device))

            def train(model, loader, optimizer):
                for samples, labels in loader:
                    samples = samples.to(device)
                    labels = labels.cuda()
                    loss = criterion(model(samples), labels)
                    loss.backward()
                    optimizer.step()
            """,
            "12:19",
            "13:18",
            header=CUDA_SCRIPT,
            messages=(
                "batch copied to the GPU without `non_blocking=True`: the host waits for every copy (no fix: "
                "`NestedTensor` of this project defines its own `to()` without `non_blocking`; on a batch of that "
                "class the keyword raises TypeError)",
                "batch copied to the GPU without `non_blocking=True`: the host waits for every copy",
            ),
            fixed="""
            class NestedTensor:
                def __init__(self, tensors, mask):
                    self.tensors, self.mask = tensors, mask
                def to(self, device):
                    return NestedTensor(self.tensors.to(device), self.mask.to(device))

            def train(model, loader, optimizer):
                for samples, labels in loader:
                    samples = samples.to(device)
                    labels = labels.cuda(non_blocking=True)
                    loss = criterion(model(samples), labels)
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # a batch parameter of a step function
        Invalid(
            """
            def train_step(model, batch, optimizer):
                batch = batch.to(device)
                model.to(device)
                loss = model(batch).sum()
                loss.backward()
                optimizer.step()
            """,
            "5:13",
            header=CUDA_SCRIPT,
            fixed="""
            def train_step(model, batch, optimizer):
                batch = batch.to(device, non_blocking=True)
                model.to(device)
                loss = model(batch).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    x = x.to(device)  # comment
                    y = y.cuda()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            "6:13",
            "7:13",
            header=CUDA_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    x = x.to(device, non_blocking=True)  # comment
                    y = y.cuda(non_blocking=True)
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._batch_names: dict[int, set[str]] = {}  # per step boundary (by id)
        self._statement_findings: dict[int, RawFinding] = {}  # id() of a statement -> its finding
        self._copies: dict[int, int] = {}  # id() of a finding -> the copies it stands for

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda", "type")) or has_star_kwargs(node):
            return
        blocking = keyword_arg(node, "non_blocking")
        if blocking is not None and not is_false(blocking.value):
            return
        if func.attr.value in ("cuda", "type") and len(positional_args(node)) >= 2:
            return  # `.cuda(device, True)`: non_blocking given positionally
        if func.attr.value == "to" and any(is_true(a.value) for a in positional_args(node)[1:]):
            return  # `.to(device, torch.float, True)`
        if not _copies_to_device(self.ctx, node) or not self.ctx.loops.per_step_work(node):
            return
        if self._accelerate_places_batches:
            return  # the batch is on the device already: the copy copies nothing
        receiver = func.value
        root = _root_name(receiver)
        if root is None or MODULE_NAME.search(last_name(receiver) or root):
            return
        if not self._is_batch(node, root) or self._moved_before(node, root):
            return
        if self._from_dali_gpu_output(node, receiver):
            return  # a DALI pipeline made it on the GPU: the copy copies nothing
        message = self._message(1)
        own_to = self._classes_with_own_to[0] if self._classes_with_own_to and func.attr.value == "to" else None
        fix = None
        if own_to is not None:
            message += (
                f" (no fix: `{own_to}` of this project defines its own `to()` without `non_blocking`; "
                "on a batch of that class the keyword raises TypeError)"
            )
        else:
            description = "Copy asynchronously: `non_blocking=True`"
            if self._unpinned_loader:
                description += " (the copy overlaps compute only from pinned memory: also `pin_memory=True`, GL102)"
            fix = set_keyword(self.ctx, node, "non_blocking", "True", Applicability.SAFE, description)
        statement = self.ctx.statement_of(node)
        earlier = self._statement_findings.get(id(statement))
        if earlier is not None:
            self._add_copy(earlier, fix)
            return
        hint = self.ctx.loops.few_steps_hint(node)
        if hint is None and self._step_reads_back(node):
            hint = "the step reads a value back every step: the device is idle when the next copy starts"
        self.report(node, message=message, fix=fix, hint=hint)
        self._statement_findings[id(statement)] = self.findings[-1]

    @cached_property
    def _classes_with_own_to(self) -> list[str]:
        """Classes of the module, then of the rest of the project, whose own `to()` takes no
        `non_blocking` (DETR's `NestedTensor.to(self, device)`): a batch may be one of them."""
        found: list[str] = []
        for cls in self.ctx.index.nodes("ClassDef"):
            class_names = [cls.name.value, *(last_name(base.value) or "" for base in cls.bases)]
            if any(NOT_A_BATCH.search(name) for name in class_names):
                continue  # a dataset, sampler or model: not what a loader yields
            for statement in cls.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == "to":
                    params = statement.params
                    parameters = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
                    if not isinstance(params.star_kwarg, cst.Param) and "non_blocking" not in parameters:
                        found.append(cls.name.value)
        return found + [name for name in self.ctx.project.own_to_elsewhere if name not in found]

    @cached_property
    def _unpinned_loader(self) -> bool:
        """Whether the module builds a DataLoader that does not pin its batches: copies from it
        stay synchronous, `non_blocking` or not."""
        for call in self.ctx.index.nodes("Call"):
            if not is_dataloader(self.ctx, call):
                continue
            keywords = self.ctx.values.keywords_of(call)
            pin = keywords.get("pin_memory") if keywords is not None else None
            if keywords is not None and (pin is None or is_false(pin)) and len(positional_args(call)) < 8:
                return True
        return False

    def _step_reads_back(self, node: cst.Call) -> bool:
        """Whether the step around the copy reads a tensor back on every step (`loss.item()`,
        `float(loss)`, `out.cpu()`): the host then waits for the device to drain each step, so the
        next step's copy starts with nothing queued for it to overlap, blocking or not."""
        boundary = self.ctx.loops.step_boundary(node)
        if not isinstance(boundary, (cst.For, cst.While, cst.FunctionDef)):
            return False
        tensors = self.ctx.torch.tensors
        for call in nodes_under(boundary.body):
            if not isinstance(call, cst.Call):
                continue
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS:
                read = tensors.is_tensor(func.value) and not self.ctx.values.on_host(func.value)
            elif isinstance(func, cst.Name) and func.value in ("float", "int") and len(call.args) == 1:
                read = func.value not in self.ctx.imports.bindings and tensors.is_tensor(call.args[0].value)
            else:
                continue
            if read and self.ctx.loops.per_step_work(call):
                return True
        return False

    def _add_copy(self, finding: RawFinding, fix: Fix | None) -> None:
        """Copies of one statement (`x, y = x.to(d), y.to(d)`) have one cause and one fix: the
        statement's finding counts them, and its fix makes every one of them asynchronous."""
        self._copies[id(finding)] = count = self._copies.get(id(finding), 1) + 1
        finding.message = self._message(count)
        if finding.fix is not None and fix is not None:
            finding.fix = replace(finding.fix, replacements={**finding.fix.replacements, **fix.replacements})

    def _message(self, copies: int) -> str:
        """The message for `copies` blocking copies in one statement; "the device" where the module
        does not say it runs on a GPU (it only moves work to a device it is handed)."""
        target = (
            "the GPU" if self.ctx.names_accelerator or self.ctx.project.accelerator_loop_elsewhere else "the device"
        )
        what = "batch copied" if copies == 1 else f"{copies} batch tensors copied in one statement"
        return f"{what} to {target} without `non_blocking=True`: the host waits for every copy"

    def _moved_before(self, node: cst.Call, root: str) -> bool:
        """Whether `root` already holds a device tensor here: an earlier statement of the same step
        moved it (`label = label.cuda()` ... `label.cuda()` copies nothing)."""
        boundary = self.ctx.loops.step_boundary(node)
        statement = self.ctx.statement_of(node)
        order = self._order
        for assign in self.ctx.index.nodes("Assign"):
            if order[id(assign)] >= order.get(id(node), 0) or self.ctx.statement_of(assign) is statement:
                continue
            if not any(_target_names(t.target) == {root} for t in assign.targets):
                continue
            value = assign.value
            if (
                isinstance(value, cst.Call)
                and _copies_to_device(self.ctx, value)
                and self.ctx.loops.step_boundary(assign) is boundary
            ):
                return True
        return False

    def _from_dali_gpu_output(self, node: cst.Call, receiver: cst.BaseExpression) -> bool:
        """Whether the copied tensor is an output of a DALI iterator that the pipeline did not
        make on the host: on the GPU, or where this module does not say (not guessed at).  The
        output is the one the batch is indexed by (`data[0]["data"]`, also through `images =
        data[0]["data"]`); a batch not indexed by an output name is on the GPU only when every
        output is."""
        boundary = self.ctx.loops.step_boundary(node)
        loops = [boundary] if isinstance(boundary, cst.For) else []
        loops += [a for a in self.ctx.ancestors(node) if isinstance(a, cst.For) and a is not boundary]
        for loop in loops:
            outputs = iterator_outputs(self.ctx, loop.iter)
            if outputs is None:
                continue
            keys = [key for key in self._keys(receiver, boundary, 4) if key in outputs]
            if keys:
                return outputs[keys[0]] != "cpu"
            return all(device != "cpu" for device in outputs.values())
        return False

    def _keys(self, expr: cst.BaseExpression, boundary: cst.CSTNode | None, depth: int) -> list[str]:
        """The string keys a batch expression is indexed by, through the step's plain views
        (`images = data[0]["data"]` ... `images.cuda()` -> `["data"]`)."""
        keys = []
        while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
            if isinstance(expr, cst.Subscript):
                for element in expr.slice:
                    index = element.slice
                    if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                        keys.append(str(index.value.evaluated_value))
                expr = expr.value
            elif isinstance(expr, cst.Attribute):
                expr = expr.value
            elif isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _VIEW_METHODS:
                expr = expr.func.value
            else:
                break
        if keys or depth <= 0 or not isinstance(expr, cst.Name):
            return keys
        for assign in self.ctx.index.nodes("Assign"):
            if self.ctx.loops.step_boundary(assign) is not boundary:
                continue
            if any(_target_names(t.target) == {expr.value} for t in assign.targets) and isinstance(
                assign.value, (cst.Subscript, cst.Attribute)
            ):
                keys += self._keys(assign.value, boundary, depth - 1)
        return keys

    @cached_property
    def _accelerate_places_batches(self) -> bool:
        """An `accelerate.Accelerator` with device placement (its default) that prepares a loader:
        the prepared loader yields batches already on the device."""
        accelerators = [
            call
            for call in self.ctx.index.nodes("Call")
            if self.ctx.call_qualified_name(call) in ACCELERATE_ACCELERATORS
        ]
        if not accelerators or any(
            (placement := keyword_arg(call, "device_placement")) is not None and is_false(placement.value)
            for call in accelerators
        ):
            return False
        return any(method_name(call) in ("prepare", "prepare_data_loader") for call in self.ctx.index.nodes("Call"))

    @cached_property
    def _order(self) -> dict[int, int]:
        """Source order of the walked nodes (by id)."""
        return {id(n): i for i, n in enumerate(self.ctx.index.ordered)}

    def _is_batch(self, node: cst.Call, root: str) -> bool:
        # A comprehension over the batch: `{k: v.to(device) for k, v in batch.items()}`.
        boundary = self.ctx.loops.step_boundary(node)
        names = self._names_for(boundary)
        for ancestor in self.ctx.ancestors(node):
            if ancestor is boundary:
                break
            if isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
                comp: cst.CompFor | None = ancestor.for_in
                while comp is not None:
                    iterated = comp.iter
                    if isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute):
                        iterated = iterated.func.value  # batch.items()
                    if root in _target_names(comp.target) and _root_name(iterated) in names:
                        return True
                    comp = comp.inner_for_in
        return root in names

    def _names_for(self, boundary: cst.CSTNode | None) -> set[str]:
        """The names holding the batch in a step loop or step function."""
        if boundary is None:
            return set()
        names = self._batch_names.get(id(boundary))
        if names is not None:
            return names
        names = set()
        # A step loop nested in the loop over batches (micro-batches, chunks of a sequence) sees
        # that loop's batch too.
        loops = [boundary] if isinstance(boundary, cst.For) else []
        for ancestor in self.ctx.ancestors(boundary):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, cst.For):
                loops.append(ancestor)
        for loop in loops:
            names |= _target_names(loop.target)
        if isinstance(boundary, cst.FunctionDef):
            names |= {p.name.value for p in boundary.params.params if _BATCH_PARAM.search(p.name.value)}
        assigns = [
            a
            for a in self.ctx.index.nodes("Assign")
            if self.ctx.loops.step_boundary(a) is boundary
            or any(x is loop for x in self.ctx.ancestors(a) for loop in loops)
        ]
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


def _root_name(expr: cst.BaseExpression) -> str | None:
    """`batch` for `batch`, `batch["x"]`, `batch.x`, `batch[0].x`, `ids[:, i:i + n]`, through
    methods that keep a tensor where it is (`x.reshape(n, -1)`, `x.long()`), and through an item
    taken out of a batch dictionary (`batch.pop("input_ids")`, `batch.get("labels")`)."""
    while True:
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and (
                expr.func.attr.value in _VIEW_METHODS
                or (expr.func.attr.value in _ITEM_METHODS and positional_args(expr))
            )
        ):
            expr = expr.func.value
        else:
            return expr.value if isinstance(expr, cst.Name) else None


def _copies_to_device(ctx: FileContext, call: cst.Call) -> bool:
    """`.to(device)`, `.cuda()`, or `.type(torch.cuda.LongTensor)`: a copy to the accelerator."""
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value not in ("to", "cuda", "type"):
        return False  # `y = prep(y)`, `m = batch.pop("mask")`: copies nothing
    if call.func.attr.value != "type":
        return is_device_target(ctx, call)
    positional = positional_args(call)
    keyword = keyword_arg(call, "dtype")
    target = keyword.value if keyword is not None else positional[0].value if positional else None
    if isinstance(target, cst.SimpleString):
        return str(target.evaluated_value).startswith("torch.cuda.")
    return target is not None and (ctx.qualified_name(target) or "").startswith("torch.cuda.")


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
    """`batch`, `batch["x"]`, `batch.x`, `(batch[0], batch[1])`, `batch.pop("x")`: the batch
    itself, not a result."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return bool(expr.elements) and all(_is_plain_view(el.value, names) for el in expr.elements)
    item = (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _ITEM_METHODS
        and bool(positional_args(expr))
    )
    return (item or isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript))) and _root_name(expr) in names
