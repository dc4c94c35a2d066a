"""GL702 tfdata-no-prefetch."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.consumption import iterator_only_displayed
from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import TENSORFLOW
from gpulint.linter.analysis.loops import STEP_SHAPES
from gpulint.linter.analysis.nodes import dotted_name, keyword_arg, method_name
from gpulint.linter.analysis.values import target_key
from gpulint.linter.analysis.vocabulary import KINDS, OPTS_OUT_OF_PREFETCH_TOKENS, TFDATA_CHAIN
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT

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
_COMBINING_CONSTRUCTORS = (
    "zip",
    "sample_from_datasets",
    "choose_from_datasets",
    "concatenate",
    "load",
    "from_generator",
)
_CONSUMING_METHODS = frozenset({"fit", "evaluate", "predict"})
# Stages that do work on every element: after a prefetch they make the consumer wait again.
_WORK_STAGES = frozenset(
    "batch bucket_by_sequence_length filter flat_map group_by_window interleave map padded_batch ragged_batch "
    "rebatch scan sparse_batch unbatch window".split()
)

# Stages that run a function on every element (decoding, augmenting): work worth overlapping.
_FUNCTION_STAGES = frozenset("map flat_map interleave filter scan group_by_window parallel_interleave".split())
# Constructors that slice data already in memory.
_IN_MEMORY_CONSTRUCTORS = frozenset({"from_tensor_slices", "from_tensors", "range"})


class TfDataNoPrefetch(Rule):
    """
    ## What it finds
    A tf.data pipeline consumed -- passed to `fit`/`evaluate`/`predict`, iterated by a training
    loop (a `for` that makes a training step), or handed to `iter(...)` -- when no definition of it
    has a `.prefetch(...)`.  Loops that only look at outputs (`for out in ds.take(1)`, evaluation)
    and `next(iter(ds))` are not reported: there is no step to overlap with; nor is an iterator
    (`batches = iter(ds)`) read only by a loop that shows images (matplotlib, `cv2.imshow`) and
    trains nothing.  Nor is a pipeline
    that only slices data in memory (`from_tensor_slices(...)` with `shuffle`/`batch`/`repeat`
    and no `map` or other per-element function): there is no input work to overlap.

    ## Why it is slow
    Without a prefetch, the pipeline produces the next batch only when the training step asks for
    it: input work and the step take turns instead of overlapping, so the GPU waits for every batch
    (the TF Profiler calls 5% of step time waiting for input moderate and 20% high).
    `.prefetch(tf.data.AUTOTUNE)` prepares the next batches in the background while the step runs.

    TensorFlow 2.13 and later inject that prefetch by themselves (`inject_prefetch`, on by
    default), so the rule reports only where that does not happen: a project whose requirements
    allow a TensorFlow older than 2.13 (`tensorflow>=2.10`, or `target-tensorflow = "2.10"` in
    `[tool.gpulint]`), or a module that turns it off (`inject_prefetch = False`,
    `autotune.enabled = False`).  A project whose TensorFlow is not known gets today's, so it is
    not reported there.

    ## Example
    ```python
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    train_ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(64).with_options(options)
    model.fit(train_ds, epochs=10)
    ```
    Use instead:
    ```python
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    train_ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(64).with_options(options)
    model.fit(train_ds.prefetch(tf.data.AUTOTUNE), epochs=10)
    ```

    ## Fix (safe)
    Appends `.prefetch(tf.data.AUTOTUNE)` to the pipeline where it is consumed (with the module's
    own `tensorflow` alias; `tf.data.experimental.AUTOTUNE` for a TensorFlow older than 2.4, as
    GL701 writes it).  Safe: prefetching yields the same elements in the same order; it only
    overlaps producing them with consuming them (at the cost of a few batches of host memory).
    Pipelines that keras' `*_dataset_from_directory` or `tfds.load` built (they prefetch already),
    or that arrive as parameters, are not reported.
    """

    code = "GL702"
    name = "tfdata-no-prefetch"
    message = "tf.data pipeline consumed without `.prefetch(...)`: input and training steps take turns"
    requires = {TENSORFLOW}
    tokens = ("tf.data", "tensorflow", "tfds", "dataset_from_directory")  # a tf.data pipeline is built here
    # where the pipeline is consumed (`fit`..., `iter(...)`, a training loop: it holds a step), and
    # the constructor that built it (its qualified name ends in one)
    triggers = (
        (*(f".{method}(" for method in sorted(_CONSUMING_METHODS)), "iter(", *STEP_SHAPES),
        tuple(sorted({constructor.rstrip(".").rsplit(".", 1)[1] for constructor in KINDS["tfdata"].constructors})),
    )
    # Where TensorFlow prefetches by itself, the rule fires only where the code turns that off.
    tokens_if_prefetch_injected = OPTS_OUT_OF_PREFETCH_TOKENS
    fix_applicability = Applicability.SAFE

    VALID = [
        # an iterator read only by a loop that shows images and trains nothing
        Valid(
            """
            import time
            import matplotlib.pyplot as plt
            options = tf.data.Options()
            options.experimental_optimization.inject_prefetch = False
            ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(8).with_options(options)
            batches = iter(ds)
            while True:
                images, labels = next(batches)
                plt.imshow(images[0])
                plt.show()
                time.sleep(0.5)
            """,
            header=TF_SCRIPT,
        ),
        # TensorFlow 2.13 and later (or not known: today's) inject the final prefetch
        Valid(
            """
            ds = tf.data.Dataset.from_tensor_slices(files).map(parse).batch(32)
            model.fit(ds, epochs=3)
            """,
            header=TF_SCRIPT,
        ),
        Valid(
            """
            ds = tf.data.Dataset.from_tensor_slices(files).map(parse).batch(32)
            model.fit(ds, epochs=3)
            """,
            header=TF_SCRIPT,
            target_tensorflow=(2, 13),
        ),
        # in-memory slices with no per-element function: nothing to overlap
        Valid(
            """
            train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(1024).batch(64)
            model.fit(train_ds, epochs=10)
            """,
            header=TF_SCRIPT,
        ),
        # inspection is not consumption for training (keras' own tests)
        Valid(
            """
            ds = tf.data.Dataset.from_tensor_slices(x).batch(2).map(layer)
            for output in ds.take(1):
                check(output)
            first = next(iter(ds)).numpy()
            for x, y in ds:
                preds.append(model(x))
            """,
            header=TF_SCRIPT,
        ),
        Valid(
            """
            import keras
            ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
            ds = ds.prefetch(tf.data.AUTOTUNE)
            model.fit(ds)
            images = keras.utils.image_dataset_from_directory("data/")  # prefetches itself
            model.fit(images)

            def train(dataset: tf.data.Dataset):
                model.fit(dataset)  # a parameter: the caller may prefetch

            for row in rows_list:  # not tf.data
                pass
            zipped = tf.data.Dataset.zip((ds, ds))
            model.fit(zipped)
            dev = tf.data.Dataset.range(4).apply(tf.data.experimental.prefetch_to_device("/gpu:0"))
            model.fit(dev)
            # model.fit(ds) in a comment
            """,
            header=TF_SCRIPT,
        ),
        # not TensorFlow
        Valid(
            """
            import torch
            for batch in loader:
                pass
            """,
        ),
    ]
    INVALID = [
        # recent TensorFlow, but the module turns the injected prefetch off
        Invalid(
            """
            options = tf.data.Options()
            options.experimental_optimization.inject_prefetch = False
            ds = tf.data.Dataset.from_tensor_slices(files).map(parse).batch(32).with_options(options)
            model.fit(ds, epochs=3)
            """,
            "5:11",
            header=TF_SCRIPT,
            fixed="""
            options = tf.data.Options()
            options.experimental_optimization.inject_prefetch = False
            ds = tf.data.Dataset.from_tensor_slices(files).map(parse).batch(32).with_options(options)
            model.fit(ds.prefetch(tf.data.AUTOTUNE), epochs=3)
            """,
        ),
        # fit/evaluate, a training loop, iter(), validation_data
        Invalid(
            """
            ds = tf.data.Dataset.from_tensor_slices((files, y)).map(parse).batch(32)
            model.fit(ds, epochs=3)
            model.evaluate(x=ds)
            for batch in ds:
                model.train_on_batch(batch)
            for i, batch in enumerate(ds):
                model.train_on_batch(batch)
            it = iter(ds)
            model.fit(other, validation_data=ds)
            """,
            "3:11",
            "4:18",
            "5:14",
            "7:27",
            "9:11",
            "10:34",
            header=TF_SCRIPT,
            target_tensorflow=(2, 12),
            fixed="""
            ds = tf.data.Dataset.from_tensor_slices((files, y)).map(parse).batch(32)
            model.fit(ds.prefetch(tf.data.AUTOTUNE), epochs=3)
            model.evaluate(x=ds.prefetch(tf.data.AUTOTUNE))
            for batch in ds.prefetch(tf.data.AUTOTUNE):
                model.train_on_batch(batch)
            for i, batch in enumerate(ds.prefetch(tf.data.AUTOTUNE)):
                model.train_on_batch(batch)
            it = iter(ds.prefetch(tf.data.AUTOTUNE))
            model.fit(other, validation_data=ds.prefetch(tf.data.AUTOTUNE))
            """,
        ),
        # the fix prefetches where the pipeline is consumed
        Invalid(
            """
            ds = tf.data.Dataset.range(10).map(make).batch(2)
            for epoch in range(3):
                for batch in ds:  # train
                    model.train_on_batch(batch)
            model.fit(ds.shuffle(4), epochs=1)
            """,
            "4:18",
            "6:11",
            header=TF_SCRIPT,
            target_tensorflow=(2, 10),
            fixed="""
            ds = tf.data.Dataset.range(10).map(make).batch(2)
            for epoch in range(3):
                for batch in ds.prefetch(tf.data.AUTOTUNE):  # train
                    model.train_on_batch(batch)
            model.fit(ds.shuffle(4).prefetch(tf.data.AUTOTUNE), epochs=1)
            """,
        ),
        # no module alias: the fix imports tensorflow
        Invalid(
            """
            from tensorflow.data import Dataset
            ds = Dataset.range(3).map(make)
            for b in ds:
                model.train_on_batch(b)
            """,
            "3:10",
            target_tensorflow=(2, 12),
            fixed="""
            import tensorflow
            from tensorflow.data import Dataset
            ds = Dataset.range(3).map(make)
            for b in ds.prefetch(tensorflow.data.AUTOTUNE):
                model.train_on_batch(b)
            """,
        ),
        # a project on TensorFlow 2.1: `tf.data.AUTOTUNE` comes with 2.4, the experimental name is older
        Invalid(
            """
            ds = tf.data.Dataset.range(3).map(make)
            for b in ds:
                model.train_on_batch(b)
            """,
            "3:10",
            header=TF_SCRIPT,
            target_tensorflow=(2, 1),
            fixed="""
            ds = tf.data.Dataset.range(3).map(make)
            for b in ds.prefetch(tf.data.experimental.AUTOTUNE):
                model.train_on_batch(b)
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
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
            arg = self.ctx.parent(node)
            parent = self.ctx.parent(arg) if arg is not None else None  # Call -> Arg -> Call
            if isinstance(parent, cst.Call) and dotted_name(parent.func) == "next":
                return  # `next(iter(ds))` looks at one element: nothing to overlap
            if iterator_only_displayed(self.ctx, node):
                return  # `batches = iter(ds)` read only by a loop that shows images: nothing trains
            if len(node.args) == 1 and not node.args[0].star:
                self._check(node.args[0].value)

    def visit_For(self, node: cst.For) -> None:
        # Only training loops: a loop that inspects outputs (`for out in ds.take(1)`) or evaluates
        # has no step for the input to overlap with.
        if not self.ctx.loops.is_step_loop(node):
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
        if self.ctx.tf.injects_prefetch:
            return  # TensorFlow ends the pipeline with a prefetch itself
        if not self.ctx.values.is_kind(expr, "tfdata") or not _lacks_prefetch(self.ctx, expr, set()):
            return
        fix = None
        if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            autotune, imports = self.ctx.tf.autotune(expr)
            prefetched = cst.Call(
                func=cst.Attribute(value=expr, attr=cst.Name("prefetch")),
                args=[cst.Arg(cst.parse_expression(autotune))],
            )
            fix = Fix(Applicability.SAFE, f"Prefetch: `.prefetch({autotune})`", {expr: prefetched}, imports)
        self.report(expr, fix=fix)


