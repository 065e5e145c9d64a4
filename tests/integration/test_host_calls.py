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


def test_the_host_calls_fix_moves_them_into_tf_functions_with_the_same_numbers(
    tfd_home: Path, tmp_path: Path
) -> None:
    """The fix on what the run saw: the soft update becomes a tf.function on the variables and the act
    call a graph call; the fixed script's facts show no copy left, and its update gives the weights the
    numpy one gives (run side by side on equal models)."""
    from tfdoctor.fixes import FixContext, get_fix
    from tfdoctor.fixes.sanity import not_in_effect

    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    cfg = CaptureConfig(
        script=script, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, steps=12, warmup=2, profile=False, timeout_s=240
    )
    before = run_capture(cfg, RunStore(tfd_home).new_run(str(script), []))
    assert before.ok, before.error
    out = get_fix("host-calls").apply(AGENT, FixContext(filename="agent.py", facts=before.facts))
    assert out.status == "changed", out.reason
    assert out.reason == (
        "soft_update() (line 27) a tf.function on the weights; actor() at line 33 called in a tf.function"
    )
    assert "@tf.function\ndef soft_update(target, original, tau):" in out.code
    assert "action = graph_call(actor, states[step : step + 1]).numpy()" in out.code
    fixed = tmp_path / "fixed" / "agent.py"
    fixed.parent.mkdir()
    fixed.write_text(out.code)
    after = run_capture(
        CaptureConfig(
            script=fixed, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, steps=12, warmup=2, profile=False, timeout_s=240
        ),
        RunStore(tfd_home).new_run(str(fixed), []),
    )
    assert after.ok, after.error
    assert after.facts.host_calls == [], after.facts.host_calls
    assert not_in_effect("host-calls", before.facts, after.facts) is None
    assert not_in_effect("host-calls", before.facts, before.facts) is not None

    # the same arithmetic: both soft updates on copies of the same two models
    import numpy as np
    import tensorflow as tf
    from tensorflow import keras

    ns_old: dict = {"tf": tf, "keras": keras, "np": np}
    ns_new: dict = dict(ns_old)
    defs = [b for b in AGENT.split("\n\n\n") if b.startswith(("def build", "def soft_update"))]
    assert len(defs) == 2
    exec("\n\n\n".join(defs), ns_old)
    fn_src = out.code.split("@tf.function\ndef soft_update")[1].split("\n\n\n")[0]
    exec("@tf.function\ndef soft_update" + fn_src, ns_new)
    keras.utils.set_random_seed(1)
    a, t = ns_old["build"](), ns_old["build"]()
    a2, t2 = ns_old["build"](), ns_old["build"]()
    a2.set_weights(a.get_weights())
    t2.set_weights(t.get_weights())
    t0 = t.get_weights()[0]
    for tau in (0.005, 0.005, 0.5):
        ns_old["soft_update"](t, a, tau)
        ns_new["soft_update"](t2, a2, tau)
    for w_old, w_new in zip(t.get_weights(), t2.get_weights(), strict=True):
        np.testing.assert_allclose(w_old, w_new, rtol=1e-6, atol=1e-7)
    assert not np.allclose(t.get_weights()[0], t0)  # the updates moved the target
