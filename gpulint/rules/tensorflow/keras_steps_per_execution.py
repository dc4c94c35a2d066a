"""GL705 keras-steps-per-execution."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import TENSORFLOW
from gpulint.linter.analysis.nodes import has_star_kwargs, keyword_arg, method_name
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, RuleOption, Valid, positive_int
from gpulint.rules.case_headers import TF_SCRIPT

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
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not _keras_compile_call(self.ctx, node) or has_star_kwargs(node):
            return
        if keyword_arg(node, "steps_per_execution") is not None:
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
