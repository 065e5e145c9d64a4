"""The in-script API, run the way a user runs it: ``python train.py`` with ``with tfdoctor.profile()``
(or ``tfdoctor.keras.Profile()`` in ``fit``) inside, real TensorFlow, a real run store.

Each script prints one JSON line (``RESULT {...}``) with what it saw after the block; the tests check
that line, the stored run (meta.json, report.json, the index) and what was printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfdoctor.store import RunStore

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

HEAD = """
import json, os, sys
import numpy as np
import tensorflow as tf
import keras
import tfdoctor

HOME = os.environ["TFDOCTOR_HOME"]
x = np.random.default_rng(0).normal(size=(512, 8)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
"""

FIT = (
    HEAD
    + """
with tfdoctor.profile(steps=12, home=HOME) as run:
    history = model.fit(x, y, batch_size=16, epochs=50, verbose=0)
    after_fit_in_block = True
print("RESULT " + json.dumps({
    "epochs_run": len(history.history["loss"]),
    "after_fit_in_block": after_fit_in_block,
    "run_id": run.run_id,
    "status": run.report.status,
    "steps": len(run.report.steps),
    "examples_per_s": run.report.throughput.examples_per_s,
    "batch": run.report.facts.batch_size,
    "message": run.message,
    "nested": run.nested,
}))
"""
)

LOOP = (
    HEAD
    + """
opt = keras.optimizers.SGD(0.01)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()
reached = []
with tfdoctor.profile(steps=12, home=HOME) as run:
    for xb, yb in ds:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(xb) - yb) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    reached.append("after-loop")
print("RESULT " + json.dumps({
    "reached": reached,
    "run_id": run.run_id,
    "status": run.report.status,
    "steps": len(run.report.steps),
    "message": run.message,
}))
"""
)

CALLBACK = (
    HEAD
    + """
cb = tfdoctor.keras.Profile(steps=12, home=HOME)
history = model.fit(x, y, batch_size=32, epochs=50, verbose=0, callbacks=[cb])
print("RESULT " + json.dumps({
    "epochs_run": len(history.history["loss"]),
    "run_id": cb.run_id,
    "status": cb.report.status,
    "steps": len(cb.report.steps),
    "batch": cb.report.facts.batch_size,
    "loop_kind": cb.report.facts.loop_kind,
}))
"""
)

RAISES = (
    HEAD
    + """
opt = keras.optimizers.SGD(0.01)
try:
    with tfdoctor.profile(steps=30, home=HOME) as run:
        for i in range(100):
            if i == 6:
                raise ValueError("bad batch 6\\nsecond line of the message")
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x[:16]) - y[:16]) ** 2)
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
except ValueError as e:
    print("RESULT " + json.dumps({"caught": str(e).splitlines()[0], "run_id": run.run_id,
                                  "status": run.report.status, "message": run.message}))
