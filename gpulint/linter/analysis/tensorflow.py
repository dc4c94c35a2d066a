"""What gpulint knows about TensorFlow and Keras code: which functions run compiled (under
`tf.function`), which training steps are TensorFlow steps, when `float(x)` reads a tensor, and when
a finding about an eager step is a hint (the file runs it eagerly on purpose, or only to compare it
with its compiled twin)."""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.loops import method_class
from gpulint.linter.analysis.nodes import dotted_name, last_name, method_name
from gpulint.linter.analysis.vocabulary import OPTS_OUT_OF_PREFETCH, tensorflow_injects_prefetch
from gpulint.linter.analysis.walk import nodes_under

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

TF_FUNCTION = frozenset(
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
# `float(x)` syncs when x is a tensor; what a name holds is not known, so only names that say
# they hold a step's result count (not `float(step)` or `float(args.lr)`).
_TENSORISH_NAME = re.compile(r"loss|acc|metric|logit|pred|grad|norm|result|output", re.IGNORECASE)


# `tf.data.AUTOTUNE` exists from TensorFlow 2.4; `tf.data.experimental.AUTOTUNE` from 1.x on.
AUTOTUNE_SINCE = (2, 4)
_OPTS_OUT_OF_MAP_PARALLELIZATION = re.compile(r"(map_parallelization|autotune\s*\.\s*enabled)\s*=\s*False")
_OPTS_INTO_MAP_PARALLELIZATION = re.compile(r"map_parallelization\s*=\s*True")
# TensorFlow ops with state: random numbers (other than the stateless ones), Python, variables.
_STATEFUL_OPS = re.compile(
    r"^tensorflow\.(random\.(?!stateless_)|py_function|numpy_function|compat\.v1\.py_func|Variable|keras|"
    r"image\.random_|data\.)"
)
# Ops that draw random numbers for each element: augmentation (`tf.image.random_flip_left_right`,
# `tf.random.uniform`, Keras' `RandomFlip` / `RandomRotation` / ... preprocessing layers).
_RANDOM_OPS = re.compile(
    r"^tensorflow\.(random\.(?!stateless_)|image\.random_)"
    r"|^(tensorflow\.)?keras\.layers\.(experimental\.preprocessing\.)?Random[A-Z]"
)
# What an Estimator's `model_fn` returns; Estimator calls the function to build a graph.
_ESTIMATOR_SPEC = re.compile(r"^tensorflow\.(compat\.v1\.)?estimator\.(tpu\.TPU)?EstimatorSpec$")
_PURE_BUILTINS = frozenset({"len", "int", "float", "tuple", "list", "dict", "str", "min", "max", "abs", "range"})
# Keras preprocessing layers that draw no random numbers: tf.data still runs a map calling one in
# parallel by itself (checked with TensorFlow 2.21 and Keras 3: a `ParallelMap` follows).
_STATELESS_KERAS_LAYER = re.compile(
    r"^(tensorflow\.)?keras\.layers\.(experimental\.preprocessing\.)?(Rescaling|Resizing|CenterCrop|Normalization)$"
)
# Writers of TFRecord files: a module that writes them and trains nothing converts a dataset once.
_RECORD_WRITERS = frozenset(
    {
        "tensorflow.io.TFRecordWriter",
        "tensorflow.python_io.TFRecordWriter",
        "tensorflow.compat.v1.io.TFRecordWriter",
        "tensorflow.compat.v1.python_io.TFRecordWriter",
        "tensorflow.data.experimental.TFRecordWriter",
    }
)
# Keras calls that train or run a model on a pipeline.
_MODEL_RUNS = frozenset({"fit", "evaluate", "predict", "train_on_batch", "fit_generator"})
# TensorFlow 1's switch to eager execution: a file that calls it runs eagerly on purpose.
_ENABLE_EAGER = frozenset({"tensorflow.enable_eager_execution", "tensorflow.compat.v1.enable_eager_execution"})
# Why a finding about an eager step is a hint when the file also runs that step compiled: said of
# the step itself, or of code in a loop that takes it.
_COMPILED_TWIN_OF_STEP = (
    "the file also runs this step compiled (`{twin}` under `tf.function`): the eager one is there to compare"
)
_COMPILED_TWIN_OF_LOOP = (
    "the loop takes the eager step of a file that also runs it compiled (`{twin}` under `tf.function`): "
    "a guide's loop, there to compare"
)
# Tensor methods that only read or set static shape information.
_SHAPE_METHODS = frozenset({"set_shape", "get_shape"})


def is_tf_function_decorator(ctx: FileContext, decorator: cst.Decorator) -> bool:
    expr = decorator.decorator
    if isinstance(expr, cst.Call):  # @tf.function(jit_compile=True)
        expr = expr.func
    qualified = ctx.qualified_name(expr)
    if qualified is not None:
        return qualified in TF_FUNCTION
    # An unresolved `@function` / `@def_function.function` (TF's own sources, re-exports): a
    # decorator named like tf.function is taken to compile -- missing an eager step is cheaper
    # than reporting a compiled one.
    name = dotted_name(expr) or ""
    return name.rsplit(".", 1)[-1] in ("function", "tf_function")


def float_of_tensor(ctx: FileContext, node: cst.Call) -> bool:
    """`float(loss)`, `float(metric.result())`, `int(train_step(...))` of a compiled step: a
    TensorFlow value read back to the host."""
    func = node.func
    if not (isinstance(func, cst.Name) and func.value in ("float", "int") and func.value not in ctx.imports.bindings):
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
        if isinstance(value.func, cst.Name) and any(
            id(f) in ctx.tf.compiled for f in ctx.index.nodes("FunctionDef") if f.name.value == value.func.value
        ):
            return True  # what a tf.function returns is a tensor
        return func.value == "float" and method_name(value) == "result"  # metric.result()
    name = last_name(value)
    return func.value == "float" and bool(name and _TENSORISH_NAME.search(name))


def names_referenced(call: cst.Call) -> set[str]:
    """Function names a call runs or hands on: `f(...)`, `self.f(...)`, `strategy.run(f)`, `self(...)`
    (the object's `__call__`)."""
    names = set()
    for expr in [call.func, *(arg.value for arg in call.args)]:
        if expr is call.func and isinstance(expr, cst.Name) and expr.value == "self":
            names.add("__call__")  # `self(x, y)` runs the object's `__call__`
        elif isinstance(expr, cst.Name):
            names.add(expr.value)
        elif isinstance(expr, cst.Attribute) and dotted_name(expr.value) in ("self", "cls"):
            names.add(expr.attr.value)
    return names


def _names_bound(statement: cst.CSTNode) -> set[str]:
    """The local names an import statement binds (`import a.b` binds `a`)."""
    if not isinstance(statement, (cst.Import, cst.ImportFrom)) or isinstance(statement.names, cst.ImportStar):
        return set()
    names = set()
    for alias in statement.names:
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            names.add(alias.asname.name.value)
        elif isinstance(statement, cst.Import):
            names.add((dotted_name(alias.name) or "").split(".", 1)[0])
        elif isinstance(alias.name, cst.Name):
            names.add(alias.name.value)
    return names


class TfAnalysis:
    """The TensorFlow analyses of one module (`ctx.tf`): which functions run compiled, and which
    step boundaries of the loop model are TensorFlow steps."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.calls: list[cst.Call] = ctx.index.nodes("Call")

    def autotune(self, at: cst.CSTNode) -> tuple[str, tuple[str, ...]]:
        """`tf.data.AUTOTUNE` in the module's spelling at `at`, and the imports it needs, for the
        TensorFlow the module runs on: `tf.data.experimental.AUTOTUNE` where the project's
        TensorFlow (its requirements, else its prose) is older than 2.4, and through
        `tf.compat.v1` where the module imports TensorFlow so (code kept running on 1.x).  A
        project that says nothing runs on a TensorFlow of today.  An alias the module binds only
        below `at` (a guide that imports `tf_data` further down) is not there yet: the full name
        and its import then."""
        floor = self.ctx.tensorflow_floor
        if "tensorflow.compat.v1" in self.ctx.imports.bindings.values():
            qualified = "tensorflow.compat.v1.data.experimental.AUTOTUNE"
        elif floor is not None and floor[0] < AUTOTUNE_SINCE:
            qualified = "tensorflow.data.experimental.AUTOTUNE"
        else:
            qualified = "tensorflow.data.AUTOTUNE"
        text, imports = self.ctx.reference(qualified)
        if not imports and not self._bound_above(text.split(".", 1)[0], at):
            return qualified, (f"import {qualified.split('.', 1)[0]}",)
        return text, imports

    def _bound_above(self, name: str, at: cst.CSTNode) -> bool:
        """Whether an import on a line above `at` binds `name`."""
        statements = [
            statement
            for kind in ("Import", "ImportFrom")
            for statement in self.ctx.index.nodes(kind)
            if name in _names_bound(statement)
        ]
        if not statements:
            return False
        positions = self.ctx.positions([*statements, at])
        return any(positions[statement].start.line < positions[at].start.line for statement in statements)

    @cached_property
    def converts_once(self) -> bool:
        """Whether the module writes TFRecord files and trains nothing (no training step, no Keras
        `fit`/`evaluate`/`predict`, no step function of another module): a script that converts a
        dataset once, where no accelerator waits for its pipelines."""
        calls = self.calls
        if not any(self.ctx.call_qualified_name(call) in _RECORD_WRITERS for call in calls):
            return False
        return not (
            self.ctx.loops.step_calls
            or self.ctx.project.steps_elsewhere
            or any(method_name(call) in _MODEL_RUNS for call in calls)
        )

    @cached_property
    def injects_prefetch(self) -> bool:
        """Whether tf.data ends this module's pipelines with a prefetch by itself: TensorFlow 2.13
        and later do (`inject_prefetch`, on by default), unless the module turns it off (or
        autotuning, which the injected prefetch uses).  A project whose TensorFlow is not known
        gets today's TensorFlow, so it counts as recent."""
        if not tensorflow_injects_prefetch(self.ctx.target_tensorflow):
            return False
        return not OPTS_OUT_OF_PREFETCH.search(self.ctx.code_without_comments)

    @cached_property
    def parallelises_stateless_maps(self) -> bool:
        """Whether tf.data runs this module's stateless `map` functions in parallel by itself
        (`map_parallelization`, on by default in the TensorFlow versions that inject a prefetch, or
        turned on by the module's options on any version), unless the module turns it off (or
        autotuning)."""
        if _OPTS_OUT_OF_MAP_PARALLELIZATION.search(self.ctx.code_without_comments):
            return False
        return self.asks_for_map_parallelization or tensorflow_injects_prefetch(self.ctx.target_tensorflow)

    @cached_property
    def asks_for_map_parallelization(self) -> bool:
        """Whether the module's pipeline options turn `map_parallelization` on by name
        (`options.experimental_optimization.map_parallelization = True`): the author asked tf.data
        to run its maps in parallel."""
        return bool(_OPTS_INTO_MAP_PARALLELIZATION.search(self.ctx.code_without_comments))

    def known_stateful(self, function: cst.BaseExpression) -> bool:
        """Whether a function given to `map` is known to draw random numbers, run Python or hold
        state (a stateful TensorFlow op itself, or a lambda or function of this module that calls
        one): tf.data's `map_parallelization` leaves such a map serial."""
        qualified = self.ctx.qualified_name(function) or ""
        if qualified.startswith("tensorflow."):
            return bool(_STATEFUL_OPS.search(qualified))
        body = self._function_body(function)
        return body is not None and any(
            isinstance(node, cst.Call) and _STATEFUL_OPS.search(self.ctx.call_qualified_name(node) or "")
            for node in nodes_under(body)
        )

    def draws_random_numbers(self, function: cst.BaseExpression, depth: int = 2) -> bool:
        """Whether a function given to `map` is known to draw random numbers for each element --
        random augmentation: a random op itself, a lambda or function of this module that calls
        one, a name the module binds to a Keras model or layer built from random layers
        (`augment = keras.Sequential([layers.RandomFlip(), ...])`, `augment.add(layers.RandomZoom(0.1))`),
        or an instance of a class of the module whose code calls one (`map(Augment())`), following
        the module's functions `depth` calls deep."""
        qualified = self.ctx.qualified_name(function) or ""
        if qualified.startswith(("tensorflow.", "keras.")):
            return bool(_RANDOM_OPS.search(qualified))
        if isinstance(function, cst.Call) and isinstance(function.func, cst.Name):
            defined = self._class_of_module(function.func.value)
            return defined is not None and self._calls_random(defined, depth)
        body = self._function_body(function)
        if body is not None:
            return self._calls_random(body, depth)
        if isinstance(function, cst.Name) and function.value not in self.ctx.imports.bindings:
            added = [
                call
                for call in self.calls
                if isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "add"
                and isinstance(call.func.value, cst.Name)
                and call.func.value.value == function.value
            ]
            return any(self._calls_random(node, depth) for node in [*self._bound_once(function.value), *added])
        return False

    def _calls_random(self, code: cst.CSTNode, depth: int) -> bool:
        """Whether `code` calls an op that draws random numbers, or a function, layer or class of
        the module that does (`depth` calls deep)."""
        for node in nodes_under(code):
            if not isinstance(node, cst.Call):
                continue
            qualified = self.ctx.call_qualified_name(node)
            if _RANDOM_OPS.search(qualified or ""):
                return True
            if depth > 0 and not qualified and isinstance(node.func, cst.Name):
                # (an instance of a class of the module is followed into the class)
                called = node if self._class_of_module(node.func.value) is not None else node.func
                if self.draws_random_numbers(called, depth - 1):
                    return True
        return False

    def _class_of_module(self, name: str) -> cst.ClassDef | None:
        """The class the module defines once under `name`."""
        classes = [c for c in self.ctx.index.nodes("ClassDef") if c.name.value == name]
        return classes[0] if len(classes) == 1 else None

    def stateless(self, function: cst.BaseExpression, depth: int = 2) -> bool:
        """Whether a function given to `map` is known to be stateless: a TensorFlow op itself
        (`map(tf.range)`), or a lambda or function of this module -- by name, a name bound once to
        a lambda, or a method `self.f` of the module -- whose every call is a TensorFlow op that
        draws no random numbers and runs no Python (`tf.py_function`), a stateless Keras
        preprocessing layer (`Rescaling`), or another such function of the module.  Anything else
        -- an augmentation layer (it draws random numbers), a function of another module -- is not
        known to be."""
        qualified = self.ctx.qualified_name(function) or ""
        if qualified.startswith("tensorflow."):
            return not _STATEFUL_OPS.search(qualified)
        body = self._function_body(function)
        if body is None:
            return False
        for node in nodes_under(body):
            if isinstance(node, cst.Call) and not self._stateless_call(node, depth):
                return False
        return True

    def bound_ambiguously(self, function: cst.BaseExpression) -> bool:
        """Whether a function given to `map` runs a name this module binds to different things --
        a `def` and an assignment, or two different values (a notebook that builds
        `resize_and_rescale = keras.Sequential([...])` in one cell and `def resize_and_rescale(...)`
        in another): which one the map calls depends on the order the cells ran, so what it does is
        not known either way.  The function itself, or a plain name a lambda calls."""
        if isinstance(function, cst.Name):
            names = {function.value}
        elif isinstance(function, cst.Lambda):
            names = {
                node.func.value
                for node in nodes_under(function.body)
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
            }
        else:
            return False
        return any(self._binding_count(name) > 1 for name in names - set(self.ctx.imports.bindings))

    def _binding_count(self, name: str) -> int:
        """How many different things the module binds `name` to (`def`s, and assigned values by
        their code)."""
        code = self.ctx.module.code_for_node
        defined = {code(f) for f in self.ctx.index.nodes("FunctionDef") if f.name.value == name}
        assigned = {code(value) for value in self._bound_once(name)}
        return len(defined) + len(assigned)

    def _function_body(self, function: cst.BaseExpression) -> cst.CSTNode | None:
        """The code a function expression runs, when this module defines it once: a lambda, a
        `def` by name or as `self.name`, or a name bound once to a lambda."""
        if isinstance(function, cst.Lambda):
            return function.body
        if isinstance(function, cst.Name) and function.value not in self.ctx.imports.bindings:
            name = function.value
        elif isinstance(function, cst.Attribute) and dotted_name(function.value) in ("self", "cls"):
            name = function.attr.value
        else:
            return None
        defined: list[cst.CSTNode] = [f.body for f in self.ctx.index.nodes("FunctionDef") if f.name.value == name]
        defined += [value.body for value in self._bound_once(name) if isinstance(value, cst.Lambda)]
        return defined[0] if len(defined) == 1 else None

    def _bound_once(self, name: str) -> list[cst.BaseExpression]:
        """The values assigned to `name` anywhere in the module (`name = value`, one plain target)."""
        return [
            assign.value
            for assign in self.ctx.index.nodes("Assign")
            if len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and assign.targets[0].target.value == name
        ]

    def _stateless_call(self, call: cst.Call, depth: int) -> bool:
        qualified = self.ctx.call_qualified_name(call) or ""
        if qualified.startswith("tensorflow."):
            return not _STATEFUL_OPS.search(qualified)
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _SHAPE_METHODS:
            return True  # `image.set_shape([...])`
        if isinstance(call.func, cst.Name) and qualified == "":
            if call.func.value in _PURE_BUILTINS:
                return True
            bound = self._bound_once(call.func.value)
            if len(bound) == 1 and isinstance(bound[0], cst.Call):  # `rescale = layers.Rescaling(1 / 255)`
                return bool(_STATELESS_KERAS_LAYER.match(self.ctx.call_qualified_name(bound[0]) or ""))
            return depth > 0 and self.stateless(call.func, depth - 1)
        return False

    @cached_property
    def _owners(self) -> dict[int, cst.FunctionDef | None]:
        return {id(call): self.ctx.enclosing_function(call) for call in self.calls}

    def owner(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function whose definition holds `call`."""
        return self._owners[id(call)]

    @cached_property
    def compiled(self) -> set[int]:
        """id() of the functions that run under tf.function (or as a graph): decorated, wrapped
        (`step = tf.function(step)`), Keras' own compiled overrides, an Estimator's `model_fn`
        (it returns an `EstimatorSpec`), and what those call or hand on."""
        ctx = self.ctx
        compiled: set[int] = set()
        by_name: dict[str, list[cst.FunctionDef]] = {}
        for function in ctx.index.nodes("FunctionDef"):
            by_name.setdefault(function.name.value, []).append(function)
            if any(is_tf_function_decorator(ctx, d) for d in function.decorators):
                compiled.add(id(function))
            elif function.name.value in _KERAS_COMPILED_METHODS and _overrides_a_base(ctx, function):
                compiled.add(id(function))
        for call in self.calls:
            qualified = ctx.call_qualified_name(call) or ""
            if qualified in TF_FUNCTION:  # `step = tf.function(step)`
                for name in names_referenced(call) - {dotted_name(call.func)}:
                    compiled.update(id(f) for f in by_name.get(name, ()))
            elif _ESTIMATOR_SPEC.match(qualified) and (owner := self.owner(call)) is not None:
                compiled.add(id(owner))  # an Estimator's `model_fn`: Estimator builds it as a graph
        # What a compiled function calls or hands on is traced with it; so are functions nested in it.
        changed = True
        while changed:
            changed = False
            for call in self.calls:
                owner = self.owner(call)
                if owner is None or not self._in(owner, compiled):
                    continue
                for name in names_referenced(call):
                    for function in by_name.get(name, ()):
                        if id(function) not in compiled:
                            compiled.add(id(function))
                            changed = True
        return compiled

    @cached_property
    def eager_on_purpose(self) -> str | None:
        """Why the module runs eagerly on purpose, or None: it turns eager execution on itself
        (TensorFlow 1's `tf.enable_eager_execution()`: an eager guide or archive)."""
        for call in self.calls:
            qualified = self.ctx.call_qualified_name(call)
            if qualified in _ENABLE_EAGER:
                return f"the file turns eager execution on itself (`{dotted_name(call.func)}()`, TensorFlow 1)"
        return None

    def eager_step_hint(self, node: cst.CSTNode) -> str | None:
        """Why a finding about eager training steps is a hint rather than shown by default, or None.
        `node` is either an eager step itself (a step function, or a step loop with the tape
        written inline) or code in a step loop, whose eager steps are then its inline tape and the
        functions of this module, not compiled, with a tape that it calls.  The finding is a hint
        when the file also runs one of those steps compiled (`compiled_twin`: a guide shows the
        eager step first, there to compare), or, where the loop takes an eager step at all, when
        the file turns eager execution on itself (`eager_on_purpose`)."""
        steps: list[cst.FunctionDef | cst.For | cst.While]
        if isinstance(node, (cst.FunctionDef, cst.For, cst.While)):
            steps, twin_reason = [node], _COMPILED_TWIN_OF_STEP
        else:
            steps, twin_reason = self._eager_steps_of_loop(node), _COMPILED_TWIN_OF_LOOP
        for step in steps:
            twin = self.compiled_twin(step)
            if twin is not None:
                return twin_reason.format(twin=twin)
        return self.eager_on_purpose if steps else None

    def _eager_steps_of_loop(self, node: cst.CSTNode) -> list[cst.FunctionDef | cst.For | cst.While]:
        """The eager steps the step loop around `node` takes: the loop itself when it holds a
        `tf.GradientTape()` block, and the functions of this module, not compiled, with one that
        it calls."""
        loops = self.ctx.loops
        loop = loops.step_boundary(node)
        if not isinstance(loop, (cst.For, cst.While)):
            return []
        steps: list[cst.FunctionDef | cst.For | cst.While] = [loop] if self.tape_blocks(loop) else []
        called = {c.func.value for c in self.calls if isinstance(c.func, cst.Name) and loops.step_boundary(c) is loop}
        steps += [
            f
            for f in self.ctx.index.nodes("FunctionDef")
            if f.name.value in called and not self.in_compiled(f) and self.tape_blocks(f)
        ]
        return steps

    def compiled_twin(self, step: cst.FunctionDef | cst.For | cst.While) -> str | None:
        """The name of a compiled function of this module that is the same training step as an
        eager one (`step`: a step function, or a loop with the tape written inline): a function
        of the same name (a notebook that redefines `train_step` with `@tf.function`), with the
        same body, or with the same `tf.GradientTape()` block.  A guide shows the eager step, then
        compiles it: the eager one is there to compare.  None when there is none."""
        code = self.ctx.module.code_for_node

        def flat(node: cst.CSTNode) -> str:
            return "".join(code(node).split())

        tapes = {flat(block) for block in self.tape_blocks(step)}
        body = flat(step.body) if isinstance(step, cst.FunctionDef) else None
        for function in self.ctx.index.nodes("FunctionDef"):
            if function is step or id(function) not in self.compiled:
                continue
            if isinstance(step, cst.FunctionDef) and function.name.value == step.name.value:
                return function.name.value
            if flat(function.body) == body or tapes & {flat(block) for block in self.tape_blocks(function)}:
                return function.name.value
        return None

    def tape_blocks(self, node: cst.CSTNode) -> list[cst.With]:
        """The `with tf.GradientTape() as tape:` blocks under `node`."""
        return [
            block
            for block in nodes_under(node)
            if isinstance(block, cst.With)
            and any(
                isinstance(item.item, cst.Call) and last_name(item.item.func) == "GradientTape" for item in block.items
            )
        ]

    def in_compiled(self, node: cst.CSTNode) -> bool:
        """Whether `node` is (in) a function that runs under tf.function."""
        return self._in(node, self.compiled)

    def _in(self, node: cst.CSTNode, compiled: set[int]) -> bool:
        if isinstance(node, cst.FunctionDef) and id(node) in compiled:
            return True
        return any(isinstance(a, cst.FunctionDef) and id(a) in compiled for a in self.ctx.ancestors(node))

    @cached_property
    def tf_boundaries(self) -> set[int]:
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
                if not (direct or names_referenced(call) & tf_functions):
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
        """Whether `node` runs in a TensorFlow training step that runs per step."""
        boundary = self.ctx.loops.step_boundary(node)
        return boundary is not None and id(boundary) in self.tf_boundaries and self._runs_per_step(boundary)

    def _runs_per_step(self, boundary: cst.CSTNode) -> bool:
        """A step loop runs per step; a step function only when it is one: named for it
        (`train_step`, `_run_batch`) or called from a loop here.  A one-shot helper that applies
        gradients once runs once."""
        if not isinstance(boundary, cst.FunctionDef):
            return True
        name = boundary.name.value
        if "step" in name or "batch" in name:
            return True
        return any(
            name in names_referenced(call) and self.ctx.loops.step_boundary(call) is not None for call in self.calls
        )


def _overrides_a_base(ctx: FileContext, function: cst.FunctionDef) -> bool:
    """A method of a class derived from another (a Keras `Model` subclass): a plain class's
    `train_step` is its own, not the override Keras compiles."""
    cls = method_class(ctx.index, function)
    if cls is None:
        return False
    return any(dotted_name(base.value) != "object" for base in cls.bases)
