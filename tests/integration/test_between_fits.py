"""The profile run's watch of the work between the fit() calls of a fit-per-epoch loop (real TensorFlow
runs): keras-io's character-level LSTM trains with ``fit(epochs=1)`` in a loop and then makes one
``predict()`` of one row per generated character, minutes between epochs of seconds, which a run
ending inside the first fit() never saw."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.cli import main
from tfdoctor.store import RunStore

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}

LOOP = """\
import os

import keras
import numpy as np

keras.utils.set_random_seed(0)
x = np.random.rand(1600, 8).astype("float32")
y = np.random.rand(1600, 1).astype("float32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
predicts = int(os.environ.get("PREDICTS", "40"))
callbacks = [keras.callbacks.ModelCheckpoint(os.environ["CKPT"])] if os.environ.get("CKPT") else []

for epoch in range(3):
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=callbacks)
    for i in range(predicts):
        p = model.predict(x[i : i + 1], verbose=0)[0]
    print("epoch", epoch, "done", flush=True)
"""


def _capture(tfd_home: Path, script: Path, env: dict[str, str], phases: list | None = None, **cfg: object):
    run = RunStore(tfd_home).new_run(str(script), [])
    opts: dict = {"steps": 12, "warmup": 2, "profile": False, "timeout_s": 240, "between_fits_s": 30.0, **cfg}
    progress = (lambda p: phases.append(p.phase)) if phases is not None else None
    res = run_capture(CaptureConfig(script=script, env={**QUIET, **env}, **opts), run, progress=progress)  # type: ignore[arg-type]
    return res, run


def test_the_work_between_fit_calls_of_a_loop_is_timed_until_the_next_fit(tfd_home, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    phases: list[str] = []
    res, run = _capture(tfd_home, script, {"PREDICTS": "40"}, phases)
    assert res.ok, res.error
    assert "between_fits" in phases  # the progress display says what the run does after its steps
    assert len(res.steps) == 12  # the timed steps are the fit()'s, as before
    gap = res.facts.between_fits
    assert gap is not None and gap.ended_by == "next_fit", gap
    lines = LOOP.splitlines()
    assert (
        gap.fit_site
        == f"loop.py:{lines.index('    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=callbacks)') + 1}"
    )
    assert gap.fit_steps == 200  # 1600 rows at 8: the steps one fit() of the loop runs
    [calls] = gap.predict_calls
    assert (
        calls.calls == 40
        and calls.rows == 1
        and calls.code == "p = model.predict(x[i : i + 1], verbose=0)[0]"
    )
    assert 0 < calls.seconds <= gap.seconds
    # the script went on to its next fit(), timed to its first batch, and no further: the first epoch's
    # line only
    assert gap.next_fit_model == "same" and gap.next_fit_first_batch_s is not None, gap
    out = run.file("stdout.log").read_text()
    assert "epoch 0 done" in out and "epoch 1 done" not in out


FEDAVG = """\
import keras
import numpy as np

keras.utils.set_random_seed(0)
x = np.random.rand(640, 8).astype("float32")
y = np.random.rand(640, 1).astype("float32")


def build():
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])


global_model = build()
for comm_round in range(3):
    weights = []
    for client in range(4):
        local = build()
        local.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
        local.set_weights(global_model.get_weights())
        local.fit(x[client::4], y[client::4], batch_size=16, epochs=1, verbose=0)
        weights.append(local.get_weights())
        keras.backend.clear_session()
    global_model.set_weights([np.mean(w, axis=0) for w in zip(*weights)])
    print("round", comm_round, "done", flush=True)
"""


def test_a_model_built_for_each_fit_is_named_and_its_first_batch_timed(tfd_home, tmp_path):
    """Federated averaging builds, compiles and fits a new local model per client: each fit() traces its
    train function anew before its first batch, the loop's time as much as the work between the calls."""
    script = tmp_path / "fedavg.py"
    script.write_text(FEDAVG)
    res, run = _capture(tfd_home, script, {})
    assert res.ok, res.error
    gap = res.facts.between_fits
    assert gap is not None and gap.ended_by == "next_fit", gap
    assert gap.fit_steps == 10 and gap.next_fit_model == "new", gap  # 160 rows a client at 16
    assert gap.next_fit_first_batch_s is not None and gap.next_fit_first_batch_s > 0, gap
    assert "round 0 done" not in run.file("stdout.log").read_text()  # stopped inside the first round


