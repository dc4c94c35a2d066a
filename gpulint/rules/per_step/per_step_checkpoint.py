"""GL303 per-step-checkpoint."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.code_shapes import STEP_LOOP
from gpulint.linter.analysis.facts import STEPS
from gpulint.linter.analysis.nodes import last_name
from gpulint.linter.analysis.walk import names_under
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.guards import guard_fix
from gpulint.linter.rule import Invalid, Rule, RuleOption, Valid, positive_int
from gpulint.rules.case_headers import LOGGING_SCRIPT

CHECKPOINT_EVERY = RuleOption(
    "checkpoint-every",
    1000,
    "Interval (in steps) the GL303 fix guards checkpoints with"
    " (at most: a loop of known length saves ten times a pass).",
    int,
    check=positive_int,
)

# Methods that write a checkpoint whatever their receiver.
_SAVE_METHODS = frozenset({"save_pretrained", "save_state", "save_checkpoint", "save_model", "save_weights"})
# `.save(...)` is a checkpoint only on these receivers (an image's or an array's `.save` is not).
_SAVE_RECEIVER = re.compile(
    r"(^|_)(model|net|module|fabric|accelerator|trainer|checkpoint|ckpt|checkpointer|manager|engine)s?$", re.I
)
_SAVE_FUNCTIONS = frozenset({"torch.save", "safetensors.torch.save_file", "safetensors.torch.save_model"})


class PerStepCheckpoint(Rule):
    """
    ## What it finds
    A checkpoint written inside a training step loop, not under an interval guard:
    `torch.save(...)`, `model.save_pretrained(...)`, `accelerator.save_state(...)`,
    `trainer.save_checkpoint(...)`, Keras `model.save(...)` / `save_weights(...)`.  In full-batch
    training (the step loop iterates epochs) a save runs once per epoch and is not reported.  In a
    loop the code bounds to fewer than 50 steps the finding carries a hint and is held back unless
    hints are shown.

    ## Why it is slow
    A checkpoint copies every weight (and the optimizer state, often twice the weights) from the
    GPU to the host and writes it to disk: for a 1 GB model with Adam, about 3 GB per save, seconds
    per step on local disk and far more on network storage -- while the GPU waits.  Saving on
    improvement (`if acc > best_acc:`), in `except` handlers or before a `break` is an event and is
    not reported.

    ## Example
    ```python
    import torch

    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        torch.save(model.state_dict(), "checkpoint.pt")
    ```
    Use instead:
    ```python
    import torch

    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 1000 == 0:
            torch.save(model.state_dict(), "checkpoint.pt")
    ```

    ## Fix (unsafe)
    Wraps the statement in `if <step counter> % <N> == <first value>:`: N is `checkpoint-every`
    (default 1000), or less in a loop whose length the code states, so a checkpoint is still
    written ten times a pass (as GL302 chooses its interval).  Offered only when the loop has a
    step counter.  Unsafe: fewer checkpoints are written, so a crash loses
    more work and the files on disk differ.
    """

    code = "GL303"
    name = "per-step-checkpoint"
    message = "a checkpoint is written on every training step; save every N steps"
    requires = {STEPS}
    tokens = ("save",)
    # what it reports ends in one: a save function or method; run per step
    triggers = (tuple(sorted({name.rsplit(".", 1)[1] for name in _SAVE_FUNCTIONS} | _SAVE_METHODS)), (STEP_LOOP,))
    site_triggers = 1
    fix_applicability = Applicability.UNSAFE
    fixes_test_files = False
    options = (CHECKPOINT_EVERY,)

    VALID = [
        # full-batch training: one step per epoch, so this runs once per epoch
        Valid(
            """
            for epoch in range(num_epochs):
                optimizer.zero_grad()
                loss = criterion(model(features, graph)[train_mask], labels[train_mask])
                loss.backward()
                optimizer.step()
                torch.save(model.state_dict(), "last.pt")
            """,
            header=LOGGING_SCRIPT,
        ),
        # not a checkpoint, throttled, on improvement, before a break
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    image.save("sample.png")
                    np.save("arr.npy", arr)
                    if step % 1000 == 0:
                        torch.save(model.state_dict(), "ckpt.pt")
                    if step % steps_per_epoch == 0 or step == max_steps:
                        manager.save()
                    if acc > best_acc:
                        torch.save(model.state_dict(), "best.pt")
                    if loss.isnan().any():
                        torch.save(model.state_dict(), "crash.pt")
                        break
                    # torch.save(model.state_dict(), "x.pt")
            """,
            header=LOGGING_SCRIPT,
        ),
        # once per epoch
        Valid(
            """
            for epoch in range(3):
                for x, y in loader:
                    model(x).sum().backward()
                    optimizer.step()
                torch.save(model.state_dict(), f"epoch{epoch}.pt")
            """,
            header=LOGGING_SCRIPT,
        ),
        # once: on the last step, at the end of the data
        Valid(
            """
            for step, (x, y) in enumerate(loader):
                model(x).sum().backward()
                optimizer.step()
                if step == num_steps - 1:
                    accelerator.save_state("final")
                if accelerator.gradient_state.end_of_dataloader:
                    torch.save(model.state_dict(), "last.pt")
            """,
            header=LOGGING_SCRIPT,
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
                    torch.save(model.state_dict(), "last.pt")
                    model.save_pretrained("out")
                    accelerator.save_state("ckpt")
                    trainer.save_checkpoint("x.ckpt")
                    model.save("model.keras")
            """,
            "10:9",
            "11:9",
            "12:9",
            "13:9",
            "14:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 1000 == 0:
                        torch.save(model.state_dict(), "last.pt")
                        model.save_pretrained("out")
                        accelerator.save_state("ckpt")
                        trainer.save_checkpoint("x.ckpt")
                        model.save("model.keras")
            """,
        ),
        # aliased torch.save
        Invalid(
            """
            from torch import save
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    save(model.state_dict(), "last.pt")
            """,
            "7:9",
            fixed="""
            from torch import save
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 1000 == 0:
                        save(model.state_dict(), "last.pt")
            """,
        ),
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    torch.save(model.state_dict(), "last.pt")  # keep
            """,
            "10:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 1000 == 0:
                        torch.save(model.state_dict(), "last.pt")  # keep
            """,
        ),
        # the guard uses checkpoint-every
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    torch.save(model.state_dict(), "last.pt")  # keep
            """,
            "10:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 200 == 0:
                        torch.save(model.state_dict(), "last.pt")  # keep
            """,
            options={"checkpoint-every": 200},
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self._is_checkpoint(node) or not self.ctx.loops.per_step_work(node) or self._on_improvement(node):
            return
        if self.ctx.loops.one_step_per_epoch(node):
            return  # full-batch training: a step per epoch, and this saves once per epoch
        interval = self.option(CHECKPOINT_EVERY)
        self.report(
            node,
            fix=guard_fix(self.ctx, node, CHECKPOINT_EVERY.key, interval, "checkpointing"),
            hint=self.ctx.loops.few_steps_hint(node),
        )

    def _is_checkpoint(self, node: cst.Call) -> bool:
        qualified = self.ctx.call_qualified_name(node)
        if qualified is not None:
            return qualified in _SAVE_FUNCTIONS
        func = node.func
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value in _SAVE_METHODS:
            return True
        return func.attr.value == "save" and bool(_SAVE_RECEIVER.search(last_name(func.value) or ""))

    def _on_improvement(self, node: cst.CSTNode) -> bool:
        """`if acc > best_acc: save(...)`: saving on improvement is an event, not per-step work."""
        boundary = self.ctx.loops.step_boundary(node)
        for ancestor in self.ctx.ancestors(node):
            if ancestor is boundary:
                return False
            if isinstance(ancestor, cst.If):
                names = {n.lower() for n in names_under(ancestor.test)}
                if any("best" in n or "improv" in n for n in names):
                    return True
        return False
