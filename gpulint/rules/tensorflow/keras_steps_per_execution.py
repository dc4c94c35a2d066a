"""GL705 keras-steps-per-execution."""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import TENSORFLOW
from gpulint.linter.analysis.nodes import has_star_kwargs, keyword_arg, method_name
from gpulint.linter.analysis.workers import is_main_guard
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, RuleOption, Valid, positive_int
from gpulint.rules.case_headers import TF_SCRIPT

# Keras callback hooks called once per batch.
_PER_BATCH_HOOK = re.compile(r"on_(train_|test_|predict_)?batch_(begin|end)")
_TORCH_BACKEND = re.compile(r"""KERAS_BACKEND["']\s*\]?\s*[=,]\s*["']torch["']""")
_STEPS_PER_EXECUTION_SINCE = (2, 4)  # TensorFlow 2.3 spelled it `experimental_steps_per_execution`
STEPS_PER_EXECUTION = RuleOption(
    "steps-per-execution", 32, "Value GL705's fix writes as `steps_per_execution=`.", int, check=positive_int
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
    import keras

    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    ```
    Use instead:
    ```python
    import keras

    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", steps_per_execution=32)
    ```

    ## Fix (unsafe)
    Adds `steps_per_execution=<steps-per-execution>` (option, default 32).  Unsafe: callbacks'
    `on_batch_begin`/`on_batch_end` then run every N batches, progress and logs update less often,
    and the PyTorch backend of Keras does not support it.  A hint: opt in with `--select GL705`.

    No fix (the finding says why):
    - where the project runs on a TensorFlow older than 2.4, which has no `steps_per_execution`
      (2.3 called it `experimental_steps_per_execution`): as its requirements or
      `target-tensorflow` say, or, where none bounds it, as its README, INSTALL.md or docs name;
    - in library code that compiles a model it was given: a function whose parameter is the
      model (`def compile_model(model, lr): model.compile(...)`) in a module that is not a
      script -- one that, run, does nothing but define (no `if __name__ == "__main__":`, no
      top-level call or loop).  The library's users choose how often their callbacks run; a
      script's author is the one who reads the fix;
    - where a callback of the same file acts per batch (a method `on_train_batch_end`,
      `on_batch_begin`, ...): with N batches a call it is called for every Nth batch only, and a
      callback that waits for batch 1 or counts batches never sees what it waits for;
    - where the file picks Keras' PyTorch backend (`os.environ["KERAS_BACKEND"] = "torch"`),
      which does not support `steps_per_execution`;
    - in Keras' (or TensorFlow's) own repository, by its distribution name: its guides and
      examples run on every backend, the PyTorch one included, and show `compile()` as users
      write it.
    """

    code = "GL705"
    name = "keras-steps-per-execution"
    message = "`model.compile()` without `steps_per_execution`: `fit` returns to Python after every batch"
    requires = {TENSORFLOW}
    tokens = (".compile(",)
    default = "hint"
    fix_applicability = Applicability.UNSAFE
    options = (STEPS_PER_EXECUTION,)

    VALID = [
        Valid(
            """
            import re
            import torch
            model.compile(optimizer="adam", loss="mse", steps_per_execution=16)
            model.compile(**config)
            pattern = re.compile("x")
            compiled = torch.compile(net)
            net.compile()  # nn.Module.compile: no loss, no optimizer
            """,
            header=TF_SCRIPT,
        ),
    ]
    INVALID = [
        Invalid(
            """
            import keras
            model.compile(optimizer="adam", loss="mse")
            model.compile("sgd", "mse")
            model.compile(optimizer=keras.optimizers.Adam(), loss=loss_fn)
            """,
            "3:1",
            "4:1",
            "5:1",
            header=TF_SCRIPT,
            fixed="""
            import keras
            model.compile(optimizer="adam", loss="mse", steps_per_execution=32)
            model.compile("sgd", "mse", steps_per_execution=32)
            model.compile(optimizer=keras.optimizers.Adam(), loss=loss_fn, steps_per_execution=32)
            """,
        ),
        # the option, in the call's layout
        Invalid(
            """
            model.compile(
                optimizer="adam",
                loss="mse",
            )
            """,
            "2:1",
            header=TF_SCRIPT,
            fixed="""
            model.compile(
                optimizer="adam",
                loss="mse",
                steps_per_execution=64,
            )
            """,
            options={"steps-per-execution": 64},
        ),
        # a project on a TensorFlow without `steps_per_execution`, by its requirements or its README
        Invalid(
            """
            model.compile(optimizer="adam", loss="mse")
            """,
            "2:1",
            header=TF_SCRIPT,
            target_tensorflow=(2, 1),
            messages=(
                "`model.compile()` without `steps_per_execution`: `fit` returns to Python after every batch "
                "(no fix: `steps_per_execution` needs TensorFlow 2.4; the project runs on TensorFlow 2.1, per its "
                "requirements or `target-tensorflow`)",
            ),
        ),
        Invalid(
            """
            model.compile(optimizer="adam", loss="mse")
            """,
            "2:1",
            header=TF_SCRIPT,
            documented_tensorflow=(1, 14),
            messages=(
                "`model.compile()` without `steps_per_execution`: `fit` returns to Python after every batch "
                "(no fix: `steps_per_execution` needs TensorFlow 2.4; the project runs on TensorFlow 1.14, per its "
                "README)",
            ),
        ),
        # a callback of the file counts batches; the file runs Keras on PyTorch
        Invalid(
            """
            class ThroughputCallback(keras.callbacks.Callback):
                def on_train_batch_begin(self, batch, logs=None):
                    if batch == 1:
                        self.start = time.time()

            model.compile(optimizer="adam", loss="mse")
            model.fit(x, y, callbacks=[ThroughputCallback()])
            """,
            "7:1",
            header=TF_SCRIPT,
            messages=(
                "`model.compile()` without `steps_per_execution`: `fit` returns to Python after every batch "
                "(no fix: a callback of this file acts per batch (`on_train_batch_begin`): it would see every Nth "
                "batch only)",
            ),
        ),
        Invalid(
            """
            import os
            os.environ["KERAS_BACKEND"] = "torch"
            import keras
            model.compile(optimizer="adam", loss="mse")
            """,
            "4:1",
            messages=(
                "`model.compile()` without `steps_per_execution`: `fit` returns to Python after every batch "
                "(no fix: the file runs Keras on its PyTorch backend, which does not support `steps_per_execution`)",
            ),
        ),
        # Keras' own guides: they run on every backend, PyTorch's included
        Invalid(
            """
            model.compile(optimizer="adam", loss="mse")
            model.fit(x, y, epochs=1)
            """,
            "2:1",
            header=TF_SCRIPT,
            framework="Keras",
            messages=(
                "`model.compile()` without `steps_per_execution`: `fit` returns to Python after every batch "
                "(no fix: the project is Keras itself: its guides and examples show the calls as its users write "
                "them, on every setup it supports)",
            ),
        ),
        # a library's helper that compiles its caller's model: reported, left to the caller
        Invalid(
            """
            def compile_model(model, learning_rate=1e-3):
                model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate), loss="mse")
                return model
            """,
            "3:5",
            header=TF_SCRIPT,
            messages=(
                "`model.compile()` without `steps_per_execution`: `fit` returns to Python after every batch "
                "(no fix: library code that compiles its caller's model; the caller chooses how often callbacks "
                "run)",
            ),
        ),
        # the same function in a script: its author runs it
        Invalid(
            """
            def train(model, data):
                model.compile(optimizer="adam", loss="mse")
                model.fit(data, epochs=3)


            if __name__ == "__main__":
                train(build_model(), load_data())
            """,
            "3:5",
            header=TF_SCRIPT,
            fixed="""
            def train(model, data):
                model.compile(optimizer="adam", loss="mse", steps_per_execution=32)
                model.fit(data, epochs=3)


            if __name__ == "__main__":
                train(build_model(), load_data())
            """,
        ),
    ]

    @cached_property
    def _file_unfit(self) -> str | None:
        """Why nothing in this file may run N batches a call, or None: a callback of the file
        acts per batch, or the file runs Keras on PyTorch."""
        for function in self.ctx.index.nodes("FunctionDef"):
            if _PER_BATCH_HOOK.fullmatch(function.name.value) and any(
                isinstance(a, cst.ClassDef) for a in self.ctx.ancestors(function)
            ):
                return (
                    f"a callback of this file acts per batch (`{function.name.value}`): it would see every Nth "
                    "batch only"
                )
        if _TORCH_BACKEND.search(self.ctx.source_text):
            return "the file runs Keras on its PyTorch backend, which does not support `steps_per_execution`"
        return None

    def visit_Call(self, node: cst.Call) -> None:
        if not _keras_compile_call(self.ctx, node) or has_star_kwargs(node):
            return
        if keyword_arg(node, "steps_per_execution") is not None:
            return
        floor = self.ctx.tensorflow_floor
        if floor is not None and floor[0] < _STEPS_PER_EXECUTION_SINCE:
            version, where = floor
            self.report(
                node,
                message=f"{self.message} (no fix: `steps_per_execution` needs TensorFlow 2.4; the project runs on "
                f"TensorFlow {version[0]}.{version[1]}, per {where})",
            )
            return
        unfit = self._file_unfit
        if unfit is not None:
            self.report(node, message=f"{self.message} (no fix: {unfit})")
            return
        if _compiles_a_given_model(self.ctx, node):
            self.report(
                node,
                message=f"{self.message} (no fix: library code that compiles its caller's model; the caller "
                "chooses how often callbacks run)",
            )
            return
        value = str(self.option(STEPS_PER_EXECUTION))
        self.report(
            node,
            fix=set_keyword(
                self.ctx,
                node,
                "steps_per_execution",
                value,
                Applicability.UNSAFE,
                f"Run {value} batches per compiled call: `steps_per_execution={value}`",
            ),
        )


def _keras_compile_call(ctx: FileContext, node: cst.Call) -> bool:
    """`model.compile(optimizer=..., loss=...)`: Keras' compile, not `torch.compile`/`re.compile`
    (module functions) nor `nn.Module.compile()` (which takes no loss or optimizer)."""
    if method_name(node) != "compile" or ctx.call_qualified_name(node) is not None:
        return False
    if keyword_arg(node, "optimizer") is not None or keyword_arg(node, "loss") is not None:
        return True
    first = node.args[0] if node.args and node.args[0].keyword is None and not node.args[0].star else None
    return first is not None and (
        isinstance(first.value, cst.SimpleString) or ctx.values.is_kind(first.value, "optimizer")
    )


def _compiles_a_given_model(ctx: FileContext, node: cst.Call) -> bool:
    """`model.compile(...)` on a parameter of the function around it, in a module that is not a
    script: a library's helper that compiles the model its caller built."""
    function = ctx.enclosing_function(node)
    receiver = node.func.value if isinstance(node.func, cst.Attribute) else None
    while isinstance(receiver, (cst.Attribute, cst.Subscript)):
        receiver = receiver.value
    if function is None or not isinstance(receiver, cst.Name) or receiver.value in ("self", "cls"):
        return False
    parameters = function.params
    names = {p.name.value for p in (*parameters.posonly_params, *parameters.params, *parameters.kwonly_params)}
    return receiver.value in names and not _is_script(ctx.module)


def _is_script(module: cst.Module) -> bool:
    """Whether running the module does more than define things: a main guard, or a call, loop or
    `with` at its top level (`main()`, `model.fit(...)`)."""
    for statement in module.body:
        if is_main_guard(statement) or isinstance(statement, (cst.For, cst.While, cst.With)):
            return True
        if isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Expr) and isinstance(small.value, (cst.Call, cst.Await)) for small in statement.body
        ):
            return True
    return False
