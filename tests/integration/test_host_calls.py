"""Keras host work between the steps of a custom loop (real TensorFlow runs): keras-io's DDPG, as updated
for Keras 3, soft-updates its target networks through ``get_weights()`` / ``set_weights()`` every step and
acts with an eager ``actor(state)`` call on one row, around a tf.function update on 64 rows."""

from __future__ import annotations

from pathlib import Path

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.store import RunStore

AGENT = """\
import numpy as np
import tensorflow as tf
from tensorflow import keras

rng = np.random.default_rng(0)


def build():
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])


actor, target = build(), build()
target.set_weights(actor.get_weights())
opt = keras.optimizers.Adam(1e-3)
states = rng.random((512, 3)).astype("float32")


@tf.function
def update(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(actor(x, training=True) - y))
    grads = tape.gradient(loss, actor.trainable_variables)
    opt.apply_gradients(zip(grads, actor.trainable_variables))
    return loss


def soft_update(target, original, tau):
    t, o = target.get_weights(), original.get_weights()
    target.set_weights([b * tau + a * (1 - tau) for a, b in zip(t, o)])


for step in range(60):
    action = actor(states[step : step + 1]).numpy()  # act: one row, no tape
    idx = rng.integers(0, 512, 16)
    update(tf.constant(states[idx]), tf.constant(states[idx, :1] + action))
    soft_update(target, actor, 0.005)
"""


def test_weights_copied_through_numpy_and_eager_model_calls_between_steps_are_timed(
    tfd_home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    run = RunStore(tfd_home).new_run(str(script), [])
    cfg = CaptureConfig(
        script=script, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, steps=12, warmup=2, profile=False, timeout_s=240
    )
    res = run_capture(cfg, run)
    assert res.ok, res.error
    f = res.facts
    # the update's 16 rows, not the one row the actor acts on before it each step (it said batch 1)
    assert f.loop_kind == "custom" and f.step_kind == "tf.function" and f.batch_size == 16, f
    lines = AGENT.splitlines()
    got = {(c.api, c.code): c for c in f.host_calls}
    for api, code in [
        ("get_weights", "t, o = target.get_weights(), original.get_weights()"),
        ("set_weights", "target.set_weights([b * tau + a * (1 - tau) for a, b in zip(t, o)])"),
        ("call", "action = actor(states[step : step + 1]).numpy()  # act: one row, no tape"),
    ]:
        c = got.get((api, code))
        assert c is not None, (api, code, f.host_calls)
        assert c.site == f"agent.py:{lines.index('    ' + code) + 1}"
        assert c.timed_steps > 0 and c.calls >= c.timed_steps and c.seconds > 0, c
    # two models' weights a step: twice the steps
    assert (
        got[("get_weights", "t, o = target.get_weights(), original.get_weights()")].calls
        == 2
        * got[("set_weights", "target.set_weights([b * tau + a * (1 - tau) for a, b in zip(t, o)])")].calls
    )
    # the model calls inside the traced update and the target's set-up before the first step are not
    assert {c.api for c in f.host_calls} == {"get_weights", "set_weights", "call"}
    assert all(c.code != "target.set_weights(actor.get_weights())" for c in f.host_calls)
