"""Whether a data pipeline built in a module is ever read: a loader's or a pipeline's settings
only matter when batches flow through it.

A pipeline (a `DataLoader(...)`, a `tf.data` dataset) assigned to a name is *consumed* when the name
is read in any way this module cannot rule out -- iterated, passed to a call (`trainer.fit(model,
loader)`, `enumerate(loader)`), returned, stored -- and *not consumed* when every read is one of:

* a peek outside any loop: `next(iter(loader))`, `for x in ds.take(1)` (a visualisation demo shows
  one batch; a peek inside a loop runs every epoch and is GL105's pattern);
* a display loop: `for images, labels in ds:` (or over `ds.take(n)`, `enumerate(ds)`, or `next(it)`
  of an `it = iter(ds)` in the loop) whose body shows what it reads -- matplotlib, `cv2.imshow`,
  IPython's display -- and takes no training step (a viewer that browses the data, often with a
  `time.sleep` between images: nothing waits for the pipeline), or only prints it (`for x in ds:
  print(x.numpy())`, a guide's demo of a transformation);
* `len(loader)`;
* `layer.adapt(ds)` outside any loop: one pass to fit a Keras preprocessing layer (a vocabulary, a
  mean);
* building the pipeline further under the same name (`ds = ds.map(f)`);

or when it is never read at all -- for a local variable of a function, or a name of a notebook
(nothing imports a notebook).  A module-level name of a Python file may be imported by another
module: it is not consumed only when a peek shows what it is for.  A
pipeline not assigned to a plain name (an argument, a `return`, `self.loader = ...`) counts as
consumed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.loops import runs_each_iteration
from gpulint.linter.analysis.nodes import dotted_name
from gpulint.linter.analysis.walk import nodes_under

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
# Calls that show data to a person: a loop making them looks at the pipeline, it trains nothing.
_DISPLAY_CALLS = re.compile(r"^(matplotlib\.|cv2\.imshow$|IPython\.display\.)")
# What a loop that only prints its elements may call besides `print` (conversions for the text).
_PRINTABLE_METHODS = frozenset({"numpy", "tolist", "decode", "format", "item", "get_shape"})
_PRINTABLE_BUILTINS = frozenset({"len", "str", "repr", "list", "tuple", "type", "round", "int", "float", "enumerate"})
# Calls that train or run a model over a pipeline (Keras); other training steps are the loop model's.
_MODEL_RUNS = frozenset({"fit", "evaluate", "predict", "train_on_batch", "test_on_batch", "predict_on_batch"})
# What a loop may iterate to go over a pipeline `ds`: `ds.take(n)`, `ds.as_numpy_iterator()`, `enumerate(ds)`.
_ITERATING_METHODS = frozenset({"take", "as_numpy_iterator", "unbatch"})


def pipeline_consumed(ctx: FileContext, pipeline: cst.BaseExpression) -> bool:
    """Whether the pipeline built by `pipeline` (a constructor call or the last stage of a chain)
    is read anywhere in a way that may draw batches from it (module docstring)."""
    name = _assigned_name(ctx, pipeline)
    if name is None:
        return True
    scope = _scope(ctx, pipeline)
    reads = [
        node for node in ctx.names_by_identifier.get(name, ()) if _is_read(ctx, node) and _scope(ctx, node) is scope
    ]
    importable = isinstance(scope, cst.Module) and not str(ctx.path).endswith(".ipynb")
    if importable and not any(_is_peek(ctx, node) for node in reads):
        return True  # a module's name may be used by another module: only a peek says it is not
    return any(not _harmless_read(ctx, node, name) for node in reads)


def fetches_one_batch(ctx: FileContext, pipeline: cst.BaseExpression) -> bool:
    """Whether the pipeline is built only to draw one batch from it: `next(iter(DataLoader(...)))`
    (a callback that logs sample images, a shape probe).  Loader workers would start, hand over
    one batch and stop: slower than loading it in place."""
    argument = ctx.parent(pipeline)
    if not isinstance(argument, cst.Arg) or not isinstance(call := ctx.parent(argument), cst.Call):
        return False
    if dotted_name(call.func) != "iter" or not isinstance(outer_argument := ctx.parent(call), cst.Arg):
        return False
    outer = ctx.parent(outer_argument)
    return isinstance(outer, cst.Call) and dotted_name(outer.func) == "next"


def _assigned_name(ctx: FileContext, expr: cst.BaseExpression) -> str | None:
    """`name` when `expr`, or the method chain it starts (`expr.batch(32).cache()`), is the whole
    value of `name = ...` (one plain target)."""
    parent = ctx.parent(expr)
    while isinstance(parent, cst.Attribute) and parent.value is expr and isinstance(ctx.parent(parent), cst.Call):
        call = ctx.parent(parent)
        assert isinstance(call, cst.Call)  # (checked above; for the type checker)
        if call.func is not parent:
            break
        expr, parent = call, ctx.parent(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and parent.value is expr:
        target = parent.targets[0].target
        return target.value if isinstance(target, cst.Name) else None
    return None


def _scope(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode:
    """The innermost function around `node`, or the module (names in a class body are its own)."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, _SCOPES):
            return ancestor
    return ctx.module


