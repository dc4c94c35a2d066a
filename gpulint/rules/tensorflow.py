"""GL7xx: TensorFlow and Keras -- tf.data pipelines, XLA, eager steps."""

from __future__ import annotations

import re
import weakref

import libcst as cst

from gpulint.linter.analysis.context import FileContext, dotted_name, has_star_kwargs, is_false, keyword_arg, method_name
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.fix.builders import guard_fix, remove_keyword, set_keyword
from gpulint.linter.rule import Rule, RuleOption
from gpulint.linter.analysis.values import TFDATA_CHAIN, KINDS, target_key, last_name
from gpulint.linter.analysis.walk import iter_children
from gpulint.rules.per_step import PerStepLogging, enclosing_logging_call, per_step_work

# Positional index of `num_parallel_calls` in each tf.data method.
_PARALLEL_POSITION = {"map": 1, "interleave": 3}


class TfDataSerialMap(Rule):
    """
    ## What it finds
    `Dataset.map(...)` and `Dataset.interleave(...)` on a tf.data pipeline without
    `num_parallel_calls`.

    ## Why it is slow
    Without `num_parallel_calls`, tf.data runs the mapped function on one element at a time, on one
    core: decoding and augmentation become a single-threaded bottleneck while the other cores and
    the GPU wait.  The TF Profiler calls a step input-bound when input takes 5% of step time
    (moderate) or 20% (high); a serial `map` is the most common cause.

    ## Example
    ```python
    ds = tf.data.Dataset.from_tensor_slices(files).map(decode).batch(64)
    ```
    Use instead:
    ```python
    ds = tf.data.Dataset.from_tensor_slices(files).map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(64)
    ```

    ## Fix (safe)
    Adds `num_parallel_calls=tf.data.AUTOTUNE` (spelled with the module's own `tensorflow` alias).
    Safe: parallel `map` keeps the order of elements (`deterministic` defaults to true), so the
    pipeline yields the same elements in the same order.  Only receivers known to be tf.data
    datasets are reported: `.map` on anything else is never touched.
    """

    code = "GL701"
    name = "tfdata-serial-map"
    message = "tf.data `.{method}()` without `num_parallel_calls` runs on one core"
    tokens = (".map(", ".interleave(")
    fix_applicability = Applicability.SAFE

    def visit_Call(self, node: cst.Call) -> None:
        method = method_name(node)
        if method not in _PARALLEL_POSITION or not self.ctx.uses_tensorflow or has_star_kwargs(node):
            return
        if keyword_arg(node, "num_parallel_calls") is not None:
            return
        if len([a for a in node.args if a.keyword is None and not a.star]) > _PARALLEL_POSITION[method]:
            return
        if not self.ctx.values.is_kind(node.func.value, "tfdata"):
            return
        autotune, imports = self.ctx.reference("tensorflow.data.AUTOTUNE")
        self.report(
            node,
            message=self.message.format(method=method),
            fix=set_keyword(
                self.ctx, node, "num_parallel_calls", autotune, Applicability.SAFE,
                f"Run `{method}` in parallel: `num_parallel_calls={autotune}`", imports,
            ),
        )


class XlaDisabled(Rule):
    """
    ## What it finds
    XLA switched off explicitly: `jit_compile=False` in `tf.function(...)` or `model.compile(...)`,
    and `tf.config.optimizer.set_jit(False)`.

    ## Why it is slow
    XLA fuses the many small kernels of a training step into few larger ones, cutting kernel-launch
    overhead and memory traffic; on GPUs it commonly speeds training up by 10-50%.  Keras compiles
    with XLA by default when it can (`jit_compile="auto"`), so `False` throws that away.

    ## Example
    ```python
    model.compile(optimizer="adam", loss="mse", jit_compile=False)
    ```
    Use instead:
    ```python
    model.compile(optimizer="adam", loss="mse")
    ```

    ## Fix (unsafe)
    For `model.compile`, removes `jit_compile=False` (back to Keras' default, "auto"); for
    `tf.function`, sets `jit_compile=True`; for `set_jit(False)`, `set_jit(True)`.  Unsafe: some ops
    have no XLA kernel and then fail to compile, and XLA may change numerics slightly.
    """

    code = "GL704"
    name = "xla-disabled"
    message = "XLA compilation is switched off (`jit_compile=False`): the step runs as many small kernels"
    tokens = ("jit_compile", "set_jit")
    fix_applicability = Applicability.UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.uses_tensorflow:
            return
        qualified = self.ctx.call_qualified_name(node)
        if qualified == "tensorflow.config.optimizer.set_jit":
            if node.args and is_false(node.args[0].value):
                args = [node.args[0].with_changes(value=cst.Name("True")), *node.args[1:]]
                fix = Fix(Applicability.UNSAFE, "Switch XLA on: `set_jit(True)`", {node: node.with_changes(args=args)})
                self.report(node, message="`set_jit(False)` switches XLA off for the whole program", fix=fix)
            return
        flag = keyword_arg(node, "jit_compile")
        if flag is None or not is_false(flag.value):
            return
        if qualified == "tensorflow.function":
            self.report(node, fix=set_keyword(self.ctx, node, "jit_compile", "True", Applicability.UNSAFE, "Compile the function with XLA: `jit_compile=True`"))
        elif method_name(node) == "compile":
            self.report(node, fix=remove_keyword(node, "jit_compile", Applicability.UNSAFE, "Remove `jit_compile=False` (Keras then uses XLA where it can)"))


