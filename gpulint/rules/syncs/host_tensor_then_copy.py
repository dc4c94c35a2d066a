"""GL203 host-tensor-then-copy."""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.code_shapes import FACTORY_COPY, REPEATED_COPY
from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import ACCELERATOR, TORCH
from gpulint.linter.analysis.loops import REPEATS_SHAPES, is_interval_condition, loop_around
from gpulint.linter.analysis.nodes import has_star_kwargs, is_zero, keyword_arg, last_name
from gpulint.linter.analysis.pytorch import is_device_target
from gpulint.linter.analysis.values import target_key
from gpulint.linter.analysis.vocabulary import (
    DEVICE_COPY_METHODS,
    FROM_DATA_FACTORIES,
    HOST_TENSOR_METHODS,
    LEGACY_TENSOR_CONSTRUCTORS,
    LIKE_FACTORIES,
    TENSOR_FACTORIES,
)
from gpulint.linter.analysis.walk import names_under
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.fix.builders import append_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import TIMED_CUDA_SCRIPT

# Random factories draw from another generator on the device: values differ (the fix is unsafe).
_RANDOM_FACTORIES = frozenset("rand randn randint randperm rand_like randn_like randint_like normal bernoulli".split())
# What the fix's description says of a random factory moved to the device.
RANDOM_STREAM_WARNING = (
    "; changes the random numbers: the device's generator draws other values than the host's for the same seed "
    "(a `randperm` split of the data, an initialization)"
)
_DEVICE_NAME = re.compile(r"device|^dev$|gpu|cuda|rank", re.I)
# A device string that names the host.
_HOST_DEVICE = re.compile(r"""^[rbuRBU]*['"](cpu|meta)\b""")


# Factories whose positional arguments are the tensor's size.
_SIZE_FACTORIES = frozenset("zeros ones empty full rand randn".split())


def _empty(factory: cst.Call, name: str) -> bool:
    """`torch.empty(0)`, `torch.zeros((0, d))`: a size with a literal 0 in it, so the tensor holds no
    element and its copy moves no data."""
    if name not in _SIZE_FACTORIES:
        return False
    sizes = [arg.value for arg in factory.args if arg.keyword is None and not arg.star]
    if name == "full":
        sizes = sizes[:1]  # `full(size, fill_value)`
    if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
        sizes = [element.value for element in sizes[0].elements]
    return any(is_zero(size) for size in sizes)


