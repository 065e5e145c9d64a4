"""A timeline of a few profiled steps, downsampled on the server so a browser draws it at once.

The core, :func:`downsample`, takes plain arrays per lane (a thread, a tf.data worker, a device
stream: start, duration and name of each event, in ms) and returns at most ``max_blocks`` blocks:
events nest (TraceMe scopes), so each lane is split into depth rows; in a row, runs of events
shorter than one pixel that follow each other within one pixel are merged into one block
("37 events: EagerExecute ×20, …"). Gaps wider than a pixel always stay visible: they are what the
timeline is for. Op kernels nested deeper than the rows drawn (an eager step runs each kernel inline,
``KernelAndDeviceFunc::Run`` five levels under the step on the Python thread) are lifted into one
"kernels" row of their lane, so compute shows where it ran; lanes with nothing but instant markers
(the Eigen pool's ``ThreadpoolListener`` marks on CPU: the kernels run on ``tf_Compute`` lanes or
inline) are left out and named in a note.

:func:`timeline_from_trace` picks the lanes and the window (a few steps from the middle of the
profiled window) from a :class:`~tfdoctor.trace.Trace`; :func:`timeline_for_run` does it for a
run directory and caches the result in ``timeline.json`` there (keyed by the trace files' size and
mtime), so a 100 MB trace is read once, not on every page view. Never imports TensorFlow.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from tfdoctor.analysis.breakdown import INPUT_NAMES, is_collective, is_dispatch, is_function_run, is_host_op
from tfdoctor.errors import TraceError
from tfdoctor.model import STEP_MARKER, STEP_MARKERS
from tfdoctor.rundir import RunDir, atomic_write_text

TIMELINE_VERSION = 2  # 2: eager kernels are compute, lifted into a kernels row
CACHE_NAME = "timeline.json"

#: colour classes of the blocks (the web page maps them to colours and a legend)
KINDS: dict[str, str] = {
    "step": "Step marker",
    "input": "Input (tf.data / get-next)",
    "dispatch": "Dispatch / launch",
    "compute": "Ops / kernels",
    "function": "tf.function call",
    "copy": "Copies",
    "collective": "Collectives",
    "other": "Other",
}

_GROUP_ORDER = {"host": 0, "tf.data": 1, "device": 2}


@dataclass(frozen=True)
class LaneArrays:
    """One lane's events as plain arrays: ``start_ms``/``dur_ms`` float arrays, ``names`` strings."""

    group: str  # "host" | "tf.data" | "device"
    name: str  # thread or stream name
    start_ms: np.ndarray
    dur_ms: np.ndarray
    names: Sequence[str] | np.ndarray


class TimelineRow(BaseModel):
    group: str
    lane: str
    depth: int
    start_ms: list[float] = Field(default_factory=list)
    dur_ms: list[float] = Field(default_factory=list)
    name: list[str] = Field(default_factory=list)
    count: list[int] = Field(default_factory=list)  # events merged into each block (1 = a single event)
    kind: list[str] = Field(default_factory=list)
    #: the row of the lane's op kernels nested deeper than the depth rows drawn (``depth`` is then one
    #: below the last depth row)
    kernels: bool = False

    @property
    def label(self) -> str:
        if self.kernels:
            return f"{self.lane} › kernels"
        return self.lane if self.depth == 0 else f"{self.lane} ›{self.depth}"


class TimelineStep(BaseModel):
    step: int
    start_ms: float
    end_ms: float


class Timeline(BaseModel):
    version: int = TIMELINE_VERSION
    window_ms: tuple[float, float] = (0.0, 0.0)
    steps: list[TimelineStep] = Field(default_factory=list)
    rows: list[TimelineRow] = Field(default_factory=list)
    events_in_window: int = 0
    blocks: int = 0
    resolution_ms: float = 0.0
    truncated: bool = False  # rows beyond max_depth or blocks beyond max_blocks were left out
    notes: list[str] = Field(default_factory=list)
    signature: list[str] = Field(default_factory=list)  # trace files (name:size:mtime) it was built from


def classify(name: str) -> str:
    """The colour class of one event name."""
    if name in STEP_MARKERS or name.startswith(f"{STEP_MARKER} "):
        return "step"
    if name in INPUT_NAMES or name.startswith(("Iterator::", "IteratorGetNext")) or "GetNext" in name:
        return "input"
    if is_collective(name):
        return "collective"
    low = name.lower()
    if "memcpy" in low or "copytodevice" in low or "copy" in low.split(":")[-1]:
        return "copy"
    if is_function_run(name):
        return "function"
    if (
        name == "KernelAndDeviceFunc::Run"
    ):  # the kernel an eager op runs inline (in a function call: the call)
        return "compute"
    if is_dispatch(name):
        return "dispatch"
    if is_host_op(name) or name.startswith(("ExecutorState", "FunctionRun")):
        return "compute"
    return "other"


