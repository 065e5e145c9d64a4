"""A custom MirroredStrategy loop whose loss is a per-replica mean (TFD604 hit fixture: read, not run)."""

import tensorflow as tf
from tensorflow import keras

strategy = tf.distribute.MirroredStrategy()
GLOBAL_BATCH = 64 * strategy.num_replicas_in_sync
x = tf.random.normal([4096, 32])
y = tf.random.uniform([4096], 0, 10, dtype=tf.int64)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH)
dist = strategy.experimental_distribute_dataset(dataset)

with strategy.scope():
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(10)])
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)
    loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


def compute_loss(labels, logits):
    return tf.reduce_mean(loss_obj(labels, logits))  # a per-replica mean: N times too large once summed


def step_fn(inputs):
    features, labels = inputs
    with tf.GradientTape() as tape:
        loss = compute_loss(labels, model(features, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def train_step(inputs):
    return strategy.reduce("SUM", strategy.run(step_fn, args=(inputs,)), axis=None)


for batch, _ in zip(dist, range(100)):
    train_step(batch)
