"""What gpulint knows about NVIDIA DALI: which outputs of a DALI PyTorch iterator are on the GPU.

DALI's PyTorch iterators (`DALIGenericIterator`, `DALIClassificationIterator`) hand every pipeline
output over as a torch tensor on the device the pipeline produced it on: the output of a GPU
operator (`device="gpu"`, a `device="mixed"` decoder, `.gpu()`, or an operator given a GPU input,
which DALI then runs on the GPU) is a CUDA tensor already; a CPU output is a host tensor.  The
iterator's `output_map` names the outputs in the order the pipeline returns them
(`DALIClassificationIterator`: `data`, `label`).  A batch is indexed by those names
(`data[0]["data"]`).

The pipeline is read where this module defines it: a `@pipeline_def` function (or any function
returning the outputs) or a `Pipeline` subclass's `define_graph`, its operators made inline
(`fn.decoders.image(jpegs, device="mixed")`) or in `__init__` (`self.decode = ops.ImageDecoder(
device="mixed")`).  An output whose device cannot be read is `None`: not known either way.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.nodes import dotted_name, keyword_arg, method_name, positional_args
from gpulint.linter.analysis.walk import nodes_under

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

_ITERATOR = re.compile(
    r"^nvidia\.dali\.plugin\.pytorch\.(iterator\.)?(DALIGenericIterator|DALIClassificationIterator)$"
)
_DEFAULT_OUTPUT_MAP = ("data", "label")  # DALIClassificationIterator's
_DEVICES = {"gpu": "gpu", "mixed": "gpu", "cpu": "cpu"}  # a "mixed" operator's output is on the GPU
_DEPTH = 12  # how many assignments and operators an output is followed through
_CYCLE = "cycle"  # (a name's device while it is being read)

# Output name -> "gpu", "cpu" or None (not known).
OutputDevices = dict[str, str | None]


def iterator_outputs(ctx: FileContext, iterated: cst.BaseExpression) -> OutputDevices | None:
    """The devices of the outputs of the DALI iterator a step loop iterates (`for data in
    train_loader`, `enumerate(train_loader)`), or None when it iterates no DALI iterator of this
    module."""
    if isinstance(iterated, cst.Call) and dotted_name(iterated.func) == "enumerate" and iterated.args:
        iterated = iterated.args[0].value
    for origin in [iterated, *(ctx.values.origins(iterated) or ())]:
        if isinstance(origin, cst.Call) and _ITERATOR.match(ctx.call_qualified_name(origin) or ""):
            return _outputs_of(ctx, origin)
    return None


def _outputs_of(ctx: FileContext, iterator: cst.Call) -> OutputDevices:
    output_map = keyword_arg(iterator, "output_map")
    positional = positional_args(iterator)
    if output_map is None and len(positional) > 1:
        output_map = positional[1]
    names: list[str] = []
    if output_map is None:
        names = list(_DEFAULT_OUTPUT_MAP)
    elif isinstance(output_map.value, (cst.List, cst.Tuple)):
        for element in output_map.value.elements:
            if not isinstance(element.value, cst.SimpleString):
                return {}
            names.append(str(element.value.evaluated_value))
    else:
        return {}
    pipeline = keyword_arg(iterator, "pipelines")
    expr = pipeline.value if pipeline is not None else positional[0].value if positional else None
    pipeline_outputs = _pipeline_outputs(ctx, expr) if expr is not None else None
    if pipeline_outputs is None or len(pipeline_outputs[0]) != len(names):
        return dict.fromkeys(names)
    returned, scope = pipeline_outputs
    reader = _DeviceReader(ctx, scope)
    devices = {name: reader.device(value, _DEPTH) for name, value in zip(names, returned, strict=True)}
    return {name: None if device == _CYCLE else device for name, device in devices.items()}


def _pipeline_outputs(
    ctx: FileContext, expr: cst.BaseExpression
) -> tuple[list[cst.BaseExpression], cst.CSTNode] | None:
    """What the pipeline returns (its outputs, in order) and the function or class that defines
    them, for a pipeline this module defines."""
    if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
        expr = expr.elements[0].value  # one pipeline per GPU: all alike
    for origin in [expr, *(ctx.values.origins(expr) or ())]:
        if not isinstance(origin, cst.Call):
            continue
        name = dotted_name(origin.func)
        if name is None:
            continue
        name = name.rsplit(".", 1)[-1]
        for function in ctx.index.nodes("FunctionDef"):
            if function.name.value == name:
                outputs = _returned(function)
                if outputs is not None:
                    return outputs, function
        for cls in ctx.index.nodes("ClassDef"):
            if cls.name.value != name:
                continue
            for statement in cls.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == "define_graph":
                    outputs = _returned(statement)
                    if outputs is not None:
                        return outputs, cls
    return None


def _returned(function: cst.FunctionDef) -> list[cst.BaseExpression] | None:
    returns = [node for node in nodes_under(function) if isinstance(node, cst.Return) and node.value is not None]
    if len(returns) != 1:
        return None
    value = returns[0].value
    assert value is not None
    if isinstance(value, (cst.Tuple, cst.List)):
        return [element.value for element in value.elements]
    return [value]


class _DeviceReader:
    """Where the values of one pipeline definition live, followed through its assignments."""

    def __init__(self, ctx: FileContext, scope: cst.CSTNode) -> None:
        self.ctx = ctx
        self.assigned: dict[str, list[cst.BaseExpression]] = {}
        # Each name's device, once read, so that a pipeline that reuses names costs one pass over
        # its assignments; `_CYCLE` while it is being read: in `x = op(x)`, the `x` read is one of
        # the name's other values, which the name's device already joins.
        self.named: dict[str, str | None] = {}
        for node in nodes_under(scope):
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    self._bind(target.target, node.value)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        key = dotted_name(target)
        if key is not None:
            self.assigned.setdefault(key, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            # `jpegs, labels = fn.readers.file(...)`: every output of one operator is where it runs
            for element in target.elements:
                self._bind(element.value, value)

    def device(self, expr: cst.BaseExpression, depth: int) -> str | None:
        if depth <= 0:
            return None
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr) or ""
            if key in self.named:
                return self.named[key]
            values = self.assigned.get(key)
            if not values:
                return None
            self.named[key] = _CYCLE
            devices = {self.device(value, depth - 1) for value in values} - {_CYCLE}
            self.named[key] = devices.pop() if len(devices) == 1 else None
            return self.named[key]
        if not isinstance(expr, cst.Call):
            return None
        if method_name(expr) == "gpu":
            return "gpu"
        operator = self._operator(expr)
        if operator is None:
            return None  # not a DALI operator: what it returns is not known
        for call in (expr, operator):
            device = keyword_arg(call, "device")
            if device is not None:  # a literal, or a variable: not known here
                return _stated_device(device.value)
        inputs = [self.device(arg.value, depth - 1) for arg in positional_args(expr)]
        if inputs and all(device == _CYCLE for device in inputs):
            return _CYCLE  # `x = op(x)`: where x already is
        inputs = [device for device in inputs if device != _CYCLE]
        if "gpu" in inputs:
            return "gpu"  # DALI runs an operator given a GPU input on the GPU
        if None in inputs:
            return None
        return "cpu"  # DALI's default: readers, random numbers, operators of CPU inputs

    def _operator(self, call: cst.Call) -> cst.Call | None:
        """The DALI operator a call runs: the call itself (`fn.decoders.image(...)`), or the
        operator object it calls (`self.decode(jpegs)` after `self.decode = ops.ImageDecoder(...)`)."""
        if (self.ctx.call_qualified_name(call) or "").startswith("nvidia.dali."):
            return call
        for value in self.assigned.get(dotted_name(call.func) or "", ()):
            if isinstance(value, cst.Call) and (self.ctx.call_qualified_name(value) or "").startswith("nvidia.dali."):
                return value
        return None


def _stated_device(device: cst.BaseExpression) -> str | None:
    """The device a `device=` argument names, when it is a literal DALI knows."""
    if isinstance(device, cst.SimpleString):
        return _DEVICES.get(str(device.evaluated_value))
    return None
