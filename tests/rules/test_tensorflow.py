"""GL7xx: tf.data, XLA, Keras compile/fit, TF host syncs and eager tape steps."""

from __future__ import annotations

import textwrap

from tests.helpers import assert_fix_ok, codes, fix, lint, rows

TF = "import tensorflow as tf\n"


def src(body: str, header: str = TF) -> str:
    return header + textwrap.dedent(body).lstrip("\n")


# -- GL701 tfdata-serial-map -------------------------------------------------------------------


def test_gl701_serial_map_and_interleave():
    source = src(
        """
        ds = tf.data.Dataset.from_tensor_slices(files).map(decode).batch(32)
        ds2 = tf.data.TFRecordDataset(files).interleave(read, cycle_length=4)
        """
    )
    assert rows(source, "GL701") == [(2, "GL701"), (3, "GL701")]


def test_gl701_negatives():
    source = src(
        """
        ds = tf.data.Dataset.range(10).map(f, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.map(f, 8)  # positional num_parallel_calls
        ds = ds.map(f, **opts)
        rdd = spark_rdd.map(f)  # not tf.data
        squares = map(f, xs)  # builtin
        # ds.map(decode) in a comment
        text = "ds.map(decode)"
        """
    )
    assert codes(source, "GL701") == []


def test_gl701_aliases():
    assert codes("from tensorflow import data as tfd\nds = tfd.Dataset.range(3).map(f)\n", "GL701") == ["GL701"]
    assert codes("from tensorflow.data import Dataset as D\nds = D.range(3)\nds = ds.map(f)\n", "GL701") == ["GL701"]


def test_gl701_fix_keeps_the_rest():
    source = src(
        """
        # build the pipeline
        ds = tf.data.Dataset.range(10).map(f)  # decode
        x = 1  # untouched
        """
    )
    fixed = assert_fix_ok(source, "GL701")
    assert "map(f, num_parallel_calls=tf.data.AUTOTUNE)  # decode" in fixed
    assert fixed.splitlines()[1] == "# build the pipeline" and fixed.splitlines()[3] == "x = 1  # untouched"


# -- GL702 tfdata-no-prefetch ------------------------------------------------------------------


def test_gl702_consumption_points():
    source = src(
        """
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
        model.fit(ds, epochs=3)
        model.evaluate(x=ds)
        for batch in ds:
            model.train_on_batch(batch)
        for i, batch in enumerate(ds):
            model.train_on_batch(batch)
        it = iter(ds)
        model.fit(other, validation_data=ds)
        """
    )
    assert [r for r, _ in rows(source, "GL702")] == [3, 4, 5, 7, 9, 10]


def test_gl702_inspection_is_not_consumption_for_training():
    # From keras' own tests: a loop that looks at one output, `next(iter(ds))`, an evaluation loop.
    source = src(
        """
        ds = tf.data.Dataset.from_tensor_slices(x).batch(2).map(layer)
        for output in ds.take(1):
            check(output)
        first = next(iter(ds)).numpy()
        for x, y in ds:
            preds.append(model(x))
        """
    )
    assert codes(source, "GL702") == []


def test_gl702_negatives():
    source = src(
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
        """
    )
    assert codes(source, "GL702") == []


def test_gl702_not_without_tensorflow():
    assert codes("import torch\nfor batch in loader:\n    pass\n", "GL702") == []


def test_gl702_fix_appends_prefetch_at_the_consumer():
    source = src(
        """
        ds = tf.data.Dataset.range(10).batch(2)
        for epoch in range(3):
            for batch in ds:  # train
                model.train_on_batch(batch)
        model.fit(ds.shuffle(4), epochs=1)
        """
    )
    fixed = assert_fix_ok(source, "GL702")
    assert "for batch in ds.prefetch(tf.data.AUTOTUNE):  # train" in fixed
    assert "model.fit(ds.shuffle(4).prefetch(tf.data.AUTOTUNE), epochs=1)" in fixed
    assert fixed.splitlines()[1] == "ds = tf.data.Dataset.range(10).batch(2)"


def test_gl702_fix_uses_module_alias_or_imports():
    fixed = assert_fix_ok("from tensorflow.data import Dataset\nds = Dataset.range(3)\nfor b in ds:\n    model.train_on_batch(b)\n", "GL702")
    assert "import tensorflow" in fixed and "ds.prefetch(tensorflow.data.AUTOTUNE)" in fixed


# -- GL703 tfdata-py-function ------------------------------------------------------------------


def test_gl703_in_mapped_function_lambda_and_callee():
    source = src(
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
        """
    )
    assert [r for r, _ in rows(source, "GL703")] == [3, 6, 13]


