"""A custom MirroredStrategy loop that feeds strategy.run a plain dataset (TFD603 hit fixture: read, not run)."""

import tensorflow as tf
from tensorflow import keras

strategy = tf.distribute.MirroredStrategy()
GLOBAL_BATCH = 64 * strategy.num_replicas_in_sync
x = tf.random.normal([4096, 32])
y = tf.random.uniform([4096], 0, 10, dtype=tf.int64)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH)

with strategy.scope():
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(10)])
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)
    loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


def step_fn(features, labels):
    with tf.GradientTape() as tape:
        per_example = loss_obj(labels, model(features, training=True))
        loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def train_step(features, labels):
    return strategy.reduce("SUM", strategy.run(step_fn, args=(features, labels)), axis=None)


for (features, labels), _ in zip(dataset, range(100)):  # the whole batch to every replica
    train_step(features, labels)