# ------------------------------------------------------------------------------------------------
# Shared TF analyses: which steps are TensorFlow steps, which functions run compiled (tf.function).
# ------------------------------------------------------------------------------------------------

_TF_FUNCTION = frozenset(
    {
        "tensorflow.function",
        "tensorflow.compat.v2.function",
        "tensorflow.python.eager.def_function.function",
        "tensorflow.python.eager.polymorphic_function.polymorphic_function.function",
    }
)
# Keras compiles these overrides itself (`Model.fit` wraps `train_step` in tf.function).
_KERAS_COMPILED_METHODS = frozenset({"train_step", "test_step", "predict_step"})
# Step calls that only TensorFlow/Keras make (`loss.backward()` and `optimizer.step()` are torch's).
_TF_STEP_METHODS = frozenset({"gradient", "apply_gradients", "train_on_batch", "apply"})


def _enclosing_function(ctx: FileContext, node: cst.CSTNode) -> cst.FunctionDef | None:
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            return ancestor
    return None


def _is_tf_function_decorator(ctx: FileContext, decorator: cst.Decorator) -> bool:
    expr = decorator.decorator
    if isinstance(expr, cst.Call):  # @tf.function(jit_compile=True)
        expr = expr.func
    qualified = ctx.qualified_name(expr)
    if qualified is not None:
        return qualified in _TF_FUNCTION
    # An unresolved `@function` / `@def_function.function` (TF's own sources, re-exports): a
    # decorator named like tf.function is taken to compile -- missing an eager step is cheaper
    # than reporting a compiled one.
    name = dotted_name(expr) or ""
    return name.rsplit(".", 1)[-1] in ("function", "tf_function")


