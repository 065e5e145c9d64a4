"""Read ``*.xplane.pb`` (XSpace protobuf, TF 2.3 – 2.21) into a :class:`~tfdoctor.trace.model.Trace`.

Decoding uses the protobuf runtime (upb where available) with the XSpace schema loaded into a
private descriptor pool; TensorFlow is never imported.
"""

from __future__ import annotations

import mmap
import os
from functools import cache
from typing import Any

import numpy as np
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from tfdoctor.errors import TraceError
from tfdoctor.model import INPUT_MARKER, STEP_MARKERS
from tfdoctor.trace._io import open_regular
from tfdoctor.trace._xplane_descriptor import SERIALIZED
from tfdoctor.trace.model import Line, Plane, StatColumn, Trace, check_consistent

#: Per-event stats kept as arrays (the rest are skipped: decoding every stat costs the most time).
EVENT_STATS = frozenset(
    {
        "step_num",  # our "train" markers and Keras' step markers
        "_r",  # TraceMe root marker
        "group_id",  # XProf's step grouping
        "step_id",
        "iter_num",
        "graph_type",  # TF 2.3 Keras "TraceContext" markers
        "correlation_id",  # host launch <-> device kernel
        "tf_op",
        "kernel_details",
        "long_name",
        "is_eager",
        "element_id",  # tf.data
        "parent_id",
        "device_ordinal",
        "memcpy_details",
        "bytes_transferred",
    }
)
#: Events whose stats are always decoded (step markers). Other events' stats are decoded only with
#: ``all_stats=True``: walking every event's stats is most of the decoding time.
MARKER_EVENTS = frozenset({*STEP_MARKERS, INPUT_MARKER, "Steps"})
#: Stats kept from event metadata (XLA modules/ops).
META_STATS = frozenset({"tf_op", "hlo_category", "program_id", "flops", "bytes_accessed", "source"})

DEFAULT_MAX_BYTES = 2 * 1024**3


@cache
def _xspace_class():
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(SERIALIZED)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.profiler.XSpace"))


def _stat_value(st: Any, stat_names: dict[int, str]) -> Any:
    kind = st.WhichOneof("value")
    if kind is None:
        return None
    if kind == "ref_value":
        return stat_names.get(st.ref_value)
    if kind == "bytes_value":
        return st.bytes_value.hex() if len(st.bytes_value) <= 64 else f"<{len(st.bytes_value)} bytes>"
    return getattr(st, kind)


def parse_xspace(data: bytes | mmap.mmap, source: str = "<bytes>", *, all_stats: bool = False) -> Trace:
    """Decode XSpace bytes. Raises :class:`TraceError` for anything that is not a readable XSpace."""
    if not data:
        raise TraceError(f"{source}: empty file (0 bytes): the profiler wrote no trace")
    if not all_stats:  # the columnar decoder (3x faster, a fraction of the memory); same Trace
        from tfdoctor.trace._xplane_columnar import Unsupported, convert_columnar

        try:
            return check_consistent(convert_columnar(data, source))
        except (Unsupported, IndexError, OverflowError, ValueError, TypeError):
            pass  # anything unexpected: the protobuf path below gives the result or the TraceError
    xs = _xspace_class()()
    if not isinstance(data, bytes):
        data = bytes(data)  # a mapped file the columnar decoder did not take: upb parses bytes
    try:
        xs.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise TraceError(f"{source}: not a readable xplane.pb (protobuf decode failed: {e})") from None
    if not xs.planes:
        raise TraceError(f"{source}: xplane.pb holds no planes (is it an XSpace? {len(data)} bytes)")
    try:
        trace = _convert(xs, source, all_stats)
    except (OverflowError, ValueError, TypeError) as e:
        raise TraceError(f"{source}: xplane.pb holds inconsistent values ({e})") from None
    return check_consistent(trace)


