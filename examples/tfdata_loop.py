"""The same data through tf.data, still an eager step: ``from_tensor_slices(...)``, the per-example
work as two maps (the deterministic "decode", then the random augmentation) without
``num_parallel_calls``, ``.batch()``, no prefetch; GradientTape + apply_gradients, no tf.function.

    python examples/tfdata_loop.py --epochs 1
    tfdoctor profile examples/tfdata_loop.py
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


def decode_example(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """naive_loop.py's per-example numpy work as TF ops, first part: "decode" (to float + a 5x5
    smoothing pass). The same for an image every epoch."""
    return decode(image), label


def augment_example(x: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Second part, random: brightness/contrast jitter, random crop with 4-pixel padding, random flip,
    per-channel normalisation."""
    return augment(x), label


def decode(image: tf.Tensor) -> tf.Tensor:
    x = tf.cast(image, tf.float32) / 255.0
    padded = tf.pad(x[None], [[0, 0], [2, 2], [2, 2], [0, 0]], mode="SYMMETRIC")
    smooth = tf.nn.avg_pool2d(padded, ksize=5, strides=1, padding="VALID")[0]
    return 0.5 * x + 0.5 * smooth


def augment(x: tf.Tensor) -> tf.Tensor:
    brightness = tf.random.uniform([], -0.1, 0.1)
    contrast = tf.random.uniform([], 0.8, 1.2)
    mean = tf.reduce_mean(x)
    x = tf.clip_by_value((x - mean) * contrast + mean + brightness, 0.0, 1.0)
    x = tf.pad(x, [[4, 4], [4, 4], [0, 0]], mode="REFLECT")
    x = tf.image.random_crop(x, [IMAGE_SIZE, IMAGE_SIZE, 3])
    x = tf.image.random_flip_left_right(x)
    return (x - MEAN) / STD


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    steps = args.steps_per_epoch or NUM_EXAMPLES // args.batch_size

    keras.utils.set_random_seed(0)
    images, labels = make_images(NUM_EXAMPLES)
    model = build_model()
    optimizer = keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    dataset = (
        tf.data.Dataset.from_tensor_slices((images, labels))
        .shuffle(NUM_EXAMPLES, seed=0)
        .map(decode_example)
        .map(augment_example)
        .batch(args.batch_size, drop_remainder=True)
    )

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
            loss = train_step(x, y)
            total += float(loss)
            n += 1
        dt = time.perf_counter() - t0
        print(
            f"epoch {epoch + 1}: loss {total / max(n, 1):.4f} ({n} steps, {n / dt:.1f} steps/s)", flush=True
        )


if __name__ == "__main__":
    main()
