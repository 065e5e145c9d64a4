"""
Shape of TensorFlow's "Basic regression: Predict fuel efficiency" tutorial: a `Normalization` layer
adapted on the training features and put first in a `Sequential`, `build_and_compile_model(norm)`,
`fit(train_features, train_labels, validation_split=0.2, verbose=0, epochs=100)` with no batch size
(Keras's 32) on 314 rows: 8 steps an epoch and a validation after each. pandas is not installed here:
the Auto MPG table is a synthetic numpy array of the same size and columns.
"""

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

rng = np.random.default_rng(0)
raw = rng.normal(size=(398, 9)).astype("float32") * [1, 2, 50, 40, 800, 3, 4, 1, 1] + [
    5,
    5,
    190,
    100,
    3000,
    15,
    76,
    0,
    0,
]
train_features = raw[:314, 1:]
train_labels = raw[:314, 0] * 3 + 20
test_features = raw[314:, 1:]
test_labels = raw[314:, 0] * 3 + 20

normalizer = tf.keras.layers.Normalization(axis=-1)
normalizer.adapt(np.array(train_features))


def build_and_compile_model(norm):
    model = keras.Sequential(
        [norm, layers.Dense(64, activation="relu"), layers.Dense(64, activation="relu"), layers.Dense(1)]
    )

    model.compile(loss="mean_absolute_error", optimizer=tf.keras.optimizers.Adam(0.001))
    return model


dnn_model = build_and_compile_model(normalizer)
dnn_model.summary()

history = dnn_model.fit(train_features, train_labels, validation_split=0.2, verbose=0, epochs=100)

test_results = {}
test_results["dnn_model"] = dnn_model.evaluate(test_features, test_labels, verbose=0)
print(test_results)
