"""GL2xx: host-device synchronisation -- the CPU waiting for the GPU inside the step."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.context import FileContext, has_star_kwargs, keyword_arg
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.fix.builders import append_keyword, guard_fix
from gpulint.linter.rule import Rule
from gpulint.linter.analysis.values import last_name
from gpulint.rules.data_pipeline import MODULE_NAME, is_device_target
from gpulint.rules.per_step import PerStepLogging, enclosing_logging_call, per_step_work

SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist"})


def _earlier_sync_in_chain(call: cst.Call) -> bool:
    """`x.cpu().numpy()`: the `.cpu()` already synced; report the chain once, at its first sync."""
    node = call.func.value if isinstance(call.func, cst.Attribute) else None
    while node is not None:
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in SYNC_METHODS:
                return True
            node = node.func
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return False
    return False


# -- which expressions are tensors ---------------------------------------------------------------
# Methods whose result is a tensor when their receiver is one (reductions and element-wise ops).
_TENSOR_METHODS = frozenset(
    "sum mean max min norm std var prod argmax argmin amax amin count_nonzero any all abs sqrt exp log "
    "float double half bfloat16 detach clone squeeze unsqueeze flatten view reshape eq ne gt lt ge le "
    "isnan isinf isfinite sigmoid softmax log_softmax".split()
)
# `torch.<name>` functions that do not return a tensor (or whose tensor is on the host anyway).
_TORCH_NOT_TENSOR = re.compile(r"^(get_|is_|set_|manual_seed|device|dtype|Size|no_grad|compile|save|load|from_numpy|tensor|as_tensor)")
_LOSSY_NAME = re.compile(r"(^|_)(loss|losses|criterion|loss_fn|lossfn|loss_func|loss_function)$", re.I)
_NAN_CHECKS = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf"})


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
                rest = qualified[len("torch."):] if qualified.startswith("torch.") else None
                if rest is None:
                    return False
                if rest.startswith("nn.functional."):
                    return True
                return "." not in rest and not _TORCH_NOT_TENSOR.match(rest)
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _TENSOR_METHODS:
                receiver = func.value
                if isinstance(receiver, cst.Comparison):
                    return self.is_tensor(receiver.left) or any(self.is_tensor(c.comparator) for c in receiver.comparisons)
                return self.is_tensor(receiver)
            # `criterion(out, y)` returns the loss, `model(x)` / `self.net(x)` the outputs.
            callee = last_name(func) or ""
            return bool(_LOSSY_NAME.search(callee) or MODULE_NAME.search(callee))
        return False


def _name_key(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return f"self.{expr.attr.value}"
    return None


def _condition_of(ctx: FileContext, node: cst.CSTNode) -> cst.BaseExpression | None:
    """The test of the `if`, `while`, conditional expression or assert that `node` is part of."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.While, cst.IfExp, cst.Assert)):
            return ancestor.test if child is ancestor.test else None
        if isinstance(ancestor, cst.SimpleStatementLine) or isinstance(ancestor, cst.BaseSuite):
            return None
        child = ancestor
    return None


