"""GL707 tf-eager-step."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.facts import STEPS, TENSORFLOW
from gpulint.linter.analysis.loops import is_test_function
from gpulint.linter.analysis.nodes import method_name
from gpulint.linter.analysis.tensorflow import float_of_tensor
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT

_APPLY_METHODS = frozenset({"apply_gradients", "apply", "minimize"})


class TfEagerStep(Rule):
    """
    ## What it finds
    A `tf.GradientTape` training step that runs eagerly: a function that calls `tape.gradient(...)`
    and `optimizer.apply_gradients(...)` without being decorated with `tf.function` (or traced by
    one: called from a compiled function, wrapped by `tf.function(step)`, or a Keras `train_step`
    override, which `fit` compiles), and a tape step written inline in a Python training loop (also
    when a helper of the module runs the tape and the loop applies the gradients).

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
    step must first become a function).  Test functions (`test*`, as pytest collects them) are not reported,
    nor a step that runs only in loops the code bounds to fewer than 20 steps (`range(10)`, a tf.data
    pipeline's `take(10)`: a demo, where tracing would cost more than it saves).

    An eager step whose file also runs the same step compiled -- a function of the same name
    under `tf.function` (a notebook redefines it), or the same body or `tf.GradientTape()` block
    -- is a hint: a guide that shows the eager loop first and then compiles it.  So is an eager
    step in a file that turns eager execution on itself (TensorFlow 1's
    `tf.enable_eager_execution()`).  Hints are held back unless hints are shown.
    """

    code = "GL707"
    name = "tf-eager-step"
    hint_by_default = MOSTLY_NOT_WANTED
    message = "GradientTape training step runs eagerly (not in `tf.function`): Python dispatches every op"
    requires = {TENSORFLOW, STEPS}
    tokens = (".gradient(",)
    fix_applicability = Applicability.UNSAFE

    VALID = [
        # steps over a handful of a pipeline's batches (a demo): not per step
        Valid(
            """
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            for x, y in train_ds.take(10):
                train_step(x, y)
            for step, (x, y) in enumerate(ds.take(5)):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            """,
            header=TF_SCRIPT,
        ),
        # an Estimator's model_fn: the Estimator builds it as a graph
        Valid(
            """
            def model_fn(features, labels, mode):
                net = Net()
                opt = tf.keras.optimizers.Adam(0.1)
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.abs(net(features["x"]) - features["y"]))
                gradients = tape.gradient(loss, net.trainable_variables)
                train_op = opt.apply_gradients(zip(gradients, net.trainable_variables))
                return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

            est = tf.estimator.Estimator(model_fn, "./model")
            est.train(toy_dataset, steps=10)
            """,
            header=TF_SCRIPT,
        ),
        # compiled in every way; a test; gradients without an optimizer step; an optimizer's own minimize
        Valid(
            """
            from tensorflow import function as compile_me
            import keras

            @tf.function(jit_compile=True)
            def step_a(x):
                with tf.GradientTape() as tape:
                    loss = f(x)
                opt.apply_gradients(zip(tape.gradient(loss, v), v))

            @compile_me
            def step_b(x):
                with tf.GradientTape() as tape:
                    loss = f(x)
                opt.apply_gradients(zip(tape.gradient(loss, v), v))

            def step_c(x):
                with tf.GradientTape() as tape:
                    loss = f(x)
                opt.apply_gradients(zip(tape.gradient(loss, v), v))
            step_c = tf.function(step_c)

            def step_d(x):
                with tf.GradientTape() as tape:
                    loss = f(x)
                opt.apply_gradients(zip(tape.gradient(loss, v), v))

            @tf.function
            def distributed_step(x):
                strategy.run(step_d, args=(x,))

            class MyModel(keras.Model):
                def train_step(self, data):
                    with tf.GradientTape() as tape:
                        loss = self.compute_loss(data)
                    grads = tape.gradient(loss, self.trainable_variables)
                    self.optimizer.apply_gradients(zip(grads, self.trainable_variables))

            @tf.function
            def whole_loop():
                for x in ds:
                    with tf.GradientTape() as tape:
                        loss = f(x)
                    opt.apply_gradients(zip(tape.gradient(loss, v), v))

            def test_optimizer_step():
                with tf.GradientTape() as tape:
                    loss = f(1.0)
                opt.apply_gradients(zip(tape.gradient(loss, v), v))

            def loop_of_gradients(ops):
                for op in ops:
                    with tf.GradientTape() as tape:
                        y = op()
                    check(tape.gradient(y, op.variables))  # gradients only: a test of gradients

            class TFOptimizer:
                def minimize(self, loss, var_list, tape=None):
                    grads = tape.gradient(loss(), var_list)
                    self.apply_gradients(zip(grads, var_list))

            def only_gradients(x):
                with tf.GradientTape() as tape:
                    y = f(x)
                return tape.gradient(y, x)  # no optimizer step: not a training step
            """,
            header=TF_SCRIPT,
        ),
    ]
    INVALID = [
        # TensorFlow 1 with eager execution turned on: eager on purpose (a hint)
        Invalid(
            """
            tf.compat.v1.enable_eager_execution()
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
            """,
            "6:13",
            header=TF_SCRIPT,
            hints=("the file turns eager execution on itself (`tf.compat.v1.enable_eager_execution()`, TensorFlow 1)",),
        ),
        # a guide: the eager step, then the same step compiled (redefined; the same tape block inline)
        Invalid(
            """
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))

            for x, y in ds:
                train_step(x, y)
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))

            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))

            for x, y in ds:
                train_step(x, y)
            """,
            "2:5",
            "13:13",
            header=TF_SCRIPT,
            hints=(
                "the file also runs this step compiled (`train_step` under `tf.function`): the eager one is there "
                "to compare",
                "the file also runs this step compiled (`train_step` under `tf.function`): the eager one is there "
                "to compare",
            ),
            fixed="""
            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))

            for x, y in ds:
                train_step(x, y)
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))

            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))

            for x, y in ds:
                train_step(x, y)
            """,
        ),
        # the fix decorates the step with the module's alias
        Invalid(
            """
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            for x, y in ds:
                train_step(x, y)
            """,
            "2:5",
            header=TF_SCRIPT,
            fixed="""
            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            for x, y in ds:
                train_step(x, y)
            """,
        ),
        # an inline step in a loop: no function to decorate
        Invalid(
            """
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
            """,
            "5:13",
            header=TF_SCRIPT,
        ),
        # the tape in a helper, the update inline: reported at the update
        Invalid(
            """
            def grad(model, x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                return loss, tape.gradient(loss, model.trainable_variables)

            for epoch in range(10):
                for x, y in ds:
                    loss, grads = grad(model, x, y)
                    optimizer.apply_gradients(zip(grads, model.trainable_variables))
            """,
            "10:9",
            header=TF_SCRIPT,
        ),
        # no fix: the step reads a value back, which fails under tf.function
        Invalid(
            """
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss.numpy()
            """,
            "2:5",
            header=TF_SCRIPT,
        ),
    ]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "minimize" or self._in_optimizer_class(node):
            return  # optimizers' own `minimize(loss, tape=...)` API is no training step
        if id(node) not in self.ctx.loops.step_functions:
            return  # a test function never is one
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
        self.report(node.name, fix=fix, hint=tf.eager_step_hint(node))

    def visit_Call(self, node: cst.Call) -> None:
        """A tape step written inline in a training loop (no step function to decorate)."""
        if method_name(node) == "apply_gradients":
            self._split_step(node)
        if method_name(node) != "gradient" or not self.ctx.loops.is_step_call(node):
            return
        boundary = self.ctx.loops.step_boundary(node)
        if not isinstance(boundary, (cst.For, cst.While)):
            return
        function = self.ctx.enclosing_function(node)
        if function is not None and is_test_function(function):
            return
        tf = self.ctx.tf
        applies = any(
            method_name(c) in _APPLY_METHODS and self.ctx.loops.step_boundary(c) is boundary for c in tf.calls
        )
        if not applies or tf.in_compiled(node):
            return  # gradients without an optimizer step (a test of gradients) are no training step
        self.report(node, hint=tf.eager_step_hint(boundary))

    def _split_step(self, apply: cst.Call) -> None:
        """`grads = grad(model, x, y)` (a helper of this module runs the tape) then
        `optimizer.apply_gradients(...)` inline in the loop, nothing compiled: reported at the apply."""
        boundary = self.ctx.loops.step_boundary(apply)
        if not isinstance(boundary, (cst.For, cst.While)) or self.ctx.tf.in_compiled(apply):
            return
        function = self.ctx.enclosing_function(apply)
        if function is not None and is_test_function(function):
            return
        tf = self.ctx.tf
        same_step = [c for c in tf.calls if self.ctx.loops.step_boundary(c) is boundary]
        if any(method_name(c) == "gradient" for c in same_step):
            return  # the inline tape step, reported at its `gradient`
        taped = self._taping_functions
        if any(isinstance(c.func, cst.Name) and c.func.value in taped for c in same_step):
            self.report(apply)

    @cached_property
    def _taping_functions(self) -> frozenset[str]:
        """Functions of this module, not compiled, that compute a tape's gradients and apply none."""
        tf = self.ctx.tf
        found = set()
        for function in self.ctx.index.nodes("FunctionDef"):
            if tf.in_compiled(function):
                continue
            own = [c for c in tf.calls if tf.owner(c) is function]
            if any(method_name(c) == "gradient" for c in own) and not any(
                method_name(c) in _APPLY_METHODS for c in own
            ):
                found.add(function.name.value)
        return frozenset(found)

    def _in_optimizer_class(self, function: cst.FunctionDef) -> bool:
        return any(isinstance(a, cst.ClassDef) and "Optimizer" in a.name.value for a in self.ctx.ancestors(function))

    def _calls_within(self, function: cst.FunctionDef) -> list[cst.Call]:
        return [c for c in self.ctx.tf.calls if any(a is function for a in self.ctx.ancestors(c))]
