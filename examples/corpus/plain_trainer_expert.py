"""Expert twin of plain_trainer.py: the same model, batch size (64), Adam(1e-3) and float32, but
``train_step`` is a ``tf.function`` compiled with XLA (``jit_compile=True``: it pays on this GELU/LayerNorm
MLP on a CPU), the standardisation map runs in parallel and is cached (it is deterministic; the shuffle
comes after the cache), and the pipeline prefetches.

    python examples/corpus/plain_trainer_expert.py --epochs 1
"""

import argparse
import time

import keras
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
args = parser.parse_args()

keras.utils.set_random_seed(7)
FEATURES, CLASSES, N = 128, 8, 12288
rng = np.random.default_rng(7)
centers = rng.normal(0.0, 1.0, size=(CLASSES, FEATURES)).astype("float32")
labels = rng.integers(0, CLASSES, size=N).astype("int64")
rows = (centers[labels] + rng.normal(0.0, 3.0, size=(N, FEATURES))).astype("float32") * 40.0 + 100.0
noisy = rng.random(N) < 0.15
labels[noisy] = rng.integers(0, CLASSES, size=int(noisy.sum()))
MEAN = rows.mean(axis=0)
STD = rows.std(axis=0)


def standardise(x, y):
    return (tf.cast(x, tf.float32) - MEAN) / STD, y


def make_dataset(batch_size):
    ds = tf.data.Dataset.from_tensor_slices((rows, labels))
    ds = ds.map(standardise, num_parallel_calls=tf.data.AUTOTUNE).cache()
    return ds.shuffle(2048).batch(batch_size).prefetch(tf.data.AUTOTUNE)


def build_model():
    return keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(512, activation="gelu"),
            keras.layers.LayerNormalization(),
            keras.layers.Dense(512, activation="gelu"),
            keras.layers.LayerNormalization(),
            keras.layers.Dense(CLASSES),
        ]
    )


class Trainer:
    def __init__(self, model, lr=1e-3, batch_size=64):
        self.model = model
        self.optimizer = keras.optimizers.Adam(learning_rate=lr)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.accuracy = keras.metrics.SparseCategoricalAccuracy()
        self.dataset = make_dataset(batch_size)

    @tf.function(jit_compile=True)
    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = self.loss_fn(y, logits)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply(grads, self.model.trainable_variables)
        self.accuracy.update_state(y, logits)
        return loss

    def fit(self, epochs):
        for epoch in range(epochs):
            start = time.perf_counter()
            total, steps = 0.0, 0
            for x, y in self.dataset:
                loss = self.train_step(x, y)
                total += float(loss)
                steps += 1
            ms = 1000 * (time.perf_counter() - start) / steps
            print(
                f"epoch {epoch}: loss {total / steps:.4f} acc {float(self.accuracy.result()):.4f} "
                f"({ms:.1f} ms/step)"
            )
            self.accuracy.reset_state()


if __name__ == "__main__":
    Trainer(build_model()).fit(args.epochs)
