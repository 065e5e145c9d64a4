"""A script that runs its own TensorFlow profiler session around training."""

import sys

import numpy as np
import tensorflow as tf
from tensorflow import keras

tf.profiler.experimental.start(sys.argv[1])
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
optimizer = keras.optimizers.SGD(0.01)
x = np.ones((8, 4), np.float32)
for _ in range(1000):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
tf.profiler.experimental.stop()
