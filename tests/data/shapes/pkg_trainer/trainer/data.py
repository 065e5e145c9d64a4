"""Synthetic data as a tf.data pipeline."""

import numpy as np
import tensorflow as tf

from .model import NUM_CLASSES


def make_dataset(batch_size, n=8192, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, NUM_CLASSES, size=n)
    centers = rng.normal(size=(NUM_CLASSES, 32)).astype("float32")
    x = (centers[y] + rng.normal(scale=2.0, size=(n, 32))).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(n, seed=seed).batch(batch_size)
