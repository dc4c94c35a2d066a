"""GL405 cudnn-benchmark."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.analysis.loops import method_class
from gpulint.linter.analysis.nodes import positional_args
from gpulint.linter.analysis.pytorch import TORCHVISION_CNN, is_dataloader
from gpulint.linter.analysis.vocabulary import CONVOLUTION_LAYER
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.startup import StartupSetting, startup_setting_fix
from gpulint.linter.rule import Invalid, Rule, Valid

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

# A script that already decided: cudnn.benchmark set either way (or a flag for it), or
# deterministic kernels chosen (benchmarking would undo that choice).
_DECIDED_TEXT = re.compile(r"cudnn\W*benchmark|cudnn_benchmark|deterministic", re.IGNORECASE)
# Data sets of fixed-size images, and the side of their (square) images.
_IMAGE_SIDE = {
    f"torchvision.datasets.{name}": side
    for names, side in (
        (("MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST"), 28),
        (("CIFAR10", "CIFAR100", "SVHN"), 32),
        (("STL10",), 96),
    )
    for name in names
}
_FIXED_SIZE_DATASETS = frozenset(_IMAGE_SIDE)
# Code after which an image's size is no longer its data set's: transforms that resize, crop or
# pad, layers that upsample.
_CHANGES_IMAGE_SIZE = re.compile(
    r"^torchvision\.transforms\..*(?:Resize|Crop|Pad|Scale|Zoom|Affine|Perspective)"
    r"|^torch\.nn\.(?:Upsample\w*|PixelShuffle|functional\.(?:interpolate|upsample\w*|pad|pixel_shuffle))$"
)
# The size model (the rule's docs): a training step dispatches at least 20 kernels (forward,
# backward and optimizer of the smallest network with a convolution), each costing its host about
# 5 us in PyTorch's dispatcher -- 100 us of host time a step.  A network whose convolutions are
# at most this many multiply-adds a step (forward and backward: three convolutions' worth each)
# runs them in under 100 us even at 1 TFLOP/s, a slow algorithm on an old card: the step waits
# on the host, and a faster algorithm only lengthens the GPU's idle time.
_HOST_BOUND_CONVOLUTION_WORK = 50_000_000
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


def convolution_work_per_step(ctx: FileContext) -> int | None:
    """An upper bound of the multiply-adds a training step spends in the module's convolutions,
    where the module spells everything it depends on, else None: the images come from data sets
    of one known size and nothing resizes, crops or upsamples them; every convolution is an
    `nn.Conv2d` with literal channels, kernel and padding (no torchvision model, no functional or
    lazy convolution), built once for a step as far as the module says (`_once_a_step`); every
    DataLoader has a literal batch size.  Each convolution's output is bounded by the input side plus what
    padding can add over all of them; forward and backward are three convolutions' worth."""
    side, batch, per_image, growth = 0, 0, 0, 0
    for call in ctx.index.nodes("Call"):
        qualified = ctx.call_qualified_name(call) or ""
        if qualified in _IMAGE_SIDE:
            side = max(side, _IMAGE_SIDE[qualified])
        elif _CHANGES_IMAGE_SIZE.match(qualified):
            return None
        elif is_dataloader(ctx, call):
            given = _arguments(ctx, call)
            if given is None:
                return None  # (a `*args` or a `**options` this module does not show)
            size = 1 if given("batch_size", 1) is None else _integer(given("batch_size", 1))
            if size is None:
                return None
            batch = max(batch, size)
        elif qualified == "torch.nn.Conv2d":
            given = _arguments(ctx, call)
            if given is None:
                return None
            inputs, outputs = _integer(given("in_channels", 0)), _integer(given("out_channels", 1))
            kernel = _pair(given("kernel_size", 2))
            padding = _pair(given("padding", 4), default=0)
            if inputs is None or outputs is None or kernel is None or padding is None or not _once_a_step(ctx, call):
                return None
            per_image += inputs * outputs * kernel[0] * kernel[1]  # (times the output's area, below)
            growth += max(0, 2 * max(padding) - (min(kernel) - 1))
        elif CONVOLUTION_LAYER.match(qualified) or TORCHVISION_CNN.match(qualified):
            return None
    if not side or not batch or not per_image:
        return None
    return 3 * batch * per_image * (side + growth) ** 2


