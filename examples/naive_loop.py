"""The naive training loop: a Python generator with per-example numpy preprocessing feeding an
eager custom loop (GradientTape + optimizer.apply_gradients, no tf.function).

This is the seed's case study, the slowest way to train the small MobileNet-ish CNN that every
example here shares (synthetic 32x32 RGB images, 10 classes, CPU is enough).

    python examples/naive_loop.py --epochs 1
    tfdoctor profile examples/naive_loop.py
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


def preprocess(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per-example work in numpy: "decode" (to float + a 5x5 smoothing pass), brightness/contrast
    jitter, random crop with 4-pixel padding, random horizontal flip, per-channel normalisation."""
    x = image.astype(np.float32) / 255.0
    padded = np.pad(x, ((2, 2), (2, 2), (0, 0)), mode="edge")
    smooth = np.zeros_like(x)
    for dy in range(5):
        for dx in range(5):
            smooth += padded[dy : dy + IMAGE_SIZE, dx : dx + IMAGE_SIZE]
    x = 0.5 * x + 0.5 * smooth / 25.0
    brightness, contrast = rng.uniform(-0.1, 0.1), rng.uniform(0.8, 1.2)
    x = np.clip((x - x.mean()) * contrast + x.mean() + brightness, 0.0, 1.0)
    padded = np.pad(x, ((4, 4), (4, 4), (0, 0)), mode="reflect")
    top, left = rng.integers(0, 9, size=2)
    x = padded[top : top + IMAGE_SIZE, left : left + IMAGE_SIZE]
    if rng.random() < 0.5:
        x = x[:, ::-1]
    return (x - MEAN) / STD


def batches(images: np.ndarray, labels: np.ndarray, batch_size: int, seed: int):
    """A plain Python generator: shuffle, preprocess one example at a time, stack into batches."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(images))
    for start in range(0, len(order) - batch_size + 1, batch_size):
        idx = order[start : start + batch_size]
        x = np.stack([preprocess(images[i], rng) for i in idx])
        yield x, labels[idx]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    images, labels = make_images(NUM_EXAMPLES)
    model = build_model()
    optimizer = keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    for epoch in range(args.epochs):
        t0, total, n = time.perf_counter(), 0.0, 0
        for step, (x, y) in enumerate(batches(images, labels, args.batch_size, seed=epoch)):
            if args.steps_per_epoch is not None and step >= args.steps_per_epoch:
                break
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = loss_fn(y, logits)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            total += float(loss)
            n += 1
        dt = time.perf_counter() - t0
        print(
            f"epoch {epoch + 1}: loss {total / max(n, 1):.4f} ({n} steps, {n / dt:.1f} steps/s)", flush=True
        )


if __name__ == "__main__":
    main()
