"""fit on a dataset of unknown cardinality (a filter: Keras learns an epoch's end when the iterator runs
out, inside a batch it began), 6 batches an epoch, with an epoch-end callback that sleeps 0.4 s (a
ModelCheckpoint's write). tests/integration/test_capture_epochs.py: each epoch's first step is marked and
begins with its epoch, the sleep in no step."""

import time

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).normal(size=(192, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True).batch(32)


class Checkpoint(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        time.sleep(0.4)


model = tf.keras.Sequential(
    [tf.keras.layers.Input((8,)), tf.keras.layers.Dense(16), tf.keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse")
model.fit(ds, epochs=6, callbacks=[Checkpoint()], verbose=0)
