"""GL701 tfdata-serial-map."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.consumption import pipeline_consumed
from gpulint.linter.analysis.facts import TENSORFLOW
from gpulint.linter.analysis.nodes import dotted_name, has_star_kwargs, keyword_arg, method_name, positional_args
from gpulint.linter.analysis.vocabulary import CLOCKS
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.findings import AUGMENTS_EVERY_ITEM, Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT

# Positional index of `num_parallel_calls` in each tf.data method.
_PARALLEL_POSITION = {"map": 1, "interleave": 3}


class TfDataSerialMap(Rule):
    """
    ## What it finds
    `Dataset.map(...)` and `Dataset.interleave(...)` on a tf.data pipeline without
    `num_parallel_calls`, unless the pipeline is never consumed, only peeked at once (`for x in
    ds.take(1)`, `next(iter(ds))` to show a sample), only browsed by a loop that shows images
    (matplotlib, `cv2.imshow`) or prints its elements and trains nothing, or only used to adapt a
    Keras preprocessing layer once (`vectorizer.adapt(ds)`), and not in a module that writes TFRecord files
    and trains nothing (a one-off conversion of a dataset).  A `map` cached right after is still
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
    order the cells ran, so it is not reported on recent TensorFlow.  A module whose pipeline
    options turn `map_parallelization` on (`options.experimental_optimization.map_parallelization
    = True`, then `ds.with_options(options)`) asked tf.data to parallelise its maps, on any
    TensorFlow version: there only a `map` whose function is known to be stateful (it calls
    `tf.random.*` or `tf.py_function` itself) is reported, since tf.data leaves that one serial.

    The rule's findings are held back by default (most were right but not worth acting on: small
    tutorial datasets, a map cached after it), except a `map` whose function draws random numbers
    for every element -- random augmentation: `tf.random.*`, `tf.image.random_*`, Keras' `Random*`
    layers, called by a lambda or function of the module, a model those layers are added to, or a
    layer class of the module -- which says so in its message and is shown: such findings were
    wanted on whole repositories (docs/precision.md).

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
    Adds `num_parallel_calls=tf.data.AUTOTUNE` (spelled with the module's own `tensorflow` alias;
    `tf.data.experimental.AUTOTUNE`, which TensorFlow 1.x has too, where the project's requirements
    or its README name a TensorFlow older than 2.4, or the module imports `tensorflow.compat.v1`;
    a project that names no version gets `tf.data.AUTOTUNE`).
    Safe: parallel `map` keeps the order of elements (`deterministic` defaults to true), so the
    pipeline yields the same elements in the same order.  Only receivers known to be tf.data
    datasets are reported: `.map` on anything else is never touched.

    No fix where the code shows the serial pipeline is meant (the finding stays, and says why):
    the same file runs the same work with `num_parallel_calls` elsewhere -- the same function, or
    a lambda calling the same functions (a guide's naive version next to its parallel one: the
    author knows the option and chose serial here) -- or the pipeline is handed, directly or by its
    name, to a function of the file that iterates it, reads a clock and trains nothing (a
    benchmark, whose baseline the fix would change).
    """

    code = "GL701"
    name = "tfdata-serial-map"
    hint_by_default = MOSTLY_NOT_WANTED
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
        # a one-off conversion: the pipeline is read once to write TFRecords, nothing is trained
        Valid(
            """
            def generate_samples(files):
                ds = tf.data.TFRecordDataset(files).map(parse_example)
                next_element = tf.compat.v1.data.make_one_shot_iterator(ds).get_next()
                with tf.compat.v1.Session() as sess:
                    while True:
                        yield sess.run(next_element)

            with tf.io.TFRecordWriter("train.tfrecord") as writer:
                for sample in generate_samples(files):
                    writer.write(serialize(sample))
            """,
            header=TF_SCRIPT,
        ),
        # a pipeline only browsed by a loop that shows images and trains nothing
        Valid(
            """
            import time
            import matplotlib.pyplot as plt
            ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(8)
            for images, labels in ds:
                plt.imshow(images[0])
                plt.show()
                time.sleep(0.5)
            """,
            header=TF_SCRIPT,
        ),
        # a pipeline whose loop only prints its elements; one only adapted to, once
        Valid(
            """
            ds = tf.data.Dataset.from_tensor_slices(sentences).map(lambda s: tf.py_function(clean, [s], tf.string))
            for element in ds:
                print(element.numpy().decode())
            raw_train = tf.data.TFRecordDataset(files)
            text_only = raw_train.map(lambda text, label: tokenize(text))
            vectorizer.adapt(text_only)
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
        # the pipeline's options ask tf.data to parallelise its maps (any TensorFlow version)
        Valid(
            """
            from data_utils import decode
            options = tf.data.Options()
            options.experimental_optimization.map_parallelization = True
            ds = tf.data.Dataset.from_tensor_slices(files).map(decode)
            ds = ds.with_options(options).batch(32)
            model.fit(ds, epochs=5)
            """,
            header=TF_SCRIPT,
            target_tensorflow=(2, 10),
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
        # random augmentation, per element (a layer class of the module built from random layers, a
        # model random layers are added to, a function drawing random numbers): evidence shown by
        # default; Python and a function of another module are held back with the rule
        Invalid(
            """
            class Augment(tf.keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.flip = tf.keras.layers.RandomFlip("horizontal")
                def call(self, image, label):
                    return self.flip(image), label
            zoom = tf.keras.Sequential()
            zoom.add(tf.keras.layers.RandomZoom(0.1))
            def jitter(image, label):
                return tf.image.random_brightness(image, 0.2), label
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            ds = ds.map(Augment())
            ds = ds.map(lambda a, b: (zoom(a), b))
            ds = ds.map(jitter)
            ds = ds.map(lambda a: tf.py_function(f, [a], t))
            ds = ds.map(preprocess)
            model.fit(ds)
            """,
            "13:6",
            "14:6",
            "15:6",
            "16:6",
            "17:6",
            header=TF_SCRIPT,
            messages=(
                *(
                    "tf.data `.map()` without `num_parallel_calls` runs on one core; its function augments every "
                    "element with random ops",
                )
                * 3,
                *("tf.data `.map()` without `num_parallel_calls` runs on one core",) * 2,
            ),
            hints=(None, None, None, MOSTLY_NOT_WANTED, MOSTLY_NOT_WANTED),
            fixed="""
            class Augment(tf.keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.flip = tf.keras.layers.RandomFlip("horizontal")
                def call(self, image, label):
                    return self.flip(image), label
            zoom = tf.keras.Sequential()
            zoom.add(tf.keras.layers.RandomZoom(0.1))
            def jitter(image, label):
                return tf.image.random_brightness(image, 0.2), label
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            ds = ds.map(Augment(), num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.map(lambda a, b: (zoom(a), b), num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.map(jitter, num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.map(lambda a: tf.py_function(f, [a], t), num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
            model.fit(ds)
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
        # map_parallelization asked for: a map known to be stateful stays serial all the same
        Invalid(
            """
            options = tf.data.Options()
            options.experimental_optimization.map_parallelization = True
            ds = tf.data.Dataset.from_tensor_slices(files).map(decode).with_options(options)
            ds = ds.map(lambda x: x + tf.random.uniform([]))
            model.fit(ds, epochs=5)
            """,
            "5:6",
            header=TF_SCRIPT,
            fixed="""
            options = tf.data.Options()
            options.experimental_optimization.map_parallelization = True
            ds = tf.data.Dataset.from_tensor_slices(files).map(decode).with_options(options)
            ds = ds.map(lambda x: x + tf.random.uniform([]), num_parallel_calls=tf.data.AUTOTUNE)
            model.fit(ds, epochs=5)
            """,
        ),
        # a loop that shows images and also trains consumes the pipeline
        Invalid(
            """
            import matplotlib.pyplot as plt
            ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(8)
            for images, labels in ds:
                plt.imshow(images[0])
                model.train_on_batch(images, labels)
            """,
            "3:49",
            header=TF_SCRIPT,
            fixed="""
            import matplotlib.pyplot as plt
            ds = (
                tf.data.Dataset.from_tensor_slices((x, y))
                .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
                .batch(8)
            )
            for images, labels in ds:
                plt.imshow(images[0])
                model.train_on_batch(images, labels)
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
        # serial on purpose, as the code shows: the same work run elsewhere with
        # `num_parallel_calls` (a guide's naive version before its parallel one; a lambda calling
        # the same function counts) -- reported, no fix; other work is fixed
        Invalid(
            """
            train = tf.data.TFRecordDataset(files)
            naive = tf.data.Dataset.range(2).interleave(lambda _: read_shard())
            model.fit(naive)
            fast = tf.data.Dataset.range(2).interleave(lambda _: read_shard(), num_parallel_calls=tf.data.AUTOTUNE)
            model.fit(fast)
            shown = train.map(lambda x, y: (augment(x, training=True), y))
            model.fit(shown)
            prepared = train.map(lambda image, label: (augment(image), label), num_parallel_calls=tf.data.AUTOTUNE)
            decoded = train.map(decode)
            model.fit(decoded)
            """,
            "3:34",
            "7:9",
            "10:11",
            header=TF_SCRIPT,
            messages=(
                "tf.data `.interleave()` without `num_parallel_calls` runs on one core (no fix: this file runs the "
                "same `interleave` with `num_parallel_calls` elsewhere)",
                "tf.data `.map()` without `num_parallel_calls` runs on one core (no fix: this file runs the same "
                "`map` with `num_parallel_calls` elsewhere)",
                "tf.data `.map()` without `num_parallel_calls` runs on one core",
            ),
            fixed="""
            train = tf.data.TFRecordDataset(files)
            naive = tf.data.Dataset.range(2).interleave(lambda _: read_shard())
            model.fit(naive)
            fast = tf.data.Dataset.range(2).interleave(lambda _: read_shard(), num_parallel_calls=tf.data.AUTOTUNE)
            model.fit(fast)
            shown = train.map(lambda x, y: (augment(x, training=True), y))
            model.fit(shown)
            prepared = train.map(lambda image, label: (augment(image), label), num_parallel_calls=tf.data.AUTOTUNE)
            decoded = train.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
            model.fit(decoded)
            """,
        ),
        # a pipeline handed to a function that times it and trains nothing (a benchmark of the
        # pipeline as written), directly or through its name: no fix; a training function that
        # also reads the clock is no benchmark
        Invalid(
            """
            import time
            def benchmark(dataset, num_epochs=2):
                start = time.perf_counter()
                for _ in range(num_epochs):
                    for sample in dataset:
                        time.sleep(0.01)
                print("Execution time:", time.perf_counter() - start)
            def train(dataset):
                start = time.time()
                model.fit(dataset, epochs=3)
                print(time.time() - start)
            benchmark(tf.data.Dataset.range(2).flat_map(make).map(naive_map).unbatch())
            slow = tf.data.Dataset.range(2).map(naive_map)
            benchmark(slow)
            train(tf.data.Dataset.range(2).map(naive_map))
            """,
            "13:51",
            "14:33",
            "16:32",
            header=TF_SCRIPT,
            messages=(
                "tf.data `.map()` without `num_parallel_calls` runs on one core (no fix: the pipeline is timed by "
                "`benchmark()`, a benchmark of it as written)",
                "tf.data `.map()` without `num_parallel_calls` runs on one core (no fix: the pipeline is timed by "
                "`benchmark()`, a benchmark of it as written)",
                "tf.data `.map()` without `num_parallel_calls` runs on one core",
            ),
            fixed="""
            import time
            def benchmark(dataset, num_epochs=2):
                start = time.perf_counter()
                for _ in range(num_epochs):
                    for sample in dataset:
                        time.sleep(0.01)
                print("Execution time:", time.perf_counter() - start)
            def train(dataset):
                start = time.time()
                model.fit(dataset, epochs=3)
                print(time.time() - start)
            benchmark(tf.data.Dataset.range(2).flat_map(make).map(naive_map).unbatch())
            slow = tf.data.Dataset.range(2).map(naive_map)
            benchmark(slow)
            train(tf.data.Dataset.range(2).map(naive_map, num_parallel_calls=tf.data.AUTOTUNE))
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
        # the TensorFlow the project names, by its requirements or its README, is older than 2.4
        Invalid(
            """
            from data_utils import decode
            ds = tf.data.TFRecordDataset(files).map(decode)
            model.fit(ds.batch(32), epochs=3)
            """,
            "3:37",
            header=TF_SCRIPT,
            target_tensorflow=(2, 0),
            fixed="""
            from data_utils import decode
            ds = tf.data.TFRecordDataset(files).map(
                decode, num_parallel_calls=tf.data.experimental.AUTOTUNE
            )
            model.fit(ds.batch(32), epochs=3)
            """,
        ),
        Invalid(
            """
            from data_utils import decode
            ds = tf.data.TFRecordDataset(files).map(decode)
            model.fit(ds.batch(32), epochs=3)
            """,
            "3:37",
            header=TF_SCRIPT,
            documented_tensorflow=(1, 15),
            fixed="""
            from data_utils import decode
            ds = tf.data.TFRecordDataset(files).map(
                decode, num_parallel_calls=tf.data.experimental.AUTOTUNE
            )
            model.fit(ds.batch(32), epochs=3)
            """,
        ),
        # a module on `tensorflow.compat.v1`: spelled through it, no second `import tensorflow`
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            from tensorflow.data import TFRecordDataset
            from data_utils import decode
            ds = TFRecordDataset(files).map(decode).batch(32)
            for batch in ds:
                step(batch)
            """,
            "4:29",
            fixed="""
            import tensorflow.compat.v1 as tf
            from tensorflow.data import TFRecordDataset
            from data_utils import decode
            ds = (
                TFRecordDataset(files)
                .map(decode, num_parallel_calls=tf.data.experimental.AUTOTUNE)
                .batch(32)
            )
            for batch in ds:
                step(batch)
            """,
        ),
        # the module imports `tf_data` only further down (a guide's next cell): not bound at the map yet
        Invalid(
            """
            from tensorflow.data import TFRecordDataset
            from data_utils import decode
            ds = TFRecordDataset(files).map(decode)
            model.fit(ds.batch(32), epochs=3)
            from tensorflow import data as tf_data
            """,
            "3:29",
            fixed="""
            import tensorflow
            from tensorflow.data import TFRecordDataset
            from data_utils import decode
            ds = TFRecordDataset(files).map(decode, num_parallel_calls=tensorflow.data.AUTOTUNE)
            model.fit(ds.batch(32), epochs=3)
            from tensorflow import data as tf_data
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
        if self.ctx.tf.converts_once:
            return  # a one-off conversion to TFRecords: nothing waits for the pipeline
        if method == "map" and self.ctx.tf.parallelises_stateless_maps:
            mapped = keyword_arg(node, "map_func")
            function = mapped.value if mapped is not None else (node.args[0].value if node.args else None)
            if function is not None and self.ctx.tf.stateless(function):
                return  # TensorFlow runs it in parallel by itself
            if function is not None and self.ctx.tf.bound_ambiguously(function):
                return  # stateless or not depends on which binding runs: not guessed
            if self.ctx.tf.asks_for_map_parallelization and not (
                function is not None and self.ctx.tf.known_stateful(function)
            ):
                return  # the options ask tf.data to parallelise it; only a stateful one stays serial
        message = self.message.format(method=method)
        deliberate = self._serial_on_purpose(node, method)
        if deliberate is not None:
            self.report(node, message=f"{message} (no fix: {deliberate})")
            return
        mapped_function = _mapped_function(node) if method == "map" else None
        augments = mapped_function is not None and self.ctx.tf.draws_random_numbers(mapped_function)
        if augments:
            message += "; its function augments every element with random ops"
        autotune, imports = self.ctx.tf.autotune(node)
        self.report_with_evidence(
            node,
            AUGMENTS_EVERY_ITEM if augments else None,
            message=message,
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

    def _serial_on_purpose(self, call: cst.Call, method: str) -> str | None:
        """Why the module's own code shows this `map` or `interleave` serial on purpose, or None:
        it runs the same work elsewhere with `num_parallel_calls` (the author knows the option and
        chose serial here: a guide's naive version next to its parallel one), or the pipeline is
        handed to a function of the module that times it and trains nothing (a benchmark, whose
        baseline the fix would change)."""
        work = _work(_mapped_function(call))
        if work is not None:
            for other in self.ctx.index.nodes("Call"):
                if other is call or method_name(other) != method or not _sets_parallelism(other, method):
                    continue
                if _work(_mapped_function(other)) == work:
                    return f"this file runs the same `{method}` with `num_parallel_calls` elsewhere"
        timer = self._timing_function_given(call)
        if timer is not None:
            return f"the pipeline is timed by `{timer}()`, a benchmark of it as written"
        return None

    def _timing_function_given(self, call: cst.Call) -> str | None:
        """The function of this module that the pipeline ending in `call`'s chain is handed to,
        directly or through the one name it is assigned to, when that function is a benchmark
        (`_timing_functions`)."""
        pipeline: cst.CSTNode = call
        while True:  # up the method chain: `call.batch(32).unbatch()`
            attribute = self.ctx.parent(pipeline)
            outer = self.ctx.parent(attribute) if attribute is not None else None
            if not (isinstance(attribute, cst.Attribute) and isinstance(outer, cst.Call) and outer.func is attribute):
                break
            pipeline = outer
        holder = self.ctx.parent(pipeline)
        name = None
        if (
            isinstance(holder, cst.Assign)
            and len(holder.targets) == 1
            and isinstance(holder.targets[0].target, cst.Name)
        ):
            name = holder.targets[0].target.value
        for timer in self.ctx.index.nodes("Call"):
            if not (isinstance(timer.func, cst.Name) and timer.func.value in self._timing_functions):
                continue
            for argument in timer.args:
                if argument.value is pipeline or (
                    isinstance(argument.value, cst.Name) and argument.value.value == name
                ):
                    return timer.func.value
        return None

    @cached_property
    def _timing_functions(self) -> frozenset[str]:
        """The functions of this module that iterate a parameter (`for sample in dataset:`), read a
        clock and train nothing (no training step, no Keras `fit`)."""
        found = set()
        for function in self.ctx.index.nodes("FunctionDef"):
            parameters = {param.name.value for param in function.params.params}
            nodes = list(nodes_under(function.body))
            calls = [node for node in nodes if isinstance(node, cst.Call)]
            if (
                any(isinstance(node, cst.For) and dotted_name(node.iter) in parameters for node in nodes)
                and any(CLOCKS.match(self.ctx.call_qualified_name(call) or "") for call in calls)
                and not any(self.ctx.loops.is_step_call(call) or method_name(call) == "fit" for call in calls)
            ):
                found.add(function.name.value)
        return frozenset(found)


def _mapped_function(call: cst.Call) -> cst.BaseExpression | None:
    """The function given to `map` or `interleave` (first argument, or `map_func=`)."""
    keyword = keyword_arg(call, "map_func")
    if keyword is not None:
        return keyword.value
    positional = positional_args(call)
    return positional[0].value if positional else None


def _sets_parallelism(call: cst.Call, method: str) -> bool:
    return (
        keyword_arg(call, "num_parallel_calls") is not None or len(positional_args(call)) > _PARALLEL_POSITION[method]
    )


def _work(function: cst.BaseExpression | None) -> str | None:
    """What a mapped function does, as a key to compare two maps by: a function's name (`naive_map`,
    `self.split_window`); for a lambda, the functions its body calls (`lambda x, y:
    (resize_and_rescale(x), y)` and `lambda a, b: (resize_and_rescale(a, training=True), b)` do
    the same work), or its body's code where it calls none."""
    if function is None:
        return None
    if isinstance(function, cst.Lambda):
        callees = [dotted_name(node.func) for node in nodes_under(function.body) if isinstance(node, cst.Call)]
        if not callees:
            return "".join(cst.Module([]).code_for_node(function.body).split())
        if None in callees:
            return None  # a call of a call (`f(x).skip(1)`): not compared
        return "calls " + ", ".join(sorted({callee for callee in callees if callee is not None}))
    return dotted_name(function)
