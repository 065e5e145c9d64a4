"""fit()'s callbacks, timed between the batches (real TensorFlow runs): a ModelCheckpoint saving every few
batches and a callback of the script's own that evaluates on held-out data every few batches
(tests/data/shapes/heavy_callbacks.py, made small). The evaluate() inside fit resets the model's metrics:
the step losses read from Keras's running mean must still be the batches' own."""

from __future__ import annotations

from pathlib import Path

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.model import Facts, StepTiming
from tfdoctor.rules import evaluate
from tfdoctor.store import RunStore

SCRIPT = """\
import os
import sys

import numpy as np
import keras

keras.utils.set_random_seed(0)
EVALUATE = sys.argv[1] == "evaluate"


class Checks(keras.callbacks.Callback):
    def __init__(self, x, y):
        super().__init__()
        self.x, self.y, self.losses = x, y, []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(logs["loss"])
        if EVALUATE and batch % 4 == 0:
            self.model.evaluate(self.x, self.y, verbose=0)


class Legacy(keras.callbacks.Callback):  # Keras 2's name for the hook, still called by Keras 3
    def on_batch_end(self, batch, logs=None):
        self.last = batch


rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 64)).astype("float32")
y = (x[:, :8].sum(axis=1) > 0).astype("int64")
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(2)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
seen = []
callbacks = [Checks(x[:1024], y[:1024]), Legacy(), keras.callbacks.LambdaCallback(on_batch_end=lambda b, logs: seen.append(b))]
if EVALUATE:
    callbacks.append(
        keras.callbacks.ModelCheckpoint(
            os.path.join(os.path.dirname(os.path.abspath(__file__)), "w.weights.h5"),
            save_weights_only=True,
            save_freq=3,
        )
    )
model.fit(x, y, batch_size=64, epochs=2, shuffle=False, verbose=0, callbacks=callbacks)
"""


def _run(tfd_home: Path, folder: Path, mode: str) -> tuple[Facts, list[StepTiming]]:
    folder.mkdir()
    script = folder / "train.py"
    script.write_text(SCRIPT)
    run = RunStore(tfd_home).new_run(str(script), [mode])
    cfg = CaptureConfig(
        script=script,
        args=[mode],
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        steps=24,
        warmup=4,
        profile=False,
        timeout_s=300,
    )
    res = run_capture(cfg, run)
    assert res.ok, res.error
    steps = [
        StepTiming.model_validate_json(line) for line in (run.path / "steps.jsonl").read_text().splitlines()
    ]
    return res.facts, steps


def test_callbacks_batch_hooks_are_timed_and_losses_survive_an_evaluate_inside_fit(
    tfd_home: Path, tmp_path: Path
) -> None:
    heavy, heavy_steps = _run(tfd_home, tmp_path / "heavy", "evaluate")
    light, light_steps = _run(tfd_home, tmp_path / "light", "plain")

    cbs = {c.name: c for c in heavy.fit_callbacks}
    # not tfdoctor's own callback; Keras 2's on_batch_end and a LambdaCallback's hook on the instance too
    assert set(cbs) == {"Checks", "ModelCheckpoint", "Legacy", "LambdaCallback"}, heavy.fit_callbacks
    ck = cbs["ModelCheckpoint"]
    assert ck.settings.startswith("save_freq=3") and not ck.site, ck
    own = cbs["Checks"]
    lines = SCRIPT.splitlines()
    assert own.site == f"train.py:{lines.index('    def on_train_batch_end(self, batch, logs=None):') + 1}"
    assert (
        cbs["Legacy"].site == f"train.py:{lines.index('    def on_batch_end(self, batch, logs=None):') + 1}"
    )
    lam = next(i for i, line in enumerate(lines) if "LambdaCallback(on_batch_end=" in line)
    assert cbs["LambdaCallback"].site == f"train.py:{lam + 1}", cbs["LambdaCallback"]
    for c in cbs.values():
        # every batch end of the timing window's steps, each call timed
        assert c.timed_steps > 0 and c.calls == c.timed_steps, c
        assert 0 < c.slowest_s <= c.seconds < c.timing_s, c
    # an evaluate() of 1024 rows every 4 batches costs more than appending a loss every batch
    light_cb = {c.name: c for c in light.fit_callbacks}
    assert set(light_cb) == {"Checks", "Legacy", "LambdaCallback"}, light.fit_callbacks
    assert light_cb["Checks"].seconds < own.seconds, (light_cb, own)

    # the same training, batch for batch (no shuffle, one seed; evaluate() changes no weight): each step's
    # loss read from Keras's running mean is the same with the evaluations as without them
    a = [s.loss for s in heavy_steps]
    b = [s.loss for s in light_steps]
    assert len(a) == len(b) >= 24 and all(v is not None for v in a + b)
    for i, (u, v) in enumerate(zip(a, b, strict=True)):
        assert abs(u - v) <= 1e-3 * max(1.0, abs(v)), (i, a, b)

    # the rule reads the facts: it fires on the facts when the callbacks take a tenth of the time
    found, _verdict = evaluate(None, heavy)
    share = sum(c.seconds for c in heavy.fit_callbacks) / own.timing_s
    fired = [f for f in found if f.rule_id == "TFD209"]
    assert bool(fired) == (share >= 0.1), (share, [f.claim for f in found])
