"""A training script that times itself: the reference for the profiler-perturbation benchmark.

It knows nothing about tfdoctor. It appends the wall-clock and process CPU time at the end of every
training step to the file named by ``$BENCH_STEP_LOG``, so the same script can be timed with
and without tfdoctor around it. Two loop kinds, the two ways tfdoctor finds steps:

    python benchmarks/workloads/selftimed.py --loop function --steps 300   # custom tf.function loop
    python benchmarks/workloads/selftimed.py --loop fit --steps 300        # Keras Model.fit
    python benchmarks/workloads/selftimed.py --loop eager --steps 300      # custom loop, eager step
    python benchmarks/workloads/selftimed.py --loop metric --steps 300     # tf.function step returning
                                                                           # nothing, loss in a Mean metric
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras

parser = argparse.ArgumentParser()
parser.add_argument("--loop", choices=["function", "fit", "eager", "metric"], default="function")
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--batch-size", type=int, default=64)
args = parser.parse_args()

log = open(os.environ.get("BENCH_STEP_LOG", os.devnull), "a", buffering=1)  # noqa: SIM115
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
N = 4096
X = rng.normal(size=(N, 16, 16, 3)).astype(np.float32)
Y = rng.integers(0, 10, size=N).astype(np.int64)
ds = (
    tf.data.Dataset.from_tensor_slices((X, Y))
    .repeat()
    .batch(args.batch_size, drop_remainder=True)
    .prefetch(tf.data.AUTOTUNE)
)
model = keras.Sequential(
    [
        keras.Input((16, 16, 3)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ]
)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = keras.optimizers.SGD(0.01)
train_loss = keras.metrics.Mean(name="train_loss")


def mark() -> None:
    log.write(f"{time.perf_counter_ns()} {time.process_time_ns()}\n")  # wall, CPU of all threads


if args.loop == "fit":

    class StepEnds(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            mark()

        def on_train_batch_end(self, batch, logs=None):
            mark()

    model.compile(optimizer=optimizer, loss=loss_fn)
    model.fit(ds, steps_per_epoch=args.steps, epochs=1, verbose=0, callbacks=[StepEnds()])
else:

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        if args.loop == "metric":  # the TensorFlow tutorials' style: the loss kept in a metric
            train_loss(loss)
            return None
        return loss

    if args.loop in ("function", "metric"):
        train_step = tf.function(train_step)

    it = iter(ds)
    mark()
    for _ in range(args.steps):
        x, y = next(it)
        loss = train_step(x, y)
        if loss is not None:
            float(loss)  # the step is done when its result is on the host
        mark()
