"""Keras `fit` on a tf.data pipeline (a stateless map, no prefetch: recent TensorFlow parallelises and prefetches itself), XLA switched off."""

import numpy as np
import tensorflow as tf


def scale(x, y):
    return tf.cast(x, tf.float32) / 10.0, y


def main():
    features = np.arange(64, dtype=np.int64).reshape(32, 2)
    labels = (features.sum(axis=1) % 2).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).map(scale).batch(8)
    model = tf.keras.Sequential(
        [tf.keras.Input((2,)), tf.keras.layers.Dense(4, activation="relu"), tf.keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse", jit_compile=False)
    history = model.fit(dataset, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2


if __name__ == "__main__":
    main()
