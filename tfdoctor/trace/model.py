"""The in-memory trace: planes of lines of events, each line as columnar numpy arrays.

Times are picoseconds relative to ``Trace.origin_ns`` (the earliest line timestamp), held in int64:
an absolute epoch time in picoseconds would overflow int64. ``Trace.to_ps(epoch_ns)`` maps a
``time.time_ns()`` reading (the harness's clock, the profiler's clock) onto the trace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Line ids XProf gives to the derived lines of a device plane.
DERIVED_LINE_NAMES = {
    "Steps",
    "TensorFlow Ops",
    "TensorFlow Name Scope",
    "XLA Modules",
    "XLA Ops",
    "Framework Ops",
    "Framework Name Scope",
    "Source code",
    "XLA TraceMe",
}

_STREAM_RE = re.compile(r"^Stream #(\d+)\((.*)\)$")


class StatColumn:
    """One per-event stat of a line, sparse: the events that carry it and their values.

    Few events carry the stats the reader keeps (step markers on a line of a million op events), so a
    line does not hold one slot per event: ``index`` (int64, ascending) names the events that carry the
    stat and ``values`` holds theirs, float64 for a numeric stat, object (str, int...) otherwise. Read
    it as the dense column it stands for with ``at(events)``, ``col[i]``, ``dense()`` or ``tolist()``:
    an event without the stat reads NaN (numeric) or None (object).
    """

    __slots__ = ("index", "n", "values")

    def __init__(self, n: int, index: np.ndarray, values: np.ndarray) -> None:
        if index.shape != values.shape or index.ndim != 1:
            raise ValueError("a stat column needs one value per index")
        self.n = int(n)
        self.index = np.ascontiguousarray(index, dtype=np.int64)
        self.values = values

    @classmethod
    def from_values(cls, n: int, col: dict[int, Any]) -> StatColumn:
        """From {event index: value}: float64 when every value is a number or None, else object."""
        order = sorted(col)
        index = np.array(order, dtype=np.int64)
        vals = [col[i] for i in order]
        if all(v is None or isinstance(v, (int, float)) for v in vals):
            return cls(
                n, index, np.array([np.nan if v is None else float(v) for v in vals], dtype=np.float64)
            )
        values = np.empty(len(vals), dtype=object)
        values[:] = vals
        return cls(n, index, values)

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def absent(self) -> Any:
        """What an event without the stat reads: NaN or None."""
        return None if self.values.dtype == object else np.nan

    def __len__(self) -> int:
        return self.n

    def at(self, events: np.ndarray) -> np.ndarray:
        """The values of the given events (integer positions or a boolean mask over the line)."""
        ev = np.asarray(events)
        if ev.dtype == bool:
            ev = np.flatnonzero(ev)
        out = np.full(ev.shape, self.absent, dtype=self.values.dtype)
        if self.index.size and ev.size:
            k = np.searchsorted(self.index, ev)
            k_in = np.minimum(k, self.index.size - 1)
            hit = self.index[k_in] == ev
            out[hit] = self.values[k_in[hit]]
        return out

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, (int, np.integer)):
            if not -self.n <= i < self.n:
                raise IndexError(f"event {i} of a line of {self.n}")
            i = int(i) % self.n
            k = int(np.searchsorted(self.index, i))
            return self.values[k] if k < self.index.size and self.index[k] == i else self.absent
        return self.at(i)

    def dense(self) -> np.ndarray:
        """One slot per event of the line (what the column stands for)."""
        out = np.full(self.n, self.absent, dtype=self.values.dtype)
        out[self.index] = self.values
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        d = self.dense()
        return d if dtype is None else d.astype(dtype)

    def tolist(self) -> list[Any]:
        return self.dense().tolist()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StatColumn):
            return NotImplemented
        if self.n != other.n or self.dtype != other.dtype or not np.array_equal(self.index, other.index):
            return False
        if self.dtype == object:
            return self.values.tolist() == other.values.tolist()
        return bool(np.array_equal(self.values, other.values, equal_nan=True))

    __hash__ = None  # type: ignore[assignment]

    @property
    def nbytes(self) -> int:
        return int(self.index.nbytes + self.values.nbytes)

    def __repr__(self) -> str:
        return f"StatColumn({self.values.size} of {self.n} events, {self.dtype})"


@dataclass
class Line:
    id: int
    name: str
    display_name: str
    start_ps: np.ndarray  # int64, relative to Trace.origin_ns
    dur_ps: np.ndarray  # int64
    name_idx: np.ndarray  # int32 index into Plane.event_names
    #: selected per-event stats, sparse (only the events that carry them): see StatColumn
    stats: dict[str, StatColumn] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.start_ps.shape[0])

    @property
    def end_ps(self) -> np.ndarray:
        return self.start_ps + self.dur_ps

    @property
    def label(self) -> str:
        return self.display_name or self.name

    @property
    def is_derived(self) -> bool:
        return self.name in DERIVED_LINE_NAMES

    def stream_kinds(self) -> list[str]:
        """For a GPU stream line ``Stream #14(MemcpyH2D)``: ``["MemcpyH2D"]``; else ``[]``."""
        m = _STREAM_RE.match(self.name)
        return [k.strip() for k in m.group(2).split(",")] if m else []

    def stat(self, name: str) -> StatColumn | None:
        return self.stats.get(name)


