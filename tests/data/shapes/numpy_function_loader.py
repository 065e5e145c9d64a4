"""Train a slice classifier on .npy scans.

Shape of user repositories that keep their data as one ``.npy`` file per example and read it in a
tf.data pipeline through ``tf.numpy_function`` (medical imaging, audio features, anything decoded by a
Python library): paths and labels in ``from_tensor_slices``, the paths shuffled, a sequential
``map(load_data_fn)`` wrapping ``np.load`` in ``tf.numpy_function(func=..., inp=..., Tout=...)``, a
second map restoring the static shapes ``numpy_function`` loses, a random flip for training, ``batch``,
no prefetch; a small CNN fitted with ``EarlyStopping``. The scans are synthetic, written first.
"""

import glob
import os

import numpy as np
import tensorflow as tf

DATA_DIR = "scans"
IMAGE_SIZE = 96
BATCH_SIZE = 16
EPOCHS = 4


def write_fake_scans(n=1536):
    """Stand-in for the dataset download: one float32 scan per file, its label in the name."""
    os.makedirs(DATA_DIR, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        label = i % 2
        scan = rng.normal(size=(IMAGE_SIZE, IMAGE_SIZE)).astype(np.float32)
        scan[32:64, 32:64] += label * 1.5  # a lesion in the middle: flips keep it
        np.save(os.path.join(DATA_DIR, f"scan_{i:05d}_{label}.npy"), scan)


def read_data_fn(image, label):
    """Reading data with numpy."""
    image = np.load(image.decode("utf-8"))[..., np.newaxis]
    image = (image - image.mean()) / (image.std() + 1e-6)
    return image.astype(np.float32), label


def load_data_fn(image, label):
    """TF helper function for loading data with numpy."""
    return tf.numpy_function(func=read_data_fn, inp=[image, label], Tout=[tf.float32, tf.int32])


def set_shapes(image, label):
    image.set_shape([IMAGE_SIZE, IMAGE_SIZE, 1])
    label.set_shape([])
    return image, label


def augment(image, label):
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_flip_up_down(image)
    return image, label


def get_dataset(files, labels, training=False):
    ds = tf.data.Dataset.from_tensor_slices((files, labels))
    if training:
        ds = ds.shuffle(len(files))
    ds = ds.map(load_data_fn)
    ds = ds.map(set_shapes)
    if training:
        ds = ds.map(augment)
    ds = ds.batch(BATCH_SIZE)
    return ds


def build_model():
    inputs = tf.keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 1))
    x = tf.keras.layers.Conv2D(16, 3, activation="relu")(inputs)
    x = tf.keras.layers.MaxPooling2D()(x)
    x = tf.keras.layers.Conv2D(32, 3, activation="relu")(x)
    x = tf.keras.layers.MaxPooling2D()(x)
    x = tf.keras.layers.Conv2D(64, 3, activation="relu")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dense(64, activation="relu")(x)
    outputs = tf.keras.layers.Dense(1, activation="sigmoid")(x)
    return tf.keras.Model(inputs, outputs)


if __name__ == "__main__":
    if not os.path.isdir(DATA_DIR):
        write_fake_scans()
    files = sorted(glob.glob(os.path.join(DATA_DIR, "*.npy")))
    labels = [int(f[-5]) for f in files]
    split = int(len(files) * 0.8)
    train_ds = get_dataset(files[:split], labels[:split], training=True)
    val_ds = get_dataset(files[split:], labels[split:])

    model = build_model()
    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=1e-3), loss="binary_crossentropy", metrics=["accuracy"])
    early_stopping = tf.keras.callbacks.EarlyStopping(monitor="val_loss", patience=3, restore_best_weights=True)
    model.fit(train_ds, validation_data=val_ds, epochs=EPOCHS, callbacks=[early_stopping])
