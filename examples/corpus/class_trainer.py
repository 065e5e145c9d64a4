"""A class-based trainer, as many GitHub repositories write one: ``Trainer.step(self, x, y)`` holds the
GradientTape, ``Trainer.batches(self)`` is a generator doing per-example numpy work (normalise,
pad-and-crop, flip), and ``Trainer.fit()`` loops over epochs.

    python examples/corpus/class_trainer.py --epochs 1
    tfdoctor profile examples/corpus/class_trainer.py
"""

import argparse
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

NUM_CLASSES = 10
IMAGE_SIZE = 32


def make_dataset(n, seed=0):
    """Synthetic CIFAR-like uint8 images: noise plus a bright class-specific patch."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, size=n).astype(np.int64)
    images = rng.integers(0, 160, size=(n, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    for k in range(NUM_CLASSES):
        row, col = divmod(k, 4)
        images[labels == k, row * 8 : row * 8 + 8, col * 8 : col * 8 + 8, k % 3] = 255
    noisy = rng.random(n) < 0.1
    labels[noisy] = rng.integers(0, NUM_CLASSES, size=int(noisy.sum()))
    return images, labels


def build_model():
    return keras.Sequential(
        [
            keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 3)),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(64, activation="relu"),
            layers.Dense(NUM_CLASSES),
        ]
    )


class Trainer:
    def __init__(self, model, images, labels, batch_size=64, lr=1e-3, seed=0):
        self.model = model
        self.images = images
        self.labels = labels
        self.batch_size = batch_size
        self.optimizer = keras.optimizers.Adam(learning_rate=lr)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.rng = np.random.default_rng(seed)
        self.mean = np.array([0.5, 0.5, 0.5], dtype=np.float32)
        self.std = np.array([0.25, 0.25, 0.25], dtype=np.float32)

    def preprocess(self, image):
        x = image.astype(np.float32) / 255.0
        x = (x - self.mean) / self.std
        padded = np.pad(x, ((4, 4), (4, 4), (0, 0)), mode="reflect")
        top, left = self.rng.integers(0, 9, size=2)
        x = padded[top : top + IMAGE_SIZE, left : left + IMAGE_SIZE]
        if self.rng.random() < 0.5:
            x = x[:, ::-1]
        return x

    def batches(self):
        order = self.rng.permutation(len(self.images))
        for start in range(0, len(order) - self.batch_size + 1, self.batch_size):
            idx = order[start : start + self.batch_size]
            x = np.stack([self.preprocess(self.images[i]) for i in idx])
            y = self.labels[idx]
            yield x, y

    def step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = self.loss_fn(y, logits)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    def fit(self, epochs):
        for epoch in range(epochs):
            start = time.time()
            losses = []
            for i, (x, y) in enumerate(self.batches()):
                loss = self.step(x, y)
                losses.append(float(loss))
                if i % 50 == 0:
                    print(f"epoch {epoch} step {i} loss {np.mean(losses[-50:]):.4f}")
            elapsed = time.time() - start
            print(
                f"epoch {epoch}: loss {np.mean(losses):.4f} "
                f"({elapsed:.1f}s, {1000 * elapsed / (i + 1):.1f} ms/step)"
            )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    images, labels = make_dataset(8192)
    trainer = Trainer(build_model(), images, labels, batch_size=args.batch_size)
    trainer.fit(args.epochs)


if __name__ == "__main__":
    main()