class TfSteps:
    """Per module: which step boundaries are TensorFlow steps and which functions run compiled."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.functions: list[cst.FunctionDef] = ctx.index.nodes("FunctionDef")
        self.calls: list[cst.Call] = ctx.index.nodes("Call")
        self._owner = {id(call): _enclosing_function(ctx, call) for call in self.calls}
        self.compiled = self._compiled_functions()
        self.tf_boundaries = self._tf_boundaries()

    def _names_referenced(self, call: cst.Call) -> set[str]:
        """Function names a call runs or hands on: `f(...)`, `self.f(...)`, `strategy.run(f)`."""
        names = set()
        for expr in [call.func, *(arg.value for arg in call.args)]:
            if isinstance(expr, cst.Name):
                names.add(expr.value)
            elif isinstance(expr, cst.Attribute) and dotted_name(expr.value) in ("self", "cls"):
                names.add(expr.attr.value)
        return names

    def _compiled_functions(self) -> set[int]:
        ctx = self.ctx
        compiled: set[int] = set()
        by_name: dict[str, list[cst.FunctionDef]] = {}
        for function in self.functions:
            by_name.setdefault(function.name.value, []).append(function)
            if any(_is_tf_function_decorator(ctx, d) for d in function.decorators):
                compiled.add(id(function))
            elif function.name.value in _KERAS_COMPILED_METHODS and ctx.loops.is_method(function):
                compiled.add(id(function))
        for call in self.calls:  # `step = tf.function(step)`
            if ctx.call_qualified_name(call) in _TF_FUNCTION:
                for name in self._names_referenced(call) - {dotted_name(call.func)}:
                    compiled.update(id(f) for f in by_name.get(name, ()))
        # What a compiled function calls or hands on is traced with it; so are functions nested in it.
        changed = True
        while changed:
            changed = False
            for call in self.calls:
                owner = self._owner[id(call)]
                if owner is None or not self.in_compiled(owner, compiled):
                    continue
                for name in self._names_referenced(call):
                    for function in by_name.get(name, ()):
                        if id(function) not in compiled:
                            compiled.add(id(function))
                            changed = True
        return compiled

    def in_compiled(self, node: cst.CSTNode, compiled: set[int] | None = None) -> bool:
        """Whether `node` is (in) a function that runs under tf.function."""
        compiled = self.compiled if compiled is None else compiled
        if isinstance(node, cst.FunctionDef) and id(node) in compiled:
            return True
        return any(isinstance(a, cst.FunctionDef) and id(a) in compiled for a in self.ctx.ancestors(node))

    def _tf_boundaries(self) -> set[int]:
        """Step loops and step functions whose step is a TensorFlow step (tape, apply_gradients,
        train_on_batch, or a call of a function that makes one)."""
        loops = self.ctx.loops
        tf_functions: set[str] = set()
        boundaries: set[int] = set()
        changed = True
        while changed:
            changed = False
            for call in self.calls:
                if not loops.is_step_call(call):
                    continue
                direct = method_name(call) in _TF_STEP_METHODS
                if not (direct or self._names_referenced(call) & tf_functions):
                    continue
                boundary = loops.step_boundary(call)
                if boundary is None or id(boundary) in boundaries:
                    continue
                boundaries.add(id(boundary))
                changed = True
                if isinstance(boundary, cst.FunctionDef):
                    tf_functions.add(boundary.name.value)
        return boundaries

    def is_tf_step(self, node: cst.CSTNode) -> bool:
        boundary = self.ctx.loops.step_boundary(node)
        return boundary is not None and id(boundary) in self.tf_boundaries and self.runs_per_step(boundary)

    def runs_per_step(self, boundary: cst.CSTNode) -> bool:
        """A step loop runs per step; a step function only when it is one: named for it
        (`train_step`, `_run_batch`) or called from a loop here.  A test or a one-shot helper that
        applies gradients once (`test_adam_step`) runs once."""
        if not isinstance(boundary, cst.FunctionDef):
            return True
        name = boundary.name.value
        if name.startswith("test"):
            return False
        if "step" in name or "batch" in name:
            return True
        return any(
            name in self._names_referenced(call) and self.ctx.loops.step_boundary(call) is not None
            for call in self.calls
        )


_TF_STEPS: "weakref.WeakKeyDictionary[FileContext, TfSteps]" = weakref.WeakKeyDictionary()


def tf_steps(ctx: FileContext) -> TfSteps:
    """The module's TfSteps, computed once and shared by the rules that ask."""
    steps = _TF_STEPS.get(ctx)
    if steps is None:
        steps = _TF_STEPS[ctx] = TfSteps(ctx)
    return steps


# ------------------------------------------------------------------------------------------------
# GL702
# ------------------------------------------------------------------------------------------------

# Constructors that end their pipeline with a prefetch of their own.
_PREFETCHING_CONSTRUCTORS = frozenset(
    {
        "keras.utils.image_dataset_from_directory",
        "keras.utils.text_dataset_from_directory",
        "keras.utils.audio_dataset_from_directory",
        "keras.utils.timeseries_dataset_from_array",
        "keras.preprocessing.image_dataset_from_directory",
        "keras.preprocessing.text_dataset_from_directory",
        "tensorflow_datasets.load",
    }
)
# Constructors that combine other datasets: whether those prefetch is not followed.
_COMBINING_CONSTRUCTORS = ("zip", "sample_from_datasets", "choose_from_datasets", "concatenate", "load", "from_generator")
_CONSUMING_METHODS = frozenset({"fit", "evaluate", "predict"})


def _lacks_prefetch(ctx: FileContext, expr: cst.BaseExpression, seen: set[str]) -> bool:
    """True only when every definition of the pipeline is known and none has a prefetch.

    Flow-insensitive on purpose: a `ds = ds.prefetch(...)` anywhere in the module counts, and
    anything not followed to a tf.data constructor (a parameter, an annotation, a function's
    return value) counts as prefetched -- a missed finding is cheaper than a false one."""
    if isinstance(expr, cst.Call):
        qualified = ctx.call_qualified_name(expr)
        if qualified is not None:
            if qualified in _PREFETCHING_CONSTRUCTORS or qualified.rsplit(".", 1)[-1] in _COMBINING_CONSTRUCTORS:
                return False
            return KINDS["tfdata"].matches(qualified)
        method = method_name(expr)
        if method == "prefetch":
            return False
        if method == "apply" and "prefetch" in ctx.code(expr):
            return False  # tf.data.experimental.prefetch_to_device(...)
        if method is None or method not in TFDATA_CHAIN:
            return False
        return _lacks_prefetch(ctx, expr.func.value, seen)
    key = target_key(expr)
    if key is None or key in ctx.values.assigned and not ctx.values.assigned[key]:
        return False
    if key in seen:
        return True  # `ds = ds.map(f)`: the other definitions decide
    values = ctx.values.assigned.get(key)
    if not values:
        return False
    seen.add(key)
    try:
        return all(_lacks_prefetch(ctx, value, seen) for value in values)
    finally:
        seen.discard(key)


