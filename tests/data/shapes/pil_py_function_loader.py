"""Segment nuclei in PNG tiles read with PIL.

Shape of user repositories that decode their images with a Python library inside the tf.data pipeline
(PIL here; cv2, imageio, nibabel elsewhere): a ``load_pair`` wrapped in ``tf.py_function`` opening the
image and its mask with ``Image.open(...).convert(...)``, the path pairs shuffled in a statement of their
own before the load (``if shuffle:``), a ``set_shape`` map (py_function loses static shapes), a random
flip of both for training, ``batch`` and ``prefetch``; a small fully convolutional network fitted on
it. The tiles are synthetic PNGs, written first.
"""

import glob
import os

import numpy as np
import tensorflow as tf
from PIL import Image

DATA_DIR = "tiles"
TILE = 64
BATCH_SIZE = 16
EPOCHS = 3


def write_fake_tiles(n=1024):
    """Stand-in for the dataset download: a grey tile with bright discs, and the discs' mask."""
    os.makedirs(DATA_DIR, exist_ok=True)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:TILE, :TILE]
    for i in range(n):
        mask = np.zeros((TILE, TILE), bool)
        for _ in range(rng.integers(2, 6)):
            cy, cx, r = rng.integers(8, TILE - 8), rng.integers(8, TILE - 8), rng.integers(3, 8)
            mask |= (yy - cy) ** 2 + (xx - cx) ** 2 < r**2
        image = rng.normal(90, 20, (TILE, TILE)) + 100 * mask
        Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(f"{DATA_DIR}/{i:05d}_img.png")
        Image.fromarray(mask.astype(np.uint8) * 255).save(f"{DATA_DIR}/{i:05d}_mask.png")


def load_pair(image_path, mask_path):
    image = Image.open(image_path.numpy().decode()).convert("L")
    mask = Image.open(mask_path.numpy().decode()).convert("L")
    image = np.asarray(image, dtype=np.float32)[..., None] / 255.0
    mask = (np.asarray(mask, dtype=np.float32)[..., None] > 127).astype(np.float32)
    return image, mask


def tf_load_pair(image_path, mask_path):
    image, mask = tf.py_function(load_pair, [image_path, mask_path], [tf.float32, tf.float32])
    image.set_shape([TILE, TILE, 1])
    mask.set_shape([TILE, TILE, 1])
    return image, mask


def random_flip(image, mask):
    if tf.random.uniform(()) > 0.5:
        image, mask = tf.image.flip_left_right(image), tf.image.flip_left_right(mask)
    return image, mask


def make_dataset(image_paths, mask_paths, shuffle=False):
    dataset = tf.data.Dataset.from_tensor_slices((image_paths, mask_paths))
    if shuffle:
        dataset = dataset.shuffle(buffer_size=len(image_paths))
    dataset = dataset.map(tf_load_pair)
    if shuffle:
        dataset = dataset.map(random_flip)
    dataset = dataset.batch(BATCH_SIZE)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return dataset


def build_model():
    inputs = tf.keras.Input(shape=(TILE, TILE, 1))
    x = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
    x = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(x)
    x = tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu", dilation_rate=2)(x)
    outputs = tf.keras.layers.Conv2D(1, 1, activation="sigmoid")(x)
    return tf.keras.Model(inputs, outputs)


if __name__ == "__main__":
    if not os.path.isdir(DATA_DIR):
        write_fake_tiles()
    images = sorted(glob.glob(os.path.join(DATA_DIR, "*_img.png")))
    masks = sorted(glob.glob(os.path.join(DATA_DIR, "*_mask.png")))
    split = int(len(images) * 0.9)
    train = make_dataset(images[:split], masks[:split], shuffle=True)
    val = make_dataset(images[split:], masks[split:])

    model = build_model()
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(train, validation_data=val, epochs=EPOCHS)
