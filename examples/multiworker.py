"""Synchronous data-parallel training over several worker processes with
``tf.distribute.MultiWorkerMirroredStrategy`` (a custom loop over a distributed dataset).

Each worker runs this script with ``TF_CONFIG`` naming the cluster and its own task. On one machine,
``--launch N`` starts N local workers on free 127.0.0.1 ports and waits for them:

python examples/multiworker.py --launch 2 --epochs 1
TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:12345", "127.0.0.1:12346"]}, "task": {"type": "worker", "index": 0}}' \\
    tfdoctor profile examples/multiworker.py --run-id job1      (and index 1 on the other worker)

--profiler-port P starts ``tf.profiler.experimental.server.start(P + task index)`` and marks each step
with ``tf.profiler.experimental.Trace("train", step_num=...)``, for ``tfdoctor capture grpc://...``.
--slow-worker K --slow-ms MS makes worker K wait MS before fetching each batch: a straggler.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time

FEATURES = 64
NUM_CLASSES = 10
NUM_EXAMPLES = 8192


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tf_config(ports: list[int], index: int) -> str:
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


def launch(n: int, argv: list[str]) -> int:
    """Start ``n`` local workers of this script (TF_CONFIG each) and wait for all of them."""
    ports = free_ports(n)
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *argv],
            env={**os.environ, "TF_CONFIG": tf_config(ports, i)},
        )
        for i in range(n)
    ]
    return max(p.wait() for p in procs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launch", type=int, default=0, help="start N local workers and wait")
    parser.add_argument("--batch-per-replica", type=int, default=64)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--profiler-port", type=int, default=0)
    parser.add_argument("--slow-worker", type=int, default=-1)
    parser.add_argument("--slow-ms", type=float, default=0.0)
    args, rest = parser.parse_known_args()
    if args.launch:
        argv = [a for a in sys.argv[1:]]
        i = argv.index("--launch")
        del argv[i : i + 2]
        sys.exit(launch(args.launch, argv + rest))

    import numpy as np
    import tensorflow as tf
    from tensorflow import keras
    from tensorflow.keras import layers

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task = strategy.cluster_resolver.task_id
    n = strategy.num_replicas_in_sync
    global_batch = args.batch_per_replica * n
    steps = args.steps_per_epoch or NUM_EXAMPLES // global_batch
    print(f"worker {task}: {n} replica(s) in sync; global batch {global_batch}", flush=True)
    if args.profiler_port:
        tf.profiler.experimental.server.start(args.profiler_port + task)

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x_all = rng.normal(size=(NUM_EXAMPLES, FEATURES)).astype(np.float32)
    y_all = np.argmax(x_all @ rng.normal(size=(FEATURES, NUM_CLASSES)), axis=1).astype(np.int64)

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices((x_all, y_all))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).shuffle(4096, seed=0).repeat()
        return ds.batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True).prefetch(2)

    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input(shape=(FEATURES,)),
                layers.Dense(args.width, activation="relu"),
                layers.Dense(args.width, activation="relu"),
                layers.Dense(NUM_CLASSES),
            ]
        )
        optimizer = keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9)
        optimizer.build(model.trainable_variables)
        loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def step_fn(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        x, y = inputs
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_obj(y, logits), global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        per_replica = strategy.run(step_fn, args=(inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    batches = iter(strategy.distribute_datasets_from_function(dataset_fn))
    slow = args.slow_ms / 1000.0 if task == args.slow_worker else 0.0
    step = 0
    for epoch in range(args.epochs):
        t0, total = time.perf_counter(), 0.0
        for _ in range(steps):
            marker = (
                tf.profiler.experimental.Trace("train", step_num=step, _r=1)
                if args.profiler_port
                else contextlib.nullcontext()
            )
            with marker:
                if slow:
                    time.sleep(slow)
                total += float(train_step(next(batches)))
            step += 1
        dt = time.perf_counter() - t0
        print(
            f"worker {task} epoch {epoch + 1}: loss {total / steps:.4f} ({steps / dt:.1f} steps/s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
