"""GL403 no-compile."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.analysis.nodes import dotted_name
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import insert_after
from gpulint.linter.rule import Invalid, Rule, Valid

_COMPILE_TEXT = re.compile(
    r"(?<![a-z0-9])compile(?![a-z])|torch\.jit|dynamo|torchscript|tensorrt|\bjit\b", re.IGNORECASE
)
_REGEX_COMPILE = re.compile(r"\b(re|regex)\s*\.\s*compile\b")


class NoCompile(Rule):
    """
    ## What it finds
    A module that trains a PyTorch model on an accelerator with its own loop and never compiles it:
    no `torch.compile`, `model.compile()`, TorchScript, or `--compile` flag.  Reported once, at the
    line that builds the model whose parameters the optimizer trains (or the optimizer, or the first
    `.backward()` when the model cannot be found).  Scripts run by Accelerate or DeepSpeed are left
    out (their configuration can compile the model); Lightning and Fabric scripts are not (they leave
    `torch.compile` to the script).

    ## Why it is slow
    In eager mode every operation is a separate kernel launch that reads and writes memory; the
    compiler fuses chains of pointwise operations and cuts Python overhead.  PyTorch 2.0 measured a
    43% average training speed-up over 163 open-source models on an A100 (1.3-2x typical).

    ## Example
    ```python
    import torch

    model = Net().to("cuda")
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    Use instead:
    ```python
    import torch

    model = Net().to("cuda")
    model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix (unsafe)
    Adds `model = torch.compile(model)` after the model's line, when that line is a plain assignment
    in the same block as the optimizer.  Unsafe: compilation can fail on dynamic Python code, costs
    start-up time, and changes the `state_dict` keys the program saves (`_orig_mod.` prefix).  Needs
    PyTorch 2.0: not offered to a project whose requirements allow an older one.  A hint: off by
    default.
    """

    code = "GL403"
    name = "no-compile"
    message = "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster"
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("backward",)
    default = "hint"
    fix_applicability = Applicability.UNSAFE

    VALID = [
        # no accelerator
        Valid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # Accelerate can compile through its configuration (`dynamo_backend`)
        Valid(
            """
            import torch
            from accelerate import Accelerator
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # a library helper that calls backward (timm, transformers): no optimizer, no loop
        Valid(
            """
            import torch
            class ApexScaler:
                def __call__(self, loss, optimizer):
                    loss.backward()
                    optimizer.step()
            x = torch.zeros(1).cuda()
            """,
        ),
        # a gradient check: no optimizer
        Valid(
            """
            import torch
            def check(layer):
                for _ in range(3):
                    out = layer(torch.ones(2, device="cuda"))
                    out.sum().backward()
            """,
        ),
        # an evaluation loop alone
        Valid(
            """
            import torch
            model = torch.nn.Linear(2, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                print(model(x))
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            model = torch.compile(model)
            torch.set_float32_matmul_precision("high")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
    ]
    INVALID = [
        # Fabric sets precision but leaves compilation to the script; the optimizer from a helper
        Invalid(
            """
            import torch
            import lightning as L

            fabric = L.Fabric(precision="bf16-mixed")
            model = build_model(config)
            optimizer = model.configure_optimizers(config)
            model, optimizer = fabric.setup(model, optimizer)
            for batch in loader:
                loss = model(batch)
                fabric.backward(loss)
                optimizer.step()
            """,
            "10:5",
        ),
        # plain fp32 training: reported once, where the fix belongs
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
            "4:25",
            fixed="""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            model = torch.compile(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # a step function called from a loop
        Invalid(
            """
            import torch
            model = torch.nn.Linear(2, 2).cuda()
            opt = torch.optim.AdamW(model.parameters())
            def train_step(batch):
                loss = model(batch).sum()
                loss.backward()
                opt.step()
            for batch in loader:
                train_step(batch)
            """,
            "2:31",
            fixed="""
            import torch
            model = torch.nn.Linear(2, 2).cuda()
            model = torch.compile(model)
            opt = torch.optim.AdamW(model.parameters())
            def train_step(batch):
                loss = model(batch).sum()
                loss.backward()
                opt.step()
            for batch in loader:
                train_step(batch)
            """,
        ),
        # a comment does not count as handled
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()

            # TODO: try autocast and torch.compile and tf32
            """,
            "4:25",
            fixed="""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            model = torch.compile(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()

            # TODO: try autocast and torch.compile and tf32
            """,
        ),
        # autocast does not compile
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
            "4:25",
            fixed="""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            model = torch.compile(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # re.compile is not torch.compile
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()

            import re
            PATTERN = re.compile('x')
            """,
            "4:25",
            fixed="""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            model = torch.compile(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()

            import re
            PATTERN = re.compile('x')
            """,
        ),
        # the trained model cannot be found: the optimizer is reported, without a fix
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(params, lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
            "5:13",
        ),
    ]

    def finish(self) -> None:
        backward_calls = [] if self.ctx.torch.compilation_set_elsewhere else self.ctx.torch.own_loop_backward_calls
        if not backward_calls:
            return
        text = _REGEX_COMPILE.sub("", self.ctx.code_without_comments)
        if _COMPILE_TEXT.search(text):
            return
        optimizer = self.ctx.torch.optimizer_construction
        assignment = _model_assignment(self.ctx, optimizer) if optimizer is not None else None
        if assignment is None:
            self.report(optimizer if optimizer is not None else backward_calls[0])
            return
        small = assignment.body[0]
        assert isinstance(small, cst.Assign)  # _model_assignment returns a one-assignment line
        model = dotted_name(small.targets[0].target)
        text, imports = self.ctx.reference("torch.compile")
        fix = insert_after(
            assignment,
            f"{model} = {text}({model})",
            Applicability.UNSAFE,
            f"Compile the model: `{model} = torch.compile({model})`",
            imports,
            min_torch=(2, 0),
        )
        self.report(small.value, fix=fix)


def _trained_model(optimizer: cst.Call) -> str | None:
    """`model` in `AdamW(model.parameters(), ...)`: the dotted name whose parameters are trained."""
    for arg in optimizer.args:
        value = arg.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            if value.func.attr.value in ("parameters", "named_parameters"):
                return dotted_name(value.func.value)
    return None


def _model_assignment(ctx: FileContext, optimizer: cst.Call) -> cst.SimpleStatementLine | None:
    """The last `model = ...` line before the optimizer is built, in the same block."""
    name = _trained_model(optimizer)
    if name is None:
        return None
    statement = ctx.statement_of(optimizer)
    block = ctx.parent(statement)
    if not isinstance(block, (cst.IndentedBlock, cst.Module)) or statement not in block.body:
        return None
    statements: list[cst.CSTNode] = list(block.body)
    before = statements[: statements.index(statement)]
    for candidate in reversed(before):
        if isinstance(candidate, cst.SimpleStatementLine) and len(candidate.body) == 1:
            small = candidate.body[0]
            if (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and dotted_name(small.targets[0].target) == name
            ):
                return candidate
    return None
