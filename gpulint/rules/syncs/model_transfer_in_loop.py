"""GL202 model-transfer-in-loop."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.code_shapes import STEP_LOOP
from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.analysis.nodes import dotted_name, last_name
from gpulint.linter.analysis.pytorch import is_device_target
from gpulint.linter.analysis.vocabulary import MODULE_NAME
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import TIMED_CUDA_SCRIPT


class ModelTransferInLoop(Rule):
    """
    ## What it finds
    `model.to(device)` or `model.cuda()` on a model (a name such as `model`, `net`, `encoder`,
    `self.model`) inside a training step loop, not under an interval guard.  Held back unless hints
    are shown (a hint on the finding says why): a move in a loop the code bounds to fewer than 50
    steps, and one the same step undoes on purpose (`vae.cpu()` or `vae.to("cpu")` there too, often
    under an offload flag): where the flag is off the move only walks the parameters.

    ## Why it is slow
    Moving a module walks every parameter and buffer.  Even when they are already on the device
    and nothing is copied, that is a Python loop over thousands of tensors every step; when the
    model really moves (offloading and back), every step copies all its weights over PCIe -- for
    a 1 GB model at about 25 GB/s, 40 ms each way.

    ## Example
    ```python
    import torch

    device = torch.device("cuda")
    for x, y in loader:
        model.to(device)
        loss = criterion(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
    ```
    Use instead: move the model once, before the loop:
    ```python
    import torch

    device = torch.device("cuda")
    model.to(device)
    for x, y in loader:
        loss = criterion(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
    ```

    ## Fix
    None: hoisting the call out of the loop is right only if nothing in the loop moves the model
    elsewhere, which a person has to check.
    """

    code = "GL202"
    name = "model-transfer-in-loop"
    hint_by_default = MOSTLY_NOT_WANTED
    message = "the model is moved to the device on every training step; move it once before the loop"
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = (".to(", ".cuda(")
    triggers = ((".to(", ".cuda("), (STEP_LOOP,))  # the copy it reports, run per step
    site_triggers = 1

    VALID = [
        # before the loop
        Valid(
            """
            model = Net().to(device)
            model.cuda()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # a batch, a dtype, the host, throttled
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    x = x.to(device)
                    model.to(torch.float32)
                    model.to("cpu")
                    if step % 1000 == 0:
                        model.cuda()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # an evaluation loop
        Valid(
            """
            for x in val_loader:
                model.to(device)
                model(x)
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    model.to(device)
                    self.encoder.cuda()
            """,
            "9:9",
            "10:9",
            header=TIMED_CUDA_SCRIPT,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda")):
            return
        receiver = func.value
        name = last_name(receiver) if isinstance(receiver, (cst.Name, cst.Attribute)) else None
        if name is None or not MODULE_NAME.search(name):
            return
        if not is_device_target(self.ctx, node) or not self.ctx.loops.per_step_work(node):
            return
        hint = self.ctx.loops.few_steps_hint(node)
        if hint is None and self._offloaded_in_step(node, dotted_name(receiver)):
            hint = "the step also moves the model back to the host (an offload round trip it chose)"
        self.report(node, hint=hint)

    def _offloaded_in_step(self, node: cst.Call, model: str | None) -> bool:
        """Whether the same step moves `model` to the host too (`vae.cpu()`, `vae.to("cpu")`, under
        a flag or not): the move to the device is one half of a deliberate offload."""
        boundary = self.ctx.loops.step_boundary(node)
        if boundary is None or model is None:
            return False
        for call in nodes_under(boundary):
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
                continue
            if dotted_name(call.func.value) != model:
                continue
            method = call.func.attr.value
            to_host_string = (
                method == "to"
                and bool(call.args)
                and isinstance(call.args[0].value, cst.SimpleString)
                and not is_device_target(self.ctx, call)
            )
            if method == "cpu" or to_host_string:
                return True
        return False
