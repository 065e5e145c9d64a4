"""The capture pieces that need no TensorFlow: windows, the step clock, script checks, import hooks."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

from tfdoctor.capture.clock import StepClock, StopCapture, Windows
from tfdoctor.capture.hooks import PostImportHooks, first_dim, is_user_file, scalar_loss
from tfdoctor.capture.runner import check_script
from tfdoctor.errors import UsageError
from tfdoctor.model import StepTiming


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


def test_retroactive_end_keeps_later_compute_starts_for_the_next_step(tmp_path):
    clock = StepClock(Windows(2, 2, 0), tmp_path / "steps.jsonl", None, clock=lambda: 0)
    clock.compute_start(100)  # step 0's tape
    clock.compute_start(250)  # step 1's tape, seen before step 0 was known to have ended
    clock.end_step(200)  # step 0 ended at 200 (decided late)
    clock.end_step(300)
    s0, s1 = _read(tmp_path / "steps.jsonl")
    assert (s0.start_ns, s0.end_ns, s0.input_wait_ns) == (100, 200, 0)
    assert (s1.start_ns, s1.end_ns, s1.input_wait_ns) == (200, 300, 50)


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
    assert not is_user_file(__import__("tfdoctor.capture.hooks").__file__)
