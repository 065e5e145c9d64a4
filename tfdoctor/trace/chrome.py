"""Read Chrome trace-event JSON (``*.trace.json.gz`` from TF 2.x tools, TF1 ``timeline.json``).

Processes become planes, threads become lines. Only complete (``X``) and begin/end (``B``/``E``)
events are kept; counters, instants and flows are skipped. These files carry no epoch clock, so
``origin_ns`` is 0 and times are relative to the first event.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from tfdoctor.errors import TraceError
from tfdoctor.trace._io import inflate, read_regular
from tfdoctor.trace.model import Line, Plane, StatColumn, Trace, check_consistent
from tfdoctor.trace.xplane import EVENT_STATS

#: the most bytes of JSON read (inflated): real TF trace.json.gz files are tens of MiB inflated; a small
#: file that inflates past this is refused while inflating (a 0.9 MB gzip of 0.9 GiB drove RSS to 2.5 GB)
DEFAULT_MAX_BYTES = 256 * 1024**2
#: the most trace events kept: XProf's trace viewer caps its JSON at 1,000,000 events too. Counted while
#: parsing (each event is reduced to a tuple as it is parsed), so a file of tiny events stops early
MAX_EVENTS = 1_000_000
#: the largest |timestamp| or duration accepted, in µs (~3,000 years: absolute epoch times in µs are ~1.7e15);
#: beyond it a value is not a time. The span of the events is bounded again after (2^62 ps, ~53 days)
_MAX_US = 1e17


class _TooMany(Exception):
    pass


def _read_bytes(p: str, max_bytes: int) -> bytes | bytearray:
    raw = read_regular(p, max_bytes)
    if raw[:2] == b"\x1f\x8b":
        return inflate(p, raw, max_bytes)
    return raw


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a trace can hold")


def _parse_int(text: str) -> int | float:
    # a 4,000-digit timestamp is not a time: do not build the integer (and refuse it below)
    return int(text) if len(text) <= 24 else float("inf")


def _decode(data: bytes | bytearray, source: str) -> Any:
    count = 0

    def hook(d: dict) -> Any:
        nonlocal count
        if "ph" in d:
            count += 1
            if count > MAX_EVENTS:
                raise _TooMany
            args = d.get("args")
            if isinstance(args, dict) and args:
                d["args"] = {k: v for k, v in args.items() if k in EVENT_STATS or k == "name"}
        return d

    try:
        return json.loads(data, object_hook=hook, parse_constant=_reject_constant, parse_int=_parse_int)
    except _TooMany:
        raise TraceError(
            f"{source}: more than {MAX_EVENTS:,} events (XProf's trace viewer limit too): profile fewer steps"
        ) from None
    except (ValueError, RecursionError) as e:
        raise TraceError(f"{source}: not valid JSON ({str(e)[:120]})") from None


def _number(v: Any) -> float | None:
    """A finite JSON number as float; None for anything else (absent, bool, string, NaN, out of range)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) and abs(f) <= _MAX_US else None


