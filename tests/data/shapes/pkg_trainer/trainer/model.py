"""The model and its settings, imported by ``train.py`` with a relative import."""

import tensorflow as tf

LEARNING_RATE = 1e-3
NUM_CLASSES = 10


def build_model(width=128):
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(32,)),
            tf.keras.layers.Dense(width, activation="relu"),
            tf.keras.layers.Dense(width, activation="relu"),
            tf.keras.layers.Dense(NUM_CLASSES),
        ]
    )


def make_optimizer():
    return tf.keras.optimizers.Adam(learning_rate=LEARNING_RATE)
