"""The model half of a two-file project (the TensorFlow multi-worker tutorial keeps its model in
``mnist.py``): ``build_model()``, ``make_optimizer()`` and the data, imported by ``train.py``."""

import numpy as np
import tensorflow as tf

LEARNING_RATE = 1e-3
NUM_CLASSES = 10


def make_data(n=12000, seed=5):
    """Synthetic 28x28 digits: noise plus a class-specific bright patch, 10% noisy labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, NUM_CLASSES, size=n).astype("int64")
    x = rng.integers(0, 100, size=(n, 28, 28), dtype=np.uint8)
    for k in range(NUM_CLASSES):
        r, c = divmod(k, 4)
        x[y == k, 2 + r * 8 : 8 + r * 8, 2 + c * 6 : 8 + c * 6] = 255
    noisy = rng.random(n) < 0.1
    y[noisy] = rng.integers(0, NUM_CLASSES, size=int(noisy.sum()))
    return x, y


def build_model():
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(28, 28)),
            tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
            tf.keras.layers.Conv2D(16, 3, activation="relu"),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(NUM_CLASSES),
        ]
    )


def make_optimizer():
    return tf.keras.optimizers.SGD(learning_rate=LEARNING_RATE * 10, momentum=0.9)