class HostSyncInLoop(Rule):
    """
    ## What it finds
    A value read back from the GPU inside a training step loop, not under an interval guard, in a
    PyTorch module that trains on an accelerator:

    * `.item()`, `.cpu()`, `.numpy()` and `.tolist()` on a tensor;
    * `float(loss)` / `int(correct)` of a tensor;
    * a tensor formatted into a string: `f"{loss}"`, `"%f" % loss`, `"{}".format(loss)`, `str(loss)`;
    * a NaN/Inf check used as a condition: `if torch.isnan(loss)`, `if not torch.isfinite(loss).all()`.

    A tensor is the loss (the receiver of `.backward()`), `outputs.loss`, the result of a
    criterion, of a `torch.*` function or of a reduction on another tensor.

    ## Why it is slow
    CUDA runs asynchronously: the host queues kernels and moves on.  Reading a value back to the
    host makes it wait until every queued kernel has finished, so the next step's kernels cannot be
    queued while this one runs and the GPU idles between steps.  One `.item()` per step commonly
    costs 5-20% of step time on small models, more with several.  `float(t)`, `str(t)` and
    `if t:` do the same read implicitly.

    ## Example
    ```python
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    ```
    Use instead: accumulate on the device and read it back every N steps:
    ```python
        total_loss += loss.detach()
        if step % 100 == 0:
            print(total_loss.item() / (step + 1))
    ```

    ## Fix (unsafe)
    Where the value only feeds a logging call (`print(f"{loss.item()}")`), the statement is wrapped
    in `if <step counter> % <log-every> == 0:`, as GL302 does.  Elsewhere -- the value feeds the
    computation, or decides control flow (`if torch.isnan(loss): break`, early stopping) -- there is
    no automatic fix: the read is still a sync, but skipping it would change what the program does.
    Unsafe: the program prints less often.
    """

    code = "GL201"
    needs_accelerator = True
    needs_step = True
    name = "host-sync-in-loop"
    message = "`.{method}()` in the training loop makes the CPU wait for the GPU every step"
    # Every finding is inside a step loop or step function, and each of those holds a step call
    # (DESIGN §2): these are the tokens of every kind of step call.
    tokens = ("backward", ".step", "training_step", "gradient", ".apply", "train_on_batch")
    fix_applicability = Applicability.UNSAFE

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._tensors: TensorNames | None = None
        self._reported_tests: set[int] = set()

    @property
    def tensors(self) -> TensorNames:
        if self._tensors is None:
            self._tensors = TensorNames(self.ctx)
        return self._tensors

    def _applies(self, node: cst.CSTNode) -> bool:
        return self.ctx.uses_torch and self.ctx.accelerated and per_step_work(self.ctx, node)

    def _report(self, node: cst.CSTNode, message: str) -> None:
        fix = None
        if enclosing_logging_call(self.ctx, node) is not None:
            interval = self.ctx.options.get("log-every", PerStepLogging.options["log-every"].default)
            fix = guard_fix(self.ctx, node, "log-every", interval, "logging")
        self.report(node, message=message, fix=fix)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS:
            if not _earlier_sync_in_chain(node) and self._applies(node):
                self._report(node, self.message.format(method=func.attr.value))
            return
        if isinstance(func, cst.Name) and func.value in ("float", "int", "bool", "str") and len(node.args) == 1:
            if func.value in self.ctx.imports.bindings or node.args[0].star:
                return
            if self._is_unsynced_tensor(node.args[0].value) and self._applies(node):
                self._report(node, f"`{func.value}()` of a tensor in the training loop makes the CPU wait for the GPU every step")
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "format" and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString)):
            for arg in node.args:
                if self._is_unsynced_tensor(arg.value) and self._applies(arg.value):
                    self._report(arg.value, "a tensor formatted into a string in the training loop makes the CPU wait for the GPU every step")
            return
        self._nan_check(node)

    def _nan_check(self, node: cst.Call) -> None:
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else None
        qualified = self.ctx.call_qualified_name(node)
        is_check = (qualified is not None and qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _NAN_CHECKS) or (
            qualified is None and name in _NAN_CHECKS and self.tensors.is_tensor(func.value)
        )
        if not is_check:
            return
        # Report the outermost call of the chain: `torch.isfinite(loss).all()`.
        outer: cst.CSTNode = node
        parent = self.ctx.parent(outer)
        while isinstance(parent, cst.Attribute) and parent.attr.value in ("any", "all") and isinstance(self.ctx.parent(parent), cst.Call):
            outer = self.ctx.parent(parent)
            parent = self.ctx.parent(outer)
        test = _condition_of(self.ctx, outer)
        if test is None or id(test) in self._reported_tests or not self._applies(outer):
            return
        self._reported_tests.add(id(test))  # `isnan(x) or isinf(x)` is one read: report it once
        self.report(outer, message="a NaN/Inf check of a tensor used as a condition makes the CPU wait for the GPU every step")

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if self._is_unsynced_tensor(node.expression) and self._applies(node):
            self._report(node.expression, "a tensor formatted into a string in the training loop makes the CPU wait for the GPU every step")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not (isinstance(node.operator, cst.Modulo) and isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString))):
            return
        right = node.right
        values = [el.value for el in right.elements] if isinstance(right, cst.Tuple) else [right]
        for value in values:
            if self._is_unsynced_tensor(value) and self._applies(value):
                self._report(value, "a tensor formatted into a string in the training loop makes the CPU wait for the GPU every step")

    def _is_unsynced_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor that has not already been read back by a reported `.item()`/`.cpu()`."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SYNC_METHODS:
            return False
        return self.tensors.is_tensor(expr)


