"""Expert twin of resnet_fit.py: the same ResNet, BATCH_SIZE = 64, LR = 1e-3, float32. The arrays
go through a cached, prefetched tf.data pipeline, ``compile`` sets ``steps_per_execution``; no XLA
(its CPU convolutions lose to oneDNN here).

    python examples/corpus/resnet_fit_expert.py --epochs 1
"""

import argparse

import numpy as np
import tensorflow as tf
from tensorflow.keras import layers, models
from tensorflow.keras.optimizers import Adam

# ---- hyper-parameters (exercise 3: try changing these) ----
LR = 1e-3
BATCH_SIZE = 64
EPOCHS = 30
NUM_CLASSES = 10

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=EPOCHS)
args = parser.parse_args()

np.random.seed(0)
tf.random.set_seed(0)


# ---- data: synthetic stand-in for CIFAR-10 ----
def load_data():
    rng = np.random.default_rng(0)
    y = rng.integers(0, NUM_CLASSES, size=6000)
    x = rng.integers(0, 160, size=(6000, 32, 32, 3)).astype("float32")
    for k in range(NUM_CLASSES):
        r, c = divmod(k, 4)
        x[y == k, r * 8 : r * 8 + 8, c * 8 : c * 8 + 8, k % 3] = 255.0
    noisy = rng.random(6000) < 0.1
    y[noisy] = rng.integers(0, NUM_CLASSES, size=int(noisy.sum()))
    return (x[:5000], y[:5000]), (x[5000:], y[5000:])


(x_train, y_train), (x_test, y_test) = load_data()
x_train = x_train / 255.0
x_test = x_test / 255.0
y_train = tf.keras.utils.to_categorical(y_train, NUM_CLASSES)
y_test = tf.keras.utils.to_categorical(y_test, NUM_CLASSES)
print("x_train shape:", x_train.shape)


# ---- model ----
def residual_block(x, filters, stride=1):
    shortcut = x
    x = layers.Conv2D(filters, 3, strides=stride, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.Conv2D(filters, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    if stride != 1 or shortcut.shape[-1] != filters:
        shortcut = layers.Conv2D(filters, 1, strides=stride, padding="same")(shortcut)
        shortcut = layers.BatchNormalization()(shortcut)
    x = layers.Add()([x, shortcut])
    return layers.Activation("relu")(x)


def build_resnet():
    inputs = layers.Input(shape=(32, 32, 3))
    x = layers.Conv2D(16, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = residual_block(x, 16)
    x = residual_block(x, 32, stride=2)
    x = residual_block(x, 64, stride=2)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(NUM_CLASSES, activation="softmax")(x)
    return models.Model(inputs, outputs)


model = build_resnet()
model.summary()
model.compile(
    optimizer=Adam(learning_rate=LR),
    loss="categorical_crossentropy",
    metrics=["accuracy"],
    steps_per_execution=8,
)

# ---- training ----
train_ds = (
    tf.data.Dataset.from_tensor_slices((x_train.astype("float32"), y_train))
    .cache()
    .shuffle(len(x_train), seed=0)
    .batch(BATCH_SIZE)
    .prefetch(tf.data.AUTOTUNE)
)
test_ds = tf.data.Dataset.from_tensor_slices((x_test.astype("float32"), y_test)).batch(256).cache()
history = model.fit(train_ds, epochs=args.epochs, validation_data=test_ds)

test_loss, test_acc = model.evaluate(x_test, y_test, verbose=0)
print(f"Test accuracy: {test_acc:.4f}")