class TfDataNoPrefetch(Rule):
    """
    ## What it finds
    A tf.data pipeline consumed -- passed to `fit`/`evaluate`/`predict`, iterated by a training
    loop (a `for` that makes a training step), or handed to `iter(...)` -- when no definition of it
    has a `.prefetch(...)`.  Loops that only look at outputs (`for out in ds.take(1)`, evaluation)
    and `next(iter(ds))` are not reported: there is no step to overlap with.

    ## Why it is slow
    Without a prefetch, the pipeline produces the next batch only when the training step asks for
    it: input work and the step take turns instead of overlapping, so the GPU waits for every batch
    (the TF Profiler calls 5% of step time waiting for input moderate and 20% high).
    `.prefetch(tf.data.AUTOTUNE)` prepares the next batches in the background while the step runs.
    Recent TensorFlow injects a prefetch by itself when the last transformation is synchronous
    (`inject_prefetch`, on by default), so the gain there is smaller; an explicit prefetch does not
    depend on the version or on the last transformation, and shows the overlap in the code.

    ## Example
    ```python
    train_ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(10_000).batch(64)
    model.fit(train_ds, epochs=10)
    ```
    Use instead:
    ```python
    model.fit(train_ds.prefetch(tf.data.AUTOTUNE), epochs=10)
    ```

    ## Fix (safe)
    Appends `.prefetch(tf.data.AUTOTUNE)` to the pipeline where it is consumed (with the module's
    own `tensorflow` alias).  Safe: prefetching yields the same elements in the same order; it only
    overlaps producing them with consuming them (at the cost of a few batches of host memory).
    Pipelines that keras' `*_dataset_from_directory` or `tfds.load` built (they prefetch already),
    or that arrive as parameters, are not reported.
    """

    code = "GL702"
    name = "tfdata-no-prefetch"
    message = "tf.data pipeline consumed without `.prefetch(...)`: input and training steps take turns"
    tokens = ("tf.data", "tensorflow", "tfds", "dataset_from_directory")  # a tf.data pipeline is built here
    fix_applicability = Applicability.SAFE

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.uses_tensorflow:
            return
        method = method_name(node)
        if method in _CONSUMING_METHODS and self.ctx.call_qualified_name(node) is None:
            consumed = keyword_arg(node, "x")
            if consumed is None and node.args and node.args[0].keyword is None and not node.args[0].star:
                consumed = node.args[0]
            if consumed is not None:
                self._check(consumed.value)
            if method == "fit":
                validation = keyword_arg(node, "validation_data")
                if validation is not None:
                    self._check(validation.value)
        elif isinstance(node.func, cst.Name) and node.func.value == "iter" and "iter" not in self.ctx.imports.bindings:
            parent = self.ctx.parent(self.ctx.parent(node))  # Call -> Arg -> Call
            if isinstance(parent, cst.Call) and dotted_name(parent.func) == "next":
                return  # `next(iter(ds))` looks at one element: nothing to overlap
            if len(node.args) == 1 and not node.args[0].star:
                self._check(node.args[0].value)

    def visit_For(self, node: cst.For) -> None:
        # Only training loops: a loop that inspects outputs (`for out in ds.take(1)`) or evaluates
        # has no step for the input to overlap with.
        if not self.ctx.uses_tensorflow or not self.ctx.loops.is_step_loop(node):
            return
        iterable = node.iter
        # `for step, batch in enumerate(ds)` consumes `ds`.
        if (
            isinstance(iterable, cst.Call)
            and isinstance(iterable.func, cst.Name)
            and iterable.func.value == "enumerate"
            and iterable.args
            and iterable.args[0].keyword is None
            and not iterable.args[0].star
        ):
            iterable = iterable.args[0].value
        self._check(iterable)

    def _check(self, expr: cst.BaseExpression) -> None:
        if not self.ctx.values.is_kind(expr, "tfdata") or not _lacks_prefetch(self.ctx, expr, set()):
            return
        fix = None
        if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            autotune, imports = self.ctx.reference("tensorflow.data.AUTOTUNE")
            prefetched = cst.Call(
                func=cst.Attribute(value=expr, attr=cst.Name("prefetch")),
                args=[cst.Arg(cst.parse_expression(autotune))],
            )
            fix = Fix(Applicability.SAFE, f"Prefetch: `.prefetch({autotune})`", {expr: prefetched}, imports)
        self.report(expr, fix=fix)


