"""GL708 keras-python-input."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.facts import TENSORFLOW
from gpulint.linter.analysis.loops import is_method
from gpulint.linter.analysis.nodes import keyword_arg, method_name
from gpulint.linter.analysis.values import target_key
from gpulint.linter.analysis.walk import iter_children
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT


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
    import tensorflow as tf

    model.fit(train_ds.as_numpy_iterator(), epochs=5)
    ```
    Use instead a tf.data pipeline (`tf.data.Dataset.from_tensor_slices(...)`, or
    `from_generator` with parallel `map`), passed as is:
    ```python
    import tensorflow as tf

    model.fit(train_ds.prefetch(tf.data.AUTOTUNE), epochs=5)
    ```

    ## Fix
    None: the input pipeline has to be rewritten by a person.  A hint: opt in with
    `--select GL708`.
    """

    code = "GL708"
    name = "keras-python-input"
    message = "Keras `fit` fed from Python ({what}): batches are produced one at a time under the GIL"
    title = (
        "Keras `fit` fed from Python (a generator or a `Sequence`): batches are produced one at a time under the GIL"
    )
    requires = {TENSORFLOW}
    tokens = ("yield", "as_numpy_iterator", "as_numpy(")
    default = "hint"

    VALID = [
        Valid(
            """
            def make_ds():
                return tf.data.Dataset.range(3)

            class Loader:
                def __iter__(self):
                    yield 1

            model.fit(make_ds())
            model.fit(x_train, y_train)
            model.fit(Loader())
            clf.fit(X, y)
            """,
            header=TF_SCRIPT,
        ),
        # no TensorFlow: sklearn and friends
        Valid(
            """
            def g():
                yield 1
            clf.fit(g())
            """,
        ),
    ]
    INVALID = [
        Invalid(
            """
            def batches():
                while True:
                    yield x, y

            gen = batches()
            model.fit(batches(), steps_per_epoch=10)
            model.fit(gen, steps_per_epoch=10)
            model.fit(ds.as_numpy_iterator())
            model.fit(x=((a, b) for a, b in pairs))
            """,
            "7:11",
            "8:11",
            "9:11",
            "10:14",
            header=TF_SCRIPT,
        ),
    ]

    @cached_property
    def _generator_functions(self) -> set[str]:
        """The module-level generator functions of this module (by name)."""
        return {
            function.name.value
            for function in self.ctx.index.nodes("FunctionDef")
            if not is_method(self.ctx.index, function) and _yields(function)
        }

    def visit_Call(self, node: cst.Call) -> None:
        if method_name(node) not in ("fit", "fit_generator"):
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
            if isinstance(expr.func, cst.Name) and expr.func.value in self._generator_functions:
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