"""
)


def run_script(tmp_path: Path, source: str, home: Path, *cmd_prefix: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(source, encoding="utf-8")
    env = {
        **os.environ,
        "TFDOCTOR_HOME": str(home),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    argv = [*cmd_prefix, str(script)] if cmd_prefix else [sys.executable, str(script)]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def result_of(proc: subprocess.CompletedProcess[str]) -> dict:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return json.loads(lines[-1][len("RESULT ") :])


def stored(home: Path, run_id: str) -> tuple[dict, dict, dict]:
    store = RunStore(home)
    run = store.get(run_id)
    rows = {r["id"]: r for r in store.list()}
    report = json.loads(run.file("report.json").read_text())
    return run.meta, report, rows[run_id]


def test_with_block_around_fit_returns_history_and_stores_the_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = run_script(tmp_path, FIT, home)
    r = result_of(proc)
    # fit returned normally at the planned step: its History is bound, the rest of the block ran
    assert r["after_fit_in_block"] is True
    assert 1 <= r["epochs_run"] < 50
    assert r["status"] == "complete" and r["steps"] == 12 and r["nested"] is False
    assert r["batch"] == 16 and r["examples_per_s"] > 0
    assert r["message"] is None
    meta, report, row = stored(home, r["run_id"])
    assert meta["status"] == "complete" and report["status"] == "complete"
    assert meta["script"] == str(tmp_path / "train.py") and meta["inscript"].endswith("train.py:14")
    assert row["examples_per_s"] == pytest.approx(r["examples_per_s"])
    assert report["trace_files"], "the profile window wrote a trace"
    # the report was printed (stderr), naming the run
    assert f"run {r['run_id']} stored" in proc.stderr and "Throughput" in proc.stderr


def test_with_block_around_a_custom_loop_stops_it_and_says_the_rest_did_not_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    r = result_of(run_script(tmp_path, LOOP, home))
    assert r["reached"] == []  # StopCapture left the loop and the block; the script went on after it
    assert r["status"] == "complete" and r["steps"] == 12
    assert "rest of the `with tfdoctor.profile()` block did not run" in r["message"]
    meta, report, _ = stored(home, r["run_id"])
    assert report["facts"]["loop_kind"] == "custom" or report["facts"]["input_kind"] == "tf.data"
    assert meta["status"] == "complete"


def test_keras_callback_profiles_fit_and_fit_returns(tmp_path: Path) -> None:
    home = tmp_path / "home"
    r = result_of(run_script(tmp_path, CALLBACK, home))
    assert 1 <= r["epochs_run"] < 50
    assert r["status"] == "complete" and r["steps"] == 12
    assert r["batch"] == 32 and r["loop_kind"] == "keras_fit"
    meta, report, _ = stored(home, r["run_id"])
    assert meta["status"] == "complete" and report["throughput"]["examples_per_s"] > 0


def test_an_error_in_the_block_propagates_after_the_run_is_stored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    r = result_of(run_script(tmp_path, RAISES, home))
    assert r["caught"] == "bad batch 6"
    assert r["status"] == "failed"
    # the one-line summary: the exception's type and FIRST line
    assert r["message"] == "the code raised after 6 steps: ValueError: bad batch 6"
    meta, report, _ = stored(home, r["run_id"])
    assert meta["status"] == "failed" and "ValueError: bad batch 6" in report["error"]


def test_under_tfdoctor_profile_the_block_is_nested_and_records_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = run_script(
        tmp_path, FIT, home, sys.executable, "-m", "tfdoctor", "profile", "--steps", "12", "--run-id", "outer"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [row["id"] for row in RunStore(home).list()]
    assert runs == ["outer"]  # only the CLI's run: the block inside the script stayed out of the way


EAGER_FIX = (
    HEAD
    + """
opt = keras.optimizers.SGD(0.01)


def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(xb) - yb) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss


with tfdoctor.profile(steps=12, home=HOME, fix=True, only=["tf-function"], run_id="inscript") as run:
    for i in range(100_000):
        train_step(x[:32], y[:32])
print("RESULT " + json.dumps({"run_id": run.run_id, "fix_run_id": run.fix_run_id, "nested": run.nested}))
"""
)


def test_fix_true_runs_the_cli_fix_loop_on_the_script(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = run_script(tmp_path, EAGER_FIX, home)
    r = result_of(proc)
    assert r == {"run_id": "inscript", "fix_run_id": "inscript-fix", "nested": False}
    store = RunStore(home)
    ids = {row["id"] for row in store.list()}
    assert {"inscript", "inscript-fix"} <= ids
    # in the fix loop's child runs the block was nested: every other run is one of the loop's trials
    others = ids - {"inscript", "inscript-fix"}
    assert all(store.get(i).meta.get("parent") == "inscript-fix" for i in others), others
    fixed = store.get("inscript-fix").report()
    assert fixed is not None and fixed.fix is not None
    assert next(t.fix_id for t in fixed.fix.trials) == "tf-function"
    assert "fix loop:" in proc.stderr and "--only tf-function" in proc.stderr
