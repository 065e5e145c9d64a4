"""The tfdata-cache trial's run-time switch: the harness fills each in-memory tf.data cache before the
first step (real TensorFlow pipelines), and a trial whose caches were not filled is not measured."""

from __future__ import annotations

import numpy as np
import pytest

from tfdoctor.capture.child.hooks import cache_nodes, datasets_behind, fill_caches
from tfdoctor.fixes.sanity import not_in_effect
from tfdoctor.model import CacheFill, Facts

N = 200


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


def _pipeline(tf, calls, n=N):
    """from_tensor_slices → counted deterministic map → cache → shuffle → random map → batch."""

    def pre(x):
        calls.assign_add(1)
        return tf.cast(x, tf.float32) / 2.0

    src = tf.data.Dataset.from_tensor_slices(np.arange(n))
    return src.map(pre).cache().shuffle(n).map(lambda x: x + tf.random.uniform([])).batch(16).prefetch(2)


def _epoch(tf, calls, ds) -> tuple[int, int]:
    """(elements read, calls of the cached map) over one pass of ``ds``."""
    c0 = int(calls.numpy())
    seen = sum(int(b.shape[0]) for b in ds)
    return seen, int(calls.numpy()) - c0


def test_a_filled_cache_serves_every_later_iterator_of_the_outer_pipeline(tf):
    calls = tf.Variable(0, dtype=tf.int64)
    ds = _pipeline(tf, calls)
    assert len(cache_nodes([ds])) == 1
    got = fill_caches([ds], seconds=60)
    assert got is not None
    assert (got.caches, got.filled, got.elements, got.note) == (1, 1, N, "")
    assert int(calls.numpy()) == N  # the fill ran the cached map once per element
    assert _epoch(tf, calls, ds) == (N, 0)  # the first epoch already reads the cache
    assert _epoch(tf, calls, ds) == (N, 0)
    assert fill_caches([ds], seconds=60) is None  # tried once per cache stage


def test_without_the_fill_the_first_epoch_runs_the_map(tf):
    calls = tf.Variable(0, dtype=tf.int64)
    ds = _pipeline(tf, calls)
    assert _epoch(tf, calls, ds) == (N, N)  # the epoch that fills the cache
    assert _epoch(tf, calls, ds) == (N, 0)


def test_distribute_datasets_from_function_shares_the_filled_cache(tf):
    calls = tf.Variable(0, dtype=tf.int64)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    dist = strategy.distribute_datasets_from_function(lambda ctx: _pipeline(tf, calls))
    got = fill_caches(datasets_behind(dist), seconds=60)
    assert got is not None and got.filled == 1 and got.elements == N
    c0 = int(calls.numpy())
    assert sum(1 for _ in dist) == -(-N // 16)
    assert int(calls.numpy()) == c0  # the distributed iterator read the filled cache


def test_limits_leave_the_cache_unfilled_and_say_why(tf):
    calls = tf.Variable(0, dtype=tf.int64)
    ds = _pipeline(tf, calls, n=5000)
    got = fill_caches([ds], seconds=0.0)  # the time limit: stops after the first read
    assert got is not None and got.filled == 0 and "time limit" in got.note
    assert _epoch(tf, calls, ds)[1] > 0  # the partly read cache was discarded: the epoch fills it

    small = _pipeline(tf, tf.Variable(0, dtype=tf.int64))
    got = fill_caches([small], seconds=60, max_bytes=100)  # 200 float32 = 800 bytes
    assert got is not None and got.filled == 0 and "over the limit" in got.note

    inf = tf.data.Dataset.range(3).repeat().cache()
    got = fill_caches([inf], seconds=60)
    assert got is not None and got.filled == 0 and "infinite" in got.note


def test_file_caches_and_cache_free_pipelines_are_not_filled(tf, tmp_path):
    on_disk = tf.data.Dataset.range(4).cache(str(tmp_path / "c")).batch(2)
    assert cache_nodes([on_disk]) == []
    got = fill_caches([on_disk], seconds=60)
    assert got is not None and got.caches == 0 and "no in-memory cache" in got.note


def _trial(fill: CacheFill | None, switch: bool = True) -> Facts:
    return Facts(tfdata_cache_fill=fill, extra={"switch_tfdata_cache_fill": "1"} if switch else {})


def test_a_trial_whose_cache_was_not_filled_is_not_in_effect():
    filled = CacheFill(caches=1, filled=1, elements=12000, seconds=1.5)
    assert not_in_effect("tfdata-cache", Facts(), _trial(filled)) is None
    why = not_in_effect("tfdata-cache", Facts(), _trial(CacheFill(caches=1, note="over the time limit")))
    assert why is not None and "not filled" in why and "time limit" in why
    assert not_in_effect("tfdata-cache", Facts(), _trial(None)) is not None
    partial = CacheFill(caches=2, filled=1, elements=10, note="a cache is infinite")
    assert not_in_effect("tfdata-cache", Facts(), _trial(partial)) is not None
    # a run without the switch (recorded before it existed) is judged as before; other fixes ignore it
    assert not_in_effect("tfdata-cache", Facts(), _trial(None, switch=False)) is None
    assert not_in_effect("tfdata-parallel-map", Facts(), _trial(None)) is None


def test_the_tracker_fills_once_before_the_first_step_and_reports_it(tf, tmp_path):
    from tfdoctor.capture.child.clock import StepClock, Windows
    from tfdoctor.capture.child.hooks import Tracker

    clock = StepClock(Windows(1, 1, 0), tmp_path / "steps.jsonl", None)
    tracker = Tracker(clock, {"tfdata_cache_fill": "1"})
    tracker.modules["tf"] = tf
    calls = tf.Variable(0, dtype=tf.int64)
    ds = _pipeline(tf, calls)
    assert tracker.fill_wanted()
    tracker.fill_caches([ds])
    tracker.fill_caches([tf.data.Dataset.range(3)])  # another pipeline without a cache
    tracker.fill_caches([ds])  # a later epoch's iterator: tried already
    fill = Facts.model_validate(
        {"tfdata_cache_fill": tracker.summary()["tfdata_cache_fill"]}
    ).tfdata_cache_fill
    assert fill is not None and (fill.caches, fill.filled, fill.elements, fill.note) == (1, 1, N, "")
    assert int(calls.numpy()) == N
    clock.index = 1  # a step ran: no filling in the middle of the measured steps
    assert not tracker.fill_wanted()

    off = Tracker(StepClock(Windows(1, 1, 0), tmp_path / "s2.jsonl", None), {})
    off.modules["tf"] = tf
    assert not off.fill_wanted() and "tfdata_cache_fill" not in off.summary()
    on = Tracker(StepClock(Windows(1, 1, 0), tmp_path / "s3.jsonl", None), {"tfdata_cache_fill": "1"})
    assert on.summary()["tfdata_cache_fill"]["filled"] == 0  # nothing iterated: said, not measured
