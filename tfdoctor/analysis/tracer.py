"""The profiler's own cost, and a breakdown that describes the unprofiled step.

The harness times every step with its own clock, profiler off (the timing window) and on (the profile
window). The host tracer records every eagerly dispatched op, so on an eager loop the profiled step can be
much slower than the real one (a step of 318 ms profiled against 156 ms unprofiled): shares measured on it
describe a step that does not happen. Here the tracer's cost per run is measured (median profiled step ÷
median unprofiled step) and, where it is significant, taken back out of the categories where the tracer
recorded: the excess time per step is removed from each category in proportion to the number of events
the tracer recorded in it (what costs is recording an event: an eager loop records one per op dispatch on
the training thread, so dispatch pays most; a graph step one per op kernel). The shares are then of the
unprofiled step.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from tfdoctor.analysis.breakdown import BreakdownResult
from tfdoctor.analysis.steps import Steps
from tfdoctor.model import CATEGORIES, StepTiming
from tfdoctor.trace.model import Trace

#: the fewest steps of each window the cost is measured on
MIN_STEPS = 3
#: the profiled step this much slower than the unprofiled one (or more) is corrected (below: noise), and
#: only when the profiled median is above the unprofiled steps' 90th percentile (a noisy machine's timing
#: window can put a 1.2x between two medians: cpu-side_effects, unprofiled steps 97-376 ms)
SIGNIFICANT = 1.10


@dataclass(frozen=True)
class TracerCost:
    profiled_ms: float  # median step of the profile window (harness clock)
    unprofiled_ms: float  # median step of the timing window
    n_profiled: int
    n_unprofiled: int
    #: the profiled median is above the unprofiled steps' 90th percentile: a cost, not the machine's noise
    separated: bool = True

    @property
    def ratio(self) -> float:
        return self.profiled_ms / self.unprofiled_ms if self.unprofiled_ms > 0 else 1.0


def tracer_cost(harness_steps: list[StepTiming] | None) -> TracerCost | None:
    """The profiled vs unprofiled step time of a harness run; None without both windows."""
    if not harness_steps:
        return None
    prof = [s.duration_ns for s in harness_steps if s.window == "profile"]
    timing = [s.duration_ns for s in harness_steps if s.window == "timing"]
    if len(prof) < MIN_STEPS or len(timing) < MIN_STEPS:
        return None
    p90 = sorted(timing)[min(len(timing) - 1, int(0.9 * len(timing)))]
    return TracerCost(
        profiled_ms=statistics.median(prof) / 1e6,
        unprofiled_ms=statistics.median(timing) / 1e6,
        n_profiled=len(prof),
        n_unprofiled=len(timing),
        separated=statistics.median(prof) > p90,
    )


def _category_of(res: BreakdownResult, t: np.ndarray) -> np.ndarray:
    """The category of each instant ``t`` (int64 ps), by the breakdown's own priority order."""
    out = np.full(t.size, res.rest_category, dtype=object)
    free = np.ones(t.size, dtype=bool)
    for cat, (s, e) in res.ordered:
        if not s.size or not free.any():
            continue
        k = np.searchsorted(s, t, side="right") - 1
        hit = free & (k >= 0) & (t < e[np.clip(k, 0, None)])
        out[hit] = cat
        free &= ~hit
    return out


def event_weights(res: BreakdownResult, trace: Trace, steps: Steps) -> dict[str, float]:
    """Share of the events the host tracer recorded during the steps, per category of the instant each
    began in (every host thread but tf.data's: an eager loop records its op dispatches on the training
    thread, a graph step its op kernels on the executor threads)."""
    lo, hi = steps.starts, steps.ends
    starts = []
    for plane in trace.host_planes():
        for ln in plane.lines:
            if not len(ln) or ln.name.startswith("tf_data"):
                continue
            st = ln.start_ps
            k = np.searchsorted(lo, st, side="right") - 1
            inside = (k >= 0) & (st < hi[np.clip(k, 0, None)]) & (ln.dur_ps > 0)
            starts.append(st[inside])
    if not starts:
        return {}
    cats = _category_of(res, np.concatenate(starts))
    if not cats.size:
        return {}
    names, counts = np.unique(cats, return_counts=True)
    total = float(counts.sum())
    return {str(n): float(c) / total for n, c in zip(names, counts, strict=True)}


def corrected_share(
    share: dict[str, float], step_ms: float, cost: TracerCost, weights: dict[str, float]
) -> tuple[dict[str, float], float]:
    """(shares of the corrected step, the corrected step in ms) from the profiled step's shares: the
    excess ``step_ms × (1 - 1/ratio)`` is removed by ``weights``, never more than a category holds (so the
    corrected step can stay above the unprofiled one: the note says by how much)."""
    target = step_ms / cost.ratio
    excess = step_ms - target
    ms = {c: share.get(c, 0.0) * step_ms for c in CATEGORIES}
    tot = sum(weights.get(c, 0.0) for c in CATEGORIES) or 1.0
    for c in CATEGORIES:  # never more than a category holds: what cannot be placed stays in the step
        ms[c] -= min(ms[c], excess * weights.get(c, 0.0) / tot)
    left = sum(ms.values()) or 1.0
    return {c: ms[c] / left for c in CATEGORIES}, left