def _depths(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of each event (input sorted by start, longer first on ties)."""
    depth = np.zeros(start.size, dtype=np.int32)
    stack: list[float] = []
    for i in range(start.size):
        s = start[i]
        while stack and stack[-1] <= s:
            stack.pop()
        depth[i] = len(stack)
        stack.append(end[i])
    return depth


def _inside(s: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each start ``s`` lies inside one of the intervals ``[lo, hi)`` (unsorted, may nest)."""
    if not lo.size:
        return np.zeros(s.size, dtype=bool)
    order = np.argsort(lo)
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    k = np.searchsorted(lo, s, side="right") - 1
    return (k >= 0) & (s < hi[np.clip(k, 0, None)])


def _kernels_below(
    s: np.ndarray, e: np.ndarray, names: np.ndarray, depth: np.ndarray, max_depth: int
) -> np.ndarray:
    """The events deeper than ``max_depth`` that are op kernels (kind "compute") outside any
    tf.function call or input event of the lane (a call's own run is the call, and the kernel of an
    eager ``IteratorGetNext`` the input wait, both drawn above: not compute)."""
    deep = depth > max_depth
    if not deep.any():
        return deep
    kinds = _kinds(names)
    outer = (kinds == "function") | (kinds == "input")
    comp = deep & (kinds == "compute")
    if comp.any() and outer.any():
        comp &= ~_inside(s, s[outer], e[outer])
    return comp


def _kinds(names: np.ndarray) -> np.ndarray:
    cache: dict[str, str] = {}
    out = np.empty(names.size, dtype=object)
    for i, n in enumerate(names.tolist()):
        k = cache.get(n)
        if k is None:
            k = cache[n] = classify(n)
        out[i] = k
    return out


def _merge_row(s: np.ndarray, e: np.ndarray, names: np.ndarray, res: float) -> tuple[list, ...]:
    """Blocks of one row: runs of sub-pixel events within a pixel of each other become one block."""
    if s.size == 0:
        return [], [], [], [], []
    small = (e - s) < res
    gap = s[1:] - np.maximum.accumulate(e)[:-1]
    join = small[1:] & small[:-1] & (gap < res)
    first = np.flatnonzero(np.concatenate(([True], ~join)))
    last = np.concatenate((first[1:] - 1, [s.size - 1]))
    ends = np.maximum.reduceat(e, first)
    starts_out, durs, labels, counts, kinds = [], [], [], [], []
    for g in range(first.size):
        a, b = int(first[g]), int(last[g])
        n = b - a + 1
        if n == 1:
            label = str(names[a])
            kind = classify(label)
        else:
            top = Counter(names[a : b + 1].tolist()).most_common(3)
            label = f"{n} events: " + ", ".join(f"{k} ×{c}" for k, c in top)
            kind = classify(top[0][0])
        starts_out.append(round(float(s[a]), 4))
        durs.append(round(float(ends[g] - s[a]), 4))
        labels.append(label)
        counts.append(n)
        kinds.append(kind)
    return starts_out, durs, labels, counts, kinds


def downsample(
    lanes: Sequence[LaneArrays],
    window_ms: tuple[float, float],
    *,
    px: int = 1600,
    max_blocks: int = 6000,
    max_depth: int = 3,
) -> Timeline:
    """The blocks to draw for ``lanes`` in ``window_ms``: at most ``max_blocks``, gaps preserved.

    ``px`` is the horizontal resolution aimed for; if the blocks exceed ``max_blocks`` the
    resolution is halved (up to 4 times), then the deepest rows are dropped (``truncated``).
    """
    lo, hi = float(window_ms[0]), float(window_ms[1])
    if hi <= lo:
        hi = lo + 1.0
    prepared = []
    n_in = 0
    truncated = False
    instant_only: list[str] = []
    for lane in lanes:
        start = np.asarray(lane.start_ms, dtype=np.float64)
        end = start + np.asarray(lane.dur_ms, dtype=np.float64)
        names = np.asarray(lane.names, dtype=object)
        # instant events (zero duration) cannot be drawn and would fill the gaps once merged
        inside = (start <= hi) & (end >= lo)
        sel = inside & (end > start)
        if not sel.any():
            if inside.any():
                instant_only.append(lane.name)
            continue
        s, e, nm = np.clip(start[sel], lo, hi), np.clip(end[sel], lo, hi), names[sel]
        order = np.lexsort((-(e - s), s))
        s, e, nm = s[order], e[order], nm[order]
        n_in += int(s.size)
        depth = _depths(s, e)
        kern = _kernels_below(s, e, nm, depth, max_depth)
        if int(depth[~kern].max(initial=0)) > max_depth:
            truncated = True
        prepared.append((lane, s, e, nm, depth, kern))
    prepared.sort(key=lambda p: (_GROUP_ORDER.get(p[0].group, 9), p[0].group))

    res = (hi - lo) / max(px, 1)
    for _attempt in range(5):
        rows: list[TimelineRow] = []
        for lane, s, e, nm, depth, kern in prepared:
            top = min(int(depth.max()), max_depth)
            for d in range(top + 2):
                m = kern if d == top + 1 else depth == d
                if not m.any():
                    continue
                st, du, la, co, ki = _merge_row(s[m], e[m], nm[m], res)
                if lane.group == "tf.data":
                    ki = ["input" if k in ("other", "dispatch") else k for k in ki]
                rows.append(
                    TimelineRow(
                        group=lane.group,
                        lane=lane.name,
                        depth=d,
                        start_ms=st,
                        dur_ms=du,
                        name=la,
                        count=co,
                        kind=ki,
                        kernels=d == top + 1,
                    )
                )
        total = sum(len(r.start_ms) for r in rows)
        if total <= max_blocks:
            break
        res *= 2
    while total > max_blocks and rows:
        # still too many: drop the deepest rows first (a kernels row ranks as a first level: it is
        # the lane's compute)
        deepest = max(_rank(r) for r in rows)
        if deepest == 0:
            keep: list[TimelineRow] = []
            budget = max_blocks
            for r in rows:
                if len(r.start_ms) <= budget:
                    keep.append(r)
                    budget -= len(r.start_ms)
            rows = keep
        else:
            rows = [r for r in rows if _rank(r) < deepest]
        truncated = True
        total = sum(len(r.start_ms) for r in rows)
    notes = []
    if instant_only:
        shown = ", ".join(instant_only[:3]) + (
            f" and {len(instant_only) - 3} more" if len(instant_only) > 3 else ""
        )
        notes.append(
            f"{len(instant_only)} thread{'s' if len(instant_only) != 1 else ''} with only instant markers "
            f"(no duration) not drawn: {shown}"
        )
    return Timeline(
        window_ms=(lo, hi),
        rows=rows,
        events_in_window=n_in,
        blocks=total,
        resolution_ms=res,
        truncated=truncated,
        notes=notes,
    )


def _rank(r: TimelineRow) -> int:
    return min(r.depth, 1) if r.kernels else r.depth


# -- from a trace ------------------------------------------------------------------------------


_ID_SUFFIX = re.compile(r"^(.*?)/-?\d{6,}$")


def short_lane_names(names: list[str]) -> list[str]:
    """``tf_data_iterator_resource/-8686034031285142634`` -> ``tf_data_iterator_resource #1``."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        m = _ID_SUFFIX.match(n)
        if m:
            base = m.group(1)
            seen[base] = seen.get(base, 0) + 1
            out.append(f"{base} #{seen[base]}")
        else:
            out.append(n)
    return out


def _lane_group(plane_name: str, line_name: str, names: np.ndarray) -> str:
    if plane_name.startswith("/device:"):
        return "device"
    low = line_name.lower()
    if "tf_data" in low or "tf.data" in low or "iterator" in low:
        return "tf.data"
    if names.size and np.mean([str(n).startswith("Iterator::") for n in names[:200]]) > 0.5:
        return "tf.data"
    return "host"


def _pick_window(starts_ms: np.ndarray, ends_ms: np.ndarray, n_steps: int) -> tuple[int, int]:
    """Indices [a, b) of ``n_steps`` consecutive steps from the middle (the first step is skipped:
    it carries the profiler's start-up)."""
    n = starts_ms.size
    if n <= n_steps:
        return 0, n
    first = 1 if n > n_steps + 1 else 0
    mid = first + (n - first - n_steps) // 2
    return mid, mid + n_steps


def timeline_from_trace(trace, steps=None, *, n_steps: int = 3, **kw) -> Timeline:  # type: ignore[no-untyped-def]
    """The timeline of ``n_steps`` steps of ``trace`` (a :class:`~tfdoctor.trace.Trace`).

    ``steps`` is a :class:`~tfdoctor.analysis.Steps`; time 0 is the first profiled step's start, the
    origin the breakdown and the findings' time ranges use. Without steps, the first 200 ms of the
    trace are shown.
    """
    notes: list[str] = []
    if steps is not None and len(steps):
        t0 = int(steps.starts.min())
        s_ms = (steps.starts - t0) / 1e9
        e_ms = (steps.ends - t0) / 1e9
        a, b = _pick_window(s_ms, e_ms, n_steps)
        lo, hi = float(s_ms[a]), float(e_ms[b - 1])
        pad = 0.03 * (hi - lo)
        window = (lo - pad, hi + pad)
        tsteps = [
            TimelineStep(step=int(steps.numbers[i]), start_ms=float(s_ms[i]), end_ms=float(e_ms[i]))
            for i in range(steps.starts.size)
            if e_ms[i] > window[0] and s_ms[i] < window[1]
        ]
        if b - a < steps.starts.size:
            notes.append(
                f"steps {int(steps.numbers[a])}–{int(steps.numbers[b - 1])} of the "
                f"{steps.starts.size} profiled steps"
            )
    else:
        t0, hi_ps = trace.span_ps()
        window = (0.0, min((hi_ps - t0) / 1e9, 200.0))
        tsteps = []
        notes.append("no steps found in the trace: showing its first events")
    lanes: list[LaneArrays] = []
    for plane in trace.planes:
        for line in plane.lines:
            if not len(line) or (line.is_derived and line.name != "Steps"):
                continue
            names = plane.names_of(line)
            group = _lane_group(plane.name, line.name, names)
            host = f"{plane.host}:" if plane.host and len(trace.hostnames) > 1 else ""
            prefix = "" if group != "device" else plane.name.replace("/device:", "") + " "
            lanes.append(
                LaneArrays(
                    group=group,
                    name=f"{host}{prefix}{line.label}"[:80],
                    start_ms=(line.start_ps - t0) / 1e9,
                    dur_ms=line.dur_ps / 1e9,
                    names=names,
                )
            )
    short = short_lane_names([ln.name for ln in lanes])
    lanes = [
        LaneArrays(group=ln.group, name=nm, start_ms=ln.start_ms, dur_ms=ln.dur_ms, names=ln.names)
        for ln, nm in zip(lanes, short, strict=True)
    ]
    tl = downsample(lanes, window, **kw)
    return tl.model_copy(update={"steps": tsteps, "notes": notes + tl.notes})


def _signature(run: RunDir) -> list[str]:
    out = []
    for p in run.trace_files():
        st = p.stat()
        out.append(f"{p.relative_to(run.path)}:{st.st_size}:{st.st_mtime_ns}")
    return out


def timeline_for_run(
    run: RunDir, *, refresh: bool = False, cache: bool = True, build: bool = True
) -> Timeline | None:
    """The run's timeline, from ``timeline.json`` when it matches the trace files, else built and
    cached (``build=False``: only a valid cache is returned). ``None`` when the run has no trace
    (or no cache and not ``build``); an unreadable trace gives a Timeline with a note."""
    sig = _signature(run)
    if not sig:
        return None
    path = Path(run.path) / CACHE_NAME
    if not refresh and path.is_file():
        try:
            tl = Timeline.model_validate_json(path.read_text(encoding="utf-8"))
            if tl.version == TIMELINE_VERSION and tl.signature == sig:
                return tl
        except (OSError, ValueError):
            pass  # a stale or damaged cache is rebuilt below
    if not build:
        return None
    from tfdoctor.analysis.steps import find_steps
    from tfdoctor.rundir import load_steps
    from tfdoctor.trace import load

    try:
        trace = load(run.logdir)
    except TraceError as e:
        return Timeline(notes=[f"no timeline: {e}"], signature=sig)
    steps = find_steps(trace, load_steps(run))
    tl = timeline_from_trace(trace, steps).model_copy(update={"signature": sig})
    if cache:
        try:
            atomic_write_text(path, json.dumps(tl.model_dump(mode="json"), separators=(",", ":")))
        except OSError:
            tl = tl.model_copy(
                update={"notes": [*tl.notes, "timeline not cached: run directory not writable"]}
            )
    return tl
