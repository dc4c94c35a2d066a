"""GL706 tf-host-sync-in-loop."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.code_shapes import STEP_LOOP
from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TENSORFLOW, TORCH
from gpulint.linter.analysis.nodes import method_name
from gpulint.linter.analysis.tensorflow import float_of_tensor
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.guards import host_read_guard_fix
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT
from gpulint.rules.options import LOG_EVERY

# TensorFlow functions (`tf.X`, `tf.math.X`) that return a boolean tensor: `if` on one reads it back.
_TF_PREDICATES = frozenset(
    "equal not_equal greater greater_equal less less_equal logical_and logical_or logical_not "
    "reduce_any reduce_all is_nan is_inf is_finite".split()
)
_CONDITION = (
    "a TensorFlow tensor used as a Python condition in the training loop makes the host wait for the GPU every step"
)


class TfHostSyncInLoop(Rule):
    """
    ## What it finds
    `.numpy()`, `float(loss)` (of a step's loss, metric or output), `int(...)` or `float(...)` of
    what a compiled step returns, and a TensorFlow predicate used as a Python condition
    (`if tf.equal(optimizer.iterations % n, 0):`, `if tf.reduce_any(tf.math.is_nan(loss)):` -- the
    condition reads the tensor back to decide), inside a TensorFlow training
    step loop -- one that calls `tape.gradient`, `apply_gradients` or `train_on_batch`, directly or
    through a step function -- not under an interval guard, in a loop that does not time its steps
    (a benchmark loop needs the read for its clock to measure the step), and not in a loop the code
    bounds to fewer than 20 steps (`range(10)`, a tf.data pipeline's `take(10)`: a demo, where the
    reads cost milliseconds next to seconds of start-up).

    A read in a loop that takes an eager step whose file also runs the same step compiled (a guide
    that shows the eager loop first, then compiles it: a function of the same name, body or
    `tf.GradientTape()` block under `tf.function`) is a hint, and so is one in a file that turns
    eager execution on itself (TensorFlow 1's `tf.enable_eager_execution()`) and one that records
    each step's value for a plot (`losses.append(loss.numpy())` in a module that plots with
    matplotlib: a tutorial's curve).  Hints are held back unless hints are shown.

    ## Why it is slow
    TensorFlow dispatches GPU work asynchronously, and `tf.function` steps run ahead of the host.
    Reading a value back (`.numpy()`, `float(...)`) makes Python wait until the GPU has finished
    everything queued, so the next step cannot be queued while this one runs and the GPU idles
    between steps; one read per step commonly costs 5-20% of step time on small models.

    ## Example
    ```python
    import tensorflow as tf

    for step, (x, y) in enumerate(train_ds):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        print("loss", loss.numpy())
    ```
    Use instead: keep a `keras.metrics.Mean` and read it every N steps:
    ```python
    import tensorflow as tf

    for step, (x, y) in enumerate(train_ds):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        loss_metric.update_state(loss)
        if step % 100 == 0:
            print("loss", float(loss_metric.result()))
    ```

    ## Fix (unsafe)
    As GL201: where the value only feeds a logging call, the statement is wrapped in an interval
    guard that fits the loop (at most every `log-every` steps, as GL302 chooses); elsewhere there
    is no automatic fix.  Unsafe: the program prints less often.  PyTorch steps are GL201's; in a
    module that trains with both frameworks on an accelerator, GL201 reports these reads, so one
    read is never reported twice.
    """

    code = "GL706"
    name = "tf-host-sync-in-loop"
    hint_by_default = MOSTLY_NOT_WANTED
    message = "`{what}` in the TensorFlow training loop makes the host wait for the GPU every step"
    title = (
        "a value read back to the host (`.numpy()`, `float()`) in the TensorFlow training loop makes the host wait "
        "for the GPU every step"
    )
    # PyTorch steps on an accelerator are GL201's, which reports these reads there: one read is
    # never reported twice in a module that trains with both frameworks.
    requires = {TENSORFLOW, STEPS, ~(TORCH & ACCELERATOR)}
    triggers = ((STEP_LOOP,),)  # it reports per-step work only
    # (and text in every name of _TF_PREDICATES)
    tokens = (".numpy(", "float(", "int(", "equal(", "greater", "less", "logical_", "reduce_a", "is_")
    fix_applicability = Applicability.UNSAFE
    fixes_test_files = False
    options = (LOG_EVERY,)

    VALID = [
        # a loop over a handful of a pipeline's batches (a demo): not per step
        Valid(
            """
            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
                return loss

            for x, y in train_ds.take(10):
                loss = train_step(x, y)
                print(loss.numpy())
            """,
            header=TF_SCRIPT,
        ),
        # a predicate condition in a compiled step (autograph makes it graph control flow), once per
        # epoch, on literals only, and in an evaluation loop
        Valid(
            """
            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                if tf.reduce_any(tf.math.is_nan(loss)):
                    tf.print("nan")
                return loss

            for epoch in range(3):
                for x, y in ds:
                    loss = train_step(x, y)
                    if tf.equal(1, 0):
                        pass
                if tf.equal(optimizer.iterations % 100, 0):
                    pass
            for x, y in val_ds:
                if tf.reduce_all(tf.equal(model(x), y)):
                    pass
            """,
            header=TF_SCRIPT,
        ),
        # an evaluation loop; a PyTorch step
        Valid(
            """
            for x, y in val_ds:
                preds.append(model(x).numpy())  # evaluation: no step

            import torch
            for x, y in loader:
                loss = criterion(net(x), y)
                loss.backward()
                opt.step()
                arr = loss.numpy()  # a torch step: GL201's business
            """,
            header=TF_SCRIPT,
        ),
        # `int()` of a plain value
        Valid(
            """
            for step, (x, y) in enumerate(ds):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
                done = int(step)
            """,
            header=TF_SCRIPT,
        ),
        # a benchmark loop: the read makes the timestamps measure the step
        Valid(
            """
            import time
            for i, (x, y) in enumerate(ds):
                loss = train_step(x, y).numpy()
                stamps.append(time.perf_counter())

            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
                return loss
            """,
            header=TF_SCRIPT,
        ),
        # PyTorch on an accelerator too: GL201 reports the read (one finding, not two)
        Valid(
            """
            import torch
            device = torch.device("cuda")
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                print(loss.numpy())
            """,
            header=TF_SCRIPT,
        ),
        # a test and a one-shot helper apply gradients once (keras' optimizer tests)
        Valid(
            """
            class AdamTest(TestCase):
                def test_weight_decay(self):
                    optimizer.apply_gradients(zip([grads], [var]))
                    self.assertAlmostEqual(var.numpy(), 1.9, decimal=6)

            def fit_once():
                optimizer.apply_gradients(zip([grads], [var]))
                return var.numpy()
            """,
            header=TF_SCRIPT,
        ),
    ]
    INVALID = [
        # each step's loss recorded for a plot: a hint
        Invalid(
            """
            import matplotlib.pyplot as plt

            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
                return loss

            losses = []
            for x, y in ds:
                losses.append(train_step(x, y).numpy())
            plt.plot(losses)
            """,
            "13:36",
            header=TF_SCRIPT,
            hints=("the loop records each step's value for a plot (matplotlib): a curve read on purpose",),
        ),
        # a guide: the eager loop first (a hint), then the same step compiled (reported)
        Invalid(
            """
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            for x, y in ds:
                loss = train_step(x, y)
                print(float(loss))

            @tf.function
            def fast_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            for x, y in ds:
                loss = fast_step(x, y)
                print(float(loss))
            """,
            "11:11",
            "23:11",
            header=TF_SCRIPT,
            hints=(
                "the loop takes the eager step of a file that also runs it compiled (`fast_step` under "
                "`tf.function`): a guide's loop, there to compare",
                MOSTLY_NOT_WANTED,
            ),
        ),
        # a predicate as a Python condition: the condition reads the tensor back (an interval
        # written with `tf.equal(... % n, 0)` still throttles what it guards)
        Invalid(
            """
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                if tf.equal(optimizer.iterations % 100, 0):
                    print(loss.numpy())
                if tf.reduce_any(tf.math.is_nan(loss)):
                    break
            """,
            "7:8",
            "9:8",
            header=TF_SCRIPT,
        ),
        # `int()` of what a compiled step returns; a read in a method that calls the object's
        # compiled `__call__` through `self(...)`
        Invalid(
            """
            @tf.function
            def train_episode(state):
                with tf.GradientTape() as tape:
                    loss, reward = play(state)
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return reward

            for episode in range(1000):
                reward = int(train_episode(reset()))

            class Trainer:
                @tf.function
                def __call__(self, x, y):
                    with tf.GradientTape() as tape:
                        loss = loss_fn(y, self.model(x))
                    grads = tape.gradient(loss, self.model.trainable_variables)
                    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
                    return loss

                def train_step(self, x, y):
                    loss = self(x, y)
                    step = self.step_var.numpy()

                def fit(self, ds):
                    for x, y in ds:
                        self.train_step(x, y)
            """,
            "11:14",
            "24:16",
            header=TF_SCRIPT,
        ),
        # in the step loop, unthrottled; only the read that feeds a log line is guarded
        Invalid(
            """
            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            for epoch in range(3):
                for step, (x, y) in enumerate(ds):
                    loss = train_step(x, y)
                    print("loss", loss.numpy())
                    total += float(loss)
                    if step % 100 == 0:
                        print(loss.numpy())
                    lr = float(args.lr)
                print("epoch", loss.numpy())
            """,
            "13:23",
            "14:18",
            header=TF_SCRIPT,
            fixed="""
            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            for epoch in range(3):
                for step, (x, y) in enumerate(ds):
                    loss = train_step(x, y)
                    if step % 100 == 0:
                        print("loss", loss.numpy())
                    total += float(loss)
                    if step % 100 == 0:
                        print(loss.numpy())
                    lr = float(args.lr)
                print("epoch", loss.numpy())
            """,
        ),
        # a step function called from a loop
        Invalid(
            """
            def update(x):
                with tf.GradientTape() as tape:
                    loss = f(x)
                optimizer.apply_gradients(zip(tape.gradient(loss, v), v))
                print(loss.numpy())

            for x in data:
                update(x)
            """,
            "6:11",
            header=TF_SCRIPT,
        ),
    ]

    def visit_If(self, node: cst.If) -> None:
        self._tensor_condition(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._tensor_condition(node.test)

    def _tensor_condition(self, test: cst.BaseExpression) -> None:
        """`if tf.equal(optimizer.iterations % n, 0):` in an eager step loop: Python asks the
        tensor for its truth value.  Under tf.function, autograph turns it into graph control flow."""
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test = test.expression
        if not isinstance(test, cst.Call) or not self._is_tf_predicate(test) or not self._eager_per_step(test):
            return
        self.report(test, message=_CONDITION, hint=self.ctx.tf.eager_step_hint(test))

    def _is_tf_predicate(self, call: cst.Call) -> bool:
        qualified = self.ctx.call_qualified_name(call) or ""
        module, _, name = qualified.rpartition(".")
        if module not in ("tensorflow", "tensorflow.math") or name not in _TF_PREDICATES:
            return False
        # of a tensor, not only of Python literals
        return any(not isinstance(arg.value, (cst.Integer, cst.Float, cst.SimpleString)) for arg in call.args)

    def visit_Call(self, node: cst.Call) -> None:
        if method_name(node) == "numpy" and not node.args:
            what = ".numpy()"
        elif float_of_tensor(self.ctx, node):
            assert isinstance(node.func, cst.Name)  # `float(...)` or `int(...)`
            what = f"{node.func.value}(...)"
        else:
            return
        if not self._eager_per_step(node):
            return
        fix, why_not = host_read_guard_fix(self.ctx, node, LOG_EVERY.key, self.option(LOG_EVERY))
        message = self.message.format(what=what)
        if why_not is not None:
            message += f" (no fix: {why_not})"
        self.report(node, message=message, fix=fix, hint=self.ctx.tf.eager_step_hint(node) or self._plotted(node))

    def _eager_per_step(self, node: cst.CSTNode) -> bool:
        """Whether a read at `node` waits for the device every step: per-step work of a TensorFlow
        step loop that runs eagerly and does not time its steps (where it does, the read is what
        makes the timing true)."""
        loops, tf = self.ctx.loops, self.ctx.tf
        if not loops.per_step_work(node) or loops.times_steps(node):
            return False
        return tf.is_tf_step(node) and not tf.in_compiled(node)

    def _plotted(self, node: cst.CSTNode) -> str | None:
        """Why the read is a hint when it records each step's value for a plot: it is (in) the
        argument of `values.append(...)` in a module that plots with matplotlib (a tutorial's loss
        curve, read on purpose)."""
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.Call) and method_name(ancestor) == "append":
                break
            if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement)):
                return None
        else:
            return None
        if not any((self.ctx.call_qualified_name(call) or "").startswith("matplotlib.") for call in self.ctx.tf.calls):
            return None
        return "the loop records each step's value for a plot (matplotlib): a curve read on purpose"
