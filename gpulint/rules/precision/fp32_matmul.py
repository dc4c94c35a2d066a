"""GL404 fp32-matmul."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.analysis.pytorch import GRAPH_NETWORK_HINT, builds_graph_network
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.startup import StartupSetting, startup_setting_fix
from gpulint.linter.rule import Invalid, Rule, Valid

_TF32_TEXT = re.compile(r"tf32|float32_matmul_precision|fp32_precision", re.IGNORECASE)
# A convolutional network whose matmuls are more than a classifier head: attention, transformers.
_ATTENTION_TEXT = re.compile(r"attention|transformer", re.IGNORECASE)
# Recurrent layers: a network of 1-D convolutions with them is not all convolutions.
_RECURRENT_TEXT = re.compile(r"\b(?:LSTM|GRU|RNN)(?:Cell)?\b")
# A model picked by name from torchvision's registry: `models.__dict__[args.arch]`.
_REGISTRY_LOOKUP = re.compile(r"\b(?P<registry>\w+)\.__dict__\[\s*\w+\.(?P<option>\w+)\s*\]")
# The torchvision architectures that are convolutional networks, by the start of their names.
_TORCHVISION_CNN_NAME = re.compile(
    r"^(resnet|resnext|wide_resnet|vgg|densenet|mobilenet|efficientnet|regnet|convnext|alexnet|googlenet"
    r"|inception|squeezenet|shufflenet|mnasnet)"
)
_CONVOLUTIONAL = (
    "a convolutional network: cuDNN already runs its convolutions in TF32 by default "
    "(`torch.backends.cudnn.allow_tf32`), so TF32 matmuls would change results for little"
)


TF32_SETTING = StartupSetting(
    target="torch.set_float32_matmul_precision",
    line='{target}("high")',
    comment="TF32 matmuls on Ampere+: faster, ~1e-3 relative precision",
    description='Enable TF32 matmuls: `torch.set_float32_matmul_precision("high")` (changes results in the last bits)',
    options=("--tf32", "--allow_tf32", "--allow-tf32"),
    min_torch=(1, 12),
)


class Fp32Matmul(Rule):
    """
    ## What it finds
    A module that trains a PyTorch model on an accelerator with its own loop, in fp32 (no mixed
    precision: see GL401), without enabling TF32 for matrix multiplications:
    no `torch.set_float32_matmul_precision("high")`, `torch.backends.cuda.matmul.allow_tf32 = True`
    or `fp32_precision = "tf32"`.  Reported once, at the optimizer's construction (or the first
    `.backward()`).  Under autocast most matmuls are already bf16/fp16, so it is not reported there.

    ## Why it is slow
    PyTorch has defaulted to exact fp32 matmuls since 1.12.  On Ampere and newer GPUs TF32 tensor
    cores run them up to 8x faster (A100: 19.5 TFLOPS fp32, 156 TFLOPS TF32) with a 10-bit mantissa
    that deep-learning training tolerates.

    ## Example
    ```python
    import torch

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    Use instead:
    ```python
    import torch

    # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
    torch.set_float32_matmul_precision("high")

    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix (unsafe)
    Writes `torch.set_float32_matmul_precision("high")` once, at start-up, under a comment that says
    what it does: after the module's other process-wide settings (seeds, `torch.backends.*`) where
    it has any, else at the top of `main()` (or of the main guard's block), else after a script's
    imports; never in a loop, a class or a per-step function.  Under the script's own option
    (`if args.tf32:`) where it defines one.  Library code with no entry point gets no fix: where the
    program starts is its caller's.  In a graph network (a module that imports PyTorch Geometric or
    DGL) the finding is a hint: its step is sparse message passing and small layers.  No fix for a
    network of convolutions without attention (a CNN, a GAN; 1-D convolutions without recurrent
    layers too): cuDNN already runs the convolutions in TF32 by default, so the change would be in
    the numbers more than in the speed -- whether the module builds the layers itself, builds
    network classes of other modules of the project that do, or picks a CNN from torchvision's
    registry by an option whose default is one (`models.__dict__[args.arch]`, `default="resnet50"`).
    Nor where a module of the project's package (not a script) decides TF32 itself (`allow_tf32`,
    `set_float32_matmul_precision`): a second switch would override the project's own, and the
    message names the module.  Unsafe: results change in the last bits (a 10-bit mantissa
    for matmul inputs), which a paper's reference numbers may not tolerate.  Needs PyTorch 1.12:
    not offered to a project whose requirements allow an older one.  A hint: off by default.
    """

    code = "GL404"
    name = "fp32-matmul"
    message = (
        'fp32 training without TF32: `torch.set_float32_matmul_precision("high")` '
        "makes matmuls up to 8x faster on Ampere+"
    )
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("backward",)
    triggers = ((".backward(",),)  # only for a training loop's `.backward()` calls
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
        # Accelerate sets precision and compilation
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
        # so does Lightning
        Valid(
            """
            import torch
            import lightning as L
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
        # under autocast the matmuls are not fp32
        Valid(
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
        # a graph network (PyTorch Geometric's layers): message passing gains little from TF32 -- a hint
        Invalid(
            """
            import torch
            from torch_geometric.nn import GCNConv

            model = GCNConv(16, 2).cuda()
            optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
            for epoch in range(200):
                loss = model(data.x, data.edge_index).sum()
                loss.backward()
                optimizer.step()
            """,
            "5:13",
            hints=(GRAPH_NETWORK_HINT,),
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
            "5:13",
            fixed="""
            import torch
            import torch.nn as nn

            # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
            torch.set_float32_matmul_precision("high")

            model = nn.Linear(8, 2).cuda()
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
            "3:7",
            fixed="""
            import torch

            # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
            torch.set_float32_matmul_precision("high")
            model = torch.nn.Linear(2, 2).cuda()
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
            "5:13",
            fixed="""
            import torch
            import torch.nn as nn

            # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
            torch.set_float32_matmul_precision("high")

            model = nn.Linear(8, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()

            # TODO: try autocast and torch.compile and tf32
            """,
        ),
        # the setting goes after the imports: the comment that labels the optimizer stays with it
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            # optimizer
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            # three epochs are enough
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
            "6:13",
            fixed="""
            import torch
            import torch.nn as nn

            # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
            torch.set_float32_matmul_precision("high")

            model = nn.Linear(8, 2).cuda()
            # optimizer
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            # three epochs are enough
            for epoch in range(3):
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        ),
        # next to the settings the script already makes, once, in main(): not before the reported
        # `.backward()` in the per-batch function, which would set it again every step
        Invalid(
            """
            import argparse
            import torch

            def train_step(model, optimizer, batch):
                loss = model(batch.cuda()).sum()
                loss.backward()
                optimizer.step()

            def main():
                args = argparse.ArgumentParser().parse_args()
                torch.manual_seed(args.seed)
                torch.backends.cudnn.deterministic = True
                # the model
                model, optimizer = build(args)
                for batch in loader:
                    train_step(model, optimizer, batch)

            if __name__ == "__main__":
                main()
            """,
            "6:5",
            fixed="""
            import argparse
            import torch

            def train_step(model, optimizer, batch):
                loss = model(batch.cuda()).sum()
                loss.backward()
                optimizer.step()

            def main():
                args = argparse.ArgumentParser().parse_args()
                torch.manual_seed(args.seed)
                torch.backends.cudnn.deterministic = True
                # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
                torch.set_float32_matmul_precision("high")
                # the model
                model, optimizer = build(args)
                for batch in loader:
                    train_step(model, optimizer, batch)

            if __name__ == "__main__":
                main()
            """,
        ),
        # no settings yet: at the top of the main() the main guard calls (after its docstring)
        Invalid(
            """
            import torch

            def train(model, loader):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
                    loss.backward()
                    optimizer.step()

            def main():
                \"\"\"Train the net.\"\"\"
                model = Net().cuda()
                train(model, loader)

            if __name__ == "__main__":
                main()
            """,
            "4:17",
            fixed="""
            import torch

            def train(model, loader):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
                    loss.backward()
                    optimizer.step()

            def main():
                \"\"\"Train the net.\"\"\"
                # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
                torch.set_float32_matmul_precision("high")
                model = Net().cuda()
                train(model, loader)

            if __name__ == "__main__":
                main()
            """,
        ),
        # a notebook's flow: the setting joins the imports at the top (the set-up cell), not the
        # import written where the optimizer is built
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2).cuda()
            from torch.optim import AdamW
            # optimizer
            optimizer = AdamW(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
            "7:13",
            fixed="""
            import torch
            import torch.nn as nn

            # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
            torch.set_float32_matmul_precision("high")

            model = nn.Linear(8, 2).cuda()
            from torch.optim import AdamW
            # optimizer
            optimizer = AdamW(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
        ),
        # the optimizer is built in a constructor: the switch goes to the main guard, not there
        Invalid(
            """
            import torch
            import torch.nn as nn

            class Trainer:
                def __init__(self, model):
                    self.model = model.cuda()
                    self.optimizer = torch.optim.Adam(self.model.parameters())

                def fit(self, loader):
                    for x, y in loader:
                        loss = nn.functional.mse_loss(self.model(x.cuda()), y.cuda())
                        loss.backward()
                        self.optimizer.step()

            if __name__ == "__main__":
                Trainer(Net()).fit(loader)
            """,
            "7:26",
            fixed="""
            import torch
            import torch.nn as nn

            class Trainer:
                def __init__(self, model):
                    self.model = model.cuda()
                    self.optimizer = torch.optim.Adam(self.model.parameters())

                def fit(self, loader):
                    for x, y in loader:
                        loss = nn.functional.mse_loss(self.model(x.cuda()), y.cuda())
                        loss.backward()
                        self.optimizer.step()

            if __name__ == "__main__":
                # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
                torch.set_float32_matmul_precision("high")
                Trainer(Net()).fit(loader)
            """,
        ),
        # a convolutional network: its convolutions are TF32 already (cuDNN's default), the
        # matmuls are a classifier head: no fix, and the message says why
        Invalid(
            """
            import torch
            import torch.nn as nn

            model = nn.Sequential(nn.Conv2d(3, 16, 5), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
            "5:13",
            messages=(
                'fp32 training without TF32: `torch.set_float32_matmul_precision("high")` makes matmuls up to 8x '
                "faster on Ampere+ (no fix: a convolutional network: cuDNN already runs its convolutions in TF32 "
                "by default (`torch.backends.cudnn.allow_tf32`), so TF32 matmuls would change results for little)",
            ),
        ),
        # a CNN picked from torchvision's registry by an option whose default is one (MoCo's shape)
        Invalid(
            """
            import argparse
            import torch
            import torchvision.models as models

            parser = argparse.ArgumentParser()
            parser.add_argument("-a", "--arch", default="resnet50")
            args = parser.parse_args()
            model = models.__dict__[args.arch]().cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
            "9:13",
            messages=(
                'fp32 training without TF32: `torch.set_float32_matmul_precision("high")` makes matmuls up to 8x '
                "faster on Ampere+ (no fix: a convolutional network: cuDNN already runs its convolutions in TF32 "
                "by default (`torch.backends.cudnn.allow_tf32`), so TF32 matmuls would change results for little)",
            ),
        ),
        # 1-D convolutions and a projection, in a tutorial whose prose mentions "transformers": a
        # convolutional network all the same
        Invalid(
            '''
            """Train a small network; see the data transformers of torchvision."""
            import torch
            import torch.nn as nn

            model = nn.Sequential(nn.Conv1d(80, 256, 5), nn.ReLU(), nn.Conv1d(256, 256, 5), nn.Linear(256, 1)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            ''',
            "6:13",
            messages=(
                'fp32 training without TF32: `torch.set_float32_matmul_precision("high")` makes matmuls up to 8x '
                "faster on Ampere+ (no fix: a convolutional network: cuDNN already runs its convolutions in TF32 "
                "by default (`torch.backends.cudnn.allow_tf32`), so TF32 matmuls would change results for little)",
            ),
        ),
        # 1-D convolutions under a recurrent network: the LSTM's matmuls are not convolutions
        Invalid(
            """
            import torch
            import torch.nn as nn

            conv = nn.Conv1d(80, 256, 5)
            rnn = nn.LSTM(256, 512)
            model = nn.ModuleList([conv, rnn]).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(rnn(conv(x.cuda()))[0], y.cuda())
                loss.backward()
                optimizer.step()
            """,
            "7:13",
            fixed="""
            import torch
            import torch.nn as nn

            # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision
            torch.set_float32_matmul_precision("high")

            conv = nn.Conv1d(80, 256, 5)
            rnn = nn.LSTM(256, 512)
            model = nn.ModuleList([conv, rnn]).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(rnn(conv(x.cuda()))[0], y.cuda())
                loss.backward()
                optimizer.step()
            """,
        ),
        # library code with no entry point: where the process starts is the caller's, no fix
        Invalid(
            """
            import torch

            def fit(model, loader, epochs):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
                        loss.backward()
                        optimizer.step()
            """,
            "4:17",
            messages=(
                'fp32 training without TF32: `torch.set_float32_matmul_precision("high")` makes matmuls up to 8x '
                "faster on Ampere+ (no fix: library code without an entry point: set it once where the program "
                "starts)",
            ),
        ),
    ]

    def finish(self) -> None:
        torch = self.ctx.torch
        backward_calls = [] if torch.precision_set_elsewhere else torch.own_loop_backward_calls
        if not backward_calls or torch.uses_mixed_precision:
            return
        if _TF32_TEXT.search(self.ctx.code_without_comments):
            return
        optimizer = torch.optimizer_construction
        node = optimizer if optimizer is not None else backward_calls[0]
        if builds_graph_network(self.ctx):
            self.report(node, hint=GRAPH_NETWORK_HINT)
            return
        elsewhere = self.ctx.project
        if elsewhere.tf32_set_in:
            fix, why_not = None, f"the project decides TF32 itself, in `{elsewhere.tf32_set_in}`"
        elif _convolutional_network(self.ctx):
            fix, why_not = None, _CONVOLUTIONAL
        else:
            fix, why_not = startup_setting_fix(self.ctx, node, TF32_SETTING)
        self.report(node, message=f"{self.message} (no fix: {why_not})" if fix is None else None, fix=fix)