# ------------------------------------------------------------------------------------------------
# GL703
# ------------------------------------------------------------------------------------------------

_PY_FUNCTIONS = frozenset(
    {
        "tensorflow.py_function",
        "tensorflow.numpy_function",
        "tensorflow.py_func",
        "tensorflow.compat.v1.py_func",
        "tensorflow.compat.v1.py_function",
        "tensorflow.compat.v1.numpy_function",
    }
)
_MAPPING_METHODS = {"map": "map_func", "flat_map": "map_func", "interleave": "map_func", "filter": "predicate"}


class TfDataPyFunction(Rule):
    """
    ## What it finds
    `tf.py_function(...)` or `tf.numpy_function(...)` inside a function that a tf.data pipeline maps
    (`.map`, `.flat_map`, `.interleave`, `.filter`), directly or through functions it calls.

    ## Why it is slow
    A Python function inside a tf.data graph runs in the Python interpreter and holds the GIL:
    however large `num_parallel_calls` is, those elements are produced one at a time, and every
    call copies tensors out of and back into TensorFlow.  The pipeline is capped at what one Python
    thread can do, and the TF Profiler shows the step input-bound (20% of step time waiting is
    "high").

    ## Example
    ```python
    def load(path):
        return tf.numpy_function(lambda p: np.load(p), [path], tf.float32)

    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    ```
    Use instead TensorFlow ops (`tf.io.read_file`, `tf.io.decode_*`, `tf.image.*`), or do the
    Python work once offline and store the result (TFRecord).

    ## Fix
    None: rewriting Python code as TensorFlow ops takes a person.
    """

    code = "GL703"
    name = "tfdata-py-function"
    message = "`{name}` in a tf.data mapped function runs in Python under the GIL, one element at a time"
    tokens = ("py_function", "numpy_function", "py_func")

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._mapped: tuple[set[int], set[str]] | None = None

    def _mapped_functions(self) -> tuple[set[int], set[str]]:
        """(ids of mapped lambdas, names of mapped functions and what they call), to a fixpoint."""
        if self._mapped is not None:
            return self._mapped
        lambdas: set[int] = set()
        names: set[str] = set()
        calls = self.ctx.index.nodes("Call")
        for call in calls:
            keyword = _MAPPING_METHODS.get(method_name(call) or "")
            if keyword is None:
                continue
            argument = keyword_arg(call, keyword)
            if argument is None and call.args and call.args[0].keyword is None:
                argument = call.args[0]
            if argument is None:
                continue
            function = argument.value
            if isinstance(function, cst.Call) and (dotted_name(function.func) or "").endswith("partial") and function.args:
                function = function.args[0].value  # functools.partial(fn, ...)
            if isinstance(function, cst.Lambda):
                lambdas.add(id(function))
            elif isinstance(function, cst.Name):
                names.add(function.value)
            elif isinstance(function, cst.Attribute) and dotted_name(function.value) in ("self", "cls"):
                names.add(function.attr.value)
        owners = [(call, _enclosing_function(self.ctx, call)) for call in calls]
        changed = bool(names)
        while changed:
            changed = False
            for call, owner in owners:
                if owner is None or owner.name.value not in names:
                    continue
                func = call.func
                callee = func.value if isinstance(func, cst.Name) else (
                    func.attr.value if isinstance(func, cst.Attribute) and dotted_name(func.value) in ("self", "cls") else None
                )
                if callee is not None and callee not in names:
                    names.add(callee)
                    changed = True
        self._mapped = (lambdas, names)
        return self._mapped

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.call_qualified_name(node)
        if qualified not in _PY_FUNCTIONS:
            return
        lambdas, names = self._mapped_functions()
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.Lambda) and id(ancestor) in lambdas:
                break
            if isinstance(ancestor, cst.FunctionDef):
                if ancestor.name.value in names:
                    break
                if not any(isinstance(a, cst.FunctionDef) and a.name.value in names for a in self.ctx.ancestors(ancestor)):
                    return
                break
        else:
            return
        self.report(node, message=self.message.format(name=dotted_name(node.func) or qualified))


# ------------------------------------------------------------------------------------------------
# GL705
# ------------------------------------------------------------------------------------------------


