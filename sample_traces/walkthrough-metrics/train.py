"""The shape of TensorFlow's "custom training walkthrough": an eager loop over a tf.data pipeline whose
step is followed by metric updates that run the model forward a second time. Between ``apply_gradients``
and the next ``GradientTape`` lies the metric work, not waiting for the batch.

Recorded with ``tfdoctor profile sample_traces/walkthrough-metrics/train.py --steps 14`` (TF 2.21 CPU);
the run directory's facts.json, steps.jsonl and logdir/ are kept here.
"""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.standard_normal((4096, 32)).astype("float32")
y = rng.integers(0, 3, 4096)
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).batch(32).repeat().prefetch(2)

model = tf.keras.Sequential(
    [tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(3)]
)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
opt = tf.keras.optimizers.SGD(0.01)
loss_avg = tf.keras.metrics.Mean()
accuracy = tf.keras.metrics.SparseCategoricalAccuracy()

for step, (xb, yb) in enumerate(ds):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    # the walkthrough's metric updates: a second forward pass, between this step and the next
    loss_avg.update_state(loss)
    accuracy.update_state(yb, model(xb, training=True))
    for _ in range(3):
        accuracy.update_state(yb, model(xb, training=False))
    if step >= 400:
        break
