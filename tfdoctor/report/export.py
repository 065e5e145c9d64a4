"""A run's trace as Chrome trace-event JSON (``tfdoctor export``), with tfdoctor's own tracks added.

The format is the Trace Event Format's JSON object form (``{"traceEvents": [...]}``), which
chrome://tracing, ui.perfetto.dev and TensorBoard's trace viewer all open. Every plane of the trace
becomes a process, every line a thread, every event a complete (``"ph": "X"``) event with the
stats tfdoctor reads (``step_num``, ``group_id``...) as args and its category (tfdoctor's colour
class: input, dispatch, function, compute, copy, collective, step, other). A process named
"tfdoctor" is added in front with:

* ``Steps``: one slice per step tfdoctor counted (``step N``, its window and input wait in args);
* one track per category (``input``, ``dispatch``, ...): the union of the trace's events of that
  category, so the time the loop waited for input or dispatched ops reads as one bar per step;
* ``Findings``: the time ranges each finding's evidence points at (``TFD101 input-stall: ...``).

Times are microseconds from the trace's start. Nothing here imports TensorFlow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from tfdoctor.analysis.intervals import union
from tfdoctor.model import Report, StepTiming
from tfdoctor.report.timeline import classify
from tfdoctor.trace.model import Trace

#: tfdoctor's process id in the export (the trace's planes follow from 1)
TFDOCTOR_PID = 0
CATEGORY_TRACKS = ("input", "dispatch", "function", "compute", "copy", "collective")
PS_PER_US = 1e6


def _meta(pid: int, tid: int | None, kind: str, name: str) -> dict[str, Any]:
    ev: dict[str, Any] = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _sort(pid: int, tid: int | None, index: int) -> dict[str, Any]:
    kind = "thread_sort_index" if tid is not None else "process_sort_index"
    ev: dict[str, Any] = {"ph": "M", "pid": pid, "name": kind, "args": {"sort_index": index}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _x(
    name: str, cat: str, start_ps: float, dur_ps: float, pid: int, tid: int, **args: Any
) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "ph": "X",
        "name": name,
        "cat": cat,
        "ts": round(start_ps / PS_PER_US, 3),
        "dur": round(max(0.0, dur_ps) / PS_PER_US, 3),
        "pid": pid,
        "tid": tid,
    }
    if args:
        ev["args"] = args
    return ev


def _absent(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _stat(v: Any) -> Any:
    """A stat for JSON: integral floats (step numbers, ids) as ints."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def trace_events(trace: Trace) -> Iterator[dict[str, Any]]:
    """The trace's own events: one process per plane, one thread per line."""
    for p_i, plane in enumerate(trace.planes, start=1):
        host = f"{plane.host} " if plane.host and len(trace.hostnames) > 1 else ""
        yield _meta(p_i, None, "process_name", f"{host}{plane.name}")
        yield _sort(p_i, None, p_i)
        classes = [classify(n) for n in plane.event_names]
        names = plane.event_display_names or plane.event_names
        for t_i, line in enumerate(plane.lines, start=1):
            if not len(line):
                continue
            yield _meta(p_i, t_i, "thread_name", line.label)
            yield _sort(p_i, t_i, t_i)
            stats = [(key, arr.tolist()) for key, arr in line.stats.items()]
            for i, (s, d, k) in enumerate(
                zip(line.start_ps.tolist(), line.dur_ps.tolist(), line.name_idx.tolist(), strict=True)
            ):
                args = {key: _stat(vals[i]) for key, vals in stats if not _absent(vals[i])}
                yield _x(names[k] or plane.event_names[k], classes[k], s, d, p_i, t_i, **args)


def category_intervals(trace: Trace) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per category, the union of the intervals of the trace's events of that category."""
    parts: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {c: ([], []) for c in CATEGORY_TRACKS}
    for plane in trace.planes:
        if not plane.event_names:
            continue
        classes = np.array([classify(n) for n in plane.event_names], dtype=object)
        for line in plane.lines:
            if not len(line) or line.is_derived:
                continue
            cls = classes[line.name_idx]
            for c in CATEGORY_TRACKS:
                mask = cls == c
                if mask.any():
                    parts[c][0].append(line.start_ps[mask])
                    parts[c][1].append(line.end_ps[mask])
    out = {}
    for c, (ss, es) in parts.items():
        if ss:
            out[c] = union(np.concatenate(ss), np.concatenate(es))
    return out


def tfdoctor_events(
    trace: Trace, report: Report | None, steps: Any = None, timings: list[StepTiming] | None = None
) -> Iterator[dict[str, Any]]:
    """tfdoctor's tracks: steps, categories, findings (see the module's docstring)."""
    pid = TFDOCTOR_PID
    yield _meta(pid, None, "process_name", "tfdoctor")
    yield _sort(pid, None, -1)
    tid = 1
    yield _meta(pid, tid, "thread_name", "Steps")
    yield _sort(pid, tid, 0)
    by_index = {t.index: t for t in timings or []}
    if steps is not None and len(steps):
        for s, e, n in zip(steps.starts.tolist(), steps.ends.tolist(), steps.numbers.tolist(), strict=True):
            t = by_index.get(int(n))
            args: dict[str, Any] = {"step": int(n), "source": steps.source}
            if t is not None:
                args.update(window=t.window, input_wait_ms=round(t.input_wait_ns / 1e6, 3))
            yield _x(f"step {int(n)}", "step", s, e - s, pid, tid, **args)
    for c_i, (cat, (s_arr, e_arr)) in enumerate(category_intervals(trace).items(), start=2):
        yield _meta(pid, c_i, "thread_name", cat)
        yield _sort(pid, c_i, c_i)
        for s, e in zip(s_arr.tolist(), e_arr.tolist(), strict=True):
            yield _x(cat, cat, s, e - s, pid, c_i)
    if report is None:
        return
    f_tid = 2 + len(CATEGORY_TRACKS)
    origin = int(steps.starts.min()) if steps is not None and len(steps) else 0
    named = False
    for f in report.findings:
        for ev in f.evidence:
            for lo_ms, hi_ms in ev.time_ranges_ms:
                if not named:
                    yield _meta(pid, f_tid, "thread_name", "Findings")
                    yield _sort(pid, f_tid, f_tid)
                    named = True
                yield _x(
                    f"{f.rule_id} {f.name}: {ev.label}",
                    "finding",
                    origin + lo_ms * 1e9,
                    (hi_ms - lo_ms) * 1e9,
                    pid,
                    f_tid,
                    claim=f.claim,
                    severity=f.severity,
                    value=ev.value,
                )


def chrome_trace(
    trace: Trace, report: Report | None = None, steps: Any = None, timings: list[StepTiming] | None = None
) -> dict[str, Any]:
    """The Chrome trace-event JSON object of ``trace`` plus tfdoctor's tracks."""
    events = [*tfdoctor_events(trace, report, steps, timings), *trace_events(trace)]
    meta: dict[str, Any] = {"tool": "tfdoctor", "source": trace.source, "origin_ns": trace.origin_ns}
    if report is not None:
        meta.update(run_id=report.run_id, script=report.script, verdict=report.verdict)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": meta}