def keras_compile_call(ctx: FileContext, node: cst.Call) -> bool:
    """`model.compile(optimizer=..., loss=...)`: Keras' compile, not `torch.compile`/`re.compile`
    (module functions) nor `nn.Module.compile()` (which takes no loss or optimizer)."""
    if method_name(node) != "compile" or not ctx.uses_tensorflow or ctx.call_qualified_name(node) is not None:
        return False
    if keyword_arg(node, "optimizer") is not None or keyword_arg(node, "loss") is not None:
        return True
    first = node.args[0] if node.args and node.args[0].keyword is None and not node.args[0].star else None
    return first is not None and (
        isinstance(first.value, cst.SimpleString) or ctx.values.is_kind(first.value, "optimizer")
    )


class KerasStepsPerExecution(Rule):
    """
    ## What it finds
    Keras `model.compile(...)` without `steps_per_execution`.

    ## Why it is slow
    By default `fit` returns to Python after every batch: one compiled-function call, callbacks and
    progress-bar updates per step.  For small models and fast GPUs (and always on TPUs) that
    per-step Python overhead is a large part of step time, and the GPU idles during it.
    `steps_per_execution=N` runs N batches inside one compiled call.

    ## Example
    ```python
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    ```
    Use instead:
    ```python
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", steps_per_execution=32)
    ```

    ## Fix (unsafe)
    Adds `steps_per_execution=<steps-per-execution>` (option, default 32).  Unsafe: callbacks'
    `on_batch_begin`/`on_batch_end` then run every N batches, progress and logs update less often,
    and the PyTorch backend of Keras does not support it.  A hint: opt in with `--select GL705`.
    """

    code = "GL705"
    name = "keras-steps-per-execution"
    message = "`model.compile()` without `steps_per_execution`: `fit` returns to Python after every batch"
    tokens = (".compile(",)
    default = "hint"
    fix_applicability = Applicability.UNSAFE
    options = {
        "steps-per-execution": RuleOption(32, "Value GL705's fix writes as `steps_per_execution=`.", int)
    }

    def visit_Call(self, node: cst.Call) -> None:
        if not keras_compile_call(self.ctx, node) or has_star_kwargs(node):
            return
        if keyword_arg(node, "steps_per_execution") is not None:
            return
        value = str(self.option("steps-per-execution"))
        self.report(
            node,
            fix=set_keyword(
                self.ctx, node, "steps_per_execution", value, Applicability.UNSAFE,
                f"Run {value} batches per compiled call: `steps_per_execution={value}`",
            ),
        )


# ------------------------------------------------------------------------------------------------
# GL706
# ------------------------------------------------------------------------------------------------

# `float(x)` syncs when x is a tensor; what a name holds is not known, so only names that say
# they hold a step's result count (not `float(step)` or `float(args.lr)`).
_TENSORISH_NAME = re.compile(r"loss|acc|metric|logit|pred|grad|norm|result|output", re.IGNORECASE)


def _float_of_tensor(ctx: FileContext, node: cst.Call) -> bool:
    if not (isinstance(node.func, cst.Name) and node.func.value == "float" and "float" not in ctx.imports.bindings):
        return False
    if len(node.args) != 1 or node.args[0].star or node.args[0].keyword is not None:
        return False
    value = node.args[0].value
    if isinstance(value, cst.Call):
        if method_name(value) == "numpy":
            return False  # reported at the `.numpy()` itself
        qualified = ctx.call_qualified_name(value)
        if qualified is not None:
            return qualified.startswith(("tensorflow.", "keras."))
        return method_name(value) == "result"  # metric.result()
    name = last_name(value)
    return bool(name and _TENSORISH_NAME.search(name))