def _is_read(ctx: FileContext, name: cst.Name) -> bool:
    """A `Name` that reads the variable: not an assignment target, attribute name, keyword or parameter."""
    parent = ctx.parent(name)
    if isinstance(parent, (cst.AssignTarget, cst.Param, cst.ImportAlias, cst.AsName)):
        return False
    if isinstance(parent, cst.Attribute) and parent.attr is name:
        return False
    if isinstance(parent, cst.Arg) and parent.keyword is name:
        return False
    if isinstance(parent, cst.FunctionDef | cst.ClassDef) and parent.name is name:
        return False
    return not (isinstance(parent, cst.For) and parent.target is name)


def _harmless_read(ctx: FileContext, name: cst.Name, variable: str) -> bool:
    if _displayed(ctx, name) or _adapted(ctx, name):
        return True
    parent = ctx.parent(name)
    # `len(loader)`
    if isinstance(parent, cst.Arg) and isinstance(call := ctx.parent(parent), cst.Call):
        callee = dotted_name(call.func)
        if callee == "len":
            return True
        # `next(iter(loader))`, once
        if callee == "iter" and isinstance(outer_arg := ctx.parent(call), cst.Arg):
            outer = ctx.parent(outer_arg)
            if isinstance(outer, cst.Call) and dotted_name(outer.func) == "next":
                return not _in_loop(ctx, outer)
        return False
    if isinstance(parent, cst.Attribute) and parent.value is name and isinstance(call := ctx.parent(parent), cst.Call):
        # `ds.take(1)`, once: a peek
        if parent.attr.value == "take" and not _in_loop(ctx, call):
            return True
        # `ds = ds.map(f)`: the same pipeline, built further
        statement = next((a for a in ctx.ancestors(call) if isinstance(a, cst.Assign)), None)
        if statement is not None and any(
            isinstance(t.target, cst.Name) and t.target.value == variable for t in statement.targets
        ):
            return True
    return False


def _is_peek(ctx: FileContext, name: cst.Name) -> bool:
    """`next(iter(name))` or `name.take(n)` outside a loop, a display loop over `name`, or a
    preprocessing layer adapted to it."""
    if _displayed(ctx, name) or _adapted(ctx, name):
        return True
    parent = ctx.parent(name)
    if isinstance(parent, cst.Attribute) and parent.value is name and parent.attr.value == "take":
        call = ctx.parent(parent)
        return isinstance(call, cst.Call) and not _in_loop(ctx, call)
    if isinstance(parent, cst.Arg) and isinstance(call := ctx.parent(parent), cst.Call):
        if dotted_name(call.func) == "iter" and isinstance(outer_arg := ctx.parent(call), cst.Arg):
            outer = ctx.parent(outer_arg)
            return isinstance(outer, cst.Call) and dotted_name(outer.func) == "next" and not _in_loop(ctx, outer)
    return False