def test_gl703_negatives():
    source = src(
        """
        def debug(x):
            return tf.py_function(print_it, [x], [])  # not mapped by tf.data

        @tf.function
        def step(x):
            debug(x)

        ds = tf.data.Dataset.range(3).map(lambda x: x * 2)
        # ds.map(lambda x: tf.py_function(f, [x], tf.int64)) in a comment
        """
    )
    assert codes(source, "GL703") == []


def test_gl703_alias():
    source = "from tensorflow import numpy_function as npf\nimport tensorflow as tf\nds = tf.data.Dataset.range(3).map(lambda x: npf(f, [x], tf.int64))\n"
    assert codes(source, "GL703") == ["GL703"]


# -- GL704 xla-disabled ------------------------------------------------------------------------


def test_gl704_positives():
    source = src(
        """
        @tf.function(jit_compile=False)
        def step(x):
            return x
        tf.config.optimizer.set_jit(False)
        model.compile(optimizer="adam", loss="mse", jit_compile=False)
        """
    )
    assert [r for r, _ in rows(source, "GL704")] == [2, 5, 6]


def test_gl704_negatives():
    source = src(
        """
        @tf.function(jit_compile=True)
        def step(x):
            return x
        tf.config.optimizer.set_jit(True)
        model.compile(optimizer="adam", loss="mse")
        other.function(jit_compile=False)  # not tf.function
        # tf.config.optimizer.set_jit(False)
        """
    )
    assert codes(source, "GL704") == []
    assert codes("import torch\nmodel.compile(jit_compile=False)\n", "GL704") == []


def test_gl704_alias_and_fixes():
    source = "from tensorflow import function as tff\nimport tensorflow as tf\nf = tff(g, jit_compile=False)\nmodel.compile(loss='mse', jit_compile=False)  # keep\ntf.config.optimizer.set_jit(False)\n"
    assert codes(source, "GL704") == ["GL704", "GL704", "GL704"]
    fixed = assert_fix_ok(source, "GL704")
    assert "tff(g, jit_compile=True)" in fixed
    assert "model.compile(loss='mse')  # keep" in fixed
    assert "set_jit(True)" in fixed


# -- GL705 keras-steps-per-execution -----------------------------------------------------------


def test_gl705_positives():
    source = src(
        """
        import keras
        model.compile(optimizer="adam", loss="mse")
        model.compile("sgd", "mse")
        model.compile(optimizer=keras.optimizers.Adam(), loss=loss_fn)
        """
    )
    assert [r for r, _ in rows(source, "GL705")] == [3, 4, 5]


def test_gl705_negatives():
    source = src(
        """
        import re
        import torch
        model.compile(optimizer="adam", loss="mse", steps_per_execution=16)
        model.compile(**config)
        pattern = re.compile("x")
        compiled = torch.compile(net)
        net.compile()  # nn.Module.compile: no loss, no optimizer
        """
    )
    assert codes(source, "GL705") == []


def test_gl705_fix_with_option():
    source = src('model.compile(\n    optimizer="adam",\n    loss="mse",\n)\n')
    fixed = assert_fix_ok(source, "GL705", **{"steps-per-execution": 64})
    assert "    steps_per_execution=64,\n)" in fixed


# -- GL706 tf-host-sync-in-loop ----------------------------------------------------------------