class TfHostSyncInLoop(Rule):
    """
    ## What it finds
    `.numpy()` and `float(loss)` (of a step's loss, metric or output) inside a TensorFlow training
    step loop -- one that calls `tape.gradient`, `apply_gradients` or `train_on_batch`, directly or
    through a step function -- not under an interval guard.

    ## Why it is slow
    TensorFlow dispatches GPU work asynchronously, and `tf.function` steps run ahead of the host.
    Reading a value back (`.numpy()`, `float(...)`) makes Python wait until the GPU has finished
    everything queued, so the next step cannot be queued while this one runs and the GPU idles
    between steps; one read per step commonly costs 5-20% of step time on small models.

    ## Example
    ```python
    for step, (x, y) in enumerate(train_ds):
        loss = train_step(x, y)
        print("loss", loss.numpy())
    ```
    Use instead: keep a `keras.metrics.Mean` and read it every N steps:
    ```python
        loss_metric.update_state(loss)
        if step % 100 == 0:
            print("loss", float(loss_metric.result()))
    ```

    ## Fix (unsafe)
    As GL201: where the value only feeds a logging call, the statement is wrapped in
    `if <step counter> % <log-every> == 0:`; elsewhere there is no automatic fix.  Unsafe: the
    program prints less often.  PyTorch steps are GL201's; in a module that trains with both
    frameworks on an accelerator, GL201 reports these reads, so one read is never reported twice.
    """

    code = "GL706"
    needs_step = True
    name = "tf-host-sync-in-loop"
    message = "`{what}` in the TensorFlow training loop makes the host wait for the GPU every step"
    tokens = (".numpy(", "float(")
    fix_applicability = Applicability.UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.uses_tensorflow or (self.ctx.uses_torch and self.ctx.accelerated):
            return
        if method_name(node) == "numpy" and not node.args:
            what = ".numpy()"
        elif _float_of_tensor(self.ctx, node):
            what = "float(...)"
        else:
            return
        if not per_step_work(self.ctx, node):
            return
        steps = tf_steps(self.ctx)
        if not steps.is_tf_step(node) or steps.in_compiled(node):
            return
        fix = None
        if enclosing_logging_call(self.ctx, node) is not None:
            interval = self.ctx.options.get("log-every", PerStepLogging.options["log-every"].default)
            fix = guard_fix(self.ctx, node, "log-every", interval, "logging")
        self.report(node, message=self.message.format(what=what), fix=fix)


# ------------------------------------------------------------------------------------------------
# GL707
# ------------------------------------------------------------------------------------------------

_APPLY_METHODS = frozenset({"apply_gradients", "apply", "minimize"})


class TfEagerStep(Rule):
    """
    ## What it finds
    A `tf.GradientTape` training step that runs eagerly: a function that calls `tape.gradient(...)`
    and `optimizer.apply_gradients(...)` without being decorated with `tf.function` (or traced by
    one: called from a compiled function, wrapped by `tf.function(step)`, or a Keras `train_step`
    override, which `fit` compiles), and a tape step written inline in a Python training loop.

    ## Why it is slow
    Eager execution dispatches every op from Python, one at a time: for small and medium models
    the step is bound by Python overhead, not by the GPU.  `tf.function` traces the step once into a
    graph that TensorFlow optimises and runs without Python; 2-10x faster steps are common for
    models with many small ops (and `jit_compile=True` adds XLA on top).

    ## Example
    ```python
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    ```
    Use instead:
    ```python
    @tf.function
    def train_step(x, y):
        ...
    ```

    ## Fix (unsafe)
    Decorates the step function with `@tf.function` (the module's own alias).  Unsafe: Python side
    effects (`print`, appending to lists) then run only while tracing, and Python values that
    change between calls retrace the function.  Not offered when the function reads values back
    (`.numpy()`, `float(...)`), which fails inside `tf.function`, nor for inline loop steps (the
    step must first become a function).  Test functions (`test_*`) are not reported.
    """

    code = "GL707"
    needs_step = True
    name = "tf-eager-step"
    message = "GradientTape training step runs eagerly (not in `tf.function`): Python dispatches every op"
    tokens = (".gradient(",)
    fix_applicability = Applicability.UNSAFE

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if not self.ctx.uses_tensorflow or node.name.value.startswith("test") or node.name.value == "minimize":
            return  # tests, and optimizers' own `minimize(loss, tape=...)` API, are no training step
        if self._in_optimizer_class(node) or id(node) not in self.ctx.loops.step_functions:
            return
        own_calls = [
            call for call in tf_steps(self.ctx).calls
            if _enclosing_function(self.ctx, call) is node and self.ctx.loops.step_boundary(call) is node
        ]
        has_tape = any(method_name(c) == "gradient" and self.ctx.loops.is_step_call(c) for c in own_calls)
        has_apply = any(method_name(c) in _APPLY_METHODS for c in own_calls)
        if not (has_tape and has_apply) or tf_steps(self.ctx).in_compiled(node):
            return
        fix = None
        if not any(method_name(c) == "numpy" or _float_of_tensor(self.ctx, c) for c in self._calls_within(node)):
            decorator, imports = self.ctx.reference("tensorflow.function")
            new = node.with_changes(
                decorators=[*node.decorators, cst.Decorator(decorator=cst.parse_expression(decorator))]
            )
            fix = Fix(Applicability.UNSAFE, f"Compile the step: `@{decorator}`", {node: new}, imports)
        self.report(node.name, fix=fix)

    def visit_Call(self, node: cst.Call) -> None:
        """A tape step written inline in a training loop (no step function to decorate)."""
        if method_name(node) != "gradient" or not self.ctx.uses_tensorflow or not self.ctx.loops.is_step_call(node):
            return
        boundary = self.ctx.loops.step_boundary(node)
        if not isinstance(boundary, (cst.For, cst.While)):
            return
        function = _enclosing_function(self.ctx, node)
        if function is not None and function.name.value.startswith("test"):
            return
        steps = tf_steps(self.ctx)
        applies = any(
            method_name(c) in _APPLY_METHODS and self.ctx.loops.step_boundary(c) is boundary for c in steps.calls
        )
        if not applies or steps.in_compiled(node):
            return  # gradients without an optimizer step (a test of gradients) are no training step
        self.report(node)

    def _in_optimizer_class(self, function: cst.FunctionDef) -> bool:
        return any(isinstance(a, cst.ClassDef) and "Optimizer" in a.name.value for a in self.ctx.ancestors(function))

    def _calls_within(self, function: cst.FunctionDef) -> list[cst.Call]:
        return [c for c in tf_steps(self.ctx).calls if any(a is function for a in self.ctx.ancestors(c))]


