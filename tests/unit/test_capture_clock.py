"""The capture pieces that need no TensorFlow: windows, the step clock and its adaptive warm-up, the memo
cache scan, script checks, import hooks."""

from __future__ import annotations

import gc
import itertools
import json
import sys
import weakref

import numpy as np
import pytest

from tfdoctor.capture.child.clock import (
    MEMO_WARMUP_MAX_S,
    MEMO_WARMUP_MAX_STEPS,
    TIMING_GROWTH_MAX,
    MemoScanner,
    MemoStats,
    StepClock,
    StopCapture,
    Warmup,
    Windows,
    settled,
    step_line,
)
from tfdoctor.capture.child.hooks import PostImportHooks, first_dim, is_user_file, scalar_loss
from tfdoctor.capture.runner import check_script
from tfdoctor.errors import UsageError
from tfdoctor.model import Facts, StepTiming


@pytest.mark.parametrize(
    ("steps", "warmup", "profile", "expected"),
    [
        (40, None, None, (6, 24, 10)),
        (12, None, None, (3, 6, 3)),
        (100, None, None, (15, 75, 10)),
        (20, 2, 4, (2, 14, 4)),
    ],
)
def test_default_and_explicit_window_split(steps, warmup, profile, expected):
    w = Windows.split(steps, warmup, profile)
    assert (w.warmup, w.timing, w.profile) == expected
    assert w.total == steps
    assert [w.of(i) for i in (0, w.warmup, w.warmup + w.timing, steps - 1)] == [
        "warmup",
        "timing",
        "profile",
        "profile",
    ]


def test_window_split_without_profiler_and_impossible_counts():
    assert Windows.split(10, profile=False) == Windows(3, 7, 0)
    with pytest.raises(ValueError, match="no timing window"):
        Windows.split(4)
    with pytest.raises(ValueError, match="at least 1"):
        Windows.split(10, warmup=0)
    with pytest.raises(ValueError, match="positive"):
        Windows.split(0)