class ModelTransferInLoop(Rule):
    """
    ## What it finds
    `model.to(device)` or `model.cuda()` on a model (a name such as `model`, `net`, `encoder`,
    `self.model`) inside a training step loop, not under an interval guard.

    ## Why it is slow
    Moving a module walks every parameter and buffer.  Even when they are already on the device
    and nothing is copied, that is a Python loop over thousands of tensors every step; when the
    model really moves (offloading and back), every step copies all its weights over PCIe -- for
    a 1 GB model at about 25 GB/s, 40 ms each way.

    ## Example
    ```python
    for x, y in loader:
        model.to(device)
        loss = criterion(model(x.to(device)), y.to(device))
    ```
    Use instead: move the model once, before the loop:
    ```python
    model.to(device)
    for x, y in loader:
        ...
    ```

    ## Fix
    None: hoisting the call out of the loop is right only if nothing in the loop moves the model
    elsewhere, which a person has to check.
    """

    code = "GL202"
    needs_accelerator = True
    needs_step = True
    name = "model-transfer-in-loop"
    message = "the model is moved to the device on every training step; move it once before the loop"
    tokens = (".to(", ".cuda(")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda")):
            return
        if not (self.ctx.uses_torch and self.ctx.accelerated):
            return
        receiver = func.value
        name = last_name(receiver) if isinstance(receiver, (cst.Name, cst.Attribute)) else None
        if name is None or not MODULE_NAME.search(name):
            return
        if not is_device_target(self.ctx, node) or not per_step_work(self.ctx, node):
            return
        self.report(node)


# Factories that build a tensor on the host when no `device=` is given.
_FACTORIES = frozenset(
    "zeros ones empty full arange linspace logspace eye tensor as_tensor zeros_like ones_like empty_like "
    "full_like rand randn randint randperm rand_like randn_like randint_like normal bernoulli tril_indices triu_indices".split()
)
# Random factories draw from another generator on the device: values differ (the fix is unsafe).
_RANDOM_FACTORIES = frozenset("rand randn randint randperm rand_like randn_like randint_like normal bernoulli".split())
# `_like` factories take the device of their input, which may already be on the GPU.
_LIKE_FACTORIES = frozenset(f for f in _FACTORIES if f.endswith("_like"))


class HostTensorThenCopy(Rule):
    """
    ## What it finds
    A tensor built on the host by a factory and then copied to the accelerator:
    `torch.zeros(n).to(device)`, `torch.arange(n).cuda()`, `torch.tensor(values).to(device)`.

    ## Why it is slow
    The factory allocates and fills host memory, then `.to(device)` makes a second, blocking copy
    from pageable memory: the host waits for the transfer and the GPU for the host.  With
    `device=` the tensor is created on the device directly -- one allocation and a kernel, no
    transfer (for `torch.tensor(values)`, one copy instead of two).  Inside `forward()` or a step
    loop this happens every step.

    ## Example
    ```python
    positions = torch.arange(seq_len).to(device)
    ```
    Use instead:
    ```python
    positions = torch.arange(seq_len, device=device)
    ```

    ## Fix (safe)
    Moves the device into the factory: `device=<the .to() argument>` (`.cuda()` becomes
    `device="cuda"`).  Safe for deterministic factories: the values are identical.  Unsafe for
    random factories (`torch.rand`, `randn`, `randint`, `randperm`, ...): on the device they draw
    from the device's generator, so the numbers differ from the host's for the same seed.  Not
    offered when `.to()` also changes the dtype, copies, asks for `non_blocking`, or takes another
    tensor (`.to(x)` takes `x`'s dtype too), nor when the factory already names a device.
    """

    code = "GL203"
    needs_accelerator = True
    name = "host-tensor-then-copy"
    message = "`torch.{factory}(...)` is built on the host and then copied to the device; pass `device=` instead"
    tokens = (".to(", ".cuda(")
    fix_applicability = Applicability.SAFE

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda")):
            return
        factory = func.value
        if not (isinstance(factory, cst.Call) and self.ctx.uses_torch and self.ctx.accelerated):
            return
        qualified = self.ctx.call_qualified_name(factory)
        if qualified is None or not qualified.startswith("torch.") or qualified.count(".") != 1:
            return
        name = qualified.split(".", 1)[1]
        if name not in _FACTORIES or name in _LIKE_FACTORIES or has_star_kwargs(factory) or has_star_kwargs(node):
            return
        if keyword_arg(factory, "device") is not None or not is_device_target(self.ctx, node):
            return
        self.report(node, message=self.message.format(factory=name), fix=self._fix(node, factory, name))

    def _fix(self, node: cst.Call, factory: cst.Call, name: str):
        if keyword_arg(node, "non_blocking") is not None:
            return None  # the author wants an asynchronous copy (of a pinned tensor?): not ours to drop
        args = list(node.args)
        if node.func.attr.value == "cuda":
            if args:
                return None  # `.cuda(1)`: the index would need translating
            device: cst.BaseExpression = cst.SimpleString('"cuda"')
        else:
            if len(args) != 1 or (args[0].keyword is not None and args[0].keyword.value != "device"):
                return None  # a dtype or `copy=` as well: keep it for a person
            device = args[0].value
            if not _device_like(self.ctx, device):
                return None  # `.to(other_tensor)` also takes its dtype: `device=` would not do the same
        applicability = Applicability.UNSAFE if name in _RANDOM_FACTORIES else Applicability.SAFE
        new = append_keyword(factory, "device", device)
        # The `.to()` call is replaced by the factory itself, keeping the outer parentheses.
        new = new.with_changes(lpar=node.lpar, rpar=node.rpar)
        return Fix(applicability, f"Create the tensor on the device: `torch.{name}(..., device=...)`", {node: new})