def _lacks_prefetch(
    ctx: FileContext, expr: cst.BaseExpression, seen: set, worked: bool = False, mapped: bool = False
) -> bool:
    """True only when every definition of the pipeline is known and none ends with a prefetch.

    A prefetch (explicit, or the one `tfds.load` and Keras' dataset utilities end with) counts
    only when no stage that does work per element (`map`, `batch`, ...) follows it: after
    `tfds.load(...).map(f).batch(64)` the consumer waits for `map` and `batch` again.
    Flow-insensitive on purpose: a `ds = ds.prefetch(...)` anywhere in the module counts, and
    anything not followed to a tf.data constructor (a parameter no call here gives a value, an
    annotation, a function of another module) counts as prefetched -- a missed finding is cheaper
    than a false one.

    A pipeline that slices data already in memory (`from_tensor_slices`, `from_tensors`, `range`)
    and runs no per-element function on it (`map`, `interleave`, ...: only `shuffle`, `batch`,
    `repeat`, `cache`) lacks nothing: producing a batch is a slice of memory, with nothing to
    overlap."""
    if (
        isinstance(expr, cst.Subscript)
        and isinstance(expr.value, cst.Call)
        and ctx.values.function_key(expr.value) is None
    ):
        expr = expr.value  # `tfds.load(...)["train"]`: a split of what the call built
    if isinstance(expr, cst.Call) and ctx.values.function_key(expr) is None:
        qualified = ctx.call_qualified_name(expr)
        if qualified is not None:
            if qualified in _PREFETCHING_CONSTRUCTORS:
                return worked
            if qualified.rsplit(".", 1)[-1] in _IN_MEMORY_CONSTRUCTORS:
                return mapped
            if qualified.rsplit(".", 1)[-1] in _COMBINING_CONSTRUCTORS:
                return False
            return KINDS["tfdata"].matches(qualified)
        method = method_name(expr)
        if method == "prefetch" or (method == "apply" and "prefetch" in ctx.code(expr)):
            return worked  # (`apply(tf.data.experimental.prefetch_to_device(...))`)
        if method is None or method not in TFDATA_CHAIN:
            return False
        assert isinstance(expr.func, cst.Attribute)  # a method call (method_name gave a name)
        return _lacks_prefetch(
            ctx, expr.func.value, seen, worked or method in _WORK_STAGES, mapped or method in _FUNCTION_STAGES
        )
    origins = ctx.values.origins(expr)
    if not origins:
        return False
    marker = target_key(expr) or id(expr)
    if marker in seen:
        return True  # `ds = ds.map(f)`: the other definitions decide
    seen.add(marker)
    try:
        return all(_lacks_prefetch(ctx, origin, seen, worked, mapped) for origin in origins)
    finally:
        seen.discard(marker)
