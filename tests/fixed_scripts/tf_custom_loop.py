"""A custom TensorFlow loop: an eager GradientTape step and a loss read back every step."""

import tensorflow as tf

model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.01)
dataset = tf.data.Dataset.from_tensor_slices((tf.random.normal((24, 3)), tf.random.normal((24, 1)))).batch(6)


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