def _once_a_step(ctx: FileContext, layer: cst.Call) -> bool:
    """Whether, as far as the module says, a step runs the layer once: it is built in
    straight-line module code, or in the `__init__` of a class the module builds only in
    straight-line code (each `Net()` outside loops and comprehensions: one instance takes part in
    a step -- the model the optimizer trains; a second, as a tutorial's copy loaded for
    evaluation, does not).  Not where it is built in a loop, a comprehension or another function,
    or its class is built nowhere here or handed around."""
    if _runs_again(ctx, layer):
        return False
    function = ctx.enclosing_function(layer)
    if function is None:
        return True
    owner = method_class(ctx.index, function)
    if owner is None or function.name.value != "__init__":
        return False
    built = False
    for name in ctx.names_by_identifier.get(owner.name.value, ()):
        call = ctx.parent(name)
        if isinstance(call, cst.Call) and call.func is name:
            if _runs_again(ctx, call):
                return False
            built = True
        elif name is not owner.name and owner not in ctx.ancestors(name):
            return False  # (handed around: built where this module does not say; `super(Net, self)` is not)
    return built


def _runs_again(ctx: FileContext, node: cst.CSTNode) -> bool:
    comprehensions = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
    return ctx.in_loop(node) or any(isinstance(ancestor, comprehensions) for ancestor in ctx.ancestors(node))


def _arguments(ctx: FileContext, call: cst.Call) -> Callable[[str, int], cst.BaseExpression | None] | None:
    """What the call passes for a parameter, by its keyword (its `**` dictionaries resolved:
    ValueOrigins.keywords_of) or its position; None where a `*args` or a `**options` the module
    does not show may pass anything."""
    keywords = ctx.values.keywords_of(call)
    if keywords is None or any(arg.star == "*" for arg in call.args):
        return None
    positional = [arg.value for arg in positional_args(call)]

    def given(keyword: str, position: int) -> cst.BaseExpression | None:
        if keyword in keywords:
            return keywords[keyword]
        return positional[position] if position < len(positional) else None

    return given


def _integer(expr: cst.BaseExpression | None) -> int | None:
    return int(expr.evaluated_value) if isinstance(expr, cst.Integer) else None


def _pair(expr: cst.BaseExpression | None, default: int | None = None) -> tuple[int, int] | None:
    """A size given as an integer literal or a tuple of two (`3`, `(3, 5)`), or `default` where
    the call gives none; None where it is anything else (a name, `padding="same"`)."""
    if expr is None:
        return None if default is None else (default, default)
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value), int(expr.evaluated_value)
    if isinstance(expr, cst.Tuple) and len(expr.elements) == 2:
        first, second = (_integer(element.value) for element in expr.elements)
        if first is not None and second is not None:
            return first, second
    return None


