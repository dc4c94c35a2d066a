"""GL201 host-sync-in-loop."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.analysis.nodes import dotted_name
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.guards import host_read_guard_fix
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT, TIMED_CUDA_SCRIPT
from gpulint.rules.options import LOG_EVERY

SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist"})
_NAN_CHECKS = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf"})
_FORMATTED = "a tensor formatted into a string in the training loop makes the CPU wait for the GPU every step"


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
    criterion, of a `torch.*` function or of a reduction on another tensor.  A tensor that provably
    lives on the host -- built without a device and never moved (`torch.zeros(3)`), moved there
    (`.cpu()`), an optimizer's `state["step"]` -- is read without waiting for the GPU: not reported.
    Nor is a read in a loop of a handful of steps (`range(15)`, `num_batches = 3`: fewer than 20
    known statically) or under a condition that reads the data (`if loss > 10:`), whose body does
    not run every step.

    ## Why it is slow
    CUDA runs asynchronously: the host queues kernels and moves on.  Reading a value back to the
    host makes it wait until every queued kernel has finished, so the next step's kernels cannot be
    queued while this one runs and the GPU idles between steps.  One `.item()` per step commonly
    costs 5-20% of step time on small models, more with several.  `float(t)`, `str(t)` and
    `if t:` do the same read implicitly.

    ## Example
    ```python
    import torch

    model = Net().cuda()
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    ```
    Use instead: accumulate on the device and read it back every N steps:
    ```python
    import torch

    model = Net().cuda()
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
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
    name = "host-sync-in-loop"
    message = "`.{method}()` in the training loop makes the CPU wait for the GPU every step"
    title = (
        "a tensor read back to the host (`.item()`, `.cpu()`, `float()`) in the training loop makes the CPU wait for "
        "the GPU every step"
    )
    # Its patterns (a method call, an f-string, `%`) are everywhere: the facts are the prefilter.
    requires = {TORCH, ACCELERATOR, STEPS}
    fix_applicability = Applicability.UNSAFE
    fixes_test_files = False
    options = (LOG_EVERY,)

    VALID = [
        # a step function that turns whatever it is given into numbers: the caller decides
        Valid(
            """
            class Meter:
                def update(self, **values):
                    for name, value in values.items():
                        if isinstance(value, torch.Tensor):
                            value = value.item()
                        self.totals[name] += value

            def train_step(x, y, metrics):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                for name, value in metrics.items():
                    if type(value) is torch.Tensor:
                        value = value.item()
                    metrics[name] = value

            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                meter.update(lr=optimizer.param_groups[0]["lr"])
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # tensors on the host: built without a device, an optimizer's step count
        Valid(
            """
            class Adam(torch.optim.Optimizer):
                def step(self):
                    for p in self.params:
                        state = self.state[p]
                        step_t = state["step"]
                        step_t += 1
                        bias_correction = 1 - beta ** step_t.item()

            correct = torch.zeros(1)
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                total = correct.cpu() + 1
                print(correct.item(), total.item(), f"{correct}")
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # a loop of a handful of steps; the body of a condition that reads the data
        Valid(
            """
            def demo(steps=15):
                for i in range(steps):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(loss.item())

            num_batches = 3
            for i in range(num_batches):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())

            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if loss > 10:
                    print(loss.item())
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # not tensors; a NaN check that is not a condition
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    lr = float(args.lr)
                    n = int(len(batch))
                    text = f"step {step} epoch {epoch}"
                    line = "step %d" % step
                    ok = torch.isnan(loss)
                    name = str(epoch)
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # under an interval guard
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        print(loss.item(), float(loss), f"{loss}")
                    if last_batch or step % args.log_interval == 0:
                        meter.update(loss.item())
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # once per epoch, and in an evaluation loop
        Valid(
            """
            for epoch in range(3):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                print(f"epoch {epoch} loss {loss.item()} {float(loss)}")
            for x, y in val_loader:
                acc += (model(x).argmax(1) == y).sum().item()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # no accelerator in the module
        Valid(
            """
            import torch
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
            """,
        ),
        # not PyTorch
        Valid(
            """
            import numpy as np
            dev = "cuda"
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
            """,
        ),
        # comments and strings
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    # total += loss.item()
                    note = "loss.item() and float(loss)"
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        # a tensor built on the host but moved, or built on the device
        Invalid(
            """
            correct = torch.zeros(1)
            correct = correct.to(device)
            step_t = torch.tensor(0.0, device=device)
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                print(correct.item(), step_t.item())
            """,
            "11:11",
            "11:27",
            header=TIMED_CUDA_SCRIPT,
        ),
        # `.cpu().numpy()` is one sync, reported once at `.cpu()`
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
                    arr = loss.detach().cpu().numpy()
                    values = y.tolist()
            """,
            "9:18",
            "10:29",
            "11:18",
            header=TIMED_CUDA_SCRIPT,
        ),
        # implicit reads; `isnan(x) or isinf(x)` is one read, reported once
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += float(loss)
                    seen = int((model(x).argmax(1) == y).sum())
                    text = f"loss {loss:.3f}"
                    line = "loss %.3f" % loss
                    other = "loss {}".format(loss)
                    if torch.isnan(loss):
                        break
                    if not torch.isfinite(loss).all():
                        raise ValueError("diverged")
                    if args.nan_filter and (torch.isnan(loss) or torch.isinf(loss)):
                        continue
            """,
            "9:18",
            "10:16",
            "11:24",
            "12:30",
            "13:34",
            "14:12",
            "16:37",
            "18:33",
            header=TIMED_CUDA_SCRIPT,
        ),
        # in a step function; an except handler is an event
        Invalid(
            """
            def train_step(batch):
                loss = model(batch).loss
                loss.backward()
                optimizer.step()
                return loss.item()

            for batch in loader:
                loss = train_step(batch)
                try:
                    pass
                except RuntimeError:
                    print(loss.item())
            """,
            "8:12",
            header=TIMED_CUDA_SCRIPT,
        ),
        # the value decides control flow: no fix
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if loss.item() < 0.01:
                        break
            """,
            "9:12",
            header=TIMED_CUDA_SCRIPT,
        ),
        # only a read that feeds a log line is guarded; the other feeds the computation
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(f"step {step} loss {loss.item():.4f}")  # comment kept
                    total += loss.item()
            """,
            "9:35",
            "10:18",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        print(f"step {step} loss {loss.item():.4f}")  # comment kept
                    total += loss.item()
            """,
        ),
        # a read-back only log lines use goes under the guard with them
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    lossf = loss.item()
                    print(f"step {step} loss {lossf:.4f}")
                    logger.info("loss %f", lossf)
            """,
            "9:17",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        lossf = loss.item()
                        print(f"step {step} loss {lossf:.4f}")
                        logger.info("loss %f", lossf)
            """,
        ),
        # the guard uses log-every
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(f"loss {loss}")
            """,
            "9:23",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 50 == 0:
                        print(f"loss {loss}")
            """,
            options={"log-every": 50},
        ),
        # TensorFlow and PyTorch on an accelerator in one module: this read is GL201's (GL706 stands aside)
        Invalid(
            """
            import torch
            device = torch.device("cuda")
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                print(loss.numpy())
            """,
            "9:11",
            header=TF_SCRIPT,
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._reported_tests: set[int] = set()

    def _applies(self, node: cst.CSTNode) -> bool:
        return self.ctx.loops.per_step_work(node)

    def _report(self, node: cst.CSTNode, message: str) -> None:
        fix = host_read_guard_fix(self.ctx, node, LOG_EVERY.key, self.option(LOG_EVERY))
        self.report(node, message=message, fix=fix)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS:
            if self.ctx.values.on_host(func.value):
                return  # a host tensor: reading it waits for nothing
            if not _earlier_sync_in_chain(node) and self._applies(node) and not self._converts_a_tensor_argument(node):
                self._report(node, self.message.format(method=func.attr.value))
            return
        if isinstance(func, cst.Name) and func.value in ("float", "int", "bool", "str") and len(node.args) == 1:
            if func.value in self.ctx.imports.bindings or node.args[0].star:
                return
            if self._is_unsynced_tensor(node.args[0].value) and self._applies(node):
                self._report(
                    node, f"`{func.value}()` of a tensor in the training loop makes the CPU wait for the GPU every step"
                )
            return
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "format"
            and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString))
        ):
            for arg in node.args:
                if self._is_unsynced_tensor(arg.value) and self._applies(arg.value):
                    self._report(arg.value, _FORMATTED)
            return
        self._nan_check(node)

    def _nan_check(self, node: cst.Call) -> None:
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else None
        qualified = self.ctx.call_qualified_name(node)
        is_check = (
            qualified is not None and qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _NAN_CHECKS
        ) or (
            qualified is None
            and isinstance(func, cst.Attribute)
            and name in _NAN_CHECKS
            and self.ctx.torch.tensors.is_tensor(func.value)
        )
        if not is_check:
            return
        # Report the outermost call of the chain: `torch.isfinite(loss).all()`.
        outer: cst.CSTNode = node
        parent = self.ctx.parent(outer)
        while (
            isinstance(parent, cst.Attribute)
            and parent.attr.value in ("any", "all")
            and isinstance(call := self.ctx.parent(parent), cst.Call)
        ):
            outer = call
            parent = self.ctx.parent(outer)
        test = self._condition_of(outer)
        if test is None or id(test) in self._reported_tests or not self._applies(outer):
            return
        self._reported_tests.add(id(test))  # `isnan(x) or isinf(x)` is one read: report it once
        self.report(
            outer, message="a NaN/Inf check of a tensor used as a condition makes the CPU wait for the GPU every step"
        )

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if self._is_unsynced_tensor(node.expression) and self._applies(node):
            self._report(node.expression, _FORMATTED)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not (
            isinstance(node.operator, cst.Modulo) and isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString))
        ):
            return
        right = node.right
        values = [el.value for el in right.elements] if isinstance(right, cst.Tuple) else [right]
        for value in values:
            if self._is_unsynced_tensor(value) and self._applies(value):
                self._report(value, _FORMATTED)

    def _converts_a_tensor_argument(self, node: cst.Call) -> bool:
        """`if isinstance(v, torch.Tensor): v = v.item()` (or `type(v) is torch.Tensor`): a helper
        that turns whatever it is given into a number.  Whether it syncs is the caller's choice (a
        caller that passes a tensor is where the read is decided)."""
        assert isinstance(node.func, cst.Attribute)  # visit_Call passes method calls
        receiver = node.func.value
        if not isinstance(receiver, cst.Name):
            return False
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.If):
                test = ancestor.test
                if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
                    if not isinstance(test.comparisons[0].operator, (cst.Is, cst.Equal)):
                        continue
                    test = test.left  # `type(v) is torch.Tensor`
                    checks = ("type",)
                else:
                    checks = ("isinstance",)
                if (
                    isinstance(test, cst.Call)
                    and dotted_name(test.func) in checks
                    and test.args
                    and isinstance(test.args[0].value, cst.Name)
                    and test.args[0].value.value == receiver.value
                ):
                    return True
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return False
        return False

    def _is_unsynced_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor that has not already been read back by a reported `.item()`/`.cpu()`."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SYNC_METHODS:
            return False
        return self.ctx.torch.tensors.is_tensor(expr) and not self.ctx.values.on_host(expr)

    def _condition_of(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The test of the `if`, `while`, conditional expression or assert that `node` is part of."""
        child = node
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, (cst.If, cst.While, cst.IfExp, cst.Assert)):
                return ancestor.test if child is ancestor.test else None
            if isinstance(ancestor, cst.SimpleStatementLine) or isinstance(ancestor, cst.BaseSuite):
                return None
            child = ancestor
        return None


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
