"""Record the small CPU traces the rule catalog is tested on (sample_traces/rules-<scenario>/).

Each scenario is a tiny real TF training loop, profiled with the TF profiler the way tfdoctor's harness
does it: ``Trace("train", step_num=i, _r=1)`` around each step, ``Trace("tfdoctor_input", step_num=i)``
around the batch fetch, a few warm-up steps outside the profile window. Next to the logdir it writes
``facts.json``: what the harness would have recorded about the run (input kind, dataset stages, step
kind, batch size, dtype policy, jit setting, source lines).

    python sample_traces/rules-scenarios/record.py [scenario ...]     # default: all

Needs TensorFlow (CPU is enough); takes well under a minute per scenario on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WARMUP = 3
PROFILE = 8


def _cpu_flags() -> str:
    """The CPU flags that decide low-precision advice (bf16 support), as the harness records them."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    flags = set(re.findall(r"\b(avx512_bf16|amx_bf16|amx_tile|avx512f|avx2|fma)\b", text))
    return " ".join(sorted(flags))


def _facts(**kw) -> dict:
    base = {
        "tf_version": tf.__version__,
        "keras_version": tf.keras.__version__ if hasattr(tf.keras, "__version__") else None,
        "python_version": sys.version.split()[0],
        "devices": [{"name": "/physical_device:CPU:0", "kind": "CPU"}],
        "dtype_policy": "float32",
        "num_replicas": 1,
        "extra": {"cpu_count": str(os.cpu_count()), "cpu_flags": _cpu_flags(), "recorded_by": "sample_traces/rules-scenarios/record.py"},
    }
    base.update(kw)
    return base


def _line(fn) -> str:
    code = fn.__code__ if hasattr(fn, "__code__") else fn.python_function.__code__
    return f"record.py:{code.co_firstlineno}"


def _out(name: str) -> Path:
    out = ROOT / f"rules-{name}"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def _profile_loop(name: str, next_batch, step, facts: dict, n_profile: int = PROFILE) -> Path:
    """Warm up, then profile ``n_profile`` steps with the harness's markers; write facts and steps."""
    out = _out(name)
    for _ in range(WARMUP):
        step(*next_batch())
    logdir = out / "logdir"
    steps = []
    tf.profiler.experimental.start(str(logdir))
    try:
        for i in range(WARMUP, WARMUP + n_profile):
            t0 = time.time_ns()
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                with tf.profiler.experimental.Trace("tfdoctor_input", step_num=i):
                    batch = next_batch()
                t1 = time.time_ns()
                loss = step(*batch)
                loss = float(loss)
            steps.append(
                {"index": i, "window": "profile", "start_ns": t0, "end_ns": time.time_ns(),
                 "input_wait_ns": t1 - t0, "loss": loss}
            )
    finally:
        tf.profiler.experimental.stop()
    (out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")
    (out / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    return out


def _model(width: int = 32, depth: int = 2):
    layers = [tf.keras.layers.Dense(width, activation="relu") for _ in range(depth)]
    layers.append(tf.keras.layers.Dense(1))
    m = tf.keras.Sequential(layers)
    m.build((None, 64))
    return m


def _train_step(model, opt, jit: bool | None = None, function: bool = True):
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    if not function:
        return step
    return tf.function(step, jit_compile=jit)


def _heavy(x):
    # deterministic per-example preprocessing: a few dense transforms of the feature vector
    m = tf.reshape(tf.tile(x, [64]), (64, 64))
    for _ in range(6):
        m = tf.tanh(tf.matmul(m, m) * 0.01)
    return m[0]


def _examples(n: int = 4096):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 64)).astype("float32")
    y = rng.standard_normal((n, 1)).astype("float32")
    return x, y


def _run_dataset(name: str, ds, facts: dict, batch: int, model_depth: int = 2, width: int = 32):
    it = iter(ds.repeat())
    model = _model(width, model_depth)
    opt = tf.keras.optimizers.SGD(0.01)
    step = _train_step(model, opt)
    return _profile_loop(name, lambda: next(it), step, facts | {"batch_size": batch})


def input_sequential_map():
    """map() without num_parallel_calls and no prefetch: input-bound, the map stage is the cause."""
    x, y = _examples()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (_heavy(a), b)).batch(32)
    facts = _facts(
        loop_kind="custom", step_kind="tf.function", step_counter="apply_gradients", input_kind="tf.data",
        dataset=[
            {"op": "from_tensor_slices"},
            {"op": "map", "parallel": False, "autotune": False, "detail": "map(lambda a, b: (_heavy(a), b))"},
            {"op": "batch", "parallel": False},
        ],
        source={"dataset_map": _line(input_sequential_map) , "step_fn": _line(_train_step)},
    )
    return _run_dataset("input-sequential-map", ds, facts, 32)