class CudnnBenchmark(Rule):
    """
    ## What it finds
    A module that trains a convolutional network (it builds `nn.Conv2d` layers or a torchvision
    CNN) on an accelerator with its own loop (it takes optimizer steps), on fixed-size inputs (MNIST, CIFAR, or a
    `RandomResizedCrop`/`CenterCrop`/`RandomCrop` transform), and never sets
    `torch.backends.cudnn.benchmark`.  Reported once, at the optimizer's construction (or the first
    `.backward()`).  A module that chooses deterministic kernels, or mentions `cudnn.benchmark` at
    all (a flag for it), has decided.  Nor is a network too small for the algorithm to matter:
    where the module spells every size (a data set of one known image size, `nn.Conv2d` layers
    with literal channels and kernels, each built once for a step as the module shows it, literal
    batch sizes), an upper bound of its convolutions' work per step, forward and backward, of at
    most 50 M multiply-adds (a LeNet on 4 CIFAR images: 35 M) runs in under 100 us even at 1
    TFLOP/s -- less than the host spends dispatching the step's kernels, so the step waits on the
    host whatever algorithm runs.

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
        # too little convolution to show in a step (the size model: a LeNet on 4 CIFAR images a
        # step is at most 35 M multiply-adds, forward and backward): the step waits on the host;
        # the copy built again to evaluate a saved model takes no part in a step
        Valid(
            """
            import torch
            import torch.nn as nn
            import torchvision

            class Net(nn.Module):
                def __init__(self):
                    super(Net, self).__init__()
                    self.conv1 = nn.Conv2d(3, 6, 5)
                    self.conv2 = nn.Conv2d(6, 16, 5)

            train_set = torchvision.datasets.CIFAR10("data", train=True)
            loader = torch.utils.data.DataLoader(train_set, batch_size=4, shuffle=True)
            net = Net().to("cuda")
            optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
            for x, y in loader:
                loss = net(x.to("cuda")).sum()
                loss.backward()
                optimizer.step()
            net = Net()
            net.load_state_dict(torch.load("net.pth"))
            """
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
        # the same network on 128 images a step: a billion multiply-adds, the GPU's time
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torchvision

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(3, 6, 5)
                    self.conv2 = nn.Conv2d(6, 16, 5)

            train_set = torchvision.datasets.CIFAR10("data", train=True)
            loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=True)
            net = Net().to("cuda")
            optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
            for x, y in loader:
                loss = net(x.to("cuda")).sum()
                loss.backward()
                optimizer.step()
            """,
            "14:13",
            fixed="""
            import torch
            import torch.nn as nn
            import torchvision

            # cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible
            torch.backends.cudnn.benchmark = True

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(3, 6, 5)
                    self.conv2 = nn.Conv2d(6, 16, 5)

            train_set = torchvision.datasets.CIFAR10("data", train=True)
            loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=True)
            net = Net().to("cuda")
            optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
            for x, y in loader:
                loss = net(x.to("cuda")).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        # the batch size a `**` dictionary passes counts: 128 images, not the default of 1
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torchvision

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(3, 6, 5)
                    self.conv2 = nn.Conv2d(6, 16, 5)

            train_set = torchvision.datasets.CIFAR10("data", train=True)
            train_kwargs = {"batch_size": 128, "shuffle": True}
            loader = torch.utils.data.DataLoader(train_set, **train_kwargs)
            net = Net().to("cuda")
            optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
            for x, y in loader:
                loss = net(x.to("cuda")).sum()
                loss.backward()
                optimizer.step()
            """,
            "15:13",
            fixed="""
            import torch
            import torch.nn as nn
            import torchvision

            # cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible
            torch.backends.cudnn.benchmark = True

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(3, 6, 5)
                    self.conv2 = nn.Conv2d(6, 16, 5)

            train_set = torchvision.datasets.CIFAR10("data", train=True)
            train_kwargs = {"batch_size": 128, "shuffle": True}
            loader = torch.utils.data.DataLoader(train_set, **train_kwargs)
            net = Net().to("cuda")
            optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
            for x, y in loader:
                loss = net(x.to("cuda")).sum()
                loss.backward()
                optimizer.step()
            """,
        ),
        # the same small layer built twenty times (a comprehension): the module does not say
        # how many a step runs, so no size is claimed
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torchvision

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(16, 16, 3, padding=1)

            train_set = torchvision.datasets.CIFAR10("data", train=True)
            loader = torch.utils.data.DataLoader(train_set, batch_size=4)
            net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), *[Block() for _ in range(20)]).cuda()
            optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
            for x, y in loader:
                net(x.cuda()).sum().backward()
                optimizer.step()
            """,
            "13:13",
            fixed="""
            import torch
            import torch.nn as nn
            import torchvision

            # cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible
            torch.backends.cudnn.benchmark = True

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(16, 16, 3, padding=1)

            train_set = torchvision.datasets.CIFAR10("data", train=True)
            loader = torch.utils.data.DataLoader(train_set, batch_size=4)
            net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), *[Block() for _ in range(20)]).cuda()
            optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
            for x, y in loader:
                net(x.cuda()).sum().backward()
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
        work = convolution_work_per_step(self.ctx)
        if work is not None and work <= _HOST_BOUND_CONVOLUTION_WORK:
            return  # (too little convolution for the algorithm to show in the step time: see above)
        if _DECIDED_TEXT.search(self.ctx.code_without_comments):
            return
        optimizer = torch.optimizer_construction
        node = optimizer if optimizer is not None else backward_calls[0]
        fix, why_not = startup_setting_fix(self.ctx, node, BENCHMARK_SETTING)
        self.report(node, message=f"{self.message} (no fix: {why_not})" if fix is None else None, fix=fix)