_DEVICE_NAME = re.compile(r"device|^dev$|gpu|cuda|rank", re.I)


def _device_like(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """A device (not a tensor or dtype): a string, `torch.device(...)`, or a name that says so."""
    if isinstance(expr, (cst.SimpleString, cst.Integer)):
        return True
    if isinstance(expr, cst.Call):
        return ctx.call_qualified_name(expr) == "torch.device"
    return bool(_DEVICE_NAME.search(last_name(expr) or ""))


_SYNCHRONIZE = frozenset(
    {
        "torch.cuda.synchronize",
        "torch.accelerator.synchronize",
        "torch.xpu.synchronize",
        "torch.mps.synchronize",
    }
)
_STREAM_GETTERS = frozenset({"torch.cuda.current_stream", "torch.cuda.default_stream", "torch.accelerator.current_stream"})
_TIMERS = re.compile(r"^(time\.(time|perf_counter|monotonic|process_time)(_ns)?|timeit\.default_timer)$")


class SynchronizeInLoop(Rule):
    """
    ## What it finds
    `torch.cuda.synchronize()` (or `torch.accelerator.synchronize()`, a stream's `.synchronize()`)
    inside a training step loop, not under an interval guard, where the loop does not time
    anything (no `time.perf_counter()`, `time.time()` or CUDA event timing in the loop).

    ## Why it is slow
    A synchronize makes the host wait until the GPU has finished every queued kernel.  The host can
    no longer run ahead and queue the next step while this one computes, so each step pays the
    Python overhead of queuing on top of the GPU time: often 10-30% of step time on models with
    small kernels.  Correct PyTorch code never needs it for correctness on one stream.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
    ```
    Use instead: delete the call, or keep it only where you time steps.

    ## Fix
    None: a synchronize may guard work with other streams or an external library, which only a
    person can rule out.  Loops that time steps need it and are not reported.
    """

    code = "GL204"
    needs_step = True
    name = "synchronize-in-loop"
    message = "`synchronize()` in the training loop makes the CPU wait for the GPU every step"
    tokens = ("synchronize",)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qualified = self.ctx.call_qualified_name(node)  # also `from torch.cuda import synchronize`
        if qualified is None and isinstance(func, cst.Attribute) and func.attr.value == "synchronize":
            if isinstance(func.value, cst.Call) and self.ctx.call_qualified_name(func.value) in _STREAM_GETTERS:
                qualified = "torch.cuda.synchronize"  # torch.cuda.current_stream().synchronize()
        if qualified not in _SYNCHRONIZE:
            return
        if not per_step_work(self.ctx, node) or self._timing(node):
            return
        self.report(node)

    def _timing(self, node: cst.CSTNode) -> bool:
        """Whether the step loop (or step function) around `node` measures time."""
        boundary = self.ctx.loops.step_boundary(node)
        for call in self.ctx.index.nodes("Call"):
            if self.ctx.loops.step_boundary(call) is not boundary:
                continue
            name = self.ctx.call_qualified_name(call) or ""
            func = call.func
            if _TIMERS.match(name) or (isinstance(func, cst.Attribute) and func.attr.value in ("elapsed_time", "record")):
                return True
            if isinstance(func, cst.Name) and func.value in ("perf_counter", "time") and name.startswith("time."):
                return True
        return False
