"""Expert twin of class_trainer.py: same model, batch size 64, Adam(1e-3), float32. The step is a
``@tf.function``; the per-example work is tf.data ops: the deterministic normalisation cached once,
random crop/flip in a parallel map, and the pipeline prefetches so input overlaps the step.

    python examples/corpus/class_trainer_expert.py --epochs 1
"""

import argparse
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

NUM_CLASSES = 10
IMAGE_SIZE = 32
MEAN = tf.constant([0.5, 0.5, 0.5])
STD = tf.constant([0.25, 0.25, 0.25])


def make_dataset(n, seed=0):
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


def normalize(image, label):
    x = tf.cast(image, tf.float32) / 255.0
    return (x - MEAN) / STD, label


def augment(x, label):
    padded = tf.pad(x, [[4, 4], [4, 4], [0, 0]], mode="REFLECT")
    x = tf.image.random_crop(padded, [IMAGE_SIZE, IMAGE_SIZE, 3])
    x = tf.image.random_flip_left_right(x)
    return x, label


class Trainer:
    def __init__(self, model, images, labels, batch_size=64, lr=1e-3):
        self.model = model
        self.batch_size = batch_size
        self.optimizer = keras.optimizers.Adam(learning_rate=lr)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.dataset = (
            tf.data.Dataset.from_tensor_slices((images, labels))
            .map(normalize, num_parallel_calls=tf.data.AUTOTUNE)
            .cache()
            .shuffle(len(images), seed=0)
            .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(batch_size, drop_remainder=True)
            .prefetch(tf.data.AUTOTUNE)
        )

    @tf.function
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
            for i, (x, y) in enumerate(self.dataset):
                losses.append(self.step(x, y))
                if i % 50 == 0:
                    print(f"epoch {epoch} step {i} loss {float(np.mean(losses[-50:])):.4f}")
            elapsed = time.time() - start
            print(
                f"epoch {epoch}: loss {float(np.mean(losses)):.4f} "
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
