"""An eager custom loop whose step function has Python side effects: it appends to a Python list
and prints. Wrapping this step in ``tf.function`` changes what the program does (the list gets one
symbolic tensor at trace time, the print runs once), so tfdoctor's tf.function fix must notice.

    python examples/side_effects.py --epochs 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

IMAGE_SIZE = 32
NUM_CLASSES = 10
NUM_EXAMPLES = 4096
MEAN = np.array([0.5, 0.5, 0.5], dtype=np.float32)
STD = np.array([0.25, 0.25, 0.25], dtype=np.float32)


def make_images(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic uint8 images: noise plus a bright class-specific patch (so the loss falls)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, size=n).astype(np.int64)
    images = rng.integers(0, 160, size=(n, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    for k in range(NUM_CLASSES):
        row, col = divmod(k, 4)
        sel = labels == k
        images[sel, row * 8 : row * 8 + 8, col * 8 : col * 8 + 8, k % 3] = 255
    return images, labels


def build_model() -> keras.Model:
    """A small MobileNet-ish CNN: conv stem, depthwise-separable blocks, global pooling, dense head."""
    inputs = keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 3))
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    for filters, stride in ((32, 1), (64, 2), (64, 1)):
        x = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
        x = layers.Conv2D(filters, 1, use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(NUM_CLASSES)(x)
    return keras.Model(inputs, outputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--print-every", type=int, default=50)
    args = parser.parse_args()
    steps = args.steps_per_epoch or NUM_EXAMPLES // args.batch_size

    keras.utils.set_random_seed(0)
    images, labels = make_images(NUM_EXAMPLES)
    x_all = (images.astype(np.float32) / 255.0 - 0.5) / 0.25
    dataset = tf.data.Dataset.from_tensor_slices((x_all, labels)).shuffle(NUM_EXAMPLES, seed=0)
    dataset = dataset.batch(args.batch_size, drop_remainder=True)
    model = build_model()
    optimizer = keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    losses: list[tf.Tensor] = []  # the side effect: one loss per step, read back at epoch end

    def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        losses.append(loss)
        if len(losses) % args.print_every == 0:
            print(f"  step {len(losses)}: loss {float(loss):.4f}", flush=True)
        return loss

    for epoch in range(args.epochs):
        t0, n = time.perf_counter(), 0
        for x, y in dataset.take(steps):
            train_step(x, y)
            n += 1
        dt = time.perf_counter() - t0
        epoch_loss = float(np.mean([float(v) for v in losses[-n:]]))
        print(f"epoch {epoch + 1}: loss {epoch_loss:.4f} ({n} steps, {n / dt:.1f} steps/s)", flush=True)


if __name__ == "__main__":
    main()