class RecordingMarkers:
    """Stands in for tf.profiler (the thing under test here is the clock's bookkeeping)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def start_profiler(self) -> None:
        self.calls.append(("start",))

    def stop_profiler(self) -> None:
        self.calls.append(("stop",))

    def open_step(self, index: int) -> None:
        self.calls.append(("step", index))

    def open_input(self, index: int) -> None:
        self.calls.append(("input", index))

    def close_input(self) -> None:
        self.calls.append(("/input",))

    def close_step(self) -> None:
        self.calls.append(("/step",))


def _read(path) -> list[StepTiming]:
    return [StepTiming.model_validate_json(line) for line in path.read_text().splitlines()]


def test_clock_writes_contiguous_steps_with_input_wait_and_stops(tmp_path):
    now = [1_000]
    markers = RecordingMarkers()
    clock = StepClock(Windows(1, 1, 2), tmp_path / "steps.jsonl", markers, clock=lambda: now[0])
    for i in range(4):
        now[0] += 30  # input
        clock.compute_start()
        now[0] += 70  # compute
        if i < 3:
            clock.end_step(loss=1.0 / (i + 1), examples=8)
        else:
            with pytest.raises(StopCapture):
                clock.end_step(loss=0.25, examples=8)
    steps = _read(tmp_path / "steps.jsonl")
    assert [s.window for s in steps] == ["warmup", "timing", "profile", "profile"]
    assert steps[0].input_wait_ns == 0  # step 0 begins at its first event
    assert [s.input_wait_ns for s in steps[1:]] == [30, 30, 30]
    assert all(a.end_ns == b.start_ns for a, b in itertools.pairwise(steps))
    assert [s.loss for s in steps] == [1.0, 0.5, 1 / 3, 0.25]
    assert markers.calls == [
        ("start",),
        ("step", 2),
        ("input", 2),
        ("/input",),
        ("/step",),
        ("step", 3),
        ("input", 3),
        ("/input",),
        ("/step",),
        ("stop",),
    ]
    with pytest.raises(StopCapture):  # once stopped, every later step end stops again
        clock.end_step()
    clock.close()
    assert markers.calls[-1] == ("stop",) and markers.calls.count(("stop",)) == 1


def test_a_diverged_loss_is_written_as_such_and_read_back(tmp_path):
    """steps.jsonl keeps a NaN or infinite loss (the model's own JSON would write null, and the fix
    loop's loss check could no longer tell a diverged step from one without a loss); each line is on
    disk as soon as its step ends (an unbuffered file: nothing lost when the process dies next)."""
    from tfdoctor.rundir import RunDir, load_steps

    run = RunDir(tmp_path / "run")
    run.path.mkdir(parents=True)
    now = [0]
    clock = StepClock(Windows(0, 6, 0), run.file("steps.jsonl"), clock=lambda: now[0])

    def on_disk() -> int:  # read while the clock still holds the file open
        return len(run.file("steps.jsonl").read_text().splitlines())

    on_disk_after = []
    for loss in (0.5, float("nan"), float("inf"), None, 3.5):
        now[0] += 100
        clock.end_step(loss=loss, examples=None if loss is None else 32)
        on_disk_after.append(on_disk())
    assert on_disk_after == [1, 2, 3, 4, 5]
    clock.close()
    steps = load_steps(run)
    assert steps[0].loss == 0.5 and steps[0].examples == 32
    assert np.isnan(steps[1].loss) and steps[2].loss == float("inf")
    assert steps[3].loss is None and steps[3].examples is None
    assert steps[4].loss == 3.5
    assert (
        scalar_loss({"d_loss": np.float32(1.5), "g_loss": 2.0}) == 3.5 and scalar_loss("not a number") is None
    )
    (run.path / "w").mkdir()
    clock = StepClock(Windows(1, 0, 2), run.path / "w" / "steps.jsonl", clock=lambda: now[0])
    for _ in range(2):  # warm-up and profile windows: each line as its step ends too
        clock.end_step(loss=1.0)
        assert len((run.path / "w" / "steps.jsonl").read_text().splitlines()) == clock.index
    clock.close()
    # the line is the model's fields, whatever the values: every one of them (a field added to the model
    # and not to the line would be silently left at its default)
    line = step_line(7, "timing", 10, 25, 3, 2, 1e-05, 64, 2, fn='train_"value"')
    assert list(json.loads(line)) == list(StepTiming.model_fields)
    assert StepTiming.model_validate_json(line).fn == 'train_"value"'
    line = step_line(7, "timing", 10, 25, 3, 2, 1e-05, 64, 2)
    assert StepTiming.model_validate_json(line) == StepTiming(
        index=7,
        window="timing",
        start_ns=10,
        end_ns=25,
        input_wait_ns=3,
        between_ns=2,
        loss=1e-05,
        examples=64,
        phase=2,
    )
    assert "phase" not in json.loads(step_line(7, "timing", 10, 25, 3, 2, None, 64))  # outside fit


def test_retroactive_end_keeps_later_compute_starts_for_the_next_step(tmp_path):
    clock = StepClock(Windows(2, 2, 0), tmp_path / "steps.jsonl", None, clock=lambda: 0)
    clock.compute_start(100)  # step 0's tape
    clock.compute_start(250)  # step 1's tape, seen before step 0 was known to have ended
    clock.end_step(200)  # step 0 ended at 200 (decided late)
    clock.end_step(300)
    s0, s1 = _read(tmp_path / "steps.jsonl")
    assert (s0.start_ns, s0.end_ns, s0.input_wait_ns) == (100, 200, 0)
    assert (s1.start_ns, s1.end_ns, s1.input_wait_ns) == (200, 300, 50)


class _Cyclic:
    """Garbage only a full collection frees: an object in a reference cycle."""

    def __init__(self) -> None:
        self.me = self


@pytest.mark.parametrize("collector_on", [True, False])
def test_the_set_ups_garbage_is_collected_where_the_timing_window_begins(tmp_path, collector_on):
    """Not in a step: a full collection the set-up's garbage called for fell 71 steps into progbar_loop's
    timing window (250-370 ms in a 5 ms step). A script that turned the collector off keeps it off."""
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(10**9)  # no automatic collection during the test
    if not collector_on:
        gc.disable()
    try:
        now = [0]
        clock = StepClock(Windows(2, 2, 0), tmp_path / "steps.jsonl", clock=lambda: now[0])
        ref = weakref.ref(_Cyclic())
        for i in range(2):  # the warm-up
            now[0] += 10
            clock.compute_start()
            now[0] += 10
            clock.end_step()
            if i == 0:
                assert ref() is not None
        assert (ref() is None) == collector_on  # collected as the timing window begins
        ref = weakref.ref(_Cyclic())  # garbage of the timing window's first step
        clock.compute_start()
        clock.end_step()
        assert ref() is not None  # left to the collector's own schedule
    finally:
        gc.set_threshold(*threshold)
        if enabled:
            gc.enable()


def test_one_worker_of_a_multi_worker_job_collects_after_its_first_step_not_before_a_window(tmp_path):
    """Its peers would wait for the collection in their next all-reduce: inside the profile window's first
    step that wait named the wrong worker the straggler. After the first step (the trace's garbage) a
    warm-up step waits instead."""
    threshold = gc.get_threshold()
    gc.set_threshold(10**9)
    try:
        now = [0]
        clock = StepClock(
            Windows(2, 2, 0), tmp_path / "steps.jsonl", clock=lambda: now[0], collect="first_step"
        )
        ref = weakref.ref(_Cyclic())
        now[0] += 10
        clock.compute_start()
        now[0] += 10
        clock.end_step()  # step 0
        assert ref() is None
        ref = weakref.ref(_Cyclic())
        for _ in range(2):  # step 1, then the timing window's first
            clock.compute_start()
            clock.end_step()
        assert ref() is not None  # no collection where the timing window began
    finally:
        gc.set_threshold(*threshold)


def test_close_before_the_profile_window_does_not_touch_the_profiler(tmp_path):
    markers = RecordingMarkers()
    clock = StepClock(Windows(2, 2, 2), tmp_path / "steps.jsonl", markers)
    clock.compute_start()
    clock.end_step()
    clock.close()
    assert markers.calls == []
    assert len(_read(tmp_path / "steps.jsonl")) == 1


def test_check_script_refuses_bad_input(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        check_script(tmp_path / "missing.py")
    with pytest.raises(UsageError, match="directory"):
        check_script(tmp_path)
    (tmp_path / "notes.txt").write_text("x = 1\n")
    with pytest.raises(UsageError, match=r"not a Python script \(expected a \.py file\)"):
        check_script(tmp_path / "notes.txt")
    (tmp_path / "train.ipynb").write_text('{"cells": []}')
    with pytest.raises(UsageError, match="a notebook, not a Python script") as e:
        check_script(tmp_path / "train.ipynb")
    assert "%%tfdoctor" in e.value.hint and "jupyter nbconvert --to script train.ipynb" in e.value.hint
    (tmp_path / "bad.py").write_text("def f(:\n    pass\n")
    with pytest.raises(UsageError, match=r"bad.py:1: syntax error"):
        check_script(tmp_path / "bad.py")
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    with pytest.raises(UsageError, match=r"not a Python script|syntax error"):
        check_script(tmp_path / "nul.py")
    (tmp_path / "ok.py").write_text("print('hi')\n")
    assert check_script(tmp_path / "ok.py") == (tmp_path / "ok.py").resolve()


def test_post_import_hook_runs_after_the_module_is_imported(tmp_path, monkeypatch):
    (tmp_path / "tfd_fake_mod.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    hooks = PostImportHooks()
    hooks.register("tfd_fake_mod", lambda m: seen.append(m.VALUE + 1))
    try:
        assert seen == []
        import tfd_fake_mod  # noqa: F401

        assert seen == [42]
        hooks.register("tfd_fake_mod", lambda m: seen.append("again"))  # already imported: at once
        assert seen == [42, "again"]
    finally:
        sys.meta_path.remove(hooks)
        sys.modules.pop("tfd_fake_mod", None)


def test_helpers_find_batches_losses_and_user_code(tmp_path):
    x = np.zeros((32, 8))
    assert first_dim(x) == 32
    assert first_dim(((x, np.zeros(32)), None)) == 32
    assert first_dim({"image": np.zeros((4, 2))}) == 4
    assert first_dim(3) is None
    assert scalar_loss(np.float32(0.5)) == 0.5
    assert scalar_loss({"loss": np.array(2.0), "acc": 1}) == 2.0
    assert scalar_loss((np.zeros(3), np.array(1.5))) == 1.5
    assert scalar_loss(np.zeros(3)) is None
    assert is_user_file(str(tmp_path / "train.py"))
    assert not is_user_file(np.__file__)
    assert not is_user_file(__import__("tfdoctor.capture.child.hooks", fromlist=["x"]).__file__)


# -- the adaptive warm-up ------------------------------------------------------------------------------
MS = 1_000_000


def drive(
    tmp_path, windows, warmup, duration_ms, *, traced=(), each_step=None, markers=None, min_timing_ns=0
):
    """Run a fake training loop on a fake clock until the clock stops it: step ``i`` lasts
    ``duration_ms(i)``, traces a tf.function when ``i in traced``, and calls ``each_step(i)`` while it
    runs (a memo cache being looked up). Returns the clock, the steps written and the windows entered."""
    now = [1_000]
    entered = []
    clock = StepClock(
        windows,
        tmp_path / "steps.jsonl",
        markers,
        clock=lambda: now[0],
        on_window=entered.append,
        warmup=warmup,
        min_timing_ns=min_timing_ns,
    )
    i = 0
    while i < 10_000:
        clock.touch()
        if i in traced:
            clock.note_trace()
        if each_step is not None:
            each_step(i)
        now[0] += int(duration_ms(i) * MS)
        try:
            clock.end_step()
        except StopCapture:
            break
        i += 1
    clock.close()
    return clock, _read(tmp_path / "steps.jsonl"), entered


def windows_of(steps):
    return [s.window for s in steps]


def test_fixed_warmup_is_exactly_the_planned_steps_whatever_happens(tmp_path):
    """--warmup N: slow, tracing, unsettled steps change nothing (today's behaviour)."""
    wild = [900, 50, 700, 20, 800, 30, 600, 40, 500, 10, 400]
    clock, steps, entered = drive(
        tmp_path, Windows(3, 5, 2), Warmup(3, adaptive=False), lambda i: wild[i], traced={1, 2, 3}
    )
    assert windows_of(steps) == ["warmup"] * 3 + ["timing"] * 5 + ["profile"] * 2
    assert entered == ["timing", "profile"]
    assert clock.warmup_facts() == {"warmup_steps": 3, "warmup_note": None}
    # and without a Warmup at all (the notebook's in-process capture) the same windows
    (tmp_path / "plain").mkdir()
    _, plain, _ = drive(tmp_path / "plain", Windows(3, 5, 2), None, lambda i: wild[i], traced={2})
    assert windows_of(plain) == windows_of(steps)


def test_a_trace_in_the_last_warmup_step_extends_the_warmup(tmp_path):
    markers = RecordingMarkers()
    clock, steps, entered = drive(
        tmp_path, Windows(3, 4, 2), Warmup(3), lambda i: 100, traced={0, 2, 3}, markers=markers
    )
    # step 2 (the planned last) and step 3 traced: two more warm-up steps; step 0's trace is planned warm-up
    assert windows_of(steps) == ["warmup"] * 5 + ["timing"] * 4 + ["profile"] * 2
    assert [s.index for s in steps] == list(range(11))
    assert entered == ["timing", "profile"]
    assert [c for c in markers.calls if c[0] == "step"] == [("step", 9), ("step", 10)]
    facts = clock.warmup_facts()
    assert facts["warmup_steps"] == 5
    assert facts["warmup_note"] == "extended 2 steps: tf.functions traced in 2 steps (last: 3)"
    assert "memo_warm" not in facts  # no memo provider: no cache
    assert Facts.model_validate(facts).warmup_steps == 5


def test_a_single_trace_is_named_by_its_step(tmp_path):
    clock, steps, _ = drive(tmp_path, Windows(4, 3, 0), Warmup(4), lambda i: 80, traced={3})
    assert windows_of(steps) == ["warmup"] * 5 + ["timing"] * 3
    assert clock.warmup.note == "extended 1 step: a tf.function traced in step 3"


def test_unsettled_step_times_extend_the_warmup_until_three_steps_agree(tmp_path):
    # an autotuning-like transient: slow, uneven steps, then 100 ms from step 3 on
    ms = [500, 100, 300]
    clock, steps, _ = drive(tmp_path, Windows(3, 4, 2), Warmup(3), lambda i: ms[i] if i < 3 else 100)
    assert windows_of(steps) == ["warmup"] * 6 + ["timing"] * 4 + ["profile"] * 2
    assert clock.warmup.steps == 6
    assert clock.warmup.note == "extended 3 steps: step time unsettled until step 5"
    timing = [s for s in steps if s.window == "timing"]
    assert {s.duration_ns for s in timing} == {100 * MS}  # no transient step in the timing window


def test_steps_that_never_settle_stop_at_the_limit_with_a_note(tmp_path):
    # every step twice as slow as the one before: never settled; limit = max(W, 10) extra steps
    clock, steps, _ = drive(tmp_path, Windows(3, 2, 1), Warmup(3), lambda i: 2**i)
    assert windows_of(steps) == ["warmup"] * 13 + ["timing"] * 2 + ["profile"]
    note = clock.warmup.note
    assert note.startswith("extended 10 steps (limit): step time still not settled at step 12")
    assert note.endswith("the timing window may include warm-up costs")
    # a larger planned warm-up allows as many extra steps as it has
    (tmp_path / "big").mkdir()
    clock, steps, _ = drive(tmp_path / "big", Windows(12, 2, 0), Warmup(12), lambda i: 2**i)
    assert clock.warmup.steps == 24


@pytest.mark.parametrize(
    ("pattern", "most_extra"),
    [
        ([100, 100, 400], 1),  # a log line every 3rd step
        ([100, 100, 100, 100, 400], 1),  # ... every 5th
        ([100, 400], 1),  # alternating fast / slow
        ([100, 130, 90, 110, 160, 95, 105], 0),  # a noisy machine (±30 %)
    ],
)
def test_periodic_or_noisy_steps_settle_within_a_step_or_two(tmp_path, pattern, most_extra):
    for planned in (6, 7, 8, 9, 10):  # wherever the planned warm-up ends in the pattern
        d = tmp_path / str(planned)
        d.mkdir()
        clock, _, _ = drive(d, Windows(planned, 3, 0), Warmup(planned), lambda i: pattern[i % len(pattern)])
        assert clock.warmup.steps - planned <= most_extra, (planned, clock.warmup.note)


def test_settled_rule():
    assert settled([3000, 50, 50])  # the first step traces: warm-up by definition
    assert not settled([3000, 1000, 200])  # still dropping
    assert not settled([3000, 1000, 200, 50, 60])  # two agreeing steps are not enough
    assert settled([3000, 1000, 200, 50, 60, 55])
    assert not settled([50, 50, 50, 50, 50, 400])  # a spike in the newest step
    assert settled([50, 50, 50, 50, 400, 50, 50])  # ... once it is past, a median of 3 ignores it
    assert not settled([50, 400, 50, 50])  # fewer than 6 steps: the last 3 after the first must agree
    assert settled([300, 300, 300, 250, 240, 230])  # within 1.5x
    assert not settled([400, 200, 400, 100, 50, 100])  # uneven, and the level dropped 4x
    assert settled([100, 400, 100, 400, 100, 400])  # alternating: the level did not drop
    assert not settled([100, 400, 100, 400, 100, 400, 100])  # ... one step later it did; the next passes


def memo_fn(**memo):
    def cached_batches():
        return None

    cached_batches.tfdoctor_memo = {"hits": 0, "misses": 0, "bypass": 0, "bytes": 0, "full": False, **memo}
    return cached_batches


def epoch_cache(fn, epoch: int):
    """Each step looks up one batch: misses over the first epoch of ``epoch`` steps, hits after."""

    def each_step(i: int) -> None:
        m = fn.tfdoctor_memo
        m["hits" if i >= epoch else "misses"] += 1
        m["bytes"] = min(i + 1, epoch) * 1024

    return each_step


class CountingNamespace:
    """The script's globals, counting how often the scanner asks for them."""

    def __init__(self, **values):
        self.values = values
        self.asked = 0

    def __call__(self):
        self.asked += 1
        return self.values


def test_a_cold_memo_cache_keeps_the_warmup_going_until_it_serves(tmp_path):
    fn = memo_fn()
    ns = CountingNamespace(cached_batches=fn, x=3, np=np)
    warmup = Warmup(3, memo=MemoScanner(ns))
    clock, steps, entered = drive(
        tmp_path, Windows(3, 4, 2), warmup, lambda i: 100, each_step=epoch_cache(fn, 12)
    )
    # steps 0-11 miss, step 12 hits: the warm-up ends after it, the timing window starts at step 13
    assert windows_of(steps) == ["warmup"] * 13 + ["timing"] * 4 + ["profile"] * 2
    assert entered == ["timing", "profile"]
    facts = Facts.model_validate(clock.warmup_facts())
    assert (facts.warmup_steps, facts.memo_warm, facts.memo_full) == (13, True, False)
    assert (facts.memo_hits, facts.memo_misses) == (1, 12)
    assert facts.warmup_note == "memo cache warm after 13 steps (hit rate 100 %)"
    assert ns.asked == 1  # the globals were scanned once; later reads only re-read the cache found


def test_a_full_memo_cache_ends_the_wait(tmp_path):
    fn = memo_fn()
    fill = epoch_cache(fn, 50)

    def each_step(i):
        fill(i)
        fn.tfdoctor_memo["full"] = i >= 5  # the cache stops learning at step 5

    clock, _, _ = drive(
        tmp_path,
        Windows(3, 2, 0),
        Warmup(3, memo=MemoScanner(lambda: {"f": fn})),
        lambda i: 100,
        each_step=each_step,
    )
    assert clock.warmup.steps == 6
    assert clock.warmup.memo_warm is True
    assert clock.warmup.note == "memo cache full after 6 steps (0 hits, 6 misses)"


def test_a_memo_cache_that_never_warms_stops_at_the_step_limit_with_the_note(tmp_path):
    fn = memo_fn()
    warmup = Warmup(3, memo=MemoScanner(lambda: {"f": fn}), memo_max_steps=40)
    clock, steps, _ = drive(
        tmp_path, Windows(3, 2, 0), warmup, lambda i: 10, each_step=epoch_cache(fn, 10**6)
    )
    assert windows_of(steps) == ["warmup"] * 40 + ["timing"] * 2
    facts = clock.warmup_facts()
    assert facts["memo_warm"] is False and facts["memo_misses"] == 40
    assert (
        facts["warmup_note"]
        == "memo cache still cold after 40 steps (limit): the timing window measures a cold cache"
    )
    assert MEMO_WARMUP_MAX_STEPS == 2000 and MEMO_WARMUP_MAX_S == 150.0  # the documented defaults


def test_a_memo_cache_that_never_warms_stops_at_the_time_limit(tmp_path):
    fn = memo_fn()
    warmup = Warmup(3, memo=MemoScanner(lambda: {"f": fn}), memo_max_s=2.0)
    clock, _, _ = drive(tmp_path, Windows(3, 2, 0), warmup, lambda i: 250, each_step=epoch_cache(fn, 10**6))
    assert clock.warmup.steps == 8  # 8 x 250 ms = 2 s
    assert clock.warmup.note == (
        "memo cache still cold after 2 s of warm-up (8 steps, limit): the timing window measures a cold cache"
    )


def test_no_extension_past_the_deadline(tmp_path):
    fn = memo_fn()
    warmup = Warmup(3, memo=MemoScanner(lambda: {"f": fn}), deadline_ns=1_000 + 1_000 * MS)
    clock, _, _ = drive(tmp_path, Windows(3, 2, 0), warmup, lambda i: 100, each_step=epoch_cache(fn, 10**6))
    assert clock.warmup.steps == 10  # the 10th step ends at the deadline (1 s)
    assert clock.warmup.note.endswith("stopped after 10 steps: half of the run's timeout was spent")
    assert clock.warmup.memo_warm is False


def test_a_fixed_warmup_still_says_whether_the_memo_cache_was_warm(tmp_path):
    fn = memo_fn()
    warmup = Warmup(3, adaptive=False, memo=MemoScanner(lambda: {"f": fn}))
    clock, steps, _ = drive(tmp_path, Windows(3, 2, 0), warmup, lambda i: 100, each_step=epoch_cache(fn, 12))
    assert windows_of(steps) == ["warmup"] * 3 + ["timing"] * 2
    assert clock.warmup.memo_warm is False
    assert clock.warmup.note.startswith("memo cache still cold at the end of the fixed warm-up (3 steps")


def test_a_memo_cache_already_warm_or_unused_does_not_extend(tmp_path):
    warm = memo_fn()
    clock, _, _ = drive(
        tmp_path,
        Windows(3, 2, 0),
        Warmup(3, memo=MemoScanner(lambda: {"f": warm})),
        lambda i: 100,
        each_step=epoch_cache(warm, 0),
    )
    assert (clock.warmup.steps, clock.warmup.memo_warm) == (3, True)
    assert clock.warmup.note == "memo cache warm after 3 steps (hit rate 100 %)"
    (tmp_path / "unused").mkdir()
    unused = memo_fn(bypass=7)
    clock, _, _ = drive(
        tmp_path / "unused",
        Windows(3, 2, 0),
        Warmup(3, memo=MemoScanner(lambda: {"f": unused})),
        lambda i: 100,
    )
    assert (clock.warmup.steps, clock.warmup.memo_warm) == (3, False)
    assert clock.warmup.note == "memo cache not used during the warm-up (7 calls bypassed it)"


def test_a_step_without_lookups_keeps_the_previous_verdict(tmp_path):
    """A cache looked up once per epoch (a whole generator memoised): cold until epoch 2 begins."""
    fn = memo_fn(misses=1)  # epoch 1's lookup, before the first step

    def each_step(i):
        if i == 20:
            fn.tfdoctor_memo["hits"] += 1  # epoch 2 replays the cached batches

    clock, _, _ = drive(
        tmp_path,
        Windows(3, 2, 0),
        Warmup(3, memo=MemoScanner(lambda: {"f": fn})),
        lambda i: 100,
        each_step=each_step,
    )
    assert clock.warmup.steps == 21
    assert clock.warmup.memo_warm is True


def test_memo_scan_reads_only_the_script_own_callables():
    touched = []

    class LazyModule:  # like TensorFlow's lazy loaders: any attribute lookup imports something
        def __getattr__(self, name):
            touched.append(name)
            raise AttributeError(name)

        def __call__(self):
            return None

    class WithClassMemo:
        tfdoctor_memo = {"hits": 99, "misses": 0}  # on the class, not an instance's own attribute

    a, b = memo_fn(hits=5, misses=1), memo_fn(hits=1, misses=3, bytes=10, full=True)
    odd = memo_fn()
    odd.tfdoctor_memo = {"hits": "many", "misses": None}  # garbage counters count as 0
    not_a_dict = memo_fn()
    not_a_dict.tfdoctor_memo = [1, 2]
    ns = {
        "a": a,
        "alias": a,
        "b": b,
        "odd": odd,
        "nd": not_a_dict,
        "lazy": LazyModule(),
        "cls": WithClassMemo,
    }
    ns["inst"] = WithClassMemo()
    stats = MemoScanner(lambda: ns)()
    assert stats == MemoStats(caches=3, hits=6, misses=4, bypass=0, bytes=10, full=True)
    assert touched == []
    assert MemoScanner(lambda: {"x": 1, "f": len})() is None
    assert MemoScanner(lambda: None)() is None


def test_a_run_that_ended_early_says_what_it_lacks() -> None:
    """Both captures (a script's child and the notebook's cell) word a short run with one method."""
    w = Windows(warmup=6, timing=24, profile=10)
    assert w.ended_early("the script", 4, traced=False) == (
        "the script ended by itself after 4 of 40 steps, within its 6-step warm-up: nothing was timed "
        "(the script needs more steps than that: more epochs or data)"
    )
    assert w.ended_early("the cell", 20, traced=False, grown="the warm-up grew by 2 steps") == (
        "the cell ended by itself after 20 of 40 steps (the warm-up grew by 2 steps), before the profile "
        "window (no trace); try --steps 20"
    )
    assert w.ended_early("the script", 35, traced=True) == "the script ended by itself after 35 of 40 steps"
    timing_only = Windows(warmup=6, timing=34, profile=0)
    assert timing_only.ended_early("the script", 20, traced=False).endswith("after 20 of 40 steps")


def test_a_timing_window_with_a_floor_on_time_grows_until_it_lasts_that_long(tmp_path):
    """Steps of 10 ms, 5 planned timing steps (50 ms) and a 200 ms floor: the timing window grows to 20
    steps (200 ms), then the profile window runs as planned. Steps of 100 ms already fill it with the
    planned 5. A floor the growth cap cannot reach stops at 20 times the planned steps."""
    floor = 200 * MS
    clock, steps, entered = drive(tmp_path, Windows(3, 5, 2), None, lambda i: 10, min_timing_ns=floor)
    assert windows_of(steps) == ["warmup"] * 3 + ["timing"] * 20 + ["profile"] * 2
    assert entered == ["timing", "profile"] and clock.windows.timing == 20 and clock.planned.timing == 5
    (tmp_path / "slow").mkdir()
    _, slow, _ = drive(tmp_path / "slow", Windows(3, 5, 2), None, lambda i: 100, min_timing_ns=floor)
    assert windows_of(slow) == ["warmup"] * 3 + ["timing"] * 5 + ["profile"] * 2
    (tmp_path / "cap").mkdir()
    _, capped, _ = drive(tmp_path / "cap", Windows(3, 5, 0), None, lambda i: 0.1, min_timing_ns=floor)
    assert windows_of(capped) == ["warmup"] * 3 + ["timing"] * (TIMING_GROWTH_MAX * 5)


def test_a_timing_window_grown_to_the_time_floor_ends_where_the_next_fit_begins(tmp_path):
    """keras-io's distiller: the teacher's fit, then the distiller's. A bigger batch's timing window grew
    past the teacher's last step to reach its 1 s floor and timed the distiller's first step (its
    train function traced, ~1 s) and the distiller's training: it now ends where phase 2 begins."""
    t = iter(range(0, 10**12, 10))
    clock = StepClock(
        Windows(2, 3, 0), tmp_path / "steps.jsonl", None, clock=lambda: next(t), min_timing_ns=10**9
    )
    clock.new_phase(1)
    for _ in range(8):  # 2 warm-up, 3 planned timing, 3 grown (each step 20 ns: far below the floor)
        clock.compute_start()
        clock.end_step()
    clock.new_phase(1)  # the same call again (a nested fit): nothing ends
    with pytest.raises(StopCapture):
        clock.new_phase(2)
    assert clock.stopped and clock.windows.timing == 6
    steps = _read(tmp_path / "steps.jsonl")
    assert [s.phase for s in steps] == [1] * 8 and [s.window for s in steps].count("timing") == 6
    # within the planned steps the window is not cut: the fix loop's check says what it measured
    clock = StepClock(
        Windows(2, 3, 0), tmp_path / "b.jsonl", None, clock=lambda: next(t), min_timing_ns=10**9
    )
    clock.new_phase(1)
    for _ in range(3):
        clock.compute_start()
        clock.end_step()
    clock.new_phase(2)
    assert not clock.stopped


def test_a_step_begins_with_its_epoch_in_every_window(tmp_path):
    """Keras validates between the last batch of an epoch and the next epoch's first: that time (a
    first validation traces its test function) is no step's, in the profile window too (the analysis
    takes the gap off the step's marker, which opened when the step before ended)."""
    now = [0]
    markers = RecordingMarkers()
    clock = StepClock(Windows(1, 2, 2), tmp_path / "steps.jsonl", markers, clock=lambda: now[0])
    for i in range(5):
        if i in (2, 4):  # an epoch's end: validation, then the next epoch begins
            now[0] += 1000
            clock.epoch_begin()
        now[0] += 5
        clock.compute_start()
        now[0] += 10
        try:
            clock.end_step()
        except StopCapture:
            assert i == 4
    steps = _read(tmp_path / "steps.jsonl")
    assert [s.window for s in steps] == ["warmup", "timing", "timing", "profile", "profile"]
    assert [s.duration_ns for s in steps] == [10, 15, 15, 15, 15]
    assert steps[2].start_ns == steps[1].end_ns + 1000
    assert steps[4].start_ns == steps[3].end_ns + 1000
    assert [c for c in markers.calls if c[0] == "step"] == [("step", 3), ("step", 4)]  # opened once each
    assert [s.epoch_start for s in steps] == [False, False, True, False, True]  # a new epoch's first step
    # an epoch begun before anything else, or while a step computes, moves nothing
    clock = StepClock(Windows(1, 2, 0), tmp_path / "b.jsonl", None, clock=lambda: now[0])
    clock.epoch_begin()
    assert clock.start_ns is None
    clock.compute_start()
    now[0] += 7
    clock.epoch_begin()
    clock.end_step()
    assert _read(tmp_path / "b.jsonl")[0].duration_ns == 7
    assert not _read(tmp_path / "b.jsonl")[0].epoch_start


def test_the_time_floor_counts_the_steps_not_what_ran_between_epochs(tmp_path):
    """3 planned timing steps of 30 ms with a validation of 2 s between two of them: the wall had
    counted that as the 1 s floor reached; the steps' own 90 ms grow the window to 34 steps."""
    now = [0]
    clock = StepClock(
        Windows(1, 3, 0), tmp_path / "steps.jsonl", None, clock=lambda: now[0], min_timing_ns=1000 * MS
    )
    for i in range(60):
        if i == 2:
            now[0] += 2000 * MS  # the epoch ended, Keras validated, the next epoch begins
            clock.epoch_begin()
        clock.compute_start()
        now[0] += 30 * MS
        try:
            clock.end_step()
        except StopCapture:
            break
    assert clock.windows.timing == 34 and clock.timing_ns == 34 * 30 * MS
