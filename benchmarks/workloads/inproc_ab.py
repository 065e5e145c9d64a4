"""Profiler perturbation measured inside one interpreter: the same warmed-up training loop timed
alternately without tfdoctor (B) and with tfdoctor's step hooks installed and the profiler off (A:
what the timing window of a capture runs under), via ``tfdoctor.capture.inproc.capture_in_process``.

No process start-up, model build or tracing differs between A and B, and alternating windows of a
few seconds cancel the slow load drift of a shared machine. Prints one JSON line per round:
``{"round", "order", "a_ms", "b_ms", "a_cpu_ms", "b_cpu_ms", "a_win", "b_win"}`` (median step wall ms,
CPU ms/step, and the steps/s of 5 consecutive sub-windows of each window, for the judge's interval).

    python benchmarks/workloads/inproc_ab.py --loop function --steps 120 --rounds 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from tensorflow import keras

from tfdoctor.capture.child.clock import Windows
from tfdoctor.capture.inproc import capture_in_process
from tfdoctor.rundir import RunDir

parser = argparse.ArgumentParser()
parser.add_argument(
    "--loop",
    choices=["function", "fit", "eager", "metric"],
    default="function",
    help="metric: a tf.function step that returns nothing and adds its loss to a keras.metrics.Mean "
    "named train_loss (the TensorFlow tutorials' style; the hooks read the loss from that metric)",
)
parser.add_argument("--steps", type=int, default=120, help="timed steps per window")
parser.add_argument("--rounds", type=int, default=8)
parser.add_argument(
    "--attribute",
    action="store_true",
    help="no A/B: run --rounds hooked windows under cProfile and print the exclusive time of tfdoctor's "
    "own functions against the window's total (one JSON line per round)",
)
parser.add_argument(
    "--churn",
    action="store_true",
    help="before each plain window, install and uninstall the hooks as a capture does (nothing run in "
    "between): A and B then differ only in the hooks' work during the window, not in the patching",
)
parser.add_argument(
    "--unhook",
    default="",
    metavar="OWNER.NAME,...",
    help="hooked windows with these of tfdoctor's patches put back at the window's start (e.g. "
    "Layer.__call__,Function.__call__): which hook costs what",
)
parser.add_argument(
    "--model",
    choices=["conv", "tiny"],
    default="conv",
    help="conv: two 3x3 convolutions (a ~20 ms eager step here); tiny: one Dense layer on the flattened "
    "batch (a step of a few ms, where the hooks' absolute cost per step stands out of the noise)",
)
args = parser.parse_args()

WARM = 3  # the capture's own warm-up steps inside A (not timed, like B's first steps)
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
X = rng.normal(size=(4096, 16, 16, 3)).astype(np.float32)
Y = rng.integers(0, 10, size=4096).astype(np.int64)
ds = tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(64, drop_remainder=True).prefetch(2)
layers = (
    [keras.layers.Flatten(), keras.layers.Dense(10)]
    if args.model == "tiny"
    else [
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ]
)
model = keras.Sequential([keras.Input((16, 16, 3)), *layers])
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = keras.optimizers.SGD(0.01)
train_loss = keras.metrics.Mean(name="train_loss")
marks: list[tuple[int, int]] = []


def mark() -> None:
    marks.append((time.perf_counter_ns(), time.process_time_ns()))


def make_step():
    """A fresh tf.function per window: traced (step 0, untimed) under whatever hooks are installed,
    as a script's step function is traced under the harness's hooks (``--loop eager``: a plain function)."""

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        if args.loop == "metric":
            train_loss(loss)
            return None
        return loss

    return train_step if args.loop == "eager" else tf.function(train_step)


it = iter(ds)


class StepEnds(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        mark()


model.compile(optimizer=optimizer, loss=loss_fn)


def train(n: int) -> None:
    mark()
    if args.loop == "fit":
        model.fit(ds, steps_per_epoch=n, epochs=1, verbose=0, callbacks=[StepEnds()])
        return
    train_step = make_step()
    for _ in range(n):
        x, y = next(it)
        out = train_step(x, y)
        if out is not None:
            float(out)
        mark()


def window(first: int, count: int) -> tuple[float, float, list[float]]:
    wall = [marks[k + 1][0] - marks[k][0] for k in range(first, first + count)]
    cpu = (marks[first + count][1] - marks[first][1]) / count
    n = max(1, len(wall) // 5)
    subs = [1e9 / statistics.median(wall[i : i + n]) for i in range(0, n * 5, n) if wall[i : i + n]]
    return statistics.median(wall) / 1e6, cpu / 1e6, subs


def churn(tmp: Path, r: int) -> None:
    """What an A window does around its steps, without them: the hooks installed (Keras and TensorFlow
    methods patched, run files written) and uninstalled at once."""
    from tfdoctor.capture.inproc import InProcessCapture

    InProcessCapture(RunDir(tmp / f"churn{r}"), Windows(warmup=1, timing=1, profile=0)).start().stop(None)


def plain(tmp: Path | None = None, r: int = 0) -> tuple[float, float, list[float]]:
    if tmp is not None:
        churn(tmp, r)
    marks.clear()
    train(WARM + args.steps)
    return window(WARM, args.steps)


def unhook() -> None:
    """Put back the patches ``--unhook`` names (the others stay: the step is still counted)."""
    from tfdoctor.capture.child import hooks

    names = {n for n in args.unhook.split(",") if n}
    for owner, name, orig in hooks._PATCHES:
        if f"{getattr(owner, '__name__', owner)}.{name}" in names:
            setattr(owner, name, orig)


def hooked(tmp: Path, r: int) -> tuple[float, float, list[float]]:
    marks.clear()
    run = RunDir(tmp / f"run{r}")
    res = capture_in_process(
        lambda: (unhook(), train(WARM + args.steps + 5)),  # the capture stops it after its planned steps
        run,
        Windows(warmup=WARM, timing=args.steps, profile=0),
    )
    if res.capture.status != "complete":
        raise SystemExit(f"capture failed: {res.capture.message}")
    return window(WARM, args.steps - 1)


def attribute(tmp: Path, r: int) -> dict:
    """One hooked window under cProfile: the exclusive (own) time of the functions in tfdoctor's files,
    against everything the profiler saw in the window. cProfile's per-call cost inflates both sides (the
    hooks are small functions called per step, so their share is if anything overstated)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    hooked(tmp, r)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    own = sum(v[2] for k, v in stats.items() if f"{os.sep}tfdoctor{os.sep}" in k[0])
    total = sum(v[2] for v in stats.values())
    calls = sum(v[1] for k, v in stats.items() if f"{os.sep}tfdoctor{os.sep}" in k[0])
    ours = sorted(
        (
            (v[2], v[1], f"{Path(k[0]).name}:{k[2]}")
            for k, v in stats.items()
            if f"{os.sep}tfdoctor{os.sep}" in k[0]
        ),
        reverse=True,
    )
    top = {name: [round(t * 1e6 / args.steps, 1), round(n / args.steps, 2)] for t, n, name in ours[:12]}
    return {
        "round": r,
        "tfdoctor_s": own,
        "total_s": total,
        "tfdoctor_calls": calls,
        "steps": args.steps,
        "top_us_and_calls_per_step": top,
    }


train(30)  # warm-up: tracing, autotuning
if args.attribute:
    with tempfile.TemporaryDirectory() as d:
        hooked(Path(d), -1)  # the hooks' first window: tracing under the hooks, not timed
        for r in range(args.rounds):
            print(json.dumps(attribute(Path(d), r)), flush=True)
    raise SystemExit(0)
with tempfile.TemporaryDirectory() as d:
    for r in range(args.rounds):
        order = "AB" if r % 2 == 0 else "BA"
        got = {}
        for cond in order:
            got[cond] = hooked(Path(d), r) if cond == "A" else plain(Path(d) if args.churn else None, r)
        a, b = got["A"], got["B"]
        print(
            json.dumps(
                {
                    "round": r,
                    "order": order,
                    "a_ms": a[0],
                    "b_ms": b[0],
                    "a_cpu_ms": a[1],
                    "b_cpu_ms": b[1],
                    "a_win": a[2],
                    "b_win": b[2],
                }
            ),
            flush=True,
        )
