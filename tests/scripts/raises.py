"""Trains 3 steps, then fails the way real scripts do: an exception from the user's own code."""

import numpy as np
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
optimizer = keras.optimizers.SGD(0.01)
x = np.ones((8, 4), np.float32)


def load_batch(i: int) -> np.ndarray:
    if i == 3:
        raise ValueError(f"corrupt record in shard {i}: expected 4 features, got 3")
    return x


for i in range(100):
    batch = load_batch(i)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(batch) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