class HostTensorThenCopy(Rule):
    """
    ## What it finds
    A tensor built on the host by a factory and then copied to the accelerator, where it is built
    repeatedly -- in a loop, in `forward()` (or another method a framework calls per batch), in a
    step function, or in a function of the module called from one of those:
    `torch.zeros(n).to(device)`, `torch.arange(n).cuda()`, also through host-side methods or a
    subscript (`torch.arange(n)[None].to(device)`, `torch.randn(n).contiguous().cuda()`), from a
    legacy constructor (`torch.LongTensor(x)`), from a name every assignment of which is such a
    factory (its own copy, `z = z.type_as(x)`, aside), and with `.type_as(t)`.

    Not reported: a tensor built once, outside any loop (start-up, an export or generation script),
    or in a loop of a handful of iterations (fewer than 20 known statically, also over an argparse
    option's list default or up to a counter's `break`): a one-off copy costs microseconds.  Nor an empty tensor
    (`torch.empty(0).to(device)`, a size with a literal 0): there is no data to copy.  Nor
    `torch.tensor(data)` / `torch.as_tensor(data)`: they read Python or NumPy data on the host
    whatever the device, so `device=` still builds on the host and copies -- nor a legacy
    constructor given Python data (`torch.LongTensor([cls, sep])`).  Nor a copy under an `if` that
    picks one iteration of its loop or throttles it (`if i == 0:`), nor the copy of a host buffer
    that a loop before it fills with host values (`for i, t in enumerate(toks): mask[i, :len(t)] =
    1`: on the device every write would be a copy of its own; rows written from device tensors
    are reported), nor a `.to()` of a name an earlier statement already moved (`m = m.to(device)`
    ... `m.to(x.dtype)`).  Nor a random factory
    that draws from a generator not known to be on the device (`generator=g` with `g =
    torch.Generator()`): the numbers must come from that host stream, and `device=` beside a host
    generator raises.

    ## Why it is slow
    The factory allocates and fills host memory, then `.to(device)` makes a second, blocking copy
    from pageable memory: the host waits for the transfer and the GPU for the host.  With
    `device=` the tensor is created on the device directly -- one allocation and a kernel, no
    transfer.  Inside `forward()` or a step loop this happens every step.

    ## Example
    ```python
    import torch

    device = torch.device("cuda")

    class Embedding(torch.nn.Module):
        def forward(self, x):
            positions = torch.arange(x.shape[1]).to(device)
            return self.table(x) + self.pos(positions)
    ```
    Use instead:
    ```python
    import torch

    device = torch.device("cuda")

    class Embedding(torch.nn.Module):
        def forward(self, x):
            positions = torch.arange(x.shape[1], device=device)
            return self.table(x) + self.pos(positions)
    ```

    ## Fix (safe)
    Moves the device into the factory: `device=<the .to() argument>` (`.cuda()` becomes
    `device="cuda"`).  Safe for deterministic factories: the values are identical.  For random
    factories (`torch.rand`, `randn`, `randint`, `randperm`, ...) it changes results, so it is not
    a speed fix to apply unread: on the device they draw from the device's generator, so the
    numbers differ from the host's for the same seed, and so does whatever they decide (the data
    split `torch.randperm(n)` draws, an initialization).  There the fix is unsafe and its
    description says that it changes the random numbers.  Not
    offered when `.to()` also changes the dtype, copies, asks for `non_blocking`, or takes another
    tensor (`.to(x)` takes `x`'s dtype too), nor when the factory already names a device; nor
    when anything stands between the factory and the copy (methods, a subscript, a name, a legacy
    constructor, `.type_as()`).
    """

    code = "GL203"
    name = "host-tensor-then-copy"
    message = "`torch.{factory}(...)` is built on the host and then copied to the device; pass `device=` instead"
    title = "a tensor built on the host and then copied to the device; pass `device=` to the factory instead"
    requires = {TORCH, ACCELERATOR}
    tokens = (".to(", ".cuda(")
    # a factory's tensor copied (code_shapes.FACTORY_COPY), what makes code run again and again, and
    # the copy where it may
    triggers = ((FACTORY_COPY,), REPEATS_SHAPES, (REPEATED_COPY,))
    site_triggers = 1
    fix_applicability = Applicability.SAFE

    VALID = [
        # Python data in a legacy constructor (read on the host whatever the device); a host
        # buffer filled in a loop, copied once; a copy on the first iteration only
        Valid(
            """
            class Fusion(torch.nn.Module):
                def forward(self, x, tokenized):
                    special = torch.LongTensor([cls_id, sep_id, pad_id]).to(x.device)
                    rows = [[0, 1, 0, 1]]
                    pattern = torch.BoolTensor(rows).to(x.device)
                    mask = torch.zeros(len(tokenized), 77, dtype=torch.long)
                    for i, toks in enumerate(tokenized):
                        mask[i, -len(toks):] = 1
                    mask = mask.to(x.device)
                    for i in range(x.shape[0]):
                        if i == 0:
                            first = torch.arange(x.shape[1]).to(x.device)
                    return x, special, pattern, mask, first
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # a random factory that draws from a host generator: the fix would pair it with a CUDA device
        Valid(
            """
            g = torch.Generator()
            g.manual_seed(0)
            for x, y in loader:
                noise = torch.randn(x.shape, generator=g).to(device)
                loss = model(x + noise).sum()
                loss.backward()
                optimizer.step()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # an empty tensor (nothing to copy); a buffer per call of a function a loop over an
        # argparse option's short list default calls
        Valid(
            """
            import argparse

            class MultiCrop(torch.nn.Module):
                def forward(self, crops):
                    output = torch.empty(0).to(crops[0].device)
                    for crop in crops:
                        output = torch.cat((output, self.backbone(crop)))
                    return output

            def knn_classifier(features, k):
                one_hot = torch.zeros(k, 1000).to(features.device)
                for chunk in features.split(100):
                    one_hot.scatter_(1, chunk, 1)

            parser = argparse.ArgumentParser()
            parser.add_argument("--nb_knn", default=[10, 20, 100, 200], nargs="+", type=int)
            args = parser.parse_args()
            for k in args.nb_knn:
                knn_classifier(features, k)
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
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
        # moved on one path only: the host tensor serves the other
        Valid(
            """
            def normalizer(cuda):
                mean = torch.tensor([0.5, 0.4, 0.3]).view(1, 3, 1, 1)
                if cuda:
                    mean = mean.cuda()
                return mean
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # built once, outside any loop (an export or generation script); in a loop of 3 iterations
        Valid(
            """
            positions = torch.arange(seq_len).to(device)
            def export(model):
                example = torch.zeros(1, 3, 224, 224).to(device)
                torch.onnx.export(model, example, "model.onnx")
            export(model)
            for i in range(3):
                warmup = torch.zeros(8).to(device)
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # `torch.tensor(data)` copies its data from the host either way: `device=` saves nothing
        Valid(
            """
            for x, y in loader:
                c = torch.tensor([1, 2]).to(device=device)
                labels = torch.as_tensor(label_list).cuda()
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
        # a host buffer whose rows are written from device tensors: each row crosses to the host
        # and back, which `device=` avoids
        Invalid(
            """
            class Task:
                def train_step(self, generated, model, optimizer):
                    rows = torch.empty(len(generated), 128, dtype=torch.long)
                    for i, tokens in enumerate(generated):
                        rows[i] = torch.cat([tokens.new([bos]), tokens])
                    loss = model(rows.to(device)).sum()
                    loss.backward()
                    optimizer.step()
            """,
            "9:22",
            header=TIMED_CUDA_SCRIPT,
        ),
        # the first copy is reported; what follows starts from the device (another's dtype, a
        # second move of the moved name)
        Invalid(
            """
            class Scale(torch.nn.Module):
                def forward(self, x):
                    m = torch.ones(x.shape[0], 1)
                    m = m.to(x.device)
                    m = m.to(x.dtype)
                    n = m.cuda()
                    return x * m * n
            """,
            "7:13",
            header=TIMED_CUDA_SCRIPT,
        ),
        # a factory's result turned into a device tensor by the next statement, in a Lightning
        # step; a generator made on the device does not keep a random factory on the host
        Invalid(
            """
            import lightning as L

            class GAN(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, _ = batch
                    z = torch.randn(x.shape[0], 100)
                    z = z.type_as(x)
                    noise = torch.rand(x.shape, generator=self.cuda_generator).to(self.device)
                    return self.loss(self.generator(z), x + noise)

                def setup(self, stage):
                    self.cuda_generator = torch.Generator(device="cuda")
            """,
            "10:13",
            "11:68",
            header=TIMED_CUDA_SCRIPT,
            applicability=Applicability.UNSAFE,
            fixed="""
            import lightning as L

            class GAN(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, _ = batch
                    z = torch.randn(x.shape[0], 100)
                    z = z.type_as(x)
                    noise = torch.rand(x.shape, generator=self.cuda_generator, device=self.device)
                    return self.loss(self.generator(z), x + noise)

                def setup(self, stage):
                    self.cuda_generator = torch.Generator(device="cuda")
            """,
        ),
        # a tensor with elements, per forward; a buffer per call from a loop over a long list
        Invalid(
            """
            class MultiCrop(torch.nn.Module):
                def forward(self, crops):
                    output = torch.empty(len(crops), 0 + 1).to(crops[0].device)
                    return output

            def knn_classifier(features, k):
                return torch.zeros(k, 1000).to(features.device)

            parser.add_argument("--nb_knn", default=list(range(50)), nargs="+", type=int)
            for k in args.nb_knn:
                knn_classifier(features, k)
            """,
            "6:49",
            "10:33",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            class MultiCrop(torch.nn.Module):
                def forward(self, crops):
                    output = torch.empty(len(crops), 0 + 1, device=crops[0].device)
                    return output

            def knn_classifier(features, k):
                return torch.zeros(k, 1000, device=features.device)

            parser.add_argument("--nb_knn", default=list(range(50)), nargs="+", type=int)
            for k in args.nb_knn:
                knn_classifier(features, k)
            """,
        ),
        # deterministic factories: safe; an asynchronous copy is the author's choice (no fix)
        Invalid(
            """
            for x, y in loader:
                a = torch.zeros(3, 4).to(device)  # kept
                b = (torch.arange(10).cuda())
                e = torch.arange(2).to(device, non_blocking=True)
            """,
            "5:27",
            "6:27",
            "7:25",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            for x, y in loader:
                a = torch.zeros(3, 4, device=device)  # kept
                b = (torch.arange(10, device="cuda"))
                e = torch.arange(2).to(device, non_blocking=True)
            """,
        ),
        # `.cuda()` of a seeded reference implementation's shuffle index: the fix changes which
        # permutation each step draws, so it is unsafe too
        Invalid(
            """
            class MoCo(torch.nn.Module):
                def shuffle(self, x):
                    idx_shuffle = torch.randperm(x.shape[0]).cuda()
                    return x[idx_shuffle]

                def forward(self, x):
                    return self.encoder(self.shuffle(x))
            """,
            "6:50",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            class MoCo(torch.nn.Module):
                def shuffle(self, x):
                    idx_shuffle = torch.randperm(x.shape[0], device="cuda")
                    return x[idx_shuffle]

                def forward(self, x):
                    return self.encoder(self.shuffle(x))
            """,
            applicability=Applicability.UNSAFE,
        ),
        # a random factory draws from the device's generator: unsafe; in a module's forward()
        Invalid(
            """
            class Noise(torch.nn.Module):
                def forward(self, x):
                    return x + torch.randn(5).to(device)
            """,
            "6:35",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            class Noise(torch.nn.Module):
                def forward(self, x):
                    return x + torch.randn(5, device=device)
            """,
            applicability=Applicability.UNSAFE,
        ),
        # no fix: a dtype too, a device index, `.to(grad)` takes grad's dtype as well; in a function
        # called every epoch
        Invalid(
            """
            def masks(grad):
                a = torch.zeros(3).to(device, torch.float16)
                b = torch.ones(2).cuda(1)
                c = torch.zeros(4).to(grad)
            for epoch in range(epochs):
                masks(grad)
            """,
            "5:24",
            "6:23",
            "7:24",
            header=TIMED_CUDA_SCRIPT,
        ),
        # host methods or a subscript between the factory and the copy, a legacy constructor, a
        # name that holds a factory's tensor, `.type_as()`, an integer rank: reported, no fix
        Invalid(
            """
            while True:
                a = torch.zeros(n, dtype=torch.long)[None, ...].to(device)
                b = torch.randn(n, 3).contiguous().cuda()
                c = torch.LongTensor(ids).to(device)
                if one_hot:
                    d = torch.randint(0, 9, (n, 9))
                else:
                    d = torch.randint(0, 9, (n,))
                    d[0] = 1
                d = d.cuda()
                e = torch.zeros(n).type_as(x)
                f = torch.arange(n).view(1, -1).to(rank)
            """,
            "5:53",
            "6:40",
            "7:31",
            "13:9",
            "14:24",
            "15:37",
            header=TIMED_CUDA_SCRIPT,
        ),
        Invalid(
            """
            for x, y in loader:
                stop = torch.ones(n, 1).to(masks.device)
            """,
            "5:29",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            for x, y in loader:
                stop = torch.ones(n, 1, device=masks.device)
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in DEVICE_COPY_METHODS) or has_star_kwargs(node):
            return
        if func.attr.value != "type_as" and not is_device_target(self.ctx, node):
            return
        found = self._host_factory(func.value)
        if found is None or not self.ctx.loops.runs_repeatedly(node) or self._once_in_its_loop(node):
            return  # (built once: the copy is a one-off start-up cost)
        if isinstance(func.value, cst.Name) and (
            self._filled_in_place(func.value) or self._moved_before(func.value, node)
        ):
            return  # a buffer written piece by piece on the host, or already on the device here
        factory, name, direct = found
        if _empty(factory, name):
            return  # an empty tensor: no data to copy
        fix = self._fix(node, factory, name) if direct and name in TENSOR_FACTORIES else None
        self.report(node, message=self.message.format(factory=name), fix=fix)

    def _host_factory(self, expr: cst.BaseExpression, through: bool = False) -> tuple[cst.Call, str, bool] | None:
        """The factory that built `expr` on the host, its name, and whether `expr` is that call
        itself: `torch.zeros(n)`, `torch.tensor(x)[None]`, `torch.randn(n).contiguous()`, a legacy
        `torch.LongTensor(x)`, or a name every assignment of which is one."""
        if isinstance(expr, cst.Subscript):
            return self._host_factory(expr.value, True)
        if isinstance(expr, cst.Call):
            qualified = self.ctx.call_qualified_name(expr)
            if qualified is not None:
                name = qualified[len("torch.") :] if qualified.startswith("torch.") else ""
                if name in LEGACY_TENSOR_CONSTRUCTORS:
                    return None if self._holds_data(expr) else (expr, name, False)
                if (
                    name not in TENSOR_FACTORIES
                    or name in LIKE_FACTORIES
                    or name in FROM_DATA_FACTORIES
                    or has_star_kwargs(expr)
                ):
                    return None
                if keyword_arg(expr, "device") is not None or self._host_generator(expr):
                    return None
                return expr, name, not through
            inner = expr.func
            if isinstance(inner, cst.Attribute) and inner.attr.value in HOST_TENSOR_METHODS:
                return self._host_factory(inner.value, True)
            return None
        if isinstance(expr, cst.Name) and not through:  # (one name, not a chain of them)
            origins = self._local_values(expr)
            found = [self._host_factory(origin, True) for origin in origins if not isinstance(origin, cst.Name)]
            if found and len(found) == len(origins) and all(found):
                return found[0]
        return None

    def _holds_data(self, constructor: cst.Call) -> bool:
        """`torch.LongTensor([cls, sep, pad])`, `torch.BoolTensor(mask_rows)` with `mask_rows = [...]`:
        a legacy constructor given Python data, not sizes -- like `torch.tensor(data)` it reads the
        data on the host whatever the device."""
        first = constructor.args[0].value if constructor.args and constructor.args[0].keyword is None else None
        data = (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)
        if isinstance(first, data):
            return True
        key = target_key(first) if first is not None else None
        values = self.ctx.values.assigned.get(key, ()) if key is not None else ()
        return bool(values) and all(isinstance(value, data) for value in values)

    def _once_in_its_loop(self, node: cst.Call) -> bool:
        """Whether an `if` between the copy and the loop that repeats it picks one iteration or
        throttles (`if i == 0:`, `if step % 100 == 0:`): the copy is a one-off there."""
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(ancestor, cst.If) and is_interval_condition(ancestor.test):
                return True
        return False

    def _filled_in_place(self, name: cst.Name) -> bool:
        """Whether the function writes host values into `name` by subscript in a loop of its own
        (`for i, toks in enumerate(batch): mask[i, -len(toks):] = 1`, the copy after the loop): a
        host buffer filled piece by piece and copied once, where `device=` would make every write
        a copy.  (Rows written from device tensors are copied to the host first: reported.)"""
        function = self.ctx.enclosing_function(name)
        around_copy = {id(a) for a in self.ctx.ancestors(name)}
        filled = False
        writes: list[cst.Assign | cst.AugAssign] = [*self.ctx.index.nodes("Assign"), *self.ctx.index.nodes("AugAssign")]
        for node in writes:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if not any(
                isinstance(target, cst.Subscript)
                and isinstance(target.value, cst.Name)
                and target.value.value == name.value
                for target in targets
            ):
                continue
            if self.ctx.enclosing_function(node) is not function:
                continue
            if self.ctx.torch.tensors.is_tensor(node.value) and not self.ctx.values.on_host(node.value):
                return False  # a device tensor's values written in: they cross to the host and back
            loop, _ = loop_around(self.ctx.index, node)
            filled = filled or (loop is not None and id(loop) not in around_copy)
        return filled

    def _moved_before(self, name: cst.Name, node: cst.Call) -> bool:
        """Whether a statement of the function above the copy already moved `name` to the device
        (`m = m.to(device)` ... `m.to(x.dtype)`): the copy starts from the device."""
        function = self.ctx.enclosing_function(name)
        statement = self.ctx.statement_of(node)
        order = self._order
        for assign in self.ctx.index.nodes("Assign"):
            if self.ctx.enclosing_function(assign) is not function or not _moved(assign.value):
                continue
            if not any(isinstance(t.target, cst.Name) and t.target.value == name.value for t in assign.targets):
                continue
            if self.ctx.statement_of(assign) is not statement and order[id(assign)] < order.get(id(node), -1):
                return True
        return False

    @cached_property
    def _order(self) -> dict[int, int]:
        """Source order of the walked nodes (by id)."""
        return {id(n): i for i, n in enumerate(self.ctx.index.ordered)}

    def _host_generator(self, factory: cst.Call) -> bool:
        """Whether a random factory draws from a generator not known to be on the device
        (`generator=g` with `g = torch.Generator()`): the host is where its numbers must come from
        (a seeded, reproducible stream), and `device=` beside a host generator raises."""
        generator = keyword_arg(factory, "generator")
        if generator is None or (isinstance(generator.value, cst.Name) and generator.value.value == "None"):
            return False
        key = target_key(generator.value)
        origins = self.ctx.values.assigned.get(key, ()) if key is not None else ()
        return not origins or not all(
            isinstance(origin, cst.Call)
            and self.ctx.call_qualified_name(origin) == "torch.Generator"
            and (device := keyword_arg(origin, "device") or (origin.args[0] if origin.args else None)) is not None
            and (not isinstance(device.value, cst.SimpleString) or not _HOST_DEVICE.match(device.value.value))
            for origin in origins
        )

    def _local_values(self, name: cst.Name) -> list[cst.BaseExpression]:
        """What the function around `name` assigns to it (moves of itself left out); nothing when
        the name is also a parameter or a loop variable there, or is assigned in another way."""
        function = self.ctx.enclosing_function(name)
        if function is not None and name.value in {p.name.value for p in function.params.params}:
            return []
        for ancestor in self.ctx.ancestors(name):
            if ancestor is function:
                break
            if isinstance(ancestor, (cst.For, cst.CompFor)) and name.value in names_under(ancestor.target):
                return []
        assigns = []
        for assign in self.ctx.index.nodes("Assign"):
            if self.ctx.enclosing_function(assign) is not function:
                continue
            for target in assign.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name.value:
                    assigns.append(assign)
                elif isinstance(target.target, (cst.Tuple, cst.List)) and name.value in names_under(target.target):
                    return []  # unpacked: not one value
        assigns = [assign for assign in assigns if not _moved(assign.value)]
        # A copy made only on one path (`if cuda: mean = mean.cuda()`) is a choice of device: the
        # host tensor serves the other path.
        for ancestor in self.ctx.ancestors(name):
            if ancestor is function:
                break
            if isinstance(ancestor, cst.If) and not all(
                any(a is ancestor for a in self.ctx.ancestors(x)) for x in assigns
            ):
                return []
        return [assign.value for assign in assigns]

    def _fix(self, node: cst.Call, factory: cst.Call, name: str) -> Fix | None:
        if keyword_arg(node, "non_blocking") is not None:
            return None  # the author wants an asynchronous copy (of a pinned tensor?): not ours to drop
        args = list(node.args)
        assert isinstance(node.func, cst.Attribute)  # visit_Call checked: `.to`, `.cuda`
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
        new = append_keyword(factory, "device", device)
        # The `.to()` call is replaced by the factory itself, keeping the outer parentheses.
        new = new.with_changes(lpar=node.lpar, rpar=node.rpar)
        description = f"Create the tensor on the device: `torch.{name}(..., device=...)`"
        if name in _RANDOM_FACTORIES:
            # Not a pure speed fix: the numbers change, and with them whatever they decide.
            return Fix(Applicability.UNSAFE, description + RANDOM_STREAM_WARNING, {node: new})
        return Fix(Applicability.SAFE, description, {node: new})


def _device_like(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """A device (not a tensor or dtype): a string, `torch.device(...)`, or a name that says so."""
    if isinstance(expr, (cst.SimpleString, cst.Integer)):
        return True
    if isinstance(expr, cst.Call):
        return ctx.call_qualified_name(expr) == "torch.device"
    return bool(_DEVICE_NAME.search(last_name(expr) or ""))


def _moved(expr: cst.BaseExpression) -> bool:
    """`x.cuda()`, `x.to(...)`, `x.type_as(t)`: the name's later, device-side value."""
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in DEVICE_COPY_METHODS
    )