TF_LOOP = src(
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
    """
)


def test_gl706_in_tf_step_loop_only():
    assert rows(TF_LOOP, "GL706") == [(13, "GL706"), (14, "GL706")]


def test_gl706_eval_loop_and_torch_steps_are_not_tf_syncs():
    source = src(
        """
        for x, y in val_ds:
            preds.append(model(x).numpy())  # evaluation: no step

        import torch
        for x, y in loader:
            loss = criterion(net(x), y)
            loss.backward()
            opt.step()
            arr = loss.numpy()  # a torch step: GL201's business
        """
    )
    assert codes(source, "GL706") == []


def test_gl706_never_with_gl201_on_the_same_expression():
    source = src(
        """
        import torch
        device = torch.device("cuda")
        for x, y in ds:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            print(loss.numpy())
        """
    )
    found = rows(source, ["GL201", "GL706"])
    assert len(found) == len({r for r, _ in found}) == 1


def test_gl706_not_in_tests_or_one_shot_helpers():
    # From keras' optimizer tests: one apply_gradients then reading the variable back.
    source = src(
        """
        class AdamTest(TestCase):
            def test_weight_decay(self):
                optimizer.apply_gradients(zip([grads], [var]))
                self.assertAlmostEqual(var.numpy(), 1.9, decimal=6)

        def fit_once():
            optimizer.apply_gradients(zip([grads], [var]))
            return var.numpy()
        """
    )
    assert codes(source, "GL706") == []


def test_gl706_step_function_called_from_a_loop():
    source = src(
        """
        def update(x):
            with tf.GradientTape() as tape:
                loss = f(x)
            optimizer.apply_gradients(zip(tape.gradient(loss, v), v))
            print(loss.numpy())

        for x in data:
            update(x)
        """
    )
    assert rows(source, "GL706") == [(6, "GL706")]


def test_gl706_fix_guards_logging():
    fixed = assert_fix_ok(TF_LOOP, "GL706")
    assert "        if step % 100 == 0:\n            print(\"loss\", loss.numpy())" in fixed
    assert "total += float(loss)" in fixed  # feeds the computation: no fix
    assert rows(fixed, "GL706") == [(15, "GL706")]


# -- GL707 tf-eager-step -----------------------------------------------------------------------

EAGER = src(
    """
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for x, y in ds:
        train_step(x, y)
    """
)


def test_gl707_eager_step_function():
    assert rows(EAGER, "GL707") == [(2, "GL707")]


def test_gl707_inline_loop_step():
    source = src(
        """
        for x, y in ds:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        """
    )
    assert rows(source, "GL707") == [(5, "GL707")]


def test_gl707_compiled_in_every_way():
    source = src(
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
                self.optimizer.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))

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
        """
    )
    assert codes(source, "GL707") == []


def test_gl707_fix_decorates_with_alias():
    fixed = assert_fix_ok(EAGER, "GL707")
    assert "@tf.function\ndef train_step(x, y):" in fixed
    assert fixed.count("@tf.function") == 1


def test_gl707_no_fix_when_the_step_reads_values_back():
    source = src(
        """
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss.numpy()
        """
    )
    (finding,) = lint(source, "GL707")
    assert finding.fix is None


# -- GL708 keras-python-input ------------------------------------------------------------------


def test_gl708_python_inputs():
    source = src(
        """
        def batches():
            while True:
                yield x, y

        gen = batches()
        model.fit(batches(), steps_per_epoch=10)
        model.fit(gen, steps_per_epoch=10)
        model.fit(ds.as_numpy_iterator())
        model.fit(x=((a, b) for a, b in pairs))
        """
    )
    assert [r for r, _ in rows(source, "GL708")] == [7, 8, 9, 10]


def test_gl708_negatives():
    source = src(
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
        """
    )
    assert codes(source, "GL708") == []
    assert codes("def g():\n    yield 1\nclf.fit(g())\n", "GL708") == []  # no TF: sklearn and friends


def test_hints_are_not_in_the_default_selection():
    from gpulint.linter.config import Settings
    from gpulint.linter.engine import Linter

    source = src('model.compile(optimizer="adam", loss="mse")\ndef g():\n    yield 1\nmodel.fit(g())\n')
    default = Linter(Settings()).lint_source(source.encode(), "x.py").findings
    assert not {f.code for f in default} & {"GL705", "GL708"}
    assert {"GL705", "GL708"} <= set(codes(source, "ALL"))