def input_generator():
    """tf.data.Dataset.from_generator over a Python generator doing numpy work per example."""
    x, y = _examples(2048)

    def gen():
        while True:
            for a, b in zip(x, y, strict=True):
                m = np.outer(a, a)
                for _ in range(3):
                    m = np.tanh(m @ m * 0.01)
                yield m[0].astype("float32"), b

    spec = (tf.TensorSpec((64,), tf.float32), tf.TensorSpec((1,), tf.float32))
    ds = tf.data.Dataset.from_generator(gen, output_signature=spec).batch(32)
    facts = _facts(
        loop_kind="custom", step_kind="tf.function", step_counter="apply_gradients",
        input_kind="python_generator",
        dataset=[{"op": "from_generator", "detail": "from_generator(gen)"}, {"op": "batch", "parallel": False}],
        source={"dataset_source": _line(input_generator), "step_fn": _line(_train_step)},
    )
    return _run_dataset("input-generator", ds, facts, 32)


def input_autotuned_saturated():
    """Already parallel (AUTOTUNE) and prefetched, but the preprocessing needs more cores than there are."""
    x, y = _examples()
    ds = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(1024, seed=0)
        .map(lambda a, b: (_heavy(_heavy(a)), b), num_parallel_calls=tf.data.AUTOTUNE)
        .batch(32)
        .prefetch(tf.data.AUTOTUNE)
    )
    facts = _facts(
        loop_kind="custom", step_kind="tf.function", step_counter="apply_gradients", input_kind="tf.data",
        dataset=[
            {"op": "from_tensor_slices"},
            {"op": "shuffle"},
            {"op": "map", "parallel": True, "autotune": True},
            {"op": "batch", "parallel": False},
            {"op": "prefetch", "autotune": True},
        ],
        source={"dataset_map": _line(input_autotuned_saturated), "step_fn": _line(_train_step)},
    )
    return _run_dataset("input-autotuned-saturated", ds, facts, 32)


def well_fed():
    """cache() + parallel map + prefetch feeding a model with real work per step: not input-bound."""
    x, y = _examples(1024)
    ds = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .map(lambda a, b: (_heavy(a), b), num_parallel_calls=tf.data.AUTOTUNE)
        .cache()
        .batch(256)
        .prefetch(tf.data.AUTOTUNE)
    )
    list(ds.take(4))  # fill the cache before the profiled steps
    facts = _facts(
        loop_kind="custom", step_kind="tf.function", step_counter="apply_gradients", input_kind="tf.data",
        dataset=[
            {"op": "from_tensor_slices"},
            {"op": "map", "parallel": True, "autotune": True},
            {"op": "cache"},
            {"op": "batch", "parallel": False},
            {"op": "prefetch", "autotune": True},
        ],
        source={"step_fn": _line(_train_step)},
    )
    return _run_dataset("well-fed", ds, facts, 256, model_depth=4, width=512)


def eager_loop():
    """A custom training loop whose step is plain Python (no tf.function): op-by-op eager dispatch."""
    x, y = _examples(1024)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(2).repeat()
    it = iter(ds)
    model = _model(32, 3)
    opt = tf.keras.optimizers.SGD(0.01)
    step = _train_step(model, opt, function=False)
    facts = _facts(
        loop_kind="custom", step_kind="eager", step_counter="apply_gradients", input_kind="tf.data",
        batch_size=32,
        dataset=[{"op": "from_tensor_slices"}, {"op": "batch"}, {"op": "prefetch"}],
        source={"step_fn": _line(_train_step)},
    )
    return _profile_loop("eager-loop", lambda: next(it), step, facts)


def retracing():
    """A tf.function fed batches of a different size every step: it traces again and again."""
    x, y = _examples(1024)
    model = _model(32, 2)
    opt = tf.keras.optimizers.SGD(0.01)
    step = _train_step(model, opt)
    sizes = iter([20 + i for i in range(100)])

    def next_batch():
        n = next(sizes)
        return tf.constant(x[:n]), tf.constant(y[:n])

    facts = _facts(
        loop_kind="custom", step_kind="tf.function", step_counter="apply_gradients", input_kind="numpy",
        batch_size=None, retraces=WARMUP + PROFILE - 1,
        source={"step_fn": _line(_train_step)},
    )
    return _profile_loop("retracing", next_batch, step, facts)


