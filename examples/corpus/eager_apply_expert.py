"""Expert twin of eager_apply.py: the same model, batch size (64), Adam(1e-3) and float32, but the
step is a ``@tf.function`` from the first batch, the pipeline prefetches, and the loss is only read
back to Python every 100 steps.

    python examples/corpus/eager_apply_expert.py --epochs 1
"""

import argparse
import time

import keras
import numpy as np
import tensorflow as tf
from keras import layers

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
args = parser.parse_args()

keras.utils.set_random_seed(42)

batch_size = 64
num_classes = 10
rng = np.random.default_rng(42)
centers = rng.normal(0.0, 1.0, size=(num_classes, 784)).astype("float32")
y_train = rng.integers(0, num_classes, size=16384).astype("int64")
x_train = centers[y_train] + rng.normal(0.0, 6.0, size=(16384, 784)).astype("float32")
flip = rng.random(16384) < 0.2  # 20% label noise, so the loss plateaus instead of reaching 0
y_train[flip] = rng.integers(0, num_classes, size=int(flip.sum()))
y_val = rng.integers(0, num_classes, size=2048).astype("int64")
x_val = centers[y_val] + rng.normal(0.0, 6.0, size=(2048, 784)).astype("float32")

train_dataset = (
    tf.data.Dataset.from_tensor_slices((x_train, y_train))
    .shuffle(buffer_size=1024)
    .batch(batch_size)
    .prefetch(tf.data.AUTOTUNE)
)
val_dataset = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(batch_size).cache()

inputs = keras.Input(shape=(784,), name="digits")
x1 = layers.Dense(256, activation="relu")(inputs)
x2 = layers.Dense(256, activation="relu")(x1)
x3 = layers.Dense(128, activation="relu")(x2)
outputs = layers.Dense(num_classes, name="predictions")(x3)
model = keras.Model(inputs=inputs, outputs=outputs)

optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
val_acc_metric = keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply(grads, model.trainable_weights)
    train_acc_metric.update_state(y, logits)
    return loss_value


@tf.function
def test_step(x, y):
    val_logits = model(x, training=False)
    val_acc_metric.update_state(y, val_logits)


for epoch in range(args.epochs):
    print(f"\nStart of epoch {epoch}")
    start_time = time.time()
    for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
        loss_value = train_step(x_batch_train, y_batch_train)
        if step % 100 == 0:
            print(f"Training loss (for 1 batch) at step {step}: {float(loss_value):.4f}")
            print(f"Seen so far: {(step + 1) * batch_size} samples")
    print(f"Training acc over epoch: {float(train_acc_metric.result()):.4f}")
    train_acc_metric.reset_state()
    for x_batch_val, y_batch_val in val_dataset:
        test_step(x_batch_val, y_batch_val)
    print(f"Validation acc: {float(val_acc_metric.result()):.4f}")
    val_acc_metric.reset_state()
    elapsed = time.time() - start_time
    print(f"Time taken: {elapsed:.2f}s ({1000 * elapsed / (step + 1):.1f} ms/step)")
