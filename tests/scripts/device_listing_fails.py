"""A custom loop whose environment breaks tf.config.list_physical_devices() (as a broken driver or a
sandbox can): tfdoctor must say it could not list the devices, not treat the run as CPU-only silently."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
opt = keras.optimizers.SGD(0.01)
x = np.random.default_rng(0).normal(size=(16, 8)).astype(np.float32)
y = x.sum(axis=1, keepdims=True)


def broken(*args, **kwargs):
    raise RuntimeError("CUDA driver version is insufficient for CUDA runtime version")


tf.config.list_physical_devices = broken

for _ in range(10_000):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
