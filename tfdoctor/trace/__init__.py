"""Trace reading: ``load(path)`` accepts an ``*.xplane.pb``, a Chrome ``*.trace.json[.gz]`` / TF1
``timeline.json``, a TensorBoard logdir, a profile session directory or a tfdoctor run directory.

Never imports TensorFlow. Anything unreadable raises :class:`tfdoctor.errors.TraceError` with one
clear line.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfdoctor.errors import TraceError
from tfdoctor.trace._io import is_regular, open_regular
from tfdoctor.trace.chrome import parse_chrome, read_chrome
from tfdoctor.trace.model import Line, Plane, StatColumn, Trace
from tfdoctor.trace.xplane import parse_xspace, read_xplane

__all__ = [
    "Line",
    "Plane",
    "StatColumn",
    "Trace",
    "TraceError",
    "find_session",
    "load",
    "load_many",
    "parse_chrome",
    "parse_xspace",
    "read_chrome",
    "read_xplane",
]

TOOL_SUFFIXES = (
    ".overview_page.pb",
    ".input_pipeline.pb",
    ".tensorflow_stats.pb",
    ".kernel_stats.pb",
    ".memory_profile.json.gz",
)


def _is_json_trace(p: Path) -> bool:
    n = p.name
    return n.endswith((".trace.json.gz", ".trace.json", ".json.gz")) or n.endswith(".json") or ".json_" in n


def find_session(path: str | os.PathLike[str]) -> list[Path]:
    """The trace files of the newest profile session under ``path`` (one per host).

    Prefers ``*.xplane.pb``; falls back to ``*.trace.json.gz`` where a session has no xplane.
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.exists():
        raise TraceError(f"{p}: no such file or directory")
    if not p.is_dir():  # a FIFO, socket or device given by name: never opened
        open_regular(str(p))  # raises the TraceError that names what it is
    # regular files only: a FIFO named *.xplane.pb in a logdir would block the reader forever
    xplanes = sorted(x for x in p.rglob("*.xplane.pb") if is_regular(x))
    if xplanes:
        newest = max({x.parent for x in xplanes}, key=lambda d: (d.name, str(d)))
        return sorted(x for x in xplanes if x.parent == newest)
    jsons = sorted(x for x in p.rglob("*.trace.json*") if is_regular(x))
    if jsons:
        newest = max({x.parent for x in jsons}, key=lambda d: (d.name, str(d)))
        return sorted(x for x in jsons if x.parent == newest)
    tools = sorted(x.name for x in p.rglob("*") if x.name.endswith(TOOL_SUFFIXES))
    if tools:
        raise TraceError(
            f"{p}: holds only XProf tool outputs ({', '.join(sorted({t.split('.', 1)[1] for t in tools}))}),"
            " no trace: tfdoctor needs the *.xplane.pb the profiler writes"
        )
    raise TraceError(f"{p}: no profile found (no *.xplane.pb or *.trace.json.gz below it)")


def _read_one(p: Path, max_bytes: int | None) -> Trace:
    kw: dict[str, int] = {} if max_bytes is None else {"max_bytes": max_bytes}
    if p.name.endswith(".xplane.pb") or p.suffix == ".pb":
        return read_xplane(p, **kw)  # type: ignore[arg-type]
    if _is_json_trace(p):
        return read_chrome(p, **kw)
    # unknown suffix: sniff (a regular file only)
    f, _ = open_regular(str(p))
    with f:
        try:
            head = f.read(64).lstrip()
        except OSError as e:
            raise TraceError(f"{p}: cannot read ({e.strerror or e})") from None
    if head[:1] in (b"{", b"[") or head[:2] == b"\x1f\x8b":
        return read_chrome(p, **kw)
    return read_xplane(p, **kw)  # type: ignore[arg-type]


def load_many(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> list[Trace]:
    """One Trace per host file of the newest session under ``path``."""
    return [_read_one(f, max_bytes) for f in find_session(path)]


def load(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> Trace:
    """Read a trace; several host files of one session are merged (planes keep their host)."""
    traces = load_many(path, max_bytes=max_bytes)
    if len(traces) == 1:
        return traces[0]
    return merge(traces)


def merge(traces: list[Trace]) -> Trace:
    """Merge per-host traces onto one time base (each file's own epoch origin is kept exact)."""
    with_clock = [t for t in traces if t.origin_ns]
    origin = min(t.origin_ns for t in with_clock) if with_clock else 0
    planes: list[Plane] = []
    # several processes of one machine (workers on localhost) share a hostname: their files' names tell
    # them apart (as TensorBoard's host list does)
    names = [t.hostnames[0] if t.hostnames else "" for t in traces]
    shared = {n for n in names if names.count(n) > 1}
    for t, name in zip(traces, names, strict=True):
        shift = (t.origin_ns - origin) * 1000 if t.origin_ns else 0
        fname = Path(t.source).name
        stem = fname.removesuffix(".xplane.pb") if fname.endswith(".xplane.pb") else fname.split(".")[0]
        for pl in t.planes:
            if shift:
                for ln in pl.lines:
                    ln.start_ps = ln.start_ps + shift
            if not pl.host or name in shared:
                pl.host = name if name and name not in shared else stem
            planes.append(pl)
    return Trace(
        planes=planes,
        origin_ns=origin,
        source=";".join(t.source for t in traces),
        format=traces[0].format,
        hostnames=[h for t in traces for h in t.hostnames],
        errors=[e for t in traces for e in t.errors],
    )