def test_a_write_of_the_script_after_the_shortened_fit_stops_the_run_before_it(tfd_home, tmp_path):
    """The fit() ended early still runs its epoch's end: a ModelCheckpoint there would save the shortened
    training over the user's file. The run stops at the open, before anything is written."""
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    ckpt = tmp_path / "model.keras"
    res, _ = _capture(tfd_home, script, {"PREDICTS": "5", "CKPT": str(ckpt)})
    assert res.ok, res.error
    gap = res.facts.between_fits
    assert gap is not None and gap.ended_by == "write" and gap.write_path == str(ckpt.resolve()), gap
    assert gap.seconds == 0.0 and gap.predict_calls == []  # it stopped inside the fit()'s epoch end
    assert not ckpt.exists()


def test_the_watch_ends_at_its_time_limit(tfd_home, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    res, _ = _capture(tfd_home, script, {"PREDICTS": "100000"}, between_fits_s=3.0)
    assert res.ok, res.error
    gap = res.facts.between_fits
    assert gap is not None and gap.ended_by == "limit" and gap.limit_s == 3.0, gap
    # the limit counts from the fit()'s early end (its epoch's end, then the gap)
    assert 1.0 <= gap.seconds <= 3.5 and gap.predict_calls[0].calls > 0


def test_a_fit_outside_a_loop_and_the_fix_trials_are_not_watched(tfd_home, tmp_path):
    script = tmp_path / "once.py"
    script.write_text(LOOP.replace("for epoch in range(3):\n    model.fit", "if True:\n    model.fit"))
    res, _ = _capture(tfd_home, script, {"PREDICTS": "5"})
    assert res.ok and res.facts.between_fits is None
    loop = tmp_path / "loop.py"
    loop.write_text(LOOP)
    # a fix trial: its steps are what it measures (the fix loop asks for the watch only where it judges
    # a custom loop's bursts whole: test_the_fix_loop_judges_a_bursty_loop_whole)
    guard = {"root": str(tmp_path), "since_ns": "0"}
    res, _ = _capture(tfd_home, loop, {"PREDICTS": "5"}, guard=guard, between_fits_s=0.0)
    assert res.ok and res.facts.between_fits is None


def test_a_fit_per_batch_is_not_watched(tfd_home, tmp_path):
    """An agent's replay (a fit() of one batch per step, TFD206's shape): the loop's work between the calls
    is already in its steps."""
    script = tmp_path / "agent.py"
    script.write_text(
        "import numpy as np\nimport keras\n\n"
        "rng = np.random.default_rng(0)\n"
        'model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])\n'
        'model.compile(loss="mse", optimizer="adam")\n'
        "for i in range(40):\n"
        "    state = rng.random((1, 4))\n"
        "    q = model.predict(state, verbose=0)\n"
        "    model.fit(state, q + rng.random((1, 2)), epochs=1, verbose=0)\n"
    )
    res, _ = _capture(tfd_home, script, {})
    assert res.ok, res.error
    assert res.facts.between_fits is None and {c.api for c in res.facts.keras_batch_calls} == {
        "fit",
        "predict",
    }


def test_profile_reports_the_time_between_fit_calls(tfd_home, tmp_path):
    """The CLI's profile watches (30 s at most) and TFD207 names the predict() calls of one row."""
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    env = {**os.environ, **QUIET, "TFDOCTOR_HOME": str(tfd_home), "PREDICTS": "60", "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "tfdoctor", "profile", str(script), "--steps", "20"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "TFD207" in out and "Between the fit() calls of its loop the script spends" in out, out
    assert "predict() at loop.py:17: 60 calls of 1 row" in out, out
    assert "until the loop's next fit()" in out


PPO = Path(__file__).resolve().parents[1] / "data" / "shapes" / "ppo_cartpole.py"


def test_a_custom_loops_work_between_bursts_of_steps_is_timed_and_leads_the_verdict(tfd_home, tmp_path):
    """keras-io's PPO: 1,000 environment steps (an eager ``critic(observation)`` each) and then up to 80
    policy and 80 value updates of ~2 ms: the planned steps end inside the updates, and a run ending
    there saw 2 ms steps and called the script compute-bound. The run goes on to the burst's end and
    times the collection until the next update, the eager critic calls in it; TFD207 heads the verdict."""
    script = tmp_path / "ppo_cartpole.py"
    script.write_text(PPO.read_text())
    rc = main(["profile", str(script), "--run-id", "ppo", "--timeout", "600"])
    assert rc == 0
    run = RunStore(tfd_home).get("ppo")
    report = run.report()
    gap = report.facts.between_fits
    assert gap is not None and gap.loop == "steps" and gap.ended_by == "next_step", gap
    lines = PPO.read_text().splitlines()
    # the step function's line: its decorator's, where Python's code object begins
    first = lines.index(
        "def train_policy(observation_buffer, action_buffer, logprobability_buffer, advantage_buffer):"
    )
    assert lines[first - 1] == "@tf.function" and gap.fit_site == f"ppo_cartpole.py:{first}"
    # the burst: the policy updates (80 at most, fewer where the KL stops them) and the 80 value updates
    assert gap.fit_steps is not None and 80 < gap.fit_steps <= 160, gap
    critic = f"ppo_cartpole.py:{lines.index('        value_t = critic(observation)') + 1}"
    calls = {c.site: c for c in gap.model_calls}
    assert calls[critic].api == "call" and calls[critic].calls == 1000, (
        gap.model_calls
    )  # one a collection step
    assert 0 < calls[critic].seconds < gap.seconds
    found = {f.rule_id: f for f in report.findings}
    assert found["TFD207"].decided and found["TFD207"].severity == "high", found["TFD207"]
    assert "Between the bursts of its training steps" in found["TFD207"].claim
    assert report.verdict.startswith("Bound between bursts of steps: "), report.verdict
    assert report.findings[0].rule_id == "TFD207"  # the list leads with what the verdict names
    # the run stopped as the second collection's first update began: one epoch's line printed, no more
    out = run.file("stdout.log").read_text()
    assert "Epoch: 1." in out and "Epoch: 2." not in out


EAGER_BURSTS = """\
import numpy as np
import tensorflow as tf
from tensorflow import keras

rng = np.random.default_rng(0)
policy = keras.Sequential([keras.Input((4,)), keras.layers.Dense(32, activation="tanh"), keras.layers.Dense(2)])
opt = keras.optimizers.Adam(1e-3)

for epoch in range(4):
    states = []
    for t in range(1200):  # act: one eager call a state, then the updates (1 s here: a pause > 0.5 s)
        s = rng.random((1, 4)).astype("float32")
        logits = policy(s)
        states.append(s[0])
    x = np.stack(states)
    for _ in range(40):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(policy(x, training=True)))
        grads = tape.gradient(loss, policy.trainable_variables)
        opt.apply_gradients(zip(grads, policy.trainable_variables))
    print("epoch", epoch, "done", flush=True)
"""


def test_an_eager_loops_bursts_of_steps_are_timed_from_their_ends(tfd_home, tmp_path):
    """The same watch for an eager step (counted at its apply_gradients): 40 updates after each 1,200 eager
    policy calls."""
    script = tmp_path / "agent.py"
    script.write_text(EAGER_BURSTS)
    res, run = _capture(tfd_home, script, {}, steps=12, warmup=2)
    assert res.ok, res.error
    assert len(res.steps) == 12 and res.facts.step_kind == "eager"
    gap = res.facts.between_fits
    assert gap is not None and gap.loop == "steps" and gap.ended_by == "next_step", gap
    assert gap.fit_steps == 40, gap  # the windows' 12 steps and the burst's other 28
    lines = EAGER_BURSTS.splitlines()
    [calls] = gap.model_calls
    assert calls.api == "call" and calls.calls == 1200 and calls.code == "logits = policy(s)", gap.model_calls
    assert calls.site == f"agent.py:{lines.index('        logits = policy(s)') + 1}"
    assert 0 < calls.seconds < gap.seconds
    out = run.file("stdout.log").read_text()
    assert "epoch 0 done" in out and "epoch 1 done" not in out


TWO_STEPS = """\
import numpy as np
import tensorflow as tf
from tensorflow import keras

rng = np.random.default_rng(0)
actor = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(2)])
critic = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(1)])
opt_a, opt_c = keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3)


@tf.function
def train_policy(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(actor(x) ** 2)
    grads = tape.gradient(loss, actor.trainable_variables)
    opt_a.apply_gradients(zip(grads, actor.trainable_variables))
    return loss


@tf.function
def train_value(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(critic(x) ** 2)
    grads = tape.gradient(loss, critic.trainable_variables)
    opt_c.apply_gradients(zip(grads, critic.trainable_variables))
    return loss


for epoch in range(4):
    obs = rng.normal(size=(64, 4)).astype("float32")
    for t in range(1500):  # collect: the actor called eagerly on each state (1.3 s here: a pause > 0.5 s)
        logits = actor(obs[t % 64 : t % 64 + 1])
    for _ in range(30):
        train_policy(obs)
    for _ in range(30):  # first called (and traced) after the policy updates
        train_value(obs)
    print("epoch", epoch, "done", flush=True)
"""


def test_a_step_function_first_traced_during_the_watch_counts_in_the_burst(tfd_home, tmp_path):
    """keras-io's PPO traces its value update only after its first policy updates: the planned steps end
    among those, and the burst's value updates, a step function first seen in the watch, must count in
    the burst (it read 80 policy updates, no value update, in one run, 90 in another), its tracing no
    pause between bursts."""
    script = tmp_path / "two_steps.py"
    script.write_text(TWO_STEPS)
    res, _ = _capture(tfd_home, script, {}, steps=12, warmup=2)
    assert res.ok, res.error
    assert len(res.steps) == 12 and res.facts.step_kind == "tf.function"
    gap = res.facts.between_fits
    assert gap is not None and gap.loop == "steps" and gap.ended_by == "next_step", gap
    assert gap.fit_steps == 60, gap  # 30 policy updates and 30 value updates
    [calls] = gap.model_calls
    assert calls.calls == 1500 and calls.code == "logits = actor(obs[t % 64 : t % 64 + 1])", gap.model_calls


COLLECT = """\
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras

rng = np.random.default_rng(0)
critic = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(64, activation="tanh"), keras.layers.Dense(1)]
)
opt = keras.optimizers.Adam(1e-3)


@tf.function
def train_value(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((y - critic(x, training=True)) ** 2)
    grads = tape.gradient(loss, critic.trainable_variables)
    opt.apply_gradients(zip(grads, critic.trainable_variables))
    return loss


for epoch in range(6):
    obs = rng.normal(size=(600, 8)).astype("float32")
    values = []
    for t in range(600):  # collect: the critic called eagerly on each state
        value = critic(obs[t : t + 1])
        values.append(value)
        time.sleep(0.0005)  # the environment's step
    returns = np.concatenate([v.numpy() for v in values]) + rng.normal(size=(600, 1)).astype("float32")
    for _ in range(40):
        idx = rng.integers(0, 600, 64)
        loss = train_value(obs[idx], returns[idx])
    print(f"epoch {epoch}: value loss {float(loss):.4f}")
"""


def test_the_fix_loop_judges_a_bursty_loop_whole(tfd_home, tmp_path):
    """A PPO-shaped loop (600 eager critic calls, then 40 updates of a few ms, per epoch) spends most of
    its time between bursts of steps: every --fix run is timed over a burst and the work until the next,
    so host-calls, which moves the critic calls between bursts into a tf.function, is measured (before:
    skipped, as no trial timed those calls) and the figures say they are the whole loop's."""
    script = tmp_path / "collect.py"
    script.write_text(COLLECT)
    rc = main(
        ["profile", str(script), "--run-id", "wl", "--fix", "--only", "host-calls", "--fix-rounds", "1"]
    )
    assert rc == 0
    store = RunStore(tfd_home)
    report = store.get("wl").report()
    fx = report.fix
    assert fx is not None and fx.whole_loop
    (trial,) = fx.trials
    assert trial.fix_id == "host-calls" and trial.status in ("kept", "rejected"), trial.reason
    assert trial.speedup is not None and trial.speedup_ci is not None, trial
    assert "value = graph_call(critic, obs[t : t + 1])" in trial.patch
    # every timing-only run timed the work until the next burst, the trial's and the reference's alike
    runs = [store.get(r["id"]) for r in store.list() if r.get("parent") == "wl"]
    timed = [r.report() for r in runs if "(profiled)" not in (r.meta.get("fix") or "")]
    assert timed and all(
        rep.facts.between_fits is not None and rep.facts.between_fits.ended_by == "next_step" for rep in timed
    ), [rep.facts.between_fits for rep in timed]
    # the baseline's rate in the table is the whole loop's: the steps' over the steps and the gap
    gap = report.facts.between_fits
    steps_s = gap.fit_steps / report.throughput.steps_per_s
    assert fx.baseline.steps_per_s == pytest.approx(gap.fit_steps / (steps_s + gap.seconds))
    assert script.read_text() == COLLECT  # the user's file as it was
