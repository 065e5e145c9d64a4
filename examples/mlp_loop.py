"""A residual MLP on tabular data (LayerNorm + GELU blocks), tf.data with AUTOTUNE and prefetch, the
step compiled with ``@tf.function`` in float32, no XLA.

The input pipeline and the step are already in good shape; what is left is in the compiler and the
number format: XLA fuses the LayerNorm/GELU/residual element-wise ops between the matmuls, and on a
CPU with bfloat16 instructions (AVX512_BF16, AMX) or a tensor-core GPU the matmuls run faster in 16 bit.
This is the example where ``xla-jit`` and ``mixed-precision`` pay on a CPU.

    python examples/mlp_loop.py --epochs 1
    tfdoctor profile examples/mlp_loop.py --fix
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

FEATURES = 64
NUM_CLASSES = 10
NUM_EXAMPLES = 16384


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic tabular data: Gaussian features, labels from a fixed random nonlinear map."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    w1 = rng.normal(size=(FEATURES, 32)) / np.sqrt(FEATURES)
    w2 = rng.normal(size=(32, NUM_CLASSES))
    y = np.argmax(np.tanh(x @ w1) @ w2, axis=1).astype(np.int64)
    return x, y


def build_model(width: int, depth: int) -> keras.Model:
    """Dense stem, ``depth`` pre-norm residual blocks (LayerNorm, Dense+GELU, Dense), a dense head."""
    inputs = keras.Input(shape=(FEATURES,))
    x = layers.Dense(width)(inputs)
    for _ in range(depth):
        h = layers.LayerNormalization()(x)
        h = layers.Dense(width, activation="gelu")(h)
        h = layers.Dense(width)(h)
        x = x + h
    x = layers.LayerNormalization()(x)
    outputs = layers.Dense(NUM_CLASSES)(x)
    return keras.Model(inputs, outputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--depth", type=int, default=4)
    args = parser.parse_args()
    steps = args.steps_per_epoch or NUM_EXAMPLES // args.batch_size

    keras.utils.set_random_seed(0)
    features, labels = make_data(NUM_EXAMPLES)
    model = build_model(args.width, args.depth)
    optimizer = keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    dataset = (
        tf.data.Dataset.from_tensor_slices((features, labels))
        .shuffle(NUM_EXAMPLES, seed=0)
        .batch(args.batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    for epoch in range(args.epochs):
        t0, total, n = time.perf_counter(), 0.0, 0
        for x, y in dataset.take(steps):
            total += float(train_step(x, y))
            n += 1
        dt = time.perf_counter() - t0
        print(
            f"epoch {epoch + 1}: loss {total / max(n, 1):.4f} ({n} steps, {n / dt:.1f} steps/s)", flush=True
        )


if __name__ == "__main__":
    main()
