"""GL403 no-compile."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.analysis.nodes import dotted_name
from gpulint.linter.analysis.pytorch import GRAPH_NETWORK_HINT, builds_graph_network
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import insert_after
from gpulint.linter.fix.startup import seeds_random_numbers
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
    in the same block as the optimizer.  Unsafe: compilation can fail on dynamic Python code and
    costs start-up time.  Needs PyTorch 2.0: not offered to a project whose requirements allow an
    older one.  A hint: off by default.  In a graph network (a module that imports PyTorch Geometric
    or DGL) the finding is held back as a hint even where the rule is selected by a prefix or ALL:
    every graph size recompiles, and its small layers leave little to fuse.

    The compiled model's `state_dict` keys carry an `_orig_mod.` prefix: its checkpoints no longer
    load into the model class, and `load_state_dict` of an existing checkpoint fails on it.  So the
    fix is not offered (the finding stays) where the module saves or loads weights that may be the
    model's: a `state_dict()` or `load_state_dict()` of anything but an optimizer, scheduler or grad
    scaler, or `torch.save` of the model itself.  Compiling a second name for the forward pass
    instead would keep the keys, but it means rewriting every call of the model, often across
    functions, and a missed one silently runs uncompiled: compile by hand there (for example
    `compiled = torch.compile(model)` for the training step, saving `model`).

    Nor is it offered, with the reason in the message, where compiling changes more than speed or
    is not where the documentation puts it: in a seeded script (`torch.manual_seed`,
    `seed_everything`, `set_seed`), compiled dropout and other random operations draw other
    numbers than eager ones, so losses differ from the first step
    (`torch._inductor.config.fallback_random = True` keeps eager's numbers, at some speed: a choice
    for the author, not a fix); where the model is wrapped (`DistributedDataParallel`,
    `DataParallel`, FSDP, `fabric.setup`), PyTorch's guidance is to compile the inner module
    before wrapping it, which moves the author's code; and where the model is copied
    (`copy.deepcopy`, `.clone()`), the copy may be what runs.  A Keras script (a Keras model trained
    by a PyTorch loop on the torch backend) is left to Keras's own `jit_compile=`.  Nor where the
    training loop is timed as a benchmark (a clock read in it, or one before it and one after it
    in its block): the first steps would compile, inside what the code measures.
    """

    code = "GL403"
    name = "no-compile"
    message = "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster"
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("backward",)
    triggers = ((".backward(",),)  # it reports a training loop's `.backward()` (or the optimizer)
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
        # a graph network (DGL's layers): each graph size would recompile -- a hint
        Invalid(
            """
            import dgl
            import torch

            model = dgl.nn.GraphConv(16, 2).cuda()
            optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
            for epoch in range(200):
                for graph, features in loader:
                    loss = model(graph, features).sum()
                    loss.backward()
                    optimizer.step()
            """,
            "5:13",
            hints=(GRAPH_NETWORK_HINT,),
        ),
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
        # the model's weights are saved and loaded: `torch.compile` would prefix every key with
        # `_orig_mod.`, so the checkpoint would not load into the model class: no fix
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = Net().cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model.load_state_dict(torch.load("pretrained.pt"))
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            torch.save(model.state_dict(), "model.pt")
            """,
            "4:15",
        ),
        # the whole model object saved, or its weights saved by a helper: no fix either
        Invalid(
            """
            import torch
            import torch.nn as nn

            def save(net, path):
                torch.save({"weights": net.state_dict()}, path)

            def main():
                model = Net().cuda()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
                torch.save(model, "model.pt")
                save(model, "weights.pt")
            """,
            "8:19",
        ),
        # only the optimizer's state is saved: the model's keys do not matter, the fix is offered
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            torch.save(optimizer.state_dict(), "optimizer.pt")
            """,
            "4:25",
            fixed="""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            model = torch.compile(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            torch.save(optimizer.state_dict(), "optimizer.pt")
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
        # a seeded script: compiled dropout draws other random numbers, the losses change from the
        # first step: no fix, and the message says how to keep them
        Invalid(
            """
            import torch
            import torch.nn as nn

            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1), nn.Linear(8, 2)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
            "5:74",
            messages=(
                "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster (no fix: "
                "a seeded script: compiled dropout and other random operations draw other numbers than eager ones, "
                "so losses differ from the first step; compile by hand, with "
                "`torch._inductor.config.fallback_random = True` where runs must match)",
            ),
        ),
        # a runtime benchmark: the training loop between two clock reads whose difference is the
        # result -- the compile would run inside the timed steps: no fix, and the message says why
        Invalid(
            """
            import time

            import torch
            import torch.nn as nn


            def train_runtime(model, x, y, epochs, device):
                model = model.to(device)
                optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
                t_start = time.perf_counter()
                for _ in range(epochs):
                    optimizer.zero_grad()
                    loss = nn.functional.nll_loss(model(x), y)
                    loss.backward()
                    optimizer.step()
                return time.perf_counter() - t_start
            """,
            "8:13",
            messages=(
                "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster (no fix: "
                "the training loop is timed as a benchmark: the first steps would compile, and the compile would be "
                "in what it measures; compile by hand, warmed up before the clock starts)",
            ),
        ),
        # the model is wrapped by DistributedDataParallel: compiling the wrapper is not what the
        # PyTorch documentation advises (compile the inner module): no fix
        Invalid(
            """
            import torch
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = nn.Linear(8, 2).cuda()
            model = DDP(model, device_ids=[rank])
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
            "6:9",
            messages=(
                "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster (no fix: "
                "the model is wrapped by `DistributedDataParallel`: compile the module before it is wrapped, by hand)",
            ),
        ),
        # Fabric wraps the model it sets up: no fix
        Invalid(
            """
            import torch
            import lightning as L

            fabric = L.Fabric()
            model = Net()
            optimizer = torch.optim.AdamW(model.parameters())
            model, optimizer = fabric.setup(model, optimizer)
            for batch in loader:
                loss = model(batch)
                fabric.backward(loss)
                optimizer.step()
            """,
            "5:9",
            messages=(
                "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster (no fix: "
                "`fabric.setup` wraps the model: compile the module before it is wrapped, by hand)",
            ),
        ),
        # the model is copied (an EMA copy of it, or the model used through `.clone()`): no fix
        Invalid(
            """
            import copy
            import torch

            model = Net().cuda()
            ema = copy.deepcopy(model)
            optimizer = torch.optim.AdamW(model.parameters())
            for x in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
            "4:15",
            messages=(
                "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster (no fix: "
                "the model is copied (`copy.deepcopy`): compile the copy that runs, by hand)",
            ),
        ),
        Invalid(
            """
            import torch

            model = Net().cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            for x in loader:
                loss = model.clone()(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
            "3:15",
            messages=(
                "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster (no fix: "
                "the model is used through `.clone()`: compile the copy that runs, by hand)",
            ),
        ),
        # a Keras model in a plain PyTorch loop (the torch backend): Keras compiles it itself
        Invalid(
            """
            import keras
            import torch

            model = keras.Sequential([keras.layers.Dense(10)])
            optimizer = torch.optim.Adam(model.parameters())
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
            "4:9",
            messages=(
                "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster "
                "(no fix: a Keras script: Keras compiles its models itself (`jit_compile=`))",
            ),
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
        if builds_graph_network(self.ctx):
            self.report(optimizer if optimizer is not None else backward_calls[0], hint=GRAPH_NETWORK_HINT)
            return
        assignment = _model_assignment(self.ctx, optimizer) if optimizer is not None else None
        if assignment is None:
            self.report(optimizer if optimizer is not None else backward_calls[0])
            return
        small = assignment.body[0]
        assert isinstance(small, cst.Assign)  # _model_assignment returns a one-assignment line
        model = dotted_name(small.targets[0].target)
        assert model is not None  # _model_assignment matched it by its dotted name
        if _saves_or_loads(self.ctx, model):
            self.report(small.value)  # compiling would change the checkpoint's keys: no fix
            return
        why_not = _why_not_compiled_here(self.ctx, model)
        if why_not is not None:
            self.report(small.value, message=f"{self.message} (no fix: {why_not})")
            return
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


# Wrappers that take the model for distributed or mixed-precision training, by their last name.
_WRAPPERS = frozenset({"DataParallel", "DistributedDataParallel", "FullyShardedDataParallel", "DDP", "FSDP"})
# Framework methods that wrap the model: `fabric.setup(model, ...)`, `accelerator.prepare(model, ...)`.
_WRAPPING_METHODS = {"setup": "fabric", "setup_module": "fabric", "prepare": "accelerator"}


def _why_not_compiled_here(ctx: FileContext, model: str) -> str | None:
    """Why `model = torch.compile(model)` after the model's line would not be a change to merge, or None:
    a seeded script (compiled random operations draw other numbers), a model that a wrapper takes
    (the documented order compiles the inner module first), a model that is copied, a Keras model,
    or a training loop timed as a benchmark."""
    if ctx.uses("keras", "tf_keras"):
        return "a Keras script: Keras compiles its models itself (`jit_compile=`)"
    if seeds_random_numbers(ctx):
        return (
            "a seeded script: compiled dropout and other random operations draw other numbers than eager "
            "ones, so losses differ from the first step; compile by hand, with "
            "`torch._inductor.config.fallback_random = True` where runs must match"
        )
    for call in ctx.index.nodes("Call"):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "clone" and dotted_name(func.value) == model:
            return "the model is used through `.clone()`: compile the copy that runs, by hand"
        if not any(_mentions(arg.value, model) for arg in call.args):
            continue
        qualified = ctx.call_qualified_name(call) or dotted_name(func) or ""
        function = qualified.rsplit(".", 1)[-1]
        if function in _WRAPPERS:
            return f"the model is wrapped by `{function}`: compile the module before it is wrapped, by hand"
        if isinstance(func, cst.Attribute):
            owner = _WRAPPING_METHODS.get(func.attr.value)
            if owner is not None and (dotted_name(func.value) or "").lower().endswith(owner):
                return f"`{ctx.code(func)}` wraps the model: compile the module before it is wrapped, by hand"
        if qualified == "copy.deepcopy":
            return "the model is copied (`copy.deepcopy`): compile the copy that runs, by hand"
    if any(ctx.loops.times_the_loop(call) for call in ctx.torch.own_loop_backward_calls):
        return (
            "the training loop is timed as a benchmark: the first steps would compile, and the compile "
            "would be in what it measures; compile by hand, warmed up before the clock starts"
        )
    return None


def _mentions(expression: cst.CSTNode, name: str) -> bool:
    """Whether `name` (dotted) is spelled in `expression` (`model` in `model.cuda()`)."""
    return any(isinstance(node, cst.BaseExpression) and dotted_name(node) == name for node in nodes_under(expression))


# What a `state_dict()` that is not the model's comes from: compiling the model leaves these as they were.
_NOT_THE_MODEL = ("optimizer", "scheduler", "gradscaler")


def _saves_or_loads(ctx: FileContext, model: str) -> bool:
    """Whether the module saves or loads weights that may be the model's: a `state_dict()` or
    `load_state_dict()` of anything but an optimizer, scheduler or grad scaler (the model, or a
    helper's parameter that may be it), or `torch.save` of the model object itself.  The compiled
    model's keys carry an `_orig_mod.` prefix, so such checkpoints no longer load either way."""
    for call in ctx.index.nodes("Call"):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("state_dict", "load_state_dict"):
            if not any(ctx.values.is_kind(func.value, kind) for kind in _NOT_THE_MODEL):
                return True
        elif call.args and ctx.call_qualified_name(call) == "torch.save":
            saved = nodes_under(call.args[0].value)
            if any(isinstance(node, cst.BaseExpression) and dotted_name(node) == model for node in saved):
                return True
    return False


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
