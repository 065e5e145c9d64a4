"""Trains a few steps, then hangs (a deadlocked input pipeline, a stuck collective)."""

import time

import numpy as np
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
optimizer = keras.optimizers.SGD(0.01)
x = np.ones((8, 4), np.float32)
for _ in range(5):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
print("waiting for the next shard...", flush=True)
while True:
    time.sleep(3600)