# ------------------------------------------------------------------------------------------------
# GL708
# ------------------------------------------------------------------------------------------------


class KerasPythonInput(Rule):
    """
    ## What it finds
    Keras `fit(...)` fed by a Python generator (a generator function of this module, a generator
    expression) or by `dataset.as_numpy_iterator()` / `tfds.as_numpy(...)`.

    ## Why it is slow
    A Python generator produces each batch in the training process, under the GIL, one at a time,
    and Keras must copy every NumPy batch into a tensor; `as_numpy_iterator()` even takes a
    tf.data pipeline that could run in parallel C++ threads and pulls it through Python.  The GPU
    waits for each batch; the TF Profiler calls 20% of step time waiting for input "high".

    ## Example
    ```python
    model.fit(batch_generator(x, y), steps_per_epoch=100)
    model.fit(train_ds.as_numpy_iterator(), epochs=5)
    ```
    Use instead a tf.data pipeline (`tf.data.Dataset.from_tensor_slices(...)`, or
    `from_generator` with parallel `map`), passed as is:
    ```python
    model.fit(train_ds.prefetch(tf.data.AUTOTUNE), epochs=5)
    ```

    ## Fix
    None: the input pipeline has to be rewritten by a person.  A hint: opt in with
    `--select GL708`.
    """

    code = "GL708"
    name = "keras-python-input"
    message = "Keras `fit` fed from Python ({what}): batches are produced one at a time under the GIL"
    tokens = ("yield", "as_numpy_iterator", "as_numpy(")
    default = "hint"

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._generators: set[str] | None = None

    def _generator_functions(self) -> set[str]:
        if self._generators is None:
            self._generators = set()
            for function in self.ctx.index.nodes("FunctionDef"):
                if not self.ctx.loops.is_method(function) and _yields(function):
                    self._generators.add(function.name.value)
        return self._generators

    def visit_Call(self, node: cst.Call) -> None:
        if method_name(node) not in ("fit", "fit_generator") or not self.ctx.uses_tensorflow:
            return
        if self.ctx.call_qualified_name(node) is not None:
            return
        argument = keyword_arg(node, "x")
        if argument is None and node.args and node.args[0].keyword is None and not node.args[0].star:
            argument = node.args[0]
        if argument is None:
            return
        what = self._python_source(argument.value, set())
        if what is not None:
            self.report(argument.value, message=self.message.format(what=what))

    def _python_source(self, expr: cst.BaseExpression, seen: set[str]) -> str | None:
        if isinstance(expr, cst.GeneratorExp):
            return "a generator expression"
        if isinstance(expr, cst.Call):
            if method_name(expr) == "as_numpy_iterator":
                return "`as_numpy_iterator()`"
            if self.ctx.call_qualified_name(expr) == "tensorflow_datasets.as_numpy":
                return "`tfds.as_numpy()`"
            if isinstance(expr.func, cst.Name) and expr.func.value in self._generator_functions():
                return f"generator `{expr.func.value}()`"
            return None
        key = target_key(expr)
        if key is None or key in seen:
            return None
        seen.add(key)
        for value in self.ctx.values.assigned.get(key, ()):
            what = self._python_source(value, seen)
            if what is not None:
                return what
        return None


def _yields(function: cst.FunctionDef) -> bool:
    """Whether the function's own body (not nested functions) yields."""
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Yield)):
            return True
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        stack.extend(iter_children(node))
    return False
