"""A script that profiles itself, as TensorFlow's profiler guide shows: ``tf.profiler.experimental.start``
around a custom loop with ``Trace("train", step_num=..., _r=1)`` markers (``loop``), or Keras's
``TensorBoard(profile_batch=...)`` inside ``tf.profiler.experimental.Profile`` (``fit``). Under tfdoctor
its profiler must not take tfdoctor's session."""

import sys

import keras
import numpy as np
import tensorflow as tf

x = np.random.rand(2048, 16).astype("float32")
y = np.random.randint(0, 4, 2048)
model = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)]
)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

if sys.argv[1:] == ["fit"]:
    model.compile("adam", loss_fn)
    board = keras.callbacks.TensorBoard(log_dir="own_logs", profile_batch=(2, 20))
    with tf.profiler.experimental.Profile("own_profile"):
        model.fit(x, y, batch_size=32, epochs=2, callbacks=[board], verbose=0)
else:
    opt = keras.optimizers.Adam()

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    it = iter(tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat())
    tf.profiler.experimental.start("own_logdir")
    for step in range(60):
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
            loss = train_step(*next(it))
    tf.profiler.experimental.stop()
print("done")