def _convert(xs: Any, source: str, all_stats: bool = False) -> Trace:
    stamps = [ln.timestamp_ns for p in xs.planes for ln in p.lines if len(ln.events)]
    origin_ns = min(stamps) if stamps else 0
    hostnames = list(xs.hostnames)
    planes: list[Plane] = []
    for xp in xs.planes:
        stat_names = {k: v.name for k, v in xp.stat_metadata.items()}
        wanted = {k for k, n in stat_names.items() if n in EVENT_STATS}
        # dense event-name table
        meta_index: dict[int, int] = {}
        names: list[str] = []
        display: list[str] = []
        meta_stats: dict[int, dict[str, Any]] = {}
        for mid, md in xp.event_metadata.items():
            meta_index[mid] = len(names)
            names.append(md.name)
            display.append(md.display_name)
            if md.stats:
                kept = {
                    stat_names.get(s.metadata_id, ""): _stat_value(s, stat_names)
                    for s in md.stats
                    if stat_names.get(s.metadata_id) in META_STATS
                }
                if kept:
                    meta_stats[len(names) - 1] = kept
        plane_stats = {
            stat_names.get(s.metadata_id, str(s.metadata_id)): _stat_value(s, stat_names) for s in xp.stats
        }
        lines: list[Line] = []
        for xl in xp.lines:
            evs = xl.events
            n = len(evs)
            base_ps = (xl.timestamp_ns - origin_ns) * 1000
            off = np.fromiter((e.offset_ps for e in evs), dtype=np.int64, count=n)
            dur = np.fromiter((e.duration_ps for e in evs), dtype=np.int64, count=n)
            mids = [e.metadata_id for e in evs]
            missing = [m for m in set(mids) if m not in meta_index]
            for m in missing:  # events whose metadata is absent: keep them, named by id
                meta_index[m] = len(names)
                names.append(f"<event {m}>")
                display.append("")
            idx = np.fromiter((meta_index[m] for m in mids), dtype=np.int32, count=n)
            stats: dict[str, StatColumn] = {}
            if wanted and n:
                cols: dict[str, dict[int, Any]] = {}  # sparse: the events that carry each stat
                which: range | list[int]
                if all_stats:
                    which = range(n)
                else:
                    marker_ids = [i for i, nm in enumerate(names) if nm in MARKER_EVENTS]
                    which = np.flatnonzero(np.isin(idx, marker_ids)).tolist() if marker_ids else []
                for i in which:
                    e = evs[i]
                    for st in e.stats:
                        if st.metadata_id in wanted:
                            cols.setdefault(stat_names[st.metadata_id], {})[i] = _stat_value(st, stat_names)
                stats = {name: StatColumn.from_values(n, col) for name, col in cols.items()}
            lines.append(
                Line(
                    id=xl.id,
                    name=xl.name,
                    display_name=xl.display_name,
                    start_ps=off + base_ps,
                    dur_ps=dur,
                    name_idx=idx,
                    stats=stats,
                )
            )
        planes.append(
            Plane(
                id=xp.id,
                name=xp.name,
                lines=lines,
                event_names=names,
                event_display_names=display,
                stats=plane_stats,
                event_meta_stats=meta_stats,
                host=hostnames[0] if hostnames else "",
            )
        )
    return Trace(
        planes=planes,
        origin_ns=origin_ns,
        source=source,
        format="xplane",
        hostnames=hostnames,
        errors=[*xs.errors, *xs.warnings],
    )


#: files at least this big are memory-mapped (and their pages released as lines are decoded)
MMAP_MIN_BYTES = 1 << 20


def read_xplane(
    path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES, all_stats: bool = False
) -> Trace:
    p = os.fspath(path)
    f, size = open_regular(p)  # regular files only: a FIFO named *.xplane.pb must not block the reader
    with f:
        if size > max_bytes:
            raise TraceError(
                f"{p}: {size / 1024**2:.0f} MiB is over the {max_bytes / 1024**2:.0f} MiB limit for one xplane; "
                "profile fewer steps (--profile-steps) or raise the limit (--max-trace-mb)"
            )
        if size >= MMAP_MIN_BYTES and not all_stats:
            # mapped, not read: the columnar decoder releases each line's pages once decoded, so the
            # file's bytes are not held beside the Trace (peak memory ~2x the file instead of ~3x)
            try:
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as e:
                raise TraceError(f"{p}: cannot read ({e})") from None
            try:
                return parse_xspace(mm, source=p)
            finally:
                try:
                    mm.close()
                except BufferError:  # an array still views it: closed when collected
                    pass
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise TraceError(f"{p}: cannot read ({e.strerror or e})") from None
    if len(data) > max_bytes:
        raise TraceError(f"{p}: grew past the {max_bytes / 1024**2:.0f} MiB limit while being read")
    return parse_xspace(data, source=p, all_stats=all_stats)
