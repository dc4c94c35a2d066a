"""GL203 host-tensor-then-copy."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import ACCELERATOR, TORCH
from gpulint.linter.analysis.nodes import has_star_kwargs, keyword_arg, last_name
from gpulint.linter.analysis.pytorch import is_device_target
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.fix.builders import append_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import TIMED_CUDA_SCRIPT

# Factories that build a tensor on the host when no `device=` is given.
_FACTORIES = frozenset(
    "zeros ones empty full arange linspace logspace eye tensor as_tensor zeros_like ones_like empty_like "
    "full_like rand randn randint randperm rand_like randn_like randint_like normal bernoulli tril_indices triu_indices".split()
)
# Random factories draw from another generator on the device: values differ (the fix is unsafe).
_RANDOM_FACTORIES = frozenset("rand randn randint randperm rand_like randn_like randint_like normal bernoulli".split())
# `_like` factories take the device of their input, which may already be on the GPU.
_LIKE_FACTORIES = frozenset(f for f in _FACTORIES if f.endswith("_like"))
_DEVICE_NAME = re.compile(r"device|^dev$|gpu|cuda|rank", re.I)


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
    import torch

    device = torch.device("cuda")
    positions = torch.arange(seq_len).to(device)
    ```
    Use instead:
    ```python
    import torch

    device = torch.device("cuda")
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
    name = "host-tensor-then-copy"
    message = "`torch.{factory}(...)` is built on the host and then copied to the device; pass `device=` instead"
    requires = {TORCH, ACCELERATOR}
    tokens = (".to(", ".cuda(")
    fix_applicability = Applicability.SAFE

    VALID = [
        Valid(
            """
            import numpy as np
            a = torch.zeros(3, device=device)
            b = torch.zeros(3, device="cpu").to(device)
            c = torch.zeros_like(x).to(device)
            d = torch.zeros(3).to(torch.float16)
            e = torch.zeros(3).to("cpu")
            f = np.zeros(3).to(device)
            g = torch.from_numpy(arr).to(device)
            # h = torch.zeros(3).to(device)
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # no accelerator in the module: the only device is the host
        Valid(
            """
            import torch
            dev = "cpu"
            a = torch.zeros(3).to(dev)
            """,
        ),
    ]
    INVALID = [
        # deterministic factories: safe; an asynchronous copy is the author's choice (no fix)
        Invalid(
            """
            a = torch.zeros(3, 4).to(device)  # kept
            b = (torch.arange(10).cuda())
            c = torch.tensor([1, 2]).to(device=device)
            e = torch.tensor([1, 2]).to(device, non_blocking=True)
            """,
            "4:23", "5:23", "6:26", "7:26",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            a = torch.zeros(3, 4, device=device)  # kept
            b = (torch.arange(10, device="cuda"))
            c = torch.tensor([1, 2], device=device)
            e = torch.tensor([1, 2]).to(device, non_blocking=True)
            """,
        ),
        # a random factory draws from the device's generator: unsafe
        Invalid(
            "d = torch.randn(5).to(device)\n",
            "4:20",
            header=TIMED_CUDA_SCRIPT,
            fixed="d = torch.randn(5, device=device)\n",
            applicability=Applicability.UNSAFE,
        ),
        # no fix: a dtype too, a device index, `.to(grad)` takes grad's dtype as well
        Invalid(
            """
            a = torch.zeros(3).to(device, torch.float16)
            b = torch.ones(2).cuda(1)
            c = torch.zeros(4).to(grad)
            """,
            "4:20", "5:19", "6:20",
            header=TIMED_CUDA_SCRIPT,
        ),
        Invalid(
            "stop = torch.ones(n, 1).to(masks.device)\n",
            "4:25",
            header=TIMED_CUDA_SCRIPT,
            fixed="stop = torch.ones(n, 1, device=masks.device)\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda")):
            return
        factory = func.value
        if not isinstance(factory, cst.Call):
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

    def _fix(self, node: cst.Call, factory: cst.Call, name: str) -> Fix | None:
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


def _device_like(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """A device (not a tensor or dtype): a string, `torch.device(...)`, or a name that says so."""
    if isinstance(expr, (cst.SimpleString, cst.Integer)):
        return True
    if isinstance(expr, cst.Call):
        return ctx.call_qualified_name(expr) == "torch.device"
    return bool(_DEVICE_NAME.search(last_name(expr) or ""))
