"""Keras `fit` on the CPU with one input bottleneck built in, switched by GT_BOTTLENECK:

    GT_BOTTLENECK=healthy    a tf.data pipeline over arrays in memory, batched and prefetched
    GT_BOTTLENECK=generator  a Python generator that takes ~100 ms to make each batch
    GT_BOTTLENECK=map        a tf.data pipeline whose map calls Python (tf.py_function) for ~100 ms a batch

It times its own phases and writes them to GT_TIMERS (JSON) when it ends: "compute" is the
median time of one compiled training step on a batch in memory (train_on_batch, timed before
fit: no input to wait for), "step" the time between the ends of fit's batches (over "steps"),
and "produce" the time the input took to make its "batches" (in the producer's own thread: Keras
prefetches, so part of it overlaps the step).  A step waits for input at most step - compute, and
at most what making its batch took.
"""

import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

BOTTLENECK = os.environ.get("GT_BOTTLENECK", "healthy")
TIMERS = os.environ.get("GT_TIMERS")
BATCH = 64
FEATURES = 256
SLOW_S = 0.1
# The healthy step is long enough (~30 ms on one core) that reading a ready batch is a small share
# of it however busy the machine is (at ~15 ms, tf.data's hand-over of a prefetched batch read 2.6-5%
# of the step beside a full test run: the 5% line); a slow input gets a short step, so its wait
# dominates.
HIDDEN = 2176 if BOTTLENECK == "healthy" else 512

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(2)
rng = np.random.default_rng(0)
x_all = rng.standard_normal((4096, FEATURES)).astype("float32")
y_all = rng.standard_normal((4096, 1)).astype("float32")
timers = {"compute": 0.0, "step": 0.0, "produce": 0.0, "batches": 0, "steps": 0}


def slow_batches():
    while True:
        for start in range(0, len(x_all), BATCH):
            began = time.perf_counter()
            time.sleep(SLOW_S)
            batch = x_all[start : start + BATCH], y_all[start : start + BATCH]
            timers["produce"] += time.perf_counter() - began
            timers["batches"] += 1
            yield batch


def slow_decode(x):
    began = time.perf_counter()
    time.sleep(SLOW_S)
    timers["produce"] += time.perf_counter() - began
    timers["batches"] += 1
    return x


def dataset():
    data = tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(BATCH, drop_remainder=True).repeat()
    if BOTTLENECK == "map":
        data = data.map(lambda x, y: (tf.reshape(tf.py_function(slow_decode, [x], tf.float32), [BATCH, FEATURES]), y))
    return data.prefetch(tf.data.AUTOTUNE)


class StepTimes(keras.callbacks.Callback):
    last = None

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self.last is not None:
            timers["step"] += now - self.last
            timers["steps"] += 1
        self.last = now


def main():
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(HIDDEN, activation="relu"),
            keras.layers.Dense(HIDDEN, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="sgd", loss="mse")
    compute = []
    for _ in range(15):
        began = time.perf_counter()
        model.train_on_batch(x_all[:BATCH], y_all[:BATCH])
        compute.append(time.perf_counter() - began)
    timers["compute"] = sorted(compute[5:])[len(compute[5:]) // 2]
    source = slow_batches() if BOTTLENECK == "generator" else dataset()
    try:
        model.fit(source, steps_per_epoch=1000, epochs=100, verbose=0, callbacks=[StepTimes()])
    finally:
        if TIMERS:
            with open(TIMERS, "w") as handle:
                json.dump(timers, handle)


if __name__ == "__main__":
    main()
