"""A custom TensorFlow loop: an eager GradientTape step and a loss read back every step."""

import tensorflow as tf

model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.01)
# The pipeline as TensorFlow before 2.13 runs it: no prefetch injected at its end (GL702), no
# stateless map run in parallel unasked (GL701).
options = tf.data.Options()
options.experimental_optimization.inject_prefetch = False
options.experimental_optimization.map_parallelization = False
features = tf.data.Dataset.from_tensor_slices((tf.random.normal((24, 3)), tf.random.normal((24, 1))))
dataset = features.map(lambda x, y: (x * 2.0, y)).batch(6).with_options(options)


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


losses = []
for step, (x, y) in enumerate(dataset):
    loss = train_step(x, y)
    value = loss.numpy()
    print(f"step {step} loss {value:.4f}")
    losses.append(loss)
assert len(losses) == 4
