"""Several training steps a ``tf.function`` call, as TensorFlow's "Custom training with
tf.distribute.Strategy" tutorial (its "iterating inside a tf.function" section) and Model Garden's Orbit
write it: ``for _ in tf.range(steps): step_fn(next(iterator))`` in one function, the step a plain
function, a loss metric read each epoch. Synthetic data, CPU-sized.

    python tests/data/shapes/multi_step_range.py
"""

import numpy as np
import tensorflow as tf

GLOBAL_BATCH_SIZE = 64
STEPS_PER_CALL = 16
STEPS_PER_EPOCH = 128
EPOCHS = 8

rng = np.random.default_rng(0)
x_train = rng.normal(size=(8192, 64)).astype("float32")
y_train = (x_train[:, :10].argmax(axis=1) + (rng.random(8192) < 0.1)).astype("int64") % 10
train_dataset = (
    tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(8192).repeat().batch(GLOBAL_BATCH_SIZE)
)

model = tf.keras.Sequential(
    [
        tf.keras.Input(shape=(64,)),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(10),
    ]
)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3)
train_loss = tf.keras.metrics.Mean(name="train_loss")


def step_fn(inputs):
    images, labels = inputs
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(images, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    train_loss.update_state(loss)


@tf.function
def train_multiple_steps(iterator, steps):
    for _ in tf.range(steps):
        step_fn(next(iterator))


train_iterator = iter(train_dataset)
for epoch in range(EPOCHS):
    for _ in range(STEPS_PER_EPOCH // STEPS_PER_CALL):
        train_multiple_steps(train_iterator, tf.constant(STEPS_PER_CALL))
    print(f"Epoch {epoch + 1}, Loss: {train_loss.result():.4f}")
    train_loss.reset_state()
