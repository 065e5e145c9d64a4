"""``fit`` on a ``keras.utils.PyDataset`` subclass whose ``__getitem__`` does per-example numpy work
(normalise, random pad-and-crop, random flip) in a Python loop, as the Keras ``Sequence`` docs and
countless repositories write a data loader.

    python examples/corpus/pydataset_fit.py --epochs 1
    tfdoctor profile examples/corpus/pydataset_fit.py
"""

import argparse
import math

import keras
import numpy as np
from keras import layers

NUM_CLASSES = 10
IMAGE_SIZE = 32
BATCH_SIZE = 64


def make_images(n, seed=0):
    """Synthetic uint8 images: noise plus a bright class-specific patch."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, size=n).astype("int64")
    images = rng.integers(0, 160, size=(n, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    for k in range(NUM_CLASSES):
        row, col = divmod(k, 4)
        images[labels == k, row * 8 : row * 8 + 8, col * 8 : col * 8 + 8, k % 3] = 255
    noisy = rng.random(n) < 0.1
    labels[noisy] = rng.integers(0, NUM_CLASSES, size=int(noisy.sum()))
    return images, labels


def load_image(image):
    x = image.astype("float32") / 255.0
    return (x - 0.5) / 0.25


def augment(x, rng):
    padded = np.pad(x, ((4, 4), (4, 4), (0, 0)), mode="reflect")
    top, left = rng.integers(0, 9, size=2)
    x = padded[top : top + IMAGE_SIZE, left : left + IMAGE_SIZE]
    if rng.random() < 0.5:
        x = x[:, ::-1]
    return x


class ImageSequence(keras.utils.PyDataset):
    def __init__(self, images, labels, batch_size, shuffle=True, **kwargs):
        super().__init__(**kwargs)
        self.images = images
        self.labels = labels
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.rng = np.random.default_rng(0)
        self.indices = np.arange(len(images))
        self.on_epoch_end()

    def __len__(self):
        return math.ceil(len(self.images) / self.batch_size)

    def __getitem__(self, idx):
        batch = self.indices[idx * self.batch_size : (idx + 1) * self.batch_size]
        x = np.stack([augment(load_image(self.images[i]), self.rng) for i in batch])
        y = self.labels[batch]
        return x, y

    def on_epoch_end(self):
        if self.shuffle:
            self.rng.shuffle(self.indices)


def build_model():
    inputs = keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 3))
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
    x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(64, activation="relu")(x)
    outputs = layers.Dense(NUM_CLASSES, activation="softmax")(x)
    return keras.Model(inputs, outputs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args()
    keras.utils.set_random_seed(0)

    images, labels = make_images(8192)
    train_seq = ImageSequence(images[:7168], labels[:7168], BATCH_SIZE)
    val_seq = ImageSequence(images[7168:], labels[7168:], BATCH_SIZE, shuffle=False)

    model = build_model()
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(train_seq, validation_data=val_seq, epochs=args.epochs, verbose=2)


if __name__ == "__main__":
    main()
