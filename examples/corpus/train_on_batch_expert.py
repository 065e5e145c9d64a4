"""Expert twin of train_on_batch.py: the same model, batch size (64), Adam(1e-3) and float32, the
same augmentation (scale, reflect-pad by 4 and random-crop, random flip) as tf.data ops in a
parallel map with prefetch, trained by ``fit`` over the same number of steps.

    python examples/corpus/train_on_batch_expert.py --epochs 1
"""

import argparse
import time

import keras
import numpy as np
import tensorflow as tf
from keras import layers

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=30)
parser.add_argument("--steps-per-epoch", type=int, default=120)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()

keras.utils.set_random_seed(5)
rng = np.random.default_rng(5)
N, SIZE, CLASSES = 4096, 32, 10
y_train = rng.integers(0, CLASSES, size=N)
x_train = rng.integers(0, 150, size=(N, SIZE, SIZE, 3), dtype=np.uint8)
for k in range(CLASSES):
    row, col = divmod(k, 4)
    x_train[y_train == k, row * 8 : row * 8 + 8, col * 8 : col * 8 + 8, k % 3] = 255
noisy = rng.random(N) < 0.1
y_train[noisy] = rng.integers(0, CLASSES, size=int(noisy.sum()))


def build_model():
    inputs = keras.Input(shape=(SIZE, SIZE, 3))
    x = layers.Conv2D(32, 3, activation="relu", padding="same")(inputs)
    x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(64, 3, activation="relu", padding="same")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(128, activation="relu")(x)
    outputs = layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(inputs, outputs)


def augment(image, label):
    image = tf.cast(image, tf.float32) / 255.0
    image = tf.pad(image, [[4, 4], [4, 4], [0, 0]], mode="REFLECT")
    image = tf.image.random_crop(image, (SIZE, SIZE, 3))
    image = tf.image.random_flip_left_right(image)
    return image, label


dataset = (
    tf.data.Dataset.from_tensor_slices((x_train, y_train))
    .shuffle(N)
    .repeat()
    .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    .batch(args.batch_size)
    .prefetch(tf.data.AUTOTUNE)
)

model = build_model()
model.compile(
    optimizer=keras.optimizers.Adam(learning_rate=args.lr),
    loss="sparse_categorical_crossentropy",
    metrics=["accuracy"],
)


class EpochTime(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        ms = 1000 * (time.perf_counter() - self.start) / args.steps_per_epoch
        print(f"epoch {epoch}: loss {logs['loss']:.4f} ({ms:.1f} ms/step)")


model.fit(
    dataset, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, verbose=0, callbacks=[EpochTime()]
)
