"""A custom loop whose batches come from a memoised function, as tfdoctor's generator-cache fix writes
one (``load_batch.tfdoctor_memo``): an epoch is ``--epoch`` batches; over the first epoch every lookup
misses (and "decodes": a short sleep), from the second on every lookup hits. For the adaptive warm-up
tests in tests/integration/test_capture.py.

    python tests/scripts/memo_epoch.py [--epoch 12] [--miss-ms 5] [--retrace-at STEP] [--no-memo]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras

parser = argparse.ArgumentParser()
parser.add_argument("--epoch", type=int, default=12, help="batches per epoch")
parser.add_argument("--miss-ms", type=float, default=5.0, help="cost of a cache miss (the decode it saves)")
parser.add_argument("--retrace-at", type=int, default=-1, help="this step gets a half batch: a new trace")
parser.add_argument("--no-memo", action="store_true", help="no tfdoctor_memo attribute (a plain function)")
args = parser.parse_args()

B = 16
rng = np.random.default_rng(0)
X = rng.normal(size=(args.epoch * B, 8)).astype(np.float32)
Y = X.sum(axis=1, keepdims=True)
_store: dict[int, tuple[np.ndarray, np.ndarray]] = {}
MEMO = {"hits": 0, "misses": 0, "bypass": 0, "bytes": 0, "full": False}


def load_batch(i: int) -> tuple[np.ndarray, np.ndarray]:
    if i in _store:
        MEMO["hits"] += 1
        return _store[i]
    MEMO["misses"] += 1
    time.sleep(args.miss_ms / 1000)
    batch = (X[i * B : (i + 1) * B], Y[i * B : (i + 1) * B])
    _store[i] = batch
    MEMO["bytes"] += batch[0].nbytes + batch[1].nbytes
    return batch


if not args.no_memo:
    load_batch.tfdoctor_memo = MEMO  # type: ignore[attr-defined]

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
optimizer = keras.optimizers.SGD(0.01)


@tf.function
def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


step = 0
for _epoch in range(10_000):
    for i in range(args.epoch):
        x, y = load_batch(i)
        if step == args.retrace_at:
            x, y = x[: B // 2], y[: B // 2]  # a new input shape: train_step is traced again
        train_step(x, y)
        step += 1
