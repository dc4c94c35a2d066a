"""GL704 xla-disabled."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.facts import TENSORFLOW
from gpulint.linter.analysis.nodes import is_false, keyword_arg, method_name
from gpulint.linter.analysis.trainers import commented_arguments
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.fix.builders import remove_keyword, set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT


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
    import keras

    model.compile(optimizer="adam", loss="mse", jit_compile=False)
    ```
    Use instead:
    ```python
    import keras

    model.compile(optimizer="adam", loss="mse")
    ```

    ## Fix (unsafe)
    For `model.compile`, removes `jit_compile=False` (back to Keras' default, "auto"); for
    `tf.function`, sets `jit_compile=True`; for `set_jit(False)`, `set_jit(True)`.  Unsafe: some ops
    have no XLA kernel and then fail to compile, and XLA may change numerics slightly.

    A `jit_compile=False` with a comment on its line (`jit_compile=False,  # XLA breaks our custom
    op`) is a deliberate choice: it is reported, with no fix, and left as written.
    """

    code = "GL704"
    name = "xla-disabled"
    message = "XLA compilation is switched off (`jit_compile=False`): the step runs as many small kernels"
    requires = {TENSORFLOW}
    tokens = ("jit_compile", "set_jit")
    fix_applicability = Applicability.UNSAFE

    VALID = [
        Valid(
            """
            @tf.function(jit_compile=True)
            def step(x):
                return x
            tf.config.optimizer.set_jit(True)
            model.compile(optimizer="adam", loss="mse")
            other.function(jit_compile=False)  # not tf.function
            # tf.config.optimizer.set_jit(False)
            """,
            header=TF_SCRIPT,
        ),
        # not TensorFlow
        Valid(
            """
            import torch
            model.compile(jit_compile=False)
            """,
        ),
    ]
    INVALID = [
        Invalid(
            """
            @tf.function(jit_compile=False)
            def step(x):
                return x
            tf.config.optimizer.set_jit(False)
            model.compile(optimizer="adam", loss="mse", jit_compile=False)
            """,
            "2:2",
            "5:1",
            "6:1",
            header=TF_SCRIPT,
            fixed="""
            @tf.function(jit_compile=True)
            def step(x):
                return x
            tf.config.optimizer.set_jit(True)
            model.compile(optimizer="adam", loss="mse")
            """,
        ),
        # a comment on the argument's line explains the value: reported, left as written
        Invalid(
            """
            model.compile(
                optimizer="adam",
                jit_compile=False,  # XLA breaks our custom op
            )
            step = tf.function(train_step, jit_compile=False)  # no XLA kernel for tf.py_function
            evaluate = tf.function(eval_step, jit_compile=False)  # type: ignore[call-arg]
            """,
            "2:1",
            "6:8",
            "7:12",
            header=TF_SCRIPT,
            messages=(
                f"{message} (no fix: the comment on its line may explain this value)",
                f"{message} (no fix: the comment on its line may explain this value)",
                message,  # a directive to a tool explains nothing: fixed
            ),
            fixed="""
            model.compile(
                optimizer="adam",
                jit_compile=False,  # XLA breaks our custom op
            )
            step = tf.function(train_step, jit_compile=False)  # no XLA kernel for tf.py_function
            evaluate = tf.function(eval_step, jit_compile=True)  # type: ignore[call-arg]
            """,
        ),
        # an alias, and each fix
        Invalid(
            """
            from tensorflow import function as tff
            import tensorflow as tf
            f = tff(g, jit_compile=False)
            model.compile(loss='mse', jit_compile=False)
            tf.config.optimizer.set_jit(False)
            """,
            "3:5",
            "4:1",
            "5:1",
            fixed="""
            from tensorflow import function as tff
            import tensorflow as tf
            f = tff(g, jit_compile=True)
            model.compile(loss='mse')
            tf.config.optimizer.set_jit(True)
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
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
        if qualified != "tensorflow.function" and method_name(node) != "compile":
            return
        if "jit_compile" in commented_arguments(self.ctx, node):
            self.report(node, message=f"{self.message} (no fix: the comment on its line may explain this value)")
            return
        if qualified == "tensorflow.function":
            self.report(
                node,
                fix=set_keyword(
                    self.ctx,
                    node,
                    "jit_compile",
                    "True",
                    Applicability.UNSAFE,
                    "Compile the function with XLA: `jit_compile=True`",
                ),
            )
        else:
            self.report(
                node,
                fix=remove_keyword(
                    node,
                    "jit_compile",
                    Applicability.UNSAFE,
                    "Remove `jit_compile=False` (Keras then uses XLA where it can)",
                ),
            )
