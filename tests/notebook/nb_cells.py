"""Cells the notebook tests run: tiny models, a few milliseconds per step."""

SETUP = """
import numpy as np
import tensorflow as tf
import keras

keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(512, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
"""

FIT = "model.fit(x, y, batch_size=16, epochs=20, verbose=0)\n"

CUSTOM_SETUP = (
    SETUP
    + """
opt = keras.optimizers.SGD(0.01)
ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)

@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(xb, training=True) - yb) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

def eager_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(xb, training=True) - yb) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss
"""
)

CUSTOM_LOOP = """
losses = []
for step, (xb, yb) in enumerate(ds.take(500)):
    losses.append(float(train_step(xb, yb)))
"""

EAGER_LOOP = """
for step, (xb, yb) in enumerate(ds.take(500)):
    eager_step(xb, yb)
"""

RAISES_AT_5 = """
for step, (xb, yb) in enumerate(ds.take(500)):
    if step == 5:
        raise ValueError("bad batch at step 5")
    train_step(xb, yb)
"""

INTERRUPTED_AT_6 = """
for step, (xb, yb) in enumerate(ds.take(500)):
    if step == 6:
        raise KeyboardInterrupt  # what the kernel's interrupt button raises in the cell
    train_step(xb, yb)
"""

#: an eager step that prints: under tf.function the print runs only while tracing (the output changes)
PRINTING_STEP = """
def printing_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(xb, training=True) - yb) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    print("one step done")
    return loss
"""

PRINTING_LOOP = """
for step, (xb, yb) in enumerate(ds.take(500)):
    printing_step(xb, yb)
"""