def _convolutional_network(ctx: FileContext) -> bool:
    """Whether the network the module trains is convolutions without attention: the layers it
    builds, the network classes of other modules it builds (the project index), or a CNN its
    option picks from torchvision's registry by default."""
    if _mentioned_in_code(ctx, _ATTENTION_TEXT) or "attention" in ctx.project.networks_elsewhere:
        return False
    dims = ctx.torch.convolution_dims
    if {2, 3} & dims or "convolution" in ctx.project.networks_elsewhere or _registry_cnn(ctx):
        return True
    return 1 in dims and not _mentioned_in_code(ctx, _RECURRENT_TEXT)


def _mentioned_in_code(ctx: FileContext, pattern: re.Pattern[str]) -> bool:
    """Whether `pattern` occurs in the module's code other than its comments, docstrings and other
    bare strings (a tutorial's prose that mentions "data transformers" builds no transformer):
    more often in the code without comments than in those strings."""
    found = len(pattern.findall(ctx.code_without_comments))
    if not found:
        return False
    in_prose = sum(
        len(pattern.findall(string.value))
        for string in ctx.index.nodes("SimpleString")
        if isinstance(ctx.parent(string), cst.Expr)
    )
    return found > in_prose


def _registry_cnn(ctx: FileContext) -> bool:
    """`models.__dict__[args.arch]` with `models` torchvision's model registry, and the script's
    `--arch` option defaulting to a convolutional architecture (`default="resnet50"`)."""
    defaults = {
        option.dest: option.default.evaluated_value
        for option in ctx.command_line
        if isinstance(option.default, cst.SimpleString) and isinstance(option.default.evaluated_value, str)
    }
    for match in _REGISTRY_LOOKUP.finditer(ctx.code_without_comments):
        if ctx.imports.bindings.get(match["registry"]) != "torchvision.models":
            continue
        if _TORCHVISION_CNN_NAME.match(defaults.get(match["option"], "")):
            return True
    return False
