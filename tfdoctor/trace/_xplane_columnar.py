"""A columnar decoder for ``*.xplane.pb``: the XSpace → Trace conversion without one Python object
per event.

The protobuf runtime (upb) parses an XSpace quickly, but getting each event's offset, duration and
metadata id out of it costs a wrapper object per event, and the parsed tree is ~4× the file in
memory. Here the wire format is walked directly: the few top-level fields (planes, lines, line
headers) in Python, each line's events as index arrays, and every event's fields at once with a
vectorised varint decoder in numpy. upb is still used for what is small or needs the full schema:
a plane's metadata and stats, and the stats of the step-marker events.

:func:`convert_columnar` returns the same :class:`~tfdoctor.trace.model.Trace` as the upb path in
:mod:`tfdoctor.trace.xplane` (its ``all_stats=False`` mode), or raises :class:`Unsupported` for
anything unexpected (malformed bytes, a field encoding it does not handle): the caller then falls
back to the upb path, which gives the authoritative result or the TraceError.
"""

from __future__ import annotations

import mmap
from array import array
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from google.protobuf import message_factory
from google.protobuf.message import DecodeError

from tfdoctor.trace.model import Line, Plane, StatColumn, Trace

#: what the decoder reads: the file's bytes, or the file memory-mapped
Buffer = bytes | mmap.mmap

#: Events decoded per vectorised chunk (bounds the temporaries: ~130 bytes per event, ~2 MiB; larger
#: chunks are no faster)
CHUNK = 1 << 14

#: gives back the memory pages of a byte range of a mapped file, once read (None: the bytes are not mapped)
Release = Callable[[int, int], None] | None


class Unsupported(Exception):
    """The bytes are not what the columnar path handles; use the upb path instead."""


@cache
def _classes() -> tuple[Any, Any]:
    from tfdoctor.trace.xplane import _xspace_class

    pool = _xspace_class().DESCRIPTOR.file.pool
    get = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))  # noqa: E731
    return get("tensorflow.profiler.XPlane"), get("tensorflow.profiler.XEvent")