def parse_chrome(data: bytes | bytearray, source: str = "<bytes>") -> Trace:
    if not data.strip():
        raise TraceError(f"{source}: empty JSON trace")
    doc = _decode(data, source)
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
    elif isinstance(doc, list):
        events = doc
    else:
        events = None
    if not isinstance(events, list):
        raise TraceError(f"{source}: JSON without a traceEvents list: not a Chrome/TensorFlow trace")
    proc_names: dict[Any, str] = {}
    thread_names: dict[tuple[Any, Any], str] = {}
    spans: dict[tuple[Any, Any], list[tuple[float, float, str, dict]]] = {}
    open_b: dict[tuple[Any, Any], list[tuple[float, str, dict]]] = {}
    bad_ts = bad_dur = 0
    bad_example = ""
    for ev in events:
        if not isinstance(ev, dict):
            continue
        ph = ev.get("ph")
        pid, tid = ev.get("pid", 0), ev.get("tid", 0)
        if not isinstance(pid, (int, str)) or not isinstance(tid, (int, str)):
            continue
        name = ev.get("name")
        name = name if isinstance(name, str) else str(name)
        raw_args = ev.get("args")
        args: dict = raw_args if isinstance(raw_args, dict) else {}
        if ph == "M":
            label = args.get("name")
            if isinstance(label, str):
                if name == "process_name":
                    proc_names[pid] = label
                elif name == "thread_name":
                    thread_names[(pid, tid)] = label
            continue
        if ph not in ("X", "B", "E"):
            continue
        ts = _number(ev.get("ts"))
        if ts is None:
            if "ts" in ev:  # present but not a usable time (an event without "ts" is skipped, as before)
                bad_ts += 1
                bad_example = bad_example or f"{name!r} has ts={str(ev.get('ts'))[:24]}"
            continue
        if ph == "X":
            dur = _number(ev.get("dur", 0))
            if dur is None or dur < 0:
                bad_dur += 1
                bad_example = bad_example or f"{name!r} has dur={str(ev.get('dur'))[:24]}"
                continue
            spans.setdefault((pid, tid), []).append((ts, dur, name, args))
        elif ph == "B":
            open_b.setdefault((pid, tid), []).append((float(ts), name, args))
        elif ph == "E":
            stack = open_b.get((pid, tid))
            if stack:
                t0, nm, a = stack.pop()
                if ts < t0:
                    bad_dur += 1
                    bad_example = bad_example or f"{nm!r} ends before it begins"
                    continue
                spans.setdefault((pid, tid), []).append((t0, ts - t0, nm, a))
    if bad_ts or bad_dur:
        what = ", ".join(
            x
            for x in (
                f"{bad_ts} events without a usable timestamp" if bad_ts else "",
                f"{bad_dur} events with a negative or unusable duration" if bad_dur else "",
            )
            if x
        )
        raise TraceError(
            f"{source}: inconsistent trace: {what} (e.g. {bad_example}): timestamps must be finite "
            "microseconds (NaN, Infinity and values past 2^62 ps are refused)"
        )
    if not spans:
        raise TraceError(f"{source}: JSON trace holds no timed events")
    t_min = min(s[0] for lst in spans.values() for s in lst)
    t_max = max(s[0] + s[1] for lst in spans.values() for s in lst)
    if (t_max - t_min) * 1e6 >= 1 << 62:
        raise TraceError(
            f"{source}: inconsistent trace: its events span {(t_max - t_min) / 86400e6:,.0f} days "
            "(timestamps from different clocks, or corrupt)"
        )
    planes: dict[Any, Plane] = {}
    name_maps: dict[Any, dict[str, int]] = {}
    for (pid, tid), lst in sorted(spans.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        plane = planes.get(pid)
        if plane is None:
            plane = planes[pid] = Plane(
                id=len(planes), name=proc_names.get(pid, f"pid {pid}"), lines=[], event_names=[]
            )
            name_maps[pid] = {}
        nmap = name_maps[pid]
        lst.sort(key=lambda s: s[0])
        idx = []
        for _, _, nm, _ in lst:
            j = nmap.get(nm)
            if j is None:
                j = nmap[nm] = len(plane.event_names)
                plane.event_names.append(nm)
            idx.append(j)
        stats: dict[str, StatColumn] = {}
        keys = {k for _, _, _, a in lst for k in a if k in EVENT_STATS}
        for k in keys:  # sparse: the events that carry the stat (numbers as float64 when all are)
            at = [i for i, (_, _, _, a) in enumerate(lst) if a.get(k) is not None]
            col = [lst[i][3][k] for i in at]
            try:
                values = np.array([float(v) for v in col], dtype=np.float64)
            except (TypeError, ValueError, OverflowError):
                values = np.empty(len(col), dtype=object)
                values[:] = col
            stats[k] = StatColumn(len(lst), np.array(at, dtype=np.int64), values)
        plane.lines.append(
            Line(
                id=tid if isinstance(tid, int) else len(plane.lines),
                name=thread_names.get((pid, tid), str(tid)),
                display_name="",
                start_ps=np.array([round((s[0] - t_min) * 1e6) for s in lst], dtype=np.int64),
                dur_ps=np.array([round(s[1] * 1e6) for s in lst], dtype=np.int64),
                name_idx=np.array(idx, dtype=np.int32),
                stats=stats,
            )
        )
    # a named process without events is kept as an empty plane: a GPU plane that recorded nothing (device
    # tracing failed) must still say the run had a GPU
    for pid, pname in sorted(proc_names.items(), key=lambda kv: str(kv[0])):
        if pid not in planes and pname.startswith(("/device:", "/host:")):
            planes[pid] = Plane(id=len(planes), name=pname, lines=[], event_names=[])
    return check_consistent(Trace(planes=list(planes.values()), origin_ns=0, source=source, format="chrome"))


def read_chrome(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> Trace:
    p = os.fspath(path)
    return parse_chrome(_read_bytes(p, max_bytes), source=p)
