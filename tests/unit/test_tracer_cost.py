"""The profile window perturbs the step it explains (issue 15): the tracer's cost is measured per run
(profiled vs unprofiled step, harness clock) and, where significant, the breakdown describes the unprofiled
step (tfdoctor.analysis.tracer)."""

from __future__ import annotations

import statistics

import pytest

from tfdoctor.analysis.tracer import TracerCost, corrected_share, tracer_cost
from tfdoctor.model import StepTiming
from tfdoctor.rules._base import REPO, Example
from tfdoctor.rules._examples import load_example


def _st(i: int, window: str, ms: float) -> StepTiming:
    return StepTiming(index=i, window=window, start_ns=i * 10**9, end_ns=i * 10**9 + int(ms * 1e6))  # type: ignore[arg-type]


def test_cost_is_the_ratio_of_window_medians_and_needs_both_windows() -> None:
    steps = [_st(i, "timing", 100.0) for i in range(5)] + [_st(5 + i, "profile", 200.0) for i in range(4)]
    cost = tracer_cost(steps)
    assert cost is not None and cost.ratio == pytest.approx(2.0)
    assert tracer_cost([s for s in steps if s.window == "profile"]) is None
    assert tracer_cost(steps[:2] + steps[5:]) is None  # 2 timing steps: too few


def test_excess_is_removed_where_the_tracer_recorded_never_below_zero() -> None:
    share = {"dispatch": 0.5, "device_compute": 0.3, "host_compute": 0.2}
    cost = TracerCost(profiled_ms=318.0, unprofiled_ms=156.0, n_profiled=5, n_unprofiled=20)
    out, step = corrected_share(share, 318.0, cost, {"dispatch": 0.9, "device_compute": 0.1})
    assert step == pytest.approx(156.0, rel=0.01)
    assert sum(out.values()) == pytest.approx(1.0)
    assert out["dispatch"] * step == pytest.approx(159.0 - 0.9 * 162.0, rel=0.01)
    assert out["host_compute"] * step == pytest.approx(63.6)  # no events recorded there: untouched
    # a category cannot give more than it holds: the step then stays above the unprofiled one
    out, step = corrected_share({"dispatch": 0.1, "device_compute": 0.9}, 300.0, cost, {"dispatch": 1.0})
    assert out["dispatch"] == 0.0 and step == pytest.approx(270.0)


def _bd(name: str):
    a, _ = load_example(Example(f"sample_traces/{name}", True))
    assert a is not None and a.breakdown is not None
    return a.breakdown


def _window_median(name: str, window: str) -> float:
    steps = [
        StepTiming.model_validate_json(x)
        for x in (REPO / f"sample_traces/{name}/steps.jsonl").read_text().splitlines()
        if x.strip()
    ]
    return statistics.median(s.duration_ns for s in steps if s.window == window) / 1e6


def test_a_costly_tracer_is_taken_out_of_what_the_rules_read() -> None:
    # cpu-keras_fit: Keras fit, 6.1 ms a step unprofiled (24 steps, 5.4-7.6), 8.8 ms profiled (10, 7.1-10.3)
    a, _ = load_example(Example("sample_traces/cpu-keras_fit", True))
    assert a is not None and a.breakdown is not None
    bd = a.breakdown
    assert bd.tracer_cost == pytest.approx(1.43, abs=0.02)
    assert bd.unprofiled_share is not None and bd.unprofiled_step_ms is not None
    assert bd.unprofiled_step_ms == pytest.approx(_window_median("cpu-keras_fit", "timing"), rel=0.05)
    assert bd.unprofiled_step_ms < bd.avg_step_ms
    assert sum(bd.unprofiled_share.values()) == pytest.approx(1.0)
    assert any("the profiler slowed the step" in n for n in bd.notes)
    # what the rules read is the unprofiled step; the rows stay the trace's profiled steps
    assert a.share == bd.unprofiled_share and a.step_ms == bd.unprofiled_step_ms
    for row in bd.steps:
        assert sum(row.ms.values()) == pytest.approx(row.total_ms, rel=1e-6)


def test_a_cost_within_the_machines_noise_is_not_corrected() -> None:
    # cpu-side_effects: profiled median 190 ms vs 155 ms, but the unprofiled steps range 97-376 ms
    bd = _bd("cpu-side_effects")
    assert bd.tracer_cost == pytest.approx(1.22, abs=0.02)
    assert bd.unprofiled_share is None


def test_a_cheap_tracer_is_recorded_and_nothing_corrected() -> None:
    bd = _bd("cpu-expert")  # profiled 30.2 ms, unprofiled 29.8 ms
    assert bd.tracer_cost == pytest.approx(1.01, abs=0.02)
    assert bd.unprofiled_share is None and bd.unprofiled_step_ms is None
