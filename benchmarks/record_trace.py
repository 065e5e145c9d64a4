"""Record an xplane trace of about ``--events`` events with the plain TensorFlow profiler (no tfdoctor).

The benchmark's large inputs: a small eager training loop fed by a tf.data pipeline (parallel map,
batch, prefetch), each step wrapped in ``tf.profiler.experimental.Trace("train", step_num=i, _r=1)``
(the step markers TensorBoard's own tools understand; tfdoctor's harness writes the same ones),
profiled with ``tf.profiler.experimental.start/stop`` at host tracer level 2. The number of steps is
``--events`` divided by the events one step produces (``--per-step``, calibrated by the caller).

    python benchmarks/record_trace.py --events 100000 --per-step 160 --logdir /tmp/ld
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, required=True)
    ap.add_argument("--per-step", type=float, default=160.0)
    ap.add_argument("--logdir", required=True)
    args = ap.parse_args()

    import tensorflow as tf

    steps = max(5, round(args.events / args.per_step))
    ds = (
        tf.data.Dataset.range(1 << 30)
        .map(lambda i: tf.random.stateless_normal((16,), seed=(i, 0)), num_parallel_calls=2)
        .batch(8)
        .prefetch(2)
    )
    w1 = tf.Variable(tf.random.normal((16, 32)) * 0.1)
    w2 = tf.Variable(tf.random.normal((32, 1)) * 0.1)
    opt = tf.keras.optimizers.SGD(0.01)
    it = iter(ds)

    def step() -> None:
        x = next(it)
        with tf.GradientTape() as tape:
            h = tf.nn.relu(x @ w1)
            loss = tf.reduce_mean(tf.square(h @ w2 - 1.0))
        grads = tape.gradient(loss, [w1, w2])
        opt.apply_gradients(zip(grads, [w1, w2], strict=True))

    for _ in range(3):  # warm-up outside the trace
        step()
    t0 = time.perf_counter()
    tf.profiler.experimental.start(
        args.logdir, options=tf.profiler.experimental.ProfilerOptions(host_tracer_level=2)
    )
    for i in range(steps):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            step()
    tf.profiler.experimental.stop()
    print(f"recorded {steps} steps in {time.perf_counter() - t0:.1f} s into {args.logdir}", flush=True)


if __name__ == "__main__":
    main()
