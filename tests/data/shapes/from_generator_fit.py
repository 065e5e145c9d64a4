"""Shape of user repositories that feed ``fit`` from ``tf.data.Dataset.from_generator`` over a callable
class: ``DataGenerator.__call__`` is a generator that reshuffles the indices each epoch, loads one example
at a time (normalisation and a random flip in numpy) and yields it, forever (``while True``); the dataset
is batched after ``from_generator`` and handed to ``fit`` with ``steps_per_epoch`` and
``validation_steps``; synthetic CIFAR-sized data."""

import argparse

import numpy as np
import tensorflow as tf

NUM_CLASSES = 10
IMG_SHAPE = (32, 32, 3)
MEAN = np.array([125.3, 123.0, 113.9], dtype=np.float32)
STD = np.array([63.0, 62.1, 66.7], dtype=np.float32)


class DataGenerator:
    """Yields (image, label) pairs one at a time, as from_generator wants them."""

    def __init__(self, images, labels, augment=False, seed=0):
        self.images = images
        self.labels = labels
        self.augment = augment
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.images)

    def __call__(self):
        while True:  # fit(steps_per_epoch=...) reads one iterator across epochs
            order = self.rng.permutation(len(self.images))
            for i in order:
                x = (self.images[i].astype(np.float32) - MEAN) / STD
                if self.augment and self.rng.random() < 0.5:
                    x = x[:, ::-1, :]
                yield x, self.labels[i]


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, NUM_CLASSES, n).astype(np.int32)
    x = rng.integers(0, 200, (n,) + IMG_SHAPE).astype(np.uint8)
    for k in range(NUM_CLASSES):
        x[y == k, k * 3 : k * 3 + 3, :, :] = 255
    return x, y


def get_model():
    return tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=IMG_SHAPE),
            tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            tf.keras.layers.GlobalAveragePooling2D(),
            tf.keras.layers.Dense(NUM_CLASSES, activation="softmax"),
        ]
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    x_train, y_train = make_data(12800, seed=1)
    x_val, y_val = make_data(1280, seed=2)

    signature = (
        tf.TensorSpec(shape=IMG_SHAPE, dtype=tf.float32),
        tf.TensorSpec(shape=(), dtype=tf.int32),
    )
    train_gen = DataGenerator(x_train, y_train, augment=True)
    val_gen = DataGenerator(x_val, y_val)
    train_ds = tf.data.Dataset.from_generator(train_gen, output_signature=signature)
    train_ds = train_ds.batch(args.batch_size)
    val_ds = tf.data.Dataset.from_generator(val_gen, output_signature=signature).batch(args.batch_size)

    model = get_model()
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=args.lr),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(
        train_ds,
        validation_data=val_ds,
        epochs=args.epochs,
        steps_per_epoch=len(train_gen) // args.batch_size,
        validation_steps=len(val_gen) // args.batch_size,
    )


if __name__ == "__main__":
    main()