@dataclass
class Plane:
    id: int
    name: str  # "/host:CPU", "/device:GPU:0", ...
    lines: list[Line]
    event_names: list[str]
    event_display_names: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)  # plane-level stats (device caps, ...)
    #: selected stats on event metadata (XLA/TF op info), keyed by index into event_names
    event_meta_stats: dict[int, dict[str, Any]] = field(default_factory=dict)
    host: str = ""

    @property
    def is_host(self) -> bool:
        return self.name.startswith("/host:")

    @property
    def is_device(self) -> bool:
        return self.name.startswith("/device:")

    @property
    def device_kind(self) -> str | None:
        """ "GPU", "TPU", "CPU" for ``/device:KIND:N`` planes."""
        if not self.is_device:
            return None
        parts = self.name.split(":")
        return parts[1].upper() if len(parts) > 1 else None

    @property
    def n_events(self) -> int:
        return sum(len(ln) for ln in self.lines)

    def line(self, name: str) -> Line | None:
        for ln in self.lines:
            if ln.name == name:
                return ln
        return None

    def names_of(self, line: Line) -> np.ndarray:
        """Event names of ``line`` as an object array (for masks like ``np.char.startswith``)."""
        table = np.asarray(self.event_names, dtype=object)
        return table[line.name_idx] if len(line) else np.empty(0, dtype=object)

    def name_ids(self, predicate) -> np.ndarray:
        """Indices into event_names for which ``predicate(name)`` holds (evaluate once per name)."""
        return np.fromiter((i for i, n in enumerate(self.event_names) if predicate(n)), dtype=np.int32)


@dataclass
class Trace:
    planes: list[Plane]
    origin_ns: int  # epoch ns of time 0
    source: str  # the file(s) read
    format: str  # "xplane" | "chrome"
    hostnames: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # profiler-reported errors/warnings

    def to_ps(self, epoch_ns: int | float) -> int:
        return int((int(epoch_ns) - self.origin_ns) * 1000)

    @property
    def n_events(self) -> int:
        return sum(p.n_events for p in self.planes)

    def host_planes(self) -> list[Plane]:
        return [p for p in self.planes if p.is_host]

    def device_planes(self, kind: str | None = None) -> list[Plane]:
        return [p for p in self.planes if p.is_device and (kind is None or p.device_kind == kind)]

    def iter_lines(self) -> Iterator[tuple[Plane, Line]]:
        for p in self.planes:
            for ln in p.lines:
                yield p, ln

    def span_ps(self) -> tuple[int, int]:
        lo, hi = None, None
        for _, ln in self.iter_lines():
            if len(ln):
                a = int(ln.start_ps.min())
                b = int(ln.end_ps.max())
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
        return (lo or 0, hi or 0)

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "format": self.format,
            "hostnames": self.hostnames,
            "events": self.n_events,
            "planes": [
                {"name": p.name, "host": p.host, "lines": len(p.lines), "events": p.n_events}
                for p in self.planes
            ],
        }


#: the largest |start| or duration accepted (2^62 ps, ~53 days): start + duration then fits in int64
MAX_PS = 1 << 62


def check_consistent(trace: Trace) -> Trace:
    """Refuse a trace whose times cannot be right, naming what is wrong (a TraceError, one line):
    negative durations, times past ~53 days from the trace's origin (overflowed or corrupt values), or
    every event at time zero with no duration (no timestamps at all). Zero durations of single events are
    fine (instant events); a trace of nothing else is not."""
    from tfdoctor.errors import TraceError

    n = neg = far = 0
    any_time = False
    example = ""
    for plane, ln in trace.iter_lines():
        if not len(ln):
            continue
        n += len(ln)
        # min / max first: no temporary the size of the line unless something is wrong
        dmin, dmax = int(ln.dur_ps.min()), int(ln.dur_ps.max())
        smin, smax = int(ln.start_ps.min()), int(ln.start_ps.max())
        if dmin < 0:
            bad = ln.dur_ps < 0
            neg += int(bad.sum())
            i = int(np.flatnonzero(bad)[0])
            example = example or (
                f"{plane.event_names[ln.name_idx[i]][:60]!r} on {plane.name} lasts {int(ln.dur_ps[i]) / 1e9:.3f} ms"
            )
        if smin < -MAX_PS or smax > MAX_PS or dmax > MAX_PS:
            out = (ln.start_ps < -MAX_PS) | (ln.start_ps > MAX_PS) | (ln.dur_ps > MAX_PS)  # abs() wraps
            far += int(out.sum())
            i = int(np.flatnonzero(out)[0])
            example = example or f"{plane.event_names[ln.name_idx[i]][:60]!r} on {plane.name}"
        if not any_time and (smin or smax or dmin or dmax):
            any_time = True
    if neg or far:
        what = ", ".join(
            x
            for x in (
                f"{neg} events with a negative duration" if neg else "",
                f"{far} events at times or with durations past 2^62 ps (overflowed)" if far else "",
            )
            if x
        )
        raise TraceError(f"{trace.source}: inconsistent trace: {what} (e.g. {example}); refused")
    if n and not any_time:
        raise TraceError(
            f"{trace.source}: inconsistent trace: all {n} events are at time 0 with no duration "
            "(the timestamps are missing); refused"
        )
    return trace
