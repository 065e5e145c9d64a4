"""Shape of a user's Keras 3 ``fit`` with the callbacks people add (keras-io "Writing your own
callbacks", the ModelCheckpoint and TensorBoard docs' examples): a ``ModelCheckpoint`` saving the
weights every 10 batches (``save_freq=10``), ``TensorBoard(update_freq="batch")``, and a callback of
the script's own that records the loss and the learning rate after every batch and evaluates on a
held-out slice every 25 batches. A plain CNN classifier on synthetic 32x32 images."""
import os
import tempfile

import numpy as np
import tensorflow as tf
import keras
from keras import layers

BATCH_SIZE = 64
EPOCHS = 2
LOG_DIR = os.path.join(tempfile.gettempdir(), "heavy_callbacks")


class LossHistory(keras.callbacks.Callback):
    """Per-batch loss and learning rate, and a quick check on held-out data every few batches."""

    def __init__(self, x_val, y_val, every=25):
        super().__init__()
        self.x_val, self.y_val, self.every = x_val, y_val, every
        self.losses, self.rates, self.val = [], [], []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(logs["loss"])
        self.rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))
        if batch % self.every == 0:
            self.val.append(self.model.evaluate(self.x_val, self.y_val, verbose=0))


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 32, 32, 3)).astype("float32")
    y = (x[:, :16, :16, 0].mean(axis=(1, 2)) > 0).astype("int64") + 2 * (x[:, 16:, 16:, 1].mean(axis=(1, 2)) > 0)
    return x, y


x_train, y_train = make_data(6400, 0)
x_val, y_val = make_data(512, 1)

model = keras.Sequential(
    [
        keras.Input(shape=(32, 32, 3)),
        layers.Conv2D(32, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(256, activation="relu"),
        layers.Dense(4),
    ]
)
model.compile(
    optimizer=keras.optimizers.Adam(learning_rate=1e-3),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)

callbacks = [
    keras.callbacks.ModelCheckpoint(
        os.path.join(LOG_DIR, "ckpt.weights.h5"), save_weights_only=True, save_freq=10
    ),
    keras.callbacks.TensorBoard(log_dir=LOG_DIR, update_freq="batch"),
    LossHistory(x_val, y_val),
]
history = model.fit(
    x_train, y_train, batch_size=BATCH_SIZE, epochs=EPOCHS, validation_data=(x_val, y_val), callbacks=callbacks
)
print("final loss", history.history["loss"][-1])
