"""GL707 tf-eager-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.facts import STEPS, TENSORFLOW
from gpulint.linter.analysis.loops import is_test_function
from gpulint.linter.analysis.nodes import method_name
from gpulint.linter.analysis.tensorflow import float_of_tensor
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.rule import Invalid, Rule, Valid

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
    import tensorflow as tf

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    ```
    Use instead:
    ```python
    import tensorflow as tf

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    ```

    ## Fix (unsafe)
    Decorates the step function with `@tf.function` (the module's own alias).  Unsafe: Python side
    effects (`print`, appending to lists) then run only while tracing, and Python values that
    change between calls retrace the function.  Not offered when the function reads values back
    (`.numpy()`, `float(...)`), which fails inside `tf.function`, nor for inline loop steps (the
    step must first become a function).  Test functions (`test_*`) are not reported.
    """

    code = "GL707"
    name = "tf-eager-step"
    message = "GradientTape training step runs eagerly (not in `tf.function`): Python dispatches every op"
    requires = {TENSORFLOW, STEPS}
    tokens = (".gradient(",)
    fix_applicability = Applicability.UNSAFE

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "minimize" or self._in_optimizer_class(node):
            return  # optimizers' own `minimize(loss, tape=...)` API is no training step
        if id(node) not in self.ctx.loops.step_functions:
            return  # (test functions are never step functions)
        tf = self.ctx.tf
        own_calls = [call for call in tf.calls if tf.owner(call) is node and self.ctx.loops.step_boundary(call) is node]
        has_tape = any(method_name(c) == "gradient" and self.ctx.loops.is_step_call(c) for c in own_calls)
        has_apply = any(method_name(c) in _APPLY_METHODS for c in own_calls)
        if not (has_tape and has_apply) or tf.in_compiled(node):
            return
        fix = None
        if not any(method_name(c) == "numpy" or float_of_tensor(self.ctx, c) for c in self._calls_within(node)):
            decorator, imports = self.ctx.reference("tensorflow.function")
            new = node.with_changes(
                decorators=[*node.decorators, cst.Decorator(decorator=cst.parse_expression(decorator))]
            )
            fix = Fix(Applicability.UNSAFE, f"Compile the step: `@{decorator}`", {node: new}, imports)
        self.report(node.name, fix=fix)

    def visit_Call(self, node: cst.Call) -> None:
        """A tape step written inline in a training loop (no step function to decorate)."""
        if method_name(node) != "gradient" or not self.ctx.loops.is_step_call(node):
            return
        boundary = self.ctx.loops.step_boundary(node)
        if not isinstance(boundary, (cst.For, cst.While)):
            return
        function = self.ctx.enclosing_function(node)
        if function is not None and is_test_function(function):
            return
        tf = self.ctx.tf
        applies = any(method_name(c) in _APPLY_METHODS and self.ctx.loops.step_boundary(c) is boundary for c in tf.calls)
        if not applies or tf.in_compiled(node):
            return  # gradients without an optimizer step (a test of gradients) are no training step
        self.report(node)

    def _in_optimizer_class(self, function: cst.FunctionDef) -> bool:
        return any(isinstance(a, cst.ClassDef) and "Optimizer" in a.name.value for a in self.ctx.ancestors(function))

    def _calls_within(self, function: cst.FunctionDef) -> list[cst.Call]:
        return [c for c in self.ctx.tf.calls if any(a is function for a in self.ctx.ancestors(c))]
