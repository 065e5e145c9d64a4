"""A tiny training script for tfdoctor's capture tests: every loop kind, every input kind, seconds.

    python tests/scripts/tiny_train.py --loop {fit,eager,function,tape,function_tape} \
        --input {numpy,generator,tfdata,tfdata_parallel,from_generator} [--steps N] [--batch-size B]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras

parser = argparse.ArgumentParser()
parser.add_argument("--loop", default="eager")
parser.add_argument("--input", default="numpy")
parser.add_argument("--steps", type=int, default=1000)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--input-sleep", type=float, default=0.0, help="seconds of 'preprocessing' per batch")
parser.add_argument("--steps-per-execution", type=int, default=1, help="Keras compile(steps_per_execution=)")
parser.add_argument("--vary-batch", action="store_true", help="numpy input: every other batch is half size")
args = parser.parse_args()

keras.utils.set_random_seed(1)
rng = np.random.default_rng(1)
N = 512
X = rng.normal(size=(N, 8)).astype(np.float32)
Y = (X.sum(axis=1) > 0).astype(np.int64)
B = args.batch_size


def numpy_batches():
    i = 0
    while True:
        j = (i * B) % (N - B)
        yield X[j : j + B], Y[j : j + B]
        i += 1


def generator():
    for xb, yb in numpy_batches():
        if args.input_sleep:
            time.sleep(args.input_sleep)
        yield xb, yb


def dataset(parallel: bool):
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).repeat()
    fn = lambda x, y: (x * 1.0, y)  # noqa: E731
    ds = ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE) if parallel else ds.map(fn)
    ds = ds.batch(B)
    return ds.prefetch(tf.data.AUTOTUNE) if parallel else ds


def source():
    if args.input == "generator":
        return generator()
    if args.input == "tfdata":
        return iter(dataset(False))
    if args.input == "tfdata_parallel":
        return iter(dataset(True))
    if args.input == "from_generator":
        sig = (tf.TensorSpec((None, 8), tf.float32), tf.TensorSpec((None,), tf.int64))
        return iter(tf.data.Dataset.from_generator(generator, output_signature=sig))
    # numpy: slice arrays in the loop itself
    return None


model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = keras.optimizers.SGD(0.1)

if args.loop == "fit":
    model.compile(optimizer=optimizer, loss=loss_fn, steps_per_execution=args.steps_per_execution)
    if args.input == "numpy":
        model.fit(X, Y, batch_size=B, epochs=args.steps * B // N + 1, verbose=0)
    elif args.input == "generator":
        model.fit(generator(), steps_per_epoch=48, epochs=1000, verbose=0)
    else:
        model.fit(dataset(args.input == "tfdata_parallel"), steps_per_epoch=50, epochs=1000, verbose=0)
    raise SystemExit(0)


def eager_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


function_step = tf.function(eager_step)


def tape_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    for v, g in zip(model.trainable_variables, grads, strict=True):
        v.assign_sub(0.1 * g)
    return loss


step = {
    "eager": eager_step,
    "function": function_step,
    "tape": tape_step,
    "function_tape": tf.function(tape_step),
}[args.loop]
src = source()
for i in range(args.steps):
    if src is None:
        j = (i * B) % (N - B)
        b = B // 2 if args.vary_batch and i % 2 else B
        x, y = X[j : j + b], Y[j : j + b]
    else:
        x, y = next(src)
    loss = step(x, y)
    if i % 100 == 0:
        print(f"step {i}: loss {float(loss):.4f}", flush=True)