def _elementwise_model_step(jit: bool | None):
    w = tf.Variable(tf.random.stateless_normal((64, 64), seed=(1, 2)) * 0.05)
    opt = tf.keras.optimizers.SGD(0.01)

    def step(x, y):
        with tf.GradientTape() as tape:
            h = x
            for _ in range(12):  # many small elementwise ops around one small matmul
                h = tf.nn.gelu(h * 0.9 + 0.1) - 0.05 * tf.sigmoid(h)
            h = tf.matmul(h, w)
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(h, axis=1, keepdims=True) - y))
        g = tape.gradient(loss, [w])
        opt.apply_gradients(zip(g, [w], strict=True))
        return loss

    return tf.function(step, jit_compile=jit)


def _small_ops(name: str, jit: bool | None):
    x, y = _examples(2048)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).cache().prefetch(2).repeat()
    it = iter(ds)
    step = _elementwise_model_step(jit)
    facts = _facts(
        loop_kind="custom", step_kind="tf.function", step_counter="apply_gradients", input_kind="tf.data",
        batch_size=64, jit_compile=bool(jit),
        dataset=[{"op": "from_tensor_slices"}, {"op": "batch"}, {"op": "cache"}, {"op": "prefetch"}],
        source={"step_fn": _line(_elementwise_model_step)},
    )
    return _profile_loop(name, lambda: next(it), step, facts)


def small_ops_no_xla():
    """Many small elementwise ops per step, no XLA: each op is its own kernel launch."""
    return _small_ops("small-ops-no-xla", None)


def small_ops_xla():
    """The same step with jit_compile=True: XLA fuses the elementwise chain."""
    return _small_ops("small-ops-xla", True)


def xla_recompile():
    """jit_compile=True with a batch size that changes every step: XLA compiles the step again each time."""
    x, y = _examples(1024)
    step = _elementwise_model_step(True)
    sizes = iter([40 + i for i in range(100)])

    def next_batch():
        n = next(sizes)
        return tf.constant(x[:n]), tf.constant(y[:n])

    facts = _facts(
        loop_kind="custom", step_kind="tf.function", step_counter="apply_gradients", input_kind="numpy",
        jit_compile=True, retraces=WARMUP + PROFILE - 1,
        source={"step_fn": _line(_elementwise_model_step)},
    )
    return _profile_loop("xla-recompile", next_batch, step, facts)


def keras_fit_tiny():
    """model.fit on a tiny model with batch 8 and steps_per_execution=1: per-step overhead dominates."""
    return _keras_fit("keras-fit-tiny", batch=8, spe=1)


def _keras_fit(name: str, batch: int, spe: int):
    x, y = _examples(4096)
    model = _model(16, 1)
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=spe)
    out = _out(name)
    logdir = out / "logdir"
    steps: list[dict] = []

    class Markers(tf.keras.callbacks.Callback):
        # what the harness's injected callback does: one "train" marker per step, profile window by step
        def __init__(self):
            super().__init__()
            self.ctx = None
            self.t0 = 0

        def on_train_batch_begin(self, batch, logs=None):
            if batch == WARMUP:
                tf.profiler.experimental.start(str(logdir))
            if WARMUP <= batch < WARMUP + PROFILE:
                self.t0 = time.time_ns()
                self.ctx = tf.profiler.experimental.Trace("train", step_num=batch, _r=1)
                self.ctx.__enter__()

        def on_train_batch_end(self, batch, logs=None):
            if self.ctx is not None:
                self.ctx.__exit__(None, None, None)
                self.ctx = None
                steps.append({"index": batch, "window": "profile", "start_ns": self.t0, "end_ns": time.time_ns(),
                              "loss": float(logs["loss"]) if logs and "loss" in logs else None})
            if batch == WARMUP + PROFILE - 1:
                tf.profiler.experimental.stop()
                self.model.stop_training = True

    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, callbacks=[Markers()])
    facts = _facts(
        loop_kind="keras_fit", step_kind="tf.function", step_counter="keras_callback", input_kind="numpy",
        batch_size=batch, steps_per_execution=spe, optimizer="SGD", jit_compile=False,
        source={"fit": _line(_keras_fit)},
    )
    (out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")
    (out / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    return out


SCENARIOS = {
    f.__name__: f
    for f in (
        input_sequential_map, input_generator, input_autotuned_saturated, well_fed, eager_loop, retracing,
        small_ops_no_xla, small_ops_xla, xla_recompile, keras_fit_tiny,
    )
}

if __name__ == "__main__":
    names = sys.argv[1:] or list(SCENARIOS)
    for n in names:
        t = time.time()
        out = SCENARIOS[n]()
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        print(f"{n}: {out.relative_to(ROOT.parent)} {size / 1e6:.2f} MB in {time.time() - t:.1f}s", flush=True)
