"""A MirroredStrategy custom loop over 2 logical CPU replicas for tfdoctor's capture tests: the input
is a tf.distribute dataset (what the harness must see as tf.data, with its pipeline and batch).

    python tests/scripts/distributed_input.py --how {function,dataset} [--iterator-in-step]

--how function: distribute_datasets_from_function, each replica's dataset batched by
PER_REPLICA_BATCH; --how dataset: experimental_distribute_dataset of a dataset batched by the global
batch. --iterator-in-step: the step function takes the iterator and calls next() inside (the TF
tutorial's other form) instead of the loop's `for x in dist_ds`.
"""

from __future__ import annotations

import argparse

import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--how", choices=("function", "dataset"), default="function")
parser.add_argument("--iterator-in-step", action="store_true")
parser.add_argument("--steps", type=int, default=1000)
args = parser.parse_args()

REPLICAS = 2
PER_REPLICA_BATCH = 8
GLOBAL_BATCH = PER_REPLICA_BATCH * REPLICAS

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(REPLICAS)])

x = tf.random.stateless_normal((4096, 16), seed=(1, 2))
y = tf.cast(tf.reduce_sum(x, axis=1) > 0, tf.int64)


def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    ds = ds.map(lambda a, b: (a * 2.0, b))
    return ds.batch(ctx.get_per_replica_batch_size(GLOBAL_BATCH))


if args.how == "function":
    dist_ds = strategy.distribute_datasets_from_function(dataset_fn)
else:
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().map(lambda a, b: (a * 2.0, b))
    dist_ds = strategy.experimental_distribute_dataset(ds.batch(GLOBAL_BATCH))

with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.Input((16,)), tf.keras.layers.Dense(32, "relu"), tf.keras.layers.Dense(2)]
    )
    optimizer = tf.keras.optimizers.SGD(0.05)
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


def train_step(inputs):
    a, b = inputs
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(
            loss_object(b, model(a, training=True)), global_batch_size=GLOBAL_BATCH
        )
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


@tf.function
def distributed_step(inputs):
    per_replica = strategy.run(train_step, args=(inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


@tf.function
def distributed_step_on(iterator):
    per_replica = strategy.run(train_step, args=(next(iterator),))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


if args.iterator_in_step:
    it = iter(dist_ds)
    for _ in range(args.steps):
        loss = distributed_step_on(it)
else:
    for step, batch in enumerate(dist_ds):
        if step >= args.steps:
            break
        loss = distributed_step(batch)
print(f"loss {float(loss):.4f}")
