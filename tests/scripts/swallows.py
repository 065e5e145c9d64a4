"""A loop that swallows every Exception (and a finally that runs): the harness must still stop it."""

import numpy as np
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
optimizer = keras.optimizers.SGD(0.01)
x = np.ones((8, 4), np.float32)
done = 0
try:
    for _ in range(10_000):
        try:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(model(x) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            done += 1
        except Exception as e:  # the point of this script
            print("ignored:", e)
finally:
    print(f"finally ran after {done} steps", flush=True)
