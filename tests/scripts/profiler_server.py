"""A single-process training job that serves the TensorFlow profiler, for `tfdoctor capture` tests.

    python tests/scripts/profiler_server.py PORT

Starts ``tf.profiler.experimental.server.start(PORT)``, then trains a small dense model in a
tf.function loop (one ``Trace("train", step_num=...)`` marker per step) until killed, printing
"epoch N" every 64 steps.
"""

from __future__ import annotations

import sys

import numpy as np
import tensorflow as tf
from tensorflow import keras

port = int(sys.argv[1])
tf.profiler.experimental.server.start(port)
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(4096, 32)).astype(np.float32)
y = (x.sum(axis=1) > 0).astype(np.int64)
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=0).repeat().batch(64).prefetch(2)
model = keras.Sequential(
    [keras.Input((32,)), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(2)]
)
optimizer = keras.optimizers.SGD(0.05)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    with tf.GradientTape() as tape:
        loss = loss_fn(b, model(a, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


batches = iter(ds)
step = 0
for epoch in range(1, 100_000):
    for _ in range(64):
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
            float(train_step(*next(batches)))
        step += 1
    print(f"epoch {epoch}", flush=True)
