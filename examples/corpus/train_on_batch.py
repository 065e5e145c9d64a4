"""An older-Keras repository's training script: a numpy batch generator assigned once
(``gen = batch_generator(...)``), a loop that takes ``next(gen)`` and calls
``model.train_on_batch(xb, yb)``, per-batch numpy work in the generator (scale to [0, 1], pad and
random-crop each image, random flip), and the hyperparameters as argparse defaults.

    python examples/corpus/train_on_batch.py --epochs 1
    tfdoctor profile examples/corpus/train_on_batch.py
"""

import argparse
import time

import keras
import numpy as np
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
for k in range(CLASSES):  # a bright class-specific patch, so there is something to learn
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


def batch_generator(x, y, batch_size):
    """Endless random batches: scale, pad by 4 and random-crop each image, flip half of them."""
    while True:
        idx = rng.integers(0, len(x), batch_size)
        xb = x[idx].astype("float32") / 255.0
        padded = np.pad(xb, ((0, 0), (4, 4), (4, 4), (0, 0)), mode="reflect")
        out = np.empty_like(xb)
        for i in range(batch_size):
            dy, dx = rng.integers(0, 9, size=2)
            out[i] = padded[i, dy : dy + SIZE, dx : dx + SIZE]
        flip = rng.random(batch_size) < 0.5
        out[flip] = out[flip, :, ::-1, :]
        yield out, y[idx]


model = build_model()
model.compile(
    optimizer=keras.optimizers.Adam(learning_rate=args.lr),
    loss="sparse_categorical_crossentropy",
    metrics=["accuracy"],
)

gen = batch_generator(x_train, y_train, args.batch_size)
for epoch in range(args.epochs):
    start = time.perf_counter()
    losses = []
    for step in range(args.steps_per_epoch):
        xb, yb = next(gen)
        loss, acc = model.train_on_batch(xb, yb)
        losses.append(loss)
        if step % 50 == 0:
            print(f"epoch {epoch} step {step}: loss={loss:.4f} acc={acc:.3f}")
    ms = 1000 * (time.perf_counter() - start) / args.steps_per_epoch
    print(f"epoch {epoch}: loss {np.mean(losses):.4f} ({ms:.1f} ms/step)")
