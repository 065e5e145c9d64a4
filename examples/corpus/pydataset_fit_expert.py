"""Expert twin of pydataset_fit.py: the same model, batch size 64, Adam(1e-3), float32. The per-example
work is tf.data ops: normalisation cached once, random crop/flip in a parallel map, prefetch; and
``steps_per_execution`` in ``compile``.

    python examples/corpus/pydataset_fit_expert.py --epochs 1
"""

import argparse

import keras
import numpy as np
import tensorflow as tf
from keras import layers

NUM_CLASSES = 10
IMAGE_SIZE = 32
BATCH_SIZE = 64


def make_images(n, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, size=n).astype("int64")
    images = rng.integers(0, 160, size=(n, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    for k in range(NUM_CLASSES):
        row, col = divmod(k, 4)
        images[labels == k, row * 8 : row * 8 + 8, col * 8 : col * 8 + 8, k % 3] = 255
    noisy = rng.random(n) < 0.1
    labels[noisy] = rng.integers(0, NUM_CLASSES, size=int(noisy.sum()))
    return images, labels


def load_image(image, label):
    x = tf.cast(image, tf.float32) / 255.0
    return (x - 0.5) / 0.25, label


def augment(x, label):
    padded = tf.pad(x, [[4, 4], [4, 4], [0, 0]], mode="REFLECT")
    x = tf.image.random_crop(padded, [IMAGE_SIZE, IMAGE_SIZE, 3])
    return tf.image.random_flip_left_right(x), label


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
    autotune = tf.data.AUTOTUNE
    train_ds = (
        tf.data.Dataset.from_tensor_slices((images[:7168], labels[:7168]))
        .map(load_image, num_parallel_calls=autotune)
        .cache()
        .shuffle(7168, seed=0)
        .map(augment, num_parallel_calls=autotune)
        .batch(BATCH_SIZE)
        .prefetch(autotune)
    )
    val_ds = (
        tf.data.Dataset.from_tensor_slices((images[7168:], labels[7168:]))
        .map(load_image, num_parallel_calls=autotune)
        .batch(BATCH_SIZE)
        .cache()
        .prefetch(autotune)
    )

    model = build_model()
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        steps_per_execution=8,
    )
    model.fit(train_ds, validation_data=val_ds, epochs=args.epochs, verbose=2)


if __name__ == "__main__":
    main()
