"""GL703 tfdata-py-function."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.consumption import pipeline_consumed
from gpulint.linter.analysis.facts import TENSORFLOW
from gpulint.linter.analysis.nodes import dotted_name, keyword_arg, method_name
from gpulint.linter.analysis.project import TF_PYTHON_CALLS as _PY_FUNCTIONS
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT

_MAPPING_METHODS = {"map": "map_func", "flat_map": "map_func", "interleave": "map_func", "filter": "predicate"}


class TfDataPyFunction(Rule):
    """
    ## What it finds
    `tf.py_function(...)` or `tf.numpy_function(...)` inside a function that a tf.data pipeline maps
    (`.map`, `.flat_map`, `.interleave`, `.filter`) -- a function or a lambda -- directly or through
    functions it calls, or a function of another module of the project that does (reported at its
    call in the mapped lambda or function: `ds.map(lambda x: load(x))`).  A pipeline that is never
    consumed, or only peeked at once (`for x in ds.take(1):` to show a sample, and nothing trains
    on it), runs its Python a few times: not reported; nor is a module that writes TFRecord files
    and trains nothing (a one-off conversion of a dataset, where nothing waits for the pipeline).

    ## Why it is slow
    A Python function inside a tf.data graph runs in the Python interpreter and holds the GIL:
    however large `num_parallel_calls` is, those elements are produced one at a time, and every
    call copies tensors out of and back into TensorFlow.  The pipeline is capped at what one Python
    thread can do, and the TF Profiler shows the step input-bound (20% of step time waiting is
    "high").

    ## Example
    ```python
    import numpy as np
    import tensorflow as tf

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
    hint_by_default = MOSTLY_NOT_WANTED
    message = "`{name}` in a tf.data mapped function runs in Python under the GIL, one element at a time"
    _elsewhere = (
        "`{name}()` runs `tf.py_function` or `tf.numpy_function` (another module of the project) in a tf.data "
        "mapped function: Python under the GIL, one element at a time"
    )
    title = "Python code in a tf.data mapped function runs under the GIL, one element at a time"
    requires = {TENSORFLOW}
    # the mapping call (the Python call itself may be in another module of the project)
    tokens = (".map(", ".flat_map(", ".interleave(", ".filter(")

    VALID = [
        Valid(
            """
            def debug(x):
                return tf.py_function(print_it, [x], [])  # not mapped by tf.data

            @tf.function
            def step(x):
                debug(x)

            ds = tf.data.Dataset.range(3).map(lambda x: x * 2)
            # ds.map(lambda x: tf.py_function(f, [x], tf.int64)) in a comment
            """,
            header=TF_SCRIPT,
        ),
        # a pipeline only peeked at once, to show a sample; nothing trains on it
        Valid(
            """
            def load(path):
                return tf.py_function(read, [path], tf.float32)

            def show(paths):
                ds = tf.data.Dataset.from_tensor_slices(paths).map(lambda p: load(p)).batch(4)
                for images in ds.take(1):
                    plot(images)

            preview = tf.data.Dataset.from_tensor_slices(paths).map(load)
            for image in preview.take(1):
                print(image.shape)
            """,
            header=TF_SCRIPT,
        ),
        # a one-off conversion to TFRecords: nothing is trained
        Valid(
            """
            def serialize(feature, label):
                return tf.py_function(to_example_bytes, (feature, label), tf.string)

            serialized = tf.data.Dataset.from_tensor_slices((features, labels)).map(serialize)
            writer = tf.data.experimental.TFRecordWriter("out.tfrecord")
            with tf.io.TFRecordWriter("copy.tfrecord") as copy:
                for record in serialized:
                    copy.write(record.numpy())
            """,
            header=TF_SCRIPT,
        ),
    ]
    INVALID = [
        # in a mapped function, a function it calls, a mapped lambda
        Invalid(
            """
            def load(path):
                return tf.py_function(read, [path], tf.float32)

            def helper(x):
                return tf.numpy_function(np.sin, [x], tf.float32)

            def outer(x):
                return helper(x)

            ds = tf.data.Dataset.from_tensor_slices(paths).map(load)
            ds = ds.map(outer, num_parallel_calls=8)
            ds = ds.map(lambda x: tf.numpy_function(np.cos, [x], tf.float32))

            def decode(x):
                return tf.py_function(parse, [x], tf.string)

            ds = ds.map(lambda x, y: (decode(x), y), num_parallel_calls=4)
            """,
            "3:12",
            "6:12",
            "13:23",
            "16:12",
            header=TF_SCRIPT,
        ),
        # a lambda calling a function of the module, mapped serially, the pipeline trained on
        Invalid(
            """
            def load(x):
                return tf.py_function(read_image, [x], tf.float32)

            def make_dataset(paths):
                ds = tf.data.Dataset.from_tensor_slices(paths)
                return ds.map(lambda x: load(x)).batch(32)

            model.fit(make_dataset(paths), epochs=3)
            """,
            "3:12",
            header=TF_SCRIPT,
        ),
        # aliased
        Invalid(
            """
            from tensorflow import numpy_function as npf
            import tensorflow as tf
            ds = tf.data.Dataset.range(3).map(lambda x: npf(f, [x], tf.int64))
            """,
            "3:45",
        ),
    ]

    @cached_property
    def _mapped_functions(self) -> tuple[set[int], set[str]]:
        """(ids of mapped lambdas, names of mapped functions and what they call), to a fixpoint."""
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
            if argument is None or not pipeline_consumed(self.ctx, call):
                continue  # (a pipeline only peeked at, `for x in ds.take(1):`, runs a few elements once)
            function = argument.value
            if (
                isinstance(function, cst.Call)
                and (dotted_name(function.func) or "").endswith("partial")
                and function.args
            ):
                function = function.args[0].value  # functools.partial(fn, ...)
            if isinstance(function, cst.Lambda):
                lambdas.add(id(function))
            elif isinstance(function, cst.Name):
                names.add(function.value)
            elif isinstance(function, cst.Attribute) and dotted_name(function.value) in ("self", "cls"):
                names.add(function.attr.value)
        owners = [(call, self.ctx.enclosing_function(call)) for call in calls]
        in_lambda = {
            id(call)
            for call in calls
            if any(isinstance(a, cst.Lambda) and id(a) in lambdas for a in self.ctx.ancestors(call))
        }
        changed = bool(names or in_lambda)
        while changed:
            changed = False
            for call, owner in owners:
                if id(call) not in in_lambda and (owner is None or owner.name.value not in names):
                    continue
                func = call.func
                callee = (
                    func.value
                    if isinstance(func, cst.Name)
                    else (
                        func.attr.value
                        if isinstance(func, cst.Attribute) and dotted_name(func.value) in ("self", "cls")
                        else None
                    )
                )
                if callee is not None and callee not in names:
                    names.add(callee)
                    changed = True
        return lambdas, names

    def _runs_python_elsewhere(self, function: cst.BaseExpression) -> bool:
        """A function of another module of the project that calls `tf.py_function` (or the like),
        itself or through project functions it calls."""
        facts = self.ctx.project.callee(dotted_name(function))
        return facts is not None and facts.runs_python

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.tf.converts_once:
            return  # a one-off conversion to TFRecords: nothing waits for the pipeline
        qualified = self.ctx.call_qualified_name(node)
        elsewhere = qualified not in _PY_FUNCTIONS
        if elsewhere and not self._runs_python_elsewhere(node.func):
            return
        lambdas, names = self._mapped_functions
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.Lambda) and id(ancestor) in lambdas:
                break
            if isinstance(ancestor, cst.FunctionDef):
                if ancestor.name.value in names:
                    break
                if not any(
                    isinstance(a, cst.FunctionDef) and a.name.value in names for a in self.ctx.ancestors(ancestor)
                ):
                    return
                break
        else:
            return
        if elsewhere:
            self.report(node, message=self._elsewhere.format(name=dotted_name(node.func)))
        else:
            self.report(node, message=self.message.format(name=dotted_name(node.func) or qualified))
