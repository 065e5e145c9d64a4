"""Input wait is the time spent getting the batch, not whatever lies between two steps (issue 15).

In a custom loop the span from ``apply_gradients`` to the next ``GradientTape`` holds the loop's own work
too (the "custom training walkthrough" updates its metrics there with a second forward pass). The clock
counts the tf.data iterator's ``next`` calls as input wait and the rest as host work between steps; the
trace analysis does the same with the GetNext events inside tfdoctor's input marker.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tfdoctor.analysis import intervals as iv
from tfdoctor.analysis.breakdown import _calls_around, input_wait_set
from tfdoctor.capture.child.clock import StepClock, Windows
from tfdoctor.model import StepTiming
from tfdoctor.trace.model import Line, Plane


def _steps(clock_path) -> list[StepTiming]:
    return [StepTiming.model_validate_json(x) for x in clock_path.read_text().splitlines()]


def test_clock_counts_the_fetch_not_the_gap(tmp_path) -> None:
    clock = StepClock(Windows(9, 0, 0), tmp_path / "steps.jsonl", None, clock=lambda: 0)
    clock.touch(0)
    clock.compute_start(10)
    clock.end_step(100)  # step 0
    # step 1: 60 ns of metric work after step 0, then a 5 ns fetch, then the tape
    clock.note_fetch(160, 165)
    clock.compute_start(170)
    clock.end_step(250)
    # step 2: no fetch seen (a Python generator): the whole gap stays input wait, as before
    clock.compute_start(290)
    clock.end_step(300)
    clock.close()
    s = _steps(tmp_path / "steps.jsonl")
    assert (s[1].input_wait_ns, s[1].between_ns) == (5, 65)
    assert (s[2].input_wait_ns, s[2].between_ns) == (40, 0)


def test_a_fetch_after_the_compute_start_is_not_this_steps_wait(tmp_path) -> None:
    clock = StepClock(Windows(9, 0, 0), tmp_path / "steps.jsonl", None, clock=lambda: 0)
    clock.touch(0)
    clock.compute_start(0)
    clock.end_step(100)
    clock.compute_start(120)
    clock.note_fetch(130, 140)  # inside the step's compute (a fetch inside the step function's call)
    clock.end_step(200)
    clock.close()
    s = _steps(tmp_path / "steps.jsonl")
    assert (s[1].input_wait_ns, s[1].between_ns) == (0, 20)


def _set(*pairs: tuple[int, int]) -> iv.IntervalSet:
    return iv.union(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]))


def test_trace_input_marker_with_a_getnext_inside_is_the_getnext() -> None:
    markers = _set((0, 100), (200, 300))
    getnext = _set((90, 95))  # the first marker shows its fetch; the second (a generator) does not
    wait, between = input_wait_set(getnext, markers)
    assert iv.measure(wait) == 5 + 100
    assert iv.measure(between) == 95


def test_trace_marker_without_a_fetch_is_input_wait_only_after_the_loops_last_eager_op() -> None:
    """A marker with no GetNext: the eager ops at its start are the loop's work after the step (an
    ``assign_sub`` update, the loss evaluated each epoch); the wait is what follows the last of them."""
    markers = _set((0, 100), (200, 300), (400, 500))
    eager = _set((5, 20), (30, 60), (250, 270), (520, 530))  # none in the third marker
    wait, between = input_wait_set(iv.EMPTY, markers, eager)
    assert iv.measure(between) == 60 + 70  # marker 1 up to 60, marker 2 up to 270
    assert iv.measure(wait) == 40 + 30 + 100
    # with a fetch in the marker the fetch is the wait, eager ops or not (unchanged)
    wait, between = input_wait_set(_set((90, 95)), _set((0, 100)), eager)
    assert (iv.measure(wait), iv.measure(between)) == (5, 95)


def test_a_full_batch_loop_that_fetches_nothing_is_not_read_as_input_bound() -> None:
    """TensorFlow's "Basic training loops" recorded (sample_traces/full-batch-loop): the marker was
    34 % of the step, all of it the loop's update and per-epoch loss; it read as 34 % input wait."""
    from tfdoctor.rundir import RunDir
    from tfdoctor.session.build import build_report

    report = build_report(RunDir(Path(__file__).resolve().parents[2] / "sample_traces" / "full-batch-loop"))
    share = report.breakdown.share
    assert share["input_wait"] < 0.05, share
    assert share["host_compute"] + share["dispatch"] > 0.7, share
    assert any("host work between steps" in n for n in report.breakdown.notes), report.breakdown.notes
    assert "TFD101" not in {f.rule_id for f in report.findings}


def test_the_next_call_around_an_eager_getnext_is_input_wait_gil_reacquired_included() -> None:
    """A ``from_generator`` source on a loaded machine (seen in a real trace): the eager GetNext returns
    the prefetched batch in 5 us, then ``TFE_Py_FastPathExecute_C`` returns 4 ms later, once the main
    thread holds the GIL again (the generator's PyFunc thread had it). The whole call is getting the
    batch; a function call on the same line that holds no GetNext is not."""
    names = [
        "TFE_Py_FastPathExecute_C",
        "EagerLocalExecute: IteratorGetNext",
        "IteratorGetNextOp::DoCompute",
        "TFE_Py_ExecuteCancelable",
        "EagerLocalExecute: __inference_step_9",
    ]
    events = [  # (start, end, name index): next() at 0-4000, the step at 5000-6000
        (0, 4000, 0),
        (10, 20, 1),
        (12, 18, 2),
        (5000, 6000, 3),
        (5010, 5990, 4),
    ]
    line = Line(
        id=1,
        name="python",
        display_name="",
        start_ps=np.array([s for s, _, _ in events], dtype=np.int64),
        dur_ps=np.array([e - s for s, e, _ in events], dtype=np.int64),
        name_idx=np.array([k for _, _, k in events], dtype=np.int32),
    )
    plane = Plane(id=1, name="/host:CPU", lines=[line], event_names=names)
    cache: dict = {}
    getnext = _calls_around(plane, line, _set((10, 20)), cache)
    assert [(int(a), int(b)) for a, b in zip(*getnext, strict=True)] == [(0, 4000)]
    assert _calls_around(plane, line, iv.EMPTY, cache) == iv.EMPTY
