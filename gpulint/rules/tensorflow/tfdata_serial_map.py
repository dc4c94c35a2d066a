"""GL701 tfdata-serial-map."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.consumption import pipeline_consumed
from gpulint.linter.analysis.facts import TENSORFLOW
from gpulint.linter.analysis.nodes import has_star_kwargs, keyword_arg, method_name, positional_args
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT

# Positional index of `num_parallel_calls` in each tf.data method.
_PARALLEL_POSITION = {"map": 1, "interleave": 3}


class TfDataSerialMap(Rule):
    """
    ## What it finds
    `Dataset.map(...)` and `Dataset.interleave(...)` on a tf.data pipeline without
    `num_parallel_calls`, unless the pipeline is never consumed or only peeked at once (`for x in
    ds.take(1)`, `next(iter(ds))` to show a sample).  A `map` cached right after is still
    reported: the whole first epoch waits for it, one element at a time (decoding audio, running
    an embedding model), and that is usually the epoch that costs most.  TensorFlow 2.13 and later run a
    stateless `map` in parallel by themselves (`map_parallelization`, on by default): there a
    `map` is reported only when its function is not known to be stateless -- it draws random
    numbers (`tf.random.*`, a Keras augmentation layer), runs Python (`tf.py_function`), or is not
    a TensorFlow op, a lambda or a function of the module (a stateless Keras preprocessing layer,
    `Rescaling`, counts as an op) -- or when the project targets an older TensorFlow (its
    requirements, `target-tensorflow`) or turns `map_parallelization` off.  A function whose name
    the module binds to two different things (a notebook with `resize = keras.Sequential([...])`
    in one cell and `def resize(...)` in another) is not guessed at: which one runs depends on the
    order the cells ran, so it is not reported on recent TensorFlow.

    ## Why it is slow
    Without `num_parallel_calls`, tf.data runs the mapped function on one element at a time, on one
    core: decoding and augmentation become a single-threaded bottleneck while the other cores and
    the GPU wait.  The TF Profiler calls a step input-bound when input takes 5% of step time
    (moderate) or 20% (high); a serial `map` is the most common cause.

    ## Example
    ```python
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices(files).map(decode).batch(64)
    ```
    (`decode` is a function of another module: whether it is stateless is not known.)
    Use instead:
    ```python
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices(files).map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(64)
    ```

    ## Fix (safe)
    Adds `num_parallel_calls=tf.data.AUTOTUNE` (spelled with the module's own `tensorflow` alias).
    Safe: parallel `map` keeps the order of elements (`deterministic` defaults to true), so the
    pipeline yields the same elements in the same order.  Only receivers known to be tf.data
    datasets are reported: `.map` on anything else is never touched.
    """

    code = "GL701"
    name = "tfdata-serial-map"
    message = "tf.data `.{method}()` without `num_parallel_calls` runs on one core"
    title = "tf.data `.map()` or `.interleave()` without `num_parallel_calls` runs on one core"
    requires = {TENSORFLOW}
    tokens = (".map(", ".interleave(")
    fix_applicability = Applicability.SAFE

    VALID = [
        # a pipeline only peeked at once, to show a sample
        Valid(
            """
            def show(files):
                ds = tf.data.Dataset.from_tensor_slices(files).map(load_and_augment).batch(9)
                for images in ds.take(1):
                    plot(images)
            """,
            header=TF_SCRIPT,
        ),
        # stateless functions: TensorFlow 2.13 and later (or not known: today's) parallelise them
        Valid(
            """
            def scale(image, label):
                return tf.cast(image, tf.float32) / 255.0, label
            ds = tf.data.Dataset.from_tensor_slices((x, y)).map(scale).map(lambda a, b: (tf.reshape(a, [-1]), b))
            """,
            header=TF_SCRIPT,
        ),
        # a TensorFlow op given as the function; a name bound to a lambda; a stateless Keras
        # preprocessing layer; a method of the module that sets static shapes
        Valid(
            """
            ds = tf.data.Dataset.from_tensor_slices([1, 5, 3]).map(tf.range)
            squares = tf.data.Dataset.from_tensor_slices(x).map(tf.math.square).batch(2)
            drop_fold = lambda embedding, label, fold: (embedding, label)
            ds = tf.data.Dataset.from_tensor_slices((e, y, k)).map(drop_fold)
            rescale = tf.keras.layers.Rescaling(1.0 / 255)
            images = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (rescale(a), b))

            def split_window(self, features):
                inputs = features[:, self.input_slice, :]
                inputs.set_shape([None, self.input_width, None])
                return inputs

            def make_dataset(self, data):
                ds = tf.data.Dataset.from_tensor_slices(data)
                ds = ds.map(self.split_window)
                return ds
            """,
            header=TF_SCRIPT,
        ),
        # a name bound to two different things (a model and a function of one notebook): which
        # one the map runs is not known, so it is not guessed at
        Valid(
            """
            resize_and_rescale = tf.keras.Sequential([tf.keras.layers.Resizing(180, 180), augment])
            aug_ds = train_ds.map(lambda x, y: (resize_and_rescale(x, training=True), y))

            def resize_and_rescale(image, label):
                return tf.image.resize(tf.cast(image, tf.float32), [180, 180]) / 255.0, label

            train_ds = tf.data.Dataset.from_tensor_slices((x, y))
            val_ds = tf.data.Dataset.from_tensor_slices((x, y)).map(resize_and_rescale)
            model.fit(aug_ds, validation_data=val_ds)
            """,
            header=TF_SCRIPT,
        ),
        Valid(
            """
            ds = tf.data.Dataset.range(10).map(f, num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.map(f, 8)  # positional num_parallel_calls
            ds = ds.map(f, **opts)
            rdd = spark_rdd.map(f)  # not tf.data
            squares = map(f, xs)  # builtin
            # ds.map(decode) in a comment
            text = "ds.map(decode)"
            """,
            header=TF_SCRIPT,
        ),
    ]
    INVALID = [
        # random numbers, Python, a function of another module; a stateless one on TensorFlow 2.12
        Invalid(
            """
            def jitter(image, label):
                return image + tf.random.normal(tf.shape(image)), label
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            ds = ds.map(jitter)
            ds = ds.map(lambda a: tf.py_function(f, [a], t))
            ds = ds.map(preprocess)
            """,
            "5:6",
            "6:6",
            "7:6",
            header=TF_SCRIPT,
            fixed="""
            def jitter(image, label):
                return image + tf.random.normal(tf.shape(image)), label
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            ds = ds.map(jitter, num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.map(lambda a: tf.py_function(f, [a], t), num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
            """,
        ),
        # the same name bound once, to a model that draws random numbers: reported
        Invalid(
            """
            augment = tf.keras.Sequential([tf.keras.layers.RandomFlip("horizontal")])
            train_ds = tf.data.Dataset.from_tensor_slices((x, y))
            aug = train_ds.map(lambda x, y: (augment(x), y))
            model.fit(aug)
            """,
            "4:7",
            header=TF_SCRIPT,
            fixed="""
            augment = tf.keras.Sequential([tf.keras.layers.RandomFlip("horizontal")])
            train_ds = tf.data.Dataset.from_tensor_slices((x, y))
            aug = train_ds.map(lambda x, y: (augment(x), y), num_parallel_calls=tf.data.AUTOTUNE)
            model.fit(aug)
            """,
        ),
        Invalid(
            """
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            ds = ds.map(lambda a, b: (a / 255, b))
            """,
            "3:6",
            header=TF_SCRIPT,
            target_tensorflow=(2, 12),
            fixed="""
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            ds = ds.map(lambda a, b: (a / 255, b), num_parallel_calls=tf.data.AUTOTUNE)
            """,
        ),
        # cached right after: the whole first epoch still waits for the map, one element at a time
        Invalid(
            """
            raw_train = tf.data.TFRecordDataset(files)
            train = raw_train.map(vectorize_text)
            train = train.cache().prefetch(tf.data.AUTOTUNE)
            model.fit(train, epochs=10)
            """,
            "3:9",
            header=TF_SCRIPT,
            fixed="""
            raw_train = tf.data.TFRecordDataset(files)
            train = raw_train.map(vectorize_text, num_parallel_calls=tf.data.AUTOTUNE)
            train = train.cache().prefetch(tf.data.AUTOTUNE)
            model.fit(train, epochs=10)
            """,
        ),
        # read before it is cached: every epoch pays for the map
        Invalid(
            """
            train = tf.data.TFRecordDataset(files).map(decode)
            model.fit(train.batch(32))
            train = train.cache()
            """,
            "2:40",
            header=TF_SCRIPT,
            fixed="""
            train = tf.data.TFRecordDataset(files).map(decode, num_parallel_calls=tf.data.AUTOTUNE)
            model.fit(train.batch(32))
            train = train.cache()
            """,
        ),
        Invalid(
            """
            ds = tf.data.Dataset.from_tensor_slices(files).map(decode).batch(32)
            ds2 = tf.data.TFRecordDataset(files).interleave(read, cycle_length=4)
            """,
            "2:48",
            "3:38",
            header=TF_SCRIPT,
            fixed="""
            ds = (
                tf.data.Dataset.from_tensor_slices(files)
                .map(decode, num_parallel_calls=tf.data.AUTOTUNE)
                .batch(32)
            )
            ds2 = tf.data.TFRecordDataset(files).interleave(
                read, cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE
            )
            """,
        ),
        # aliases
        Invalid(
            """
            from tensorflow import data as tfd
            ds = tfd.Dataset.range(3).map(f)
            """,
            "2:27",
            fixed="""
            from tensorflow import data as tfd
            ds = tfd.Dataset.range(3).map(f, num_parallel_calls=tfd.AUTOTUNE)
            """,
        ),
        Invalid(
            """
            from tensorflow.data import Dataset as D
            ds = D.range(3)
            ds = ds.map(f)
            """,
            "3:6",
            fixed="""
            import tensorflow
            from tensorflow.data import Dataset as D
            ds = D.range(3)
            ds = ds.map(f, num_parallel_calls=tensorflow.data.AUTOTUNE)
            """,
        ),
        # the fix keeps the rest
        Invalid(
            """
            # build the pipeline
            ds = tf.data.Dataset.range(10).map(f)  # decode
            x = 1  # untouched
            """,
            "3:32",
            header=TF_SCRIPT,
            fixed="""
            # build the pipeline
            ds = tf.data.Dataset.range(10).map(f, num_parallel_calls=tf.data.AUTOTUNE)  # decode
            x = 1  # untouched
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        method = method_name(node)
        if method not in _PARALLEL_POSITION or has_star_kwargs(node):
            return
        if keyword_arg(node, "num_parallel_calls") is not None:
            return
        if len(positional_args(node)) > _PARALLEL_POSITION[method]:
            return
        assert isinstance(node.func, cst.Attribute)  # a method call: `method` is one of _PARALLEL_POSITION
        if not self.ctx.values.is_kind(node.func.value, "tfdata") or not pipeline_consumed(self.ctx, node):
            return
        if method == "map" and self.ctx.tf.parallelises_stateless_maps:
            mapped = keyword_arg(node, "map_func")
            function = mapped.value if mapped is not None else (node.args[0].value if node.args else None)
            if function is not None and self.ctx.tf.stateless(function):
                return  # TensorFlow runs it in parallel by itself
            if function is not None and self.ctx.tf.bound_ambiguously(function):
                return  # stateless or not depends on which binding runs: not guessed
        autotune, imports = self.ctx.reference("tensorflow.data.AUTOTUNE")
        self.report(
            node,
            message=self.message.format(method=method),
            fix=set_keyword(
                self.ctx,
                node,
                "num_parallel_calls",
                autotune,
                Applicability.SAFE,
                f"Run `{method}` in parallel: `num_parallel_calls={autotune}`",
                imports,
            ),
        )
