"""Prints a tensor as TensorFlow's "Custom training: walkthrough" does (``print(features[:5])`` of the
first shuffled batch, then a loss): each run shuffles differently, so the values, their signs and
widths, and where numpy wraps the rows differ from run to run."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
features = rng.normal(size=(1024, 64)).astype("float32")
labels = (features[:, :3].sum(axis=1) > 0).astype("int64")
ds = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(1024).batch(32)
features_b, labels_b = next(iter(ds))
print(features_b[:5])
print(f"Loss test: {float(tf.reduce_mean(features_b) ** 2)}")