# -- scalar wire-format walking (top levels: few fields) ---------------------------------------------
def _varint(buf: Buffer, p: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if p >= end or shift > 63:
            raise Unsupported("truncated varint")
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, p
        shift += 7


def _fields(buf: Buffer, p: int, end: int):
    """(field number, wire type, value or payload start, payload end, field start) for each field."""
    while p < end:
        at = p
        tag, p = _varint(buf, p, end)
        fn, wt = tag >> 3, tag & 7
        if wt == 0:
            v, p = _varint(buf, p, end)
            yield fn, wt, v, p, at
        elif wt == 2:
            n, p = _varint(buf, p, end)
            if p + n > end:
                raise Unsupported("truncated field")
            yield fn, wt, p, p + n, at
            p += n
        elif wt == 1 or wt == 5:
            p += 8 if wt == 1 else 4
            if p > end:
                raise Unsupported("truncated fixed field")
            yield fn, wt, None, p, at
        else:
            raise Unsupported(f"wire type {wt}")
    if p != end:
        raise Unsupported("field runs past its message")


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _text(buf: Buffer, a: int, b: int) -> str:
    try:
        return buf[a:b].decode("utf-8")
    except UnicodeDecodeError:
        raise Unsupported("invalid UTF-8") from None


# -- vectorised event decoding ------------------------------------------------------------------------
def _varints_at(u8: np.ndarray, pos: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position (all within ``limit``); returns (uint64 values, next pos).

    Byte by byte over the varints still going: most are 1-3 bytes, so the work shrinks fast."""
    b = u8[pos]
    vals = (b & 0x7F).astype(np.uint64)
    nxt = pos + 1
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while more.size:
        if shift > 63:
            raise Unsupported("varint longer than 10 bytes")
        q = nxt[more]
        if int(q.max()) >= len(u8):
            raise Unsupported("truncated varint")
        b = u8[q]
        vals[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        nxt[more] = q + 1
        more = more[b >= 0x80]
        shift += 7
    if (nxt > limit).any():
        raise Unsupported("varint runs past its event")
    return vals, nxt


def _decode_events(u8: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """metadata_id, offset_ps, duration_ps of events whose payloads are u8[starts[i]:ends[i]]."""
    n = len(starts)
    mid = np.zeros(n, np.int64)
    off = np.zeros(n, np.int64)
    dur = np.zeros(n, np.int64)
    pos = starts.copy()
    active = np.flatnonzero(pos < ends)
    while active.size:
        p, lim = pos[active], ends[active]
        tag = u8[p]
        if (tag >= 0x80).any():
            raise Unsupported("multi-byte tag")
        wt = tag & 7
        newp = np.empty_like(p)
        var = wt == 0
        if var.any():
            vals, q = _varints_at(u8, p[var] + 1, lim[var])
            newp[var] = q
            sel, t = active[var], tag[var]
            for field_tag, out in ((0x08, mid), (0x10, off), (0x18, dur)):
                hit = t == field_tag
                out[sel[hit]] = vals[hit].view(np.int64)
        ld = wt == 2
        if ld.any():
            lens, q = _varints_at(u8, p[ld] + 1, lim[ld])
            newp[ld] = q + lens.astype(np.int64)
        fixed = (wt == 1) | (wt == 5)
        if fixed.any():
            newp[fixed] = p[fixed] + np.where(wt[fixed] == 1, 9, 5)
        if ((wt == 3) | (wt == 4) | (wt > 5)).any():
            raise Unsupported("group or unknown wire type in an event")
        if (newp > lim).any():
            raise Unsupported("field runs past its event")
        pos[active] = newp
        active = active[newp < lim]
    return mid, off, dur


def _line_events_slow(buf: Buffer, a: int, b: int) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """The line's header fields and each event's payload (start, end), walking every tag in Python."""
    header: dict[str, Any] = {}
    starts = array("q")
    lens = array("q")
    add_s, add_l = starts.append, lens.append
    p = a
    while p < b:
        if buf[p] == 0x22:  # field 4 (events), length-delimited: the hot path
            n = buf[p + 1] if p + 1 < b else 0x80
            if n < 0x80:
                s = p + 2
            else:
                n, s = _varint(buf, p + 1, b)
            add_s(s)
            add_l(n)
            p = s + n
            continue
        for fn, wt, v, q, _at in _fields(buf, p, b):  # one header field, then back to the fast loop
            if wt == 0:
                header[{1: "id", 10: "display_id", 3: "timestamp_ns", 9: "duration_ps"}.get(fn, "?")] = v
            elif wt == 2 and fn in (2, 11):
                header["name" if fn == 2 else "display_name"] = _text(buf, v, q)
            elif wt == 2 and fn == 4:
                add_s(v)
                add_l(q - v)
            p = q
            break
    if p != b:
        raise Unsupported("event runs past its line")
    st = np.frombuffer(starts, dtype=np.int64) if len(starts) else np.zeros(0, np.int64)
    ln = np.frombuffer(lens, dtype=np.int64) if len(lens) else np.zeros(0, np.int64)
    return header, st, st + ln


def _header_field(buf: Buffer, p: int, b: int, header: dict[str, Any]) -> int:
    """Read one non-event field of a line at ``p`` into ``header``; returns the next position."""
    for fn, wt, v, q, _at in _fields(buf, p, b):
        if wt == 0:
            header[{1: "id", 10: "display_id", 3: "timestamp_ns", 9: "duration_ps"}.get(fn, "?")] = v
        elif wt == 2 and fn in (2, 11):
            header["name" if fn == 2 else "display_name"] = _text(buf, v, q)
        elif wt == 2 and fn == 4:
            raise Unsupported("event field in the header walk")
        return q
    return p


#: bytes of a line scanned for event tags at once (bounds the scan's temporaries: ~3 MiB)
SCAN = 1 << 20


def _record_ends(u8: np.ndarray, tags: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """For a length-delimited record starting at each of ``tags`` (its one-byte tag there): the length
    varint's size (1-5 bytes; 0 where it is longer, unterminated or runs past ``b``) and the record's end
    (-1 where malformed or past ``b``)."""
    q = tags + 1
    byte = u8[np.minimum(q, b - 1)]
    inside = q < b
    length = (byte & 0x7F).astype(np.int64)
    size = (inside & (byte < 0x80)).astype(np.uint8)
    going = np.flatnonzero(inside & (byte >= 0x80))  # lengths of 128 bytes and more: few
    for k in range(1, 5):  # lengths below 2^35: every record of a file under 2 GiB
        q = tags[going] + (1 + k)
        inside = q < b
        going, q = going[inside], q[inside]
        byte = u8[q]
        length[going] |= (byte & 0x7F).astype(np.int64) << (7 * k)
        last = byte < 0x80
        size[going[last]] = k + 1
        going = going[~last]
    length += tags
    length += 1
    length += size
    length[(size == 0) | (length > b)] = -1
    return size, length


def _event_records(
    u8: np.ndarray, p: int, b: int, release: Release = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The payload (starts, ends) of the events laid out back to back from ``p`` (which holds the events
    tag, 0x22) in the line's bytes ``[p, b)``, without a Python step per event; None where one of them is
    malformed or the layout is unusual (the caller walks the line in Python then, and refuses it there).

    Each record's end depends on the one before, so the walk is serial. Here every byte that could start
    a record (each 0x22 byte: the events' tags, and some inside their payloads) gets the record it would
    start, and the chain of records from ``p`` is followed by pointer doubling: log2(events) vectorised
    rounds. The chain stops at the first record whose end holds no 0x22 byte: the end of the events (or a
    line field after them). The result is checked link by link. The bytes are read once, front to back
    (``release`` gives each scanned block's pages back)."""
    idt = np.int32 if len(u8) < 1 << 31 else np.int64
    tags_l: list[np.ndarray] = []
    size_l: list[np.ndarray] = []
    end_l: list[np.ndarray] = []
    linked_l: list[np.ndarray] = []
    for a in range(p, b, SCAN):
        z = min(a + SCAN, b)
        t = np.flatnonzero(u8[a:z] == 0x22)
        t += a
        size, end = _record_ends(u8, t, b)
        # whether the record ends at a 0x22 byte (another record could start there): read now, ahead of
        # the scan, so that the block's pages can go
        linked = (end >= 0) & (end < b)
        linked[linked] = u8[end[linked]] == 0x22
        tags_l.append(t.astype(idt))
        size_l.append(size)
        end_l.append(end.astype(idt))
        linked_l.append(linked)
        del t, end, linked
        if release is not None:
            release(a, z)
    tags = np.concatenate(tags_l)
    del tags_l
    nc = tags.size
    size = np.concatenate(size_l)
    del size_l
    end = np.concatenate(end_l)
    del end_l
    linked = np.concatenate(linked_l)
    del linked_l
    if tags[0] != p:
        return None
    # jump[i]: the candidate where candidate i's record ends; nc where none does (the chain stops there).
    # An event's record usually ends at one of the next few candidates: compared in place first; the
    # others whose end holds a 0x22 byte are searched for.
    jump = np.full(nc + 1, nc, idt)  # jump[nc]: nowhere
    for a in range(0, nc, SCAN >> 2):
        z = min(a + (SCAN >> 2), nc)
        e, j = end[a:z], jump[a:z]
        lk = linked[a:z]
        for k in (1, 2, 3):
            m = min(z + k, nc) - (a + k)
            if m <= 0:
                continue
            hit = tags[a + k : a + k + m] == e[:m]
            hit &= j[:m] == nc
            at = np.flatnonzero(hit)
            j[at] = at + (a + k)
            del hit, at
        rest = np.flatnonzero(lk & (j == nc))
        if rest.size:
            r = np.minimum(np.searchsorted(tags, e[rest]), nc - 1)
            hit = tags[r] == e[rest]
            j[rest[hit]] = r[hit]
        del e, j, lk, rest
    del linked
    on = np.zeros(nc + 1, bool)
    on[0] = True  # p: the first event
    while jump[0] != nc:  # after round k, ``on`` holds the chain's first 2^(k+1) records
        on[jump[on]] = True
        jump = jump[jump]
    on[nc] = False
    last = int(end[nc - int(np.argmax(on[::-1]))])  # where the last record, the events, end
    # the chain, link by link: each record ends where the next begins (the jumps say so), the last one
    # ends the events
    if last < 0 or (last < b and u8[last] == 0x22):
        return None
    del jump, end
    on = on[:nc]
    starts = tags[on]
    del tags
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = last
    starts += 1
    starts += size[on]
    return starts, ends


def _line_events(
    buf: Buffer, u8: np.ndarray, a: int, b: int, release: Release = None
) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """The line's header fields and each event's payload (start, end).

    The events are found in the wire bytes by :func:`_event_records` (vectorised); a line it cannot
    take, or whose events are interleaved with its other fields, is walked in Python."""
    header: dict[str, Any] = {}
    p = a
    while p < b and buf[p] != 0x22:
        p = _header_field(buf, p, b, header)
    if p >= b:
        return header, np.zeros(0, np.int64), np.zeros(0, np.int64)
    found = _event_records(u8, p, b, release)
    if found is None:
        return _line_events_slow(buf, a, b)
    starts, ends = found
    q = int(ends[-1])
    while q < b:
        if buf[q] == 0x22:  # events interleaved with other fields: not the common layout
            return _line_events_slow(buf, a, b)
        q = _header_field(buf, q, b, header)
    return header, starts, ends


def _name_index(
    mids: np.ndarray, meta_index: dict[int, int], names: list[str], display: list[str]
) -> np.ndarray:
    """Metadata ids → index into the plane's name table (ids without metadata get "<event ID>")."""
    if not len(mids):
        return np.zeros(0, np.int32)
    lo, hi = int(mids.min()), int(mids.max())
    if lo >= 0 and hi < 1 << 22:  # the usual small ids: a lookup table, no sort
        present = np.flatnonzero(np.bincount(mids, minlength=hi + 1)).tolist()
    else:
        present = np.unique(mids).tolist()
    for m in present:
        if m not in meta_index:  # events whose metadata is absent: keep them, named by id
            meta_index[m] = len(names)
            names.append(f"<event {m}>")
            display.append("")
    if lo >= 0 and hi < 1 << 22:
        lut = np.zeros(hi + 1, np.int32)
        lut[present] = [meta_index[m] for m in present]
        return lut[mids]
    uniq, inverse = np.unique(mids, return_inverse=True)
    lut = np.array([meta_index[m] for m in uniq.tolist()], dtype=np.int32)
    return lut[inverse.reshape(-1)]


# -- XSpace → Trace ----------------------------------------------------------------------------------
def _releaser(data: Any) -> Release:
    """For a memory-mapped file: a function dropping the whole pages of a byte range (they fault back in
    from the file if read again); None for bytes."""
    if not isinstance(data, mmap.mmap) or not hasattr(data, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return None
    page = mmap.PAGESIZE

    def release(a: int, b: int) -> None:
        lo = -(-a // page) * page
        hi = b // page * page
        if hi > lo:
            data.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    return release


def convert_columnar(data: Buffer, source: str) -> Trace:
    from tfdoctor.trace.xplane import EVENT_STATS, MARKER_EVENTS, META_STATS, _stat_value

    XPlane, XEvent = _classes()
    release = _releaser(data)
    end = len(data)
    u8 = np.frombuffer(data, dtype=np.uint8)
    plane_spans: list[tuple[int, int]] = []
    hostnames: list[str] = []
    errors: list[str] = []
    warnings: list[str] = []
    for fn, wt, v, q, _at in _fields(data, 0, end):
        if wt != 2:
            raise Unsupported("unexpected XSpace field")
        if fn == 1:
            plane_spans.append((v, q))
        elif fn == 2:
            errors.append(_text(data, v, q))
        elif fn == 3:
            warnings.append(_text(data, v, q))
        elif fn == 4:
            hostnames.append(_text(data, v, q))
    if not plane_spans:
        raise Unsupported("no planes")

    # per plane: the lines' byte spans, the rest (metadata, stats, id, name) parsed by upb; then each line
    # is decoded and its temporaries (event positions, raw fields) freed before the next one, so the peak
    # holds one line's temporaries, not every line's. Times are first relative to the line's own
    # timestamp and shifted once the trace's origin (the earliest line with events) is known.
    planes: list[Plane] = []
    line_stamps: list[tuple[Line, int]] = []
    for a, b in plane_spans:
        line_spans: list[tuple[int, int]] = []
        rest = bytearray()
        for fn, wt, _v, q, at in _fields(data, a, b):
            if fn == 3 and wt == 2:
                line_spans.append((_v, q))
            else:
                rest += data[at:q]
        try:
            xp = XPlane.FromString(bytes(rest))
        except (DecodeError, RuntimeError, ValueError) as e:
            raise Unsupported(str(e)) from None
        del rest
        stat_names = {k: v.name for k, v in xp.stat_metadata.items()}
        wanted = {k for k, n in stat_names.items() if n in EVENT_STATS}
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
        for la, lb in line_spans:
            header, starts, ends = _line_events(data, u8, la, lb, release)
            if end < 1 << 31:  # positions in 4 bytes, not 8: they live as long as the line is decoded
                starts, ends = starts.astype(np.int32, copy=False), ends.astype(np.int32, copy=False)
            n = len(starts)
            idx = np.empty(n, np.int32)
            off = np.empty(n, np.int64)
            dur = np.empty(n, np.int64)
            done = la
            for c in range(0, n, CHUNK):  # metadata ids only per chunk: names indexed as they come
                sl = slice(c, c + CHUNK)
                mids, off[sl], dur[sl] = _decode_events(u8, starts[sl], ends[sl])
                idx[sl] = _name_index(mids, meta_index, names, display)
                del mids
                if release is not None:  # these events are decoded: their pages go (the few marker
                    release(done, int(ends[sl][-1]))  # events read below fault theirs back in)
                    done = int(ends[sl][-1]) // mmap.PAGESIZE * mmap.PAGESIZE
            stats: dict[str, StatColumn] = {}
            if wanted and n:
                marker_ids = [i for i, nm in enumerate(names) if nm in MARKER_EVENTS]
                which = np.flatnonzero(np.isin(idx, marker_ids)).tolist() if marker_ids else []
                cols: dict[str, dict[int, Any]] = {}  # sparse: few events carry these stats
                for i in which:
                    try:
                        event = XEvent.FromString(data[int(starts[i]) : int(ends[i])])
                    except (DecodeError, RuntimeError, ValueError) as err:
                        raise Unsupported(str(err)) from None
                    for st in event.stats:
                        if st.metadata_id in wanted:
                            cols.setdefault(stat_names[st.metadata_id], {})[i] = _stat_value(st, stat_names)
                stats = {name: StatColumn.from_values(n, col) for name, col in cols.items()}
            del starts, ends
            if release is not None:  # this line's bytes are decoded: give their pages back
                release(la, lb)
            line = Line(
                id=_signed(header.get("id", 0)),
                name=header.get("name", ""),
                display_name=header.get("display_name", ""),
                start_ps=off,
                dur_ps=dur,
                name_idx=idx,
                stats=stats,
            )
            lines.append(line)
            line_stamps.append((line, _signed(header.get("timestamp_ns", 0))))
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
    stamps = [ts for line, ts in line_stamps if len(line)]
    origin_ns = min(stamps) if stamps else 0
    for line, ts in line_stamps:
        if ts != origin_ns:
            line.start_ps += (ts - origin_ns) * 1000
    return Trace(
        planes=planes,
        origin_ns=origin_ns,
        source=source,
        format="xplane",
        hostnames=hostnames,
        errors=[*errors, *warnings],
    )
