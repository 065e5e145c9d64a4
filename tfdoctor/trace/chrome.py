"""Read Chrome trace-event JSON (``*.trace.json.gz`` from TF 2.x tools, TF1 ``timeline.json``).

Processes become planes, threads become lines. Only complete (``X``) and begin/end (``B``/``E``)
events are kept; counters, instants and flows are skipped. These files carry no epoch clock, so
``origin_ns`` is 0 and times are relative to the first event.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from typing import Any

import numpy as np

from tfdoctor.errors import TraceError
from tfdoctor.trace.model import Line, Plane, Trace
from tfdoctor.trace.xplane import EVENT_STATS

DEFAULT_MAX_BYTES = 1024**3


def _read_bytes(p: str, max_bytes: int) -> bytes:
    try:
        with open(p, "rb") as f:
            head = f.read(2)
            f.seek(0)
            if head == b"\x1f\x8b":
                with gzip.GzipFile(fileobj=f) as g:
                    data = g.read(max_bytes + 1)
            else:
                data = f.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise TraceError(f"{p}: cannot read ({e})") from None
    if len(data) > max_bytes:
        raise TraceError(f"{p}: over the {max_bytes / 1024**2:.0f} MiB limit for a JSON trace")
    return data


def parse_chrome(data: bytes, source: str = "<bytes>") -> Trace:
    if not data.strip():
        raise TraceError(f"{source}: empty JSON trace")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise TraceError(f"{source}: not valid JSON ({str(e)[:120]})") from None
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
    for ev in events:
        if not isinstance(ev, dict):
            continue
        ph = ev.get("ph")
        pid, tid = ev.get("pid", 0), ev.get("tid", 0)
        if not isinstance(pid, (int, str)) or not isinstance(tid, (int, str)):
            continue
        name = ev.get("name")
        name = name if isinstance(name, str) else str(name)
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        if ph == "M":
            label = args.get("name")
            if isinstance(label, str):
                if name == "process_name":
                    proc_names[pid] = label
                elif name == "thread_name":
                    thread_names[(pid, tid)] = label
            continue
        ts = ev.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            continue
        if ph == "X":
            dur = ev.get("dur", 0)
            if not isinstance(dur, (int, float)) or isinstance(dur, bool) or dur < 0:
                dur = 0
            spans.setdefault((pid, tid), []).append((float(ts), float(dur), name, args))
        elif ph == "B":
            open_b.setdefault((pid, tid), []).append((float(ts), name, args))
        elif ph == "E":
            stack = open_b.get((pid, tid))
            if stack:
                t0, nm, a = stack.pop()
                spans.setdefault((pid, tid), []).append((t0, max(0.0, float(ts) - t0), nm, a))
    if not spans:
        raise TraceError(f"{source}: JSON trace holds no timed events")
    t_min = min(s[0] for lst in spans.values() for s in lst)
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
        stats: dict[str, np.ndarray] = {}
        keys = {k for _, _, _, a in lst for k in a if k in EVENT_STATS}
        for k in keys:
            col = [a.get(k) for _, _, _, a in lst]
            nums = []
            numeric = True
            for v in col:
                if v is None:
                    nums.append(np.nan)
                    continue
                try:
                    nums.append(float(v))
                except (TypeError, ValueError):
                    numeric = False
                    break
            stats[k] = np.array(nums, dtype=np.float64) if numeric else np.array(col, dtype=object)
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
    return Trace(planes=list(planes.values()), origin_ns=0, source=source, format="chrome")


def read_chrome(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> Trace:
    p = os.fspath(path)
    return parse_chrome(_read_bytes(p, max_bytes), source=p)
