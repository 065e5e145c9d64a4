"""TensorFlow's "Better performance with tf.function" guide, its loop section: the whole epoch is one
``tf.function`` (``for x, y in dataset:`` inside it, which autograph runs as a dataset loop in the
graph), the per-batch step a plain function it calls, a fresh pipeline from ``make_dataset()`` each
epoch. Synthetic data, CPU-sized.

    python tests/data/shapes/tf_function_epoch.py
"""

import numpy as np
import tensorflow as tf

BATCH_SIZE = 64
EPOCHS = 20

rng = np.random.default_rng(0)
features = rng.normal(size=(4096, 64)).astype("float32")
labels = (features[:, :10].argmax(axis=1) + (rng.random(4096) < 0.1)).astype("int64") % 10


def make_dataset():
    return tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(4096).batch(BATCH_SIZE)


model = tf.keras.Sequential(
    [
        tf.keras.Input(shape=(64,)),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(10),
    ]
)
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3)


def train_one_step(model, optimizer, x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_object(y, logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def train(model, optimizer, dataset):
    loss = 0.0
    for x, y in dataset:
        loss = train_one_step(model, optimizer, x, y)
    return loss


for epoch in range(EPOCHS):
    loss = train(model, optimizer, make_dataset())
    print("Epoch", epoch, ": loss", loss.numpy())
