"""Data-parallel training with ``tf.distribute.MirroredStrategy``: a custom loop (or Keras ``fit``)
over every GPU, or over logical CPU devices when there is no GPU.

python examples/mirrored.py --replicas 2 --epochs 1
tfdoctor profile examples/mirrored.py -- --replicas 2
tfdoctor scale examples/mirrored.py --replicas 1,2

Pathologies on request (what the distribution rules look for):
  --no-distribute-dataset   iterate a plain tf.data dataset and feed strategy.run (no
                            experimental_distribute_dataset)
  --mean-loss               tf.reduce_mean of the per-example loss inside strategy.run (the loss is
                            not scaled by the global batch: gradients are summed over replicas)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

FEATURES = 64
NUM_CLASSES = 10
NUM_EXAMPLES = 8192


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian features whose class is a linear function of them (so the loss falls)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    w = rng.normal(size=(FEATURES, NUM_CLASSES)).astype(np.float32)
    return x, np.argmax(x @ w, axis=1).astype(np.int64)


def build_model(width: int) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input(shape=(FEATURES,)),
            layers.Dense(width, activation="relu"),
            layers.Dense(width, activation="relu"),
            layers.Dense(NUM_CLASSES),
        ]
    )


def data_parallel_devices(replicas: int) -> list[str]:
    """Every GPU; without GPUs, ``replicas`` logical CPU devices (configured here unless a launcher,
    such as ``tfdoctor scale``, already split the CPU before the script ran)."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        names = [d.name for d in tf.config.list_logical_devices("GPU")]
        return names[:replicas] if replicas else names
    cpus = tf.config.list_physical_devices("CPU")
    if replicas > 1 and len(tf.config.get_logical_device_configuration(cpus[0]) or []) < replicas:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
        )
    names = [d.name for d in tf.config.list_logical_devices("CPU")]
    return names[:replicas] if replicas else names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=0, help="devices to use (default: all)")
    parser.add_argument("--batch-per-replica", type=int, default=64)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--loop", choices=("custom", "keras"), default="custom")
    parser.add_argument("--no-distribute-dataset", action="store_true")
    parser.add_argument("--mean-loss", action="store_true")
    args = parser.parse_args()

    devices = data_parallel_devices(args.replicas)
    strategy = tf.distribute.MirroredStrategy(devices)
    n = strategy.num_replicas_in_sync
    global_batch = args.batch_per_replica * n
    steps = args.steps_per_epoch or NUM_EXAMPLES // global_batch
    print(f"{n} replica(s) on {', '.join(devices)}; global batch {global_batch}", flush=True)

    keras.utils.set_random_seed(0)
    x_all, y_all = make_data(NUM_EXAMPLES)
    dataset = (
        tf.data.Dataset.from_tensor_slices((x_all, y_all))
        .shuffle(NUM_EXAMPLES, seed=0)
        .repeat()
        .batch(global_batch, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    with strategy.scope():
        model = build_model(args.width)
        optimizer = keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9)
        optimizer.build(model.trainable_variables)  # slots created here, not inside strategy.run

    if args.loop == "keras":
        with strategy.scope():
            model.compile(
                optimizer=optimizer,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            )
        model.fit(dataset, epochs=args.epochs, steps_per_epoch=steps, verbose=2)
        return

    with strategy.scope():
        loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def step_fn(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        x, y = inputs
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            if args.mean_loss:
                loss = tf.reduce_mean(loss_obj(y, logits))
            else:
                loss = tf.nn.compute_average_loss(loss_obj(y, logits), global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        per_replica = strategy.run(step_fn, args=(inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    batches = iter(
        dataset if args.no_distribute_dataset else strategy.experimental_distribute_dataset(dataset)
    )
    for epoch in range(args.epochs):
        t0, total = time.perf_counter(), 0.0
        for _ in range(steps):
            total += float(train_step(next(batches)))
        dt = time.perf_counter() - t0
        print(
            f"epoch {epoch + 1}: loss {total / steps:.4f} ({steps} steps, {steps * global_batch / dt:.0f} ex/s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
