"""GL7xx: TensorFlow and Keras -- tf.data pipelines, XLA, eager steps."""
