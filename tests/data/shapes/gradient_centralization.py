"""
Title: Gradient Centralization (the shape of keras-io's example, Keras 3)

Our own code in the shape of keras-io's ``examples/vision/gradient_centralization.py`` (Keras 3), whose
optimizer subclass is copied into many repositories: prose in bare strings; ``from keras.optimizers
import RMSprop`` and ``from tensorflow import data as tf_data``; a ``prepare(ds, shuffle, augment)``
helper mapping a ``Rescaling`` layer per example and a list of random layers per batch (``apply_aug``);
a ``Sequential`` CNN ending in a sigmoid ``Dense(1)``; ``class GCRMSprop(RMSprop)`` overriding
``get_gradients`` (never called by Keras 3, so the run is plain RMSprop), built as
``optimizer = GCRMSprop(learning_rate=1e-4)``; a ``TimeHistory`` callback; the same model compiled and
fitted twice, first with ``RMSprop(learning_rate=1e-4)``, then with the subclass. Synthetic images in
memory (no tensorflow_datasets download), CPU-sized (96x96 images, batch 32, 3 epochs per fit).
"""

"""
## Setup
"""

from time import time

import keras
from keras import layers
from keras.optimizers import RMSprop
from keras import ops

from tensorflow import data as tf_data
import numpy as np

"""
## Prepare the data

Synthetic horses and humans: noise with a bright class-dependent band.
"""

num_classes = 2
input_shape = (96, 96, 3)
batch_size = 32
AUTOTUNE = tf_data.AUTOTUNE

rng = np.random.default_rng(0)
labels = rng.integers(0, num_classes, 1280)
images = rng.integers(0, 160, (1280, *input_shape)).astype("uint8")
for i, label in enumerate(labels):
    images[i, 20 + 40 * label : 36 + 40 * label] += 90

train_ds = tf_data.Dataset.from_tensor_slices((images[:1024], labels[:1024]))
test_ds = tf_data.Dataset.from_tensor_slices((images[1024:], labels[1024:]))

print(f"Image shape: {input_shape}")
print(f"Training images: {1024}")
print(f"Test images: {256}")

"""
## Use Data Augmentation

Rescale to `[0, 1]` and augment with random layers.
"""

rescale = layers.Rescaling(1.0 / 255)

data_augmentation = [
    layers.RandomFlip("horizontal_and_vertical"),
    layers.RandomRotation(0.3),
    layers.RandomZoom(0.2),
]


# Helper to apply augmentation
def apply_aug(x):
    for aug in data_augmentation:
        x = aug(x)
    return x


def prepare(ds, shuffle=False, augment=False):
    # Rescale dataset
    ds = ds.map(lambda x, y: (rescale(x), y), num_parallel_calls=AUTOTUNE)

    if shuffle:
        ds = ds.shuffle(1024)

    # Batch dataset
    ds = ds.batch(batch_size)

    # Use data augmentation only on the training set
    if augment:
        ds = ds.map(
            lambda x, y: (apply_aug(x), y),
            num_parallel_calls=AUTOTUNE,
        )

    # Use buffered prefetching
    return ds.prefetch(buffer_size=AUTOTUNE)


train_ds = prepare(train_ds, shuffle=True, augment=True)
test_ds = prepare(test_ds)

"""
## Define a model
"""

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(16, (3, 3), activation="relu"),
        layers.MaxPooling2D(2, 2),
        layers.Conv2D(32, (3, 3), activation="relu"),
        layers.Dropout(0.5),
        layers.MaxPooling2D(2, 2),
        layers.Conv2D(64, (3, 3), activation="relu"),
        layers.Dropout(0.5),
        layers.MaxPooling2D(2, 2),
        layers.Conv2D(64, (3, 3), activation="relu"),
        layers.MaxPooling2D(2, 2),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(128, activation="relu"),
        layers.Dense(1, activation="sigmoid"),
    ]
)

"""
## Implement Gradient Centralization

Subclass `RMSprop`, centralising each gradient of rank > 1 to zero mean.
"""


class GCRMSprop(RMSprop):
    def get_gradients(self, loss, params):
        # centralise the gradients of kernels (rank > 1)
        grads = []
        gradients = super().get_gradients()
        for grad in gradients:
            grad_len = len(grad.shape)
            if grad_len > 1:
                axis = list(range(grad_len - 1))
                grad -= ops.mean(grad, axis=axis, keep_dims=True)
            grads.append(grad)

        return grads


optimizer = GCRMSprop(learning_rate=1e-4)

"""
## Training utilities
"""


class TimeHistory(keras.callbacks.Callback):
    def on_train_begin(self, logs={}):
        self.times = []

    def on_epoch_begin(self, batch, logs={}):
        self.epoch_time_start = time()

    def on_epoch_end(self, batch, logs={}):
        self.times.append(time() - self.epoch_time_start)


"""
## Train the model without GC
"""

time_callback_no_gc = TimeHistory()
model.compile(
    loss="binary_crossentropy",
    optimizer=RMSprop(learning_rate=1e-4),
    metrics=["accuracy"],
)

model.summary()

history_no_gc = model.fit(train_ds, epochs=3, verbose=1, callbacks=[time_callback_no_gc])

"""
## Train the model with GC
"""

time_callback_gc = TimeHistory()
model.compile(loss="binary_crossentropy", optimizer=optimizer, metrics=["accuracy"])

model.summary()

history_gc = model.fit(train_ds, epochs=3, verbose=1, callbacks=[time_callback_gc])

"""
## Comparing performance
"""

print("Not using Gradient Centralization")
print(f"Loss: {history_no_gc.history['loss'][-1]}")
print(f"Accuracy: {history_no_gc.history['accuracy'][-1]}")
print(f"Training Time: {sum(time_callback_no_gc.times)}")

print("Using Gradient Centralization")
print(f"Loss: {history_gc.history['loss'][-1]}")
print(f"Accuracy: {history_gc.history['accuracy'][-1]}")
print(f"Training Time: {sum(time_callback_gc.times)}")
