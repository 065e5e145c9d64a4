"""The tfdata-cache trial's switch in a real capture: the harness fills the in-memory cache of a
``distribute_datasets_from_function`` pipeline before the first step, so the loop's first batch
already comes from a full cache (the cached map ran once per element before any step)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.model import Facts
from tfdoctor.store import RunStore

pytestmark = pytest.mark.integration

SCRIPT = """
import numpy as np
import tensorflow as tf

calls = tf.Variable(0, dtype=tf.int64)


def pre(x, y):
    calls.assign_add(1)
    return tf.cast(x, tf.float32) / 255.0, y


def dataset_fn(ctx):
    ds = tf.data.Dataset.from_tensor_slices((np.ones((512, 4), np.uint8), np.zeros(512, np.int64)))
    return ds.map(pre).cache().shuffle(8).batch(8)


strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
dist = strategy.distribute_datasets_from_function(dataset_fn)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    opt = tf.keras.optimizers.SGD(0.1)


@tf.function
def step(x, y):
    def fn(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return strategy.run(fn, args=(x, y))


for epoch in range(3):
    for i, (x, y) in enumerate(dist):
        if epoch == 0 and i == 0:
            print("cached map calls at the first batch:", int(calls.numpy()), flush=True)
        step(x, y)
"""


@pytest.mark.parametrize("switch", [True, False])
def test_the_switch_fills_a_distributed_pipelines_cache_before_the_first_step(tfd_home, tmp_path, switch):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    store = RunStore(tfd_home)
    run = store.new_run(str(path), run_id=f"fill-{switch}")
    switches = {"tfdata_cache_fill": "1"} if switch else {}
    res = run_capture(CaptureConfig(script=path, steps=8, warmup=2, profile=False, switches=switches), run)
    assert res.ok, res.message
    out = (Path(run.path) / "stdout.log").read_text()
    first = int(out.split("cached map calls at the first batch:")[1].split()[0])
    facts = Facts.model_validate_json((Path(run.path) / "facts.json").read_text())
    if switch:
        assert first == 512, out  # every element cached before the loop's first batch
        fill = facts.tfdata_cache_fill
        assert fill is not None and (fill.caches, fill.filled, fill.elements, fill.note) == (1, 1, 512, "")
        assert facts.extra.get("switch_tfdata_cache_fill") == "1"
    else:
        assert first < 512, out  # the first epoch fills it, batch by batch
        assert facts.tfdata_cache_fill is None
