"""Find the training steps in a trace.

In order of trust:
1. ``train`` markers with a ``step_num`` stat on a host line (tfdoctor's harness, Keras 2 ``fit``);
2. ``TraceContext`` markers with ``step_num`` (TF 2.3 Keras ``fit``), ``Profiled batch`` markers with
   ``step_num`` (Keras 3's ``TensorBoard(profile_batch=N)``: one per profiled batch);
3. the harness's own step clock (``steps.jsonl``, profile window) mapped onto the trace clock;
4. XProf's derived ``Steps`` line on a device plane;
5. inferred: calls of one traced function (``__inference_*``) on the main thread. A trace holding a single
   call of a step function (a Keras ``profile_batch`` profile of TF 2.2-2.3: ``train_function``) is one
   step: that call.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from tfdoctor.model import INPUT_MARKER, STEP_MARKER, STEP_MARKERS, StepTiming
from tfdoctor.trace.model import Line, Plane, Trace

#: step markers with a ``step_num`` stat, in order of trust
MARKER_NAMES = STEP_MARKERS
_FUNC_RE = re.compile(r"^EagerLocalExecute: (__inference_.+|.*_function_\d+)$")
#: a traced function that is one training step by its name (Keras' train_function / multi_step_on_iterator,
#: a user's train_step): a single call of it is a step
_STEP_FUNC_RE = re.compile(r"train_function|multi_step_on_iterator|one_step_on_iterator|train_step", re.I)


@dataclass(frozen=True)
class Steps:
    starts: np.ndarray  # int64 ps
    ends: np.ndarray
    numbers: np.ndarray  # step numbers (int64)
    source: str  # "tfdoctor markers" | "keras markers" | "harness clock" | "xprof step line" | "inferred"
    host_plane: Plane | None = None
    main_line: Line | None = None  # the host thread that ran the training loop

    def __len__(self) -> int:
        return int(self.starts.size)

    @property
    def durations(self) -> np.ndarray:
        return self.ends - self.starts


def main_thread(plane: Plane) -> Line | None:
    """The host line that runs the Python training loop: markers there, else the most eager dispatch."""
    best, best_score = None, -1
    marker_ids = set(plane.name_ids(lambda n: n in MARKER_NAMES).tolist())
    eager_ids = set(plane.name_ids(lambda n: n == "EagerExecute" or n.startswith("TFE_Py_")).tolist())
    for ln in plane.lines:
        if not len(ln):
            continue
        idx = ln.name_idx
        score = 0
        if marker_ids:
            score += 1_000_000 * int(np.isin(idx, list(marker_ids)).sum())
        if eager_ids:
            score += int(np.isin(idx, list(eager_ids)).sum())
        if ln.name in ("python", "python3", "MainThread"):
            score += 1
        if score > best_score:
            best, best_score = ln, score
    return best


def _marker_steps(trace: Trace) -> Steps | None:
    for marker in MARKER_NAMES:
        for plane in trace.host_planes():
            ids = plane.name_ids(lambda n, m=marker: n == m)
            if ids.size == 0:
                continue
            for ln in plane.lines:
                sel = np.flatnonzero(np.isin(ln.name_idx, ids))
                if not sel.size:
                    continue
                nums = ln.stats.get("step_num")
                if nums is None or nums.dtype == object:
                    continue
                vals = nums.at(sel)
                keep = ~np.isnan(vals)
                if marker == "TraceContext" and "graph_type" in ln.stats:
                    gt = ln.stats["graph_type"].at(sel)
                    keep &= np.array([v in (None, "train") or v != v for v in gt], dtype=bool)
                sel, vals = sel[keep], vals[keep]
                if not sel.size:
                    continue
                s, d, n = ln.start_ps[sel], ln.dur_ps[sel], vals.astype(np.int64)
                # one interval per step number: the longest (outermost) marker wins
                order = np.lexsort((-d, n))
                s, d, n = s[order], d[order], n[order]
                first = np.ones(n.size, dtype=bool)
                first[1:] = n[1:] != n[:-1]
                s, d, n = s[first], d[first], n[first]
                o = np.argsort(s)
                has_input = plane.name_ids(lambda x: x == INPUT_MARKER).size > 0
                source = "tfdoctor markers" if has_input and marker == STEP_MARKER else "keras markers"
                return Steps(s[o], s[o] + d[o], n[o], source, plane, ln)
    return None


def _harness_steps(trace: Trace, steps: list[StepTiming]) -> Steps | None:
    prof = [s for s in steps if s.window == "profile"]
    if not prof or not trace.origin_ns:
        return None
    lo, hi = trace.span_ps()
    starts = np.array([trace.to_ps(s.start_ns) for s in prof], dtype=np.int64)
    ends = np.array([trace.to_ps(s.end_ns) for s in prof], dtype=np.int64)
    inside = (ends > lo) & (starts < hi)
    if not inside.any():
        return None
    plane = trace.host_planes()[0] if trace.host_planes() else None
    return Steps(
        starts[inside],
        ends[inside],
        np.array([s.index for s in prof], dtype=np.int64)[inside],
        "harness clock",
        plane,
        main_thread(plane) if plane else None,
    )


def _device_step_line(trace: Trace) -> Steps | None:
    for plane in trace.device_planes():
        ln = plane.line("Steps")
        if ln is None or not len(ln):
            continue
        names = plane.names_of(ln)
        nums = np.array([int(x) if str(x).isdigit() else i for i, x in enumerate(names)], dtype=np.int64)
        o = np.argsort(ln.start_ps)
        host = trace.host_planes()[0] if trace.host_planes() else None
        return Steps(
            ln.start_ps[o],
            ln.end_ps[o],
            nums[o],
            "xprof step line",
            host,
            main_thread(host) if host else None,
        )
    return None


def _inferred(trace: Trace) -> Steps | None:
    for plane in trace.host_planes():
        ln = main_thread(plane)
        if ln is None or not len(ln):
            continue
        names = plane.names_of(ln)
        is_fn = np.array([bool(_FUNC_RE.match(str(n))) for n in names], dtype=bool)
        if not is_fn.any():
            continue
        counts = Counter(names[is_fn].tolist())
        # the function called most often with the most total time: the step function
        dur_by = {n: int(ln.dur_ps[names == n].sum()) for n in counts}
        name = max(counts, key=lambda n: (counts[n] >= 2, dur_by[n]))
        sel = names == name
        if counts[name] < 2:
            # one call: a step only when the function is a training step by its name (one call of any
            # other function is not evidence of a loop)
            single = [n for n in counts if _STEP_FUNC_RE.search(str(n))]
            if not single:
                continue
            name = max(single, key=lambda n: dur_by[n])
            sel = names == name
            i = int(np.flatnonzero(sel)[0])
            return Steps(
                ln.start_ps[i : i + 1].copy(),
                ln.end_ps[i : i + 1].copy(),
                np.zeros(1, dtype=np.int64),
                "inferred (one call)",
                plane,
                ln,
            )
        s = np.sort(ln.start_ps[sel])
        e_last = int(ln.end_ps[sel].max())
        ends = np.append(s[1:], e_last)
        return Steps(s, ends, np.arange(s.size, dtype=np.int64), "inferred", plane, ln)
    return None


def _epoch_starts(st: Steps, harness_steps: list[StepTiming]) -> Steps:
    """tfdoctor's step markers with each step begun where the harness's clock began it. A step's marker
    opens when the step before ends; where a Keras epoch ends in between (validation, ``ModelCheckpoint``,
    the next epoch's iterator) the clock begins the step again at the new epoch
    (:meth:`~tfdoctor.capture.child.clock.StepClock.epoch_begin`), and that time is no step's. The clock's
    gap between two profiled steps is that time (steps.jsonl; the trace's own clock need not be the
    epoch's, so the gap is taken off the marker's start rather than the clock's start mapped onto it)."""
    prof = {t.index: t for t in harness_steps if t.window == "profile"}
    starts = st.starts.copy()
    for i, n in enumerate(st.numbers.tolist()):
        this, before = prof.get(int(n)), prof.get(int(n) - 1)
        if this is None or before is None:
            continue
        gap_ps = (this.start_ns - before.end_ns) * 1000
        if 0 < gap_ps < st.ends[i] - starts[i]:
            starts[i] += gap_ps
    return replace(st, starts=starts)


def find_steps(trace: Trace, harness_steps: list[StepTiming] | None = None) -> Steps | None:
    """The steps of the profiled window, or None when none can be found."""
    for finder in (
        lambda: _marker_steps(trace),
        lambda: _harness_steps(trace, harness_steps or []),
        lambda: _device_step_line(trace),
        lambda: _inferred(trace),
    ):
        st = finder()
        if st is not None and st.source == "tfdoctor markers" and harness_steps:
            st = _epoch_starts(st, harness_steps)
        if st is not None and len(st):
            # a step of zero or negative length is not a step (an inconsistent trace): drop it; a source
            # left with none gives way to the next one
            keep = st.ends > st.starts
            if not keep.all():
                st = replace(st, starts=st.starts[keep], ends=st.ends[keep], numbers=st.numbers[keep])
            if len(st):
                return st
    return None