def _in_loop(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Whether `node` runs on every iteration of a loop (the body; not the iterable of a `for`)."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.While)) and runs_each_iteration(ancestor, child):
            return True
        if isinstance(ancestor, cst.CompFor | cst.ListComp | cst.GeneratorExp):
            return True
        if isinstance(ancestor, _SCOPES):
            return False
        child = ancestor
    return False


def _adapted(ctx: FileContext, name: cst.Name) -> bool:
    """`layer.adapt(name)` outside a loop: one pass that fits a Keras preprocessing layer's state
    (a vocabulary, a mean), not a training input."""
    arg = ctx.parent(name)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    return (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "adapt"
        and not _in_loop(ctx, call)
    )


def _displayed(ctx: FileContext, name: cst.Name) -> bool:
    """Whether this read of a pipeline only feeds a display loop (module docstring): `name` is what
    the loop iterates (through `take`, `as_numpy_iterator`, `enumerate`), or it is handed to
    `iter()` whose result, assigned to a name, is read only by `next()` in display loops."""
    expr: cst.CSTNode = name
    parent = ctx.parent(expr)
    if isinstance(parent, cst.Attribute) and parent.value is expr and parent.attr.value in _ITERATING_METHODS:
        call = ctx.parent(parent)
        if isinstance(call, cst.Call) and call.func is parent:
            expr, parent = call, ctx.parent(call)
    if isinstance(parent, cst.Arg) and isinstance(call := ctx.parent(parent), cst.Call):
        callee = dotted_name(call.func)
        if callee == "iter":
            return iterator_only_displayed(ctx, call)
        if callee != "enumerate":
            return False
        expr, parent = call, ctx.parent(call)
    return isinstance(parent, cst.For) and parent.iter is expr and is_display_loop(ctx, parent)


def iterator_only_displayed(ctx: FileContext, iter_call: cst.Call) -> bool:
    """`batches = iter(ds)` where every read of `batches` is `next(batches)` in a display loop."""
    name = _assigned_name(ctx, iter_call)
    if name is None:
        return False
    scope = _scope(ctx, iter_call)
    reads = [
        node for node in ctx.names_by_identifier.get(name, ()) if _is_read(ctx, node) and _scope(ctx, node) is scope
    ]
    for read in reads:
        arg = ctx.parent(read)
        call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        if not (isinstance(call, cst.Call) and dotted_name(call.func) == "next"):
            return False
        loop = next((a for a in ctx.ancestors(call) if isinstance(a, (cst.For, cst.While, *_SCOPES))), None)
        if not (isinstance(loop, (cst.For, cst.While)) and is_display_loop(ctx, loop)):
            return False
    return bool(reads)


def is_display_loop(ctx: FileContext, loop: cst.For | cst.While) -> bool:
    """Whether a loop shows what it reads to a person and trains nothing: its body calls
    matplotlib, `cv2.imshow` or IPython's display and makes no training step and no Keras
    `fit`/`evaluate`/`predict`, or it only prints what it reads (every call it makes is a print or
    a conversion for one: `print(x.numpy())`, `print(len(batch), x.shape)`)."""
    calls = [node for node in nodes_under(loop.body) if isinstance(node, cst.Call)]
    if ctx.loops.is_step_loop(loop) or any(
        ctx.loops.is_step_call(call) or (isinstance(call.func, cst.Attribute) and call.func.attr.value in _MODEL_RUNS)
        for call in calls
    ):
        return False
    if any(_DISPLAY_CALLS.match(ctx.call_qualified_name(call) or "") for call in calls):
        return True
    printed = [call for call in calls if _prints(ctx, call)]
    return bool(printed) and all(call in printed or _converts_for_print(ctx, call) for call in calls)


def _prints(ctx: FileContext, call: cst.Call) -> bool:
    return (isinstance(call.func, cst.Name) and call.func.value == "print" and "print" not in ctx.imports.bindings) or (
        ctx.call_qualified_name(call) == "tensorflow.print"
    )


def _converts_for_print(ctx: FileContext, call: cst.Call) -> bool:
    """A call that only turns a value into something to print: `x.numpy()`, `len(x)`, `str(x)`."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value in _PRINTABLE_METHODS
    return isinstance(func, cst.Name) and func.value in _PRINTABLE_BUILTINS and func.value not in ctx.imports.bindings
