"""GL405 cudnn-benchmark."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.startup import StartupSetting, startup_setting_fix
from gpulint.linter.rule import Invalid, Rule, Valid

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

# A script that already decided: cudnn.benchmark set either way (or a flag for it), or
# deterministic kernels chosen (benchmarking would undo that choice).
_DECIDED_TEXT = re.compile(r"cudnn\W*benchmark|cudnn_benchmark|deterministic", re.IGNORECASE)
# Data sets of fixed-size images.
_FIXED_SIZE_DATASETS = frozenset(
    f"torchvision.datasets.{name}"
    for name in ("MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN", "STL10")
)
# Transforms whose output has one size whatever the input.
_FIXED_SIZE_TRANSFORMS = re.compile(r"^torchvision\.transforms\.(?:v2\.)?(RandomResizedCrop|CenterCrop|RandomCrop)$")

BENCHMARK_SETTING = StartupSetting(
    target="torch.backends.cudnn.benchmark",
    line="{target} = True",
    comment="cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible",
    description=(
        "Let cuDNN pick the fastest algorithm: `torch.backends.cudnn.benchmark = True` "
        "(results may differ from run to run)"
    ),
    options=("--benchmark", "--cudnn_benchmark", "--cudnn-benchmark"),
)


def feeds_fixed_size_images(ctx: FileContext) -> bool:
    """Whether the module loads images of one size: a data set of fixed-size images (MNIST, CIFAR)
    or a transform that crops to a fixed size (`RandomResizedCrop(224)`, `CenterCrop`)."""
    for call in ctx.index.nodes("Call"):
        qualified = ctx.call_qualified_name(call) or ""
        if qualified in _FIXED_SIZE_DATASETS or _FIXED_SIZE_TRANSFORMS.match(qualified):
            return True
    return False


class CudnnBenchmark(Rule):
    """
    ## What it finds
    A module that trains a convolutional network (it builds `nn.Conv2d` layers or a torchvision
    CNN) on an accelerator with its own loop (it takes optimizer steps), on fixed-size inputs (MNIST, CIFAR, or a
    `RandomResizedCrop`/`CenterCrop`/`RandomCrop` transform), and never sets
    `torch.backends.cudnn.benchmark`.  Reported once, at the optimizer's construction (or the first
    `.backward()`).  A module that chooses deterministic kernels, or mentions `cudnn.benchmark` at
    all (a flag for it), has decided.

    ## Why it is slow
    With `benchmark` off, cuDNN picks a convolution algorithm by heuristics.  With it on, the first
    call for each input shape times the available algorithms and keeps the fastest; when every
    batch has the same shape, that one search pays for itself within a few steps, and convolutions
    are often 10-30% faster from then on.  With inputs whose size changes every batch, each new
    shape is benchmarked again: that is why it is off by default, and why this hint needs
    fixed-size inputs.

    ## Example
    ```python
    import torch
    import torch.nn as nn
    from torchvision import datasets

    train_set = datasets.CIFAR10("data", train=True, download=True)
    model = nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    ```
    Use instead:
    ```python
    import torch
    import torch.nn as nn
    from torchvision import datasets

    # cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible
    torch.backends.cudnn.benchmark = True

    train_set = datasets.CIFAR10("data", train=True, download=True)
    model = nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    ```

    ## Fix (unsafe)
    Writes `torch.backends.cudnn.benchmark = True` once, at start-up, under a comment that says what
    it does -- where GL404's fix writes TF32: after the module's other process-wide settings, else
    at the top of `main()` or the main guard's block, else after a script's imports; never in a
    loop, a class or a per-step function, and not at all in library code with no entry point.
    Under the script's own option (`if args.benchmark:`) where it defines `--benchmark`.  Unsafe:
    the chosen algorithms may differ from run to run, so results are no longer bit-for-bit
    reproducible, and the first steps of each input shape are slower.  A hint: off by default.
    """

    code = "GL405"
    name = "cudnn-benchmark"
    message = (
        "convolutions on fixed-size inputs without `torch.backends.cudnn.benchmark = True`: "
        "cuDNN never searches for the fastest algorithm"
    )
    requires = {TORCH, ACCELERATOR, STEPS}
    tokens = ("backward",)
    triggers = ((".backward(",),)  # only for a training loop's `.backward()` calls
    default = "hint"
    fix_applicability = Applicability.UNSAFE

    VALID = [
        # benchmark already set (either way), or deterministic kernels chosen
        Valid(
            """
            import torch
            import torch.nn as nn
            from torchvision import datasets
            import torch.backends.cudnn as cudnn

            train_set = datasets.CIFAR10("data")
            model = nn.Conv2d(3, 8, 3).cuda()
            cudnn.benchmark = args.benchmark
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn as nn
            from torchvision import datasets

            train_set = datasets.MNIST("data")
            model = nn.Conv2d(1, 8, 3).cuda()
            torch.use_deterministic_algorithms(True)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        # no convolution here; inputs of unknown size (detection, text); no accelerator
        Valid(
            """
            import torch
            import torch.nn as nn
            from torchvision import datasets

            train_set = datasets.MNIST("data")
            model = nn.Linear(784, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn as nn

            model = nn.Conv1d(80, 256, 5).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn as nn
            from torchvision import datasets

            train_set = datasets.MNIST("data")
            model = nn.Conv2d(1, 8, 3)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torchvision
            from torchvision import transforms

            train_tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
            model = torchvision.models.resnet50().cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            # train
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
            "8:13",
            fixed="""
            import torch
            import torch.nn as nn
            import torchvision
            from torchvision import transforms

            # cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible
            torch.backends.cudnn.benchmark = True

            train_tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
            model = torchvision.models.resnet50().cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            # train
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
        ),
        # the module's own alias for cudnn is used
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torch.backends.cudnn as cudnn
            from torchvision import datasets

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(1, 8, 3)

            train_set = datasets.MNIST("data")
            model = Net().to("cuda")
            optimizer = torch.optim.Adam(model.parameters())
            for x, y in loader:
                loss = model(x.to("cuda")).sum()
                loss.backward()
                optimizer.step()
            """,
            "13:13",
            fixed="""
            import torch
            import torch.nn as nn
            import torch.backends.cudnn as cudnn
            from torchvision import datasets

            # cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible
            cudnn.benchmark = True

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(1, 8, 3)

            train_set = datasets.MNIST("data")
            model = Net().to("cuda")
            optimizer = torch.optim.Adam(model.parameters())
            for x, y in loader:
                loss = model(x.to("cuda")).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        # the script's own option decides: the setting goes under it, after the arguments are parsed
        Invalid(
            """
            import argparse
            import torch
            import torch.nn as nn
            from torchvision import datasets

            parser = argparse.ArgumentParser()
            parser.add_argument("--benchmark", action="store_true", help="autotune convolutions")
            args = parser.parse_args()

            train_set = datasets.CIFAR10("data")
            model = nn.Conv2d(3, 8, 3).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
            "12:13",
            fixed="""
            import argparse
            import torch
            import torch.nn as nn
            from torchvision import datasets

            parser = argparse.ArgumentParser()
            parser.add_argument("--benchmark", action="store_true", help="autotune convolutions")
            args = parser.parse_args()
            # cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible
            if args.benchmark:
                torch.backends.cudnn.benchmark = True

            train_set = datasets.CIFAR10("data")
            model = nn.Conv2d(3, 8, 3).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        # a seed set in the per-step function is not a start-up setting to join: the switch goes
        # at the top of main()
        Invalid(
            """
            import torch
            import torch.nn as nn
            from torchvision import datasets

            def train_step(model, optimizer, x, step):
                torch.manual_seed(step)
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()

            def main():
                train_set = datasets.MNIST("data")
                model = nn.Conv2d(1, 8, 3).cuda()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for step, (x, y) in enumerate(loader):
                    train_step(model, optimizer, x, step)

            if __name__ == "__main__":
                main()
            """,
            "14:17",
            fixed="""
            import torch
            import torch.nn as nn
            from torchvision import datasets

            def train_step(model, optimizer, x, step):
                torch.manual_seed(step)
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()

            def main():
                # cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible
                torch.backends.cudnn.benchmark = True
                train_set = datasets.MNIST("data")
                model = nn.Conv2d(1, 8, 3).cuda()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for step, (x, y) in enumerate(loader):
                    train_step(model, optimizer, x, step)

            if __name__ == "__main__":
                main()
            """,
        ),
    ]

    def finish(self) -> None:
        torch = self.ctx.torch
        backward_calls = torch.own_loop_backward_calls
        if (
            not backward_calls
            or not torch.steps_an_optimizer
            or not ({2, 3} & torch.convolution_dims)
            or not feeds_fixed_size_images(self.ctx)
        ):
            return
        if _DECIDED_TEXT.search(self.ctx.code_without_comments):
            return
        optimizer = torch.optimizer_construction
        node = optimizer if optimizer is not None else backward_calls[0]
        fix, why_not = startup_setting_fix(self.ctx, node, BENCHMARK_SETTING)
        self.report(node, message=f"{self.message} (no fix: {why_not})" if fix is None else None, fix=fix)
