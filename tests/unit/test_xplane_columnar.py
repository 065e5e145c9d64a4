"""The columnar xplane decoder gives exactly the Trace the protobuf (upb) path gives, on every real
trace we have, and refuses (so the reader falls back to upb) whatever it does not fully understand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tfdoctor.errors import TraceError
from tfdoctor.trace._xplane_columnar import Unsupported, convert_columnar
from tfdoctor.trace.xplane import _convert, _xspace_class, parse_xspace

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "sample_traces").rglob("*.xplane.pb")) + sorted(
    (ROOT.parent / "shared" / "traces").rglob("*.xplane.pb")
)


def upb_trace(data: bytes):
    xs = _xspace_class()()
    xs.ParseFromString(data)
    return _convert(xs, "x")


def assert_same(a, b) -> None:
    assert (a.origin_ns, a.hostnames, a.errors, a.format) == (b.origin_ns, b.hostnames, b.errors, b.format)
    assert len(a.planes) == len(b.planes)
    for pa, pb in zip(a.planes, b.planes, strict=True):
        assert (pa.id, pa.name, pa.host, pa.stats) == (pb.id, pb.name, pb.host, pb.stats)
        assert pa.event_meta_stats == pb.event_meta_stats
        assert pa.event_names == pb.event_names and pa.event_display_names == pb.event_display_names
        assert len(pa.lines) == len(pb.lines)
        for la, lb in zip(pa.lines, pb.lines, strict=True):
            assert (la.id, la.name, la.display_name) == (lb.id, lb.name, lb.display_name)
            for col in ("start_ps", "dur_ps", "name_idx"):
                x, y = getattr(la, col), getattr(lb, col)
                assert x.dtype == y.dtype and np.array_equal(x, y), col
            assert la.stats.keys() == lb.stats.keys()
            for k, x in la.stats.items():
                y = lb.stats[k]
                assert x.dtype == y.dtype
                assert x == y  # sparse: the same events carry it, with the same values
                assert list(x) == list(y) if x.dtype == object else np.array_equal(x, y, equal_nan=True)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.parent.parent.parent.name}/{p.name}")
def test_same_trace_as_the_protobuf_path(path):
    data = path.read_bytes()
    assert_same(convert_columnar(data, "x"), upb_trace(data))


def test_there_are_real_traces_to_compare():
    assert len(FILES) >= 10


@pytest.mark.parametrize("fraction", [0.1, 0.37, 0.5, 0.73, 0.999])
def test_truncated_files_are_refused_like_upb_refuses_them(fraction):
    data = FILES[0].read_bytes()
    cut = data[: int(len(data) * fraction)]
    try:
        upb = upb_trace(cut)
    except Exception:
        upb = None
    if upb is None:
        with pytest.raises(Unsupported):
            convert_columnar(cut, "x")
        with pytest.raises(TraceError):  # and the reader's answer is still the clear error
            parse_xspace(cut, "cut.xplane.pb")
    else:  # cut on a field boundary: a valid, shorter XSpace
        assert_same(convert_columnar(cut, "x"), upb)


def test_events_interleaved_with_line_fields_take_the_slow_walk():
    # hand-built XLine bytes: name, an event, the line id after it, another event (unusual but valid)
    xs = _xspace_class()()
    plane = xs.planes.add(id=1, name="/host:CPU")
    plane.event_metadata[7].id = 7
    plane.event_metadata[7].name = "op"
    line = plane.lines.add(id=3, name="main", timestamp_ns=1000)
    for off in (5, 50):
        line.events.add(metadata_id=7, offset_ps=off, duration_ps=10)
    data = xs.SerializeToString()
    # move the line's id field (0x08 0x03) to after its first event
    line_bytes = line.SerializeToString()
    assert line_bytes.startswith(b"\x08\x03")
    first_event_end = line_bytes.index(b"\x22", 2)
    first_event_end += 2 + line_bytes[first_event_end + 1]
    moved = line_bytes[2:first_event_end] + b"\x08\x03" + line_bytes[first_event_end:]
    data = data.replace(line_bytes, moved)
    trace = convert_columnar(data, "x")
    assert trace.planes[0].lines[0].id == 3
    assert trace.planes[0].lines[0].dur_ps.tolist() == [10, 10]
    assert_same(trace, upb_trace(data))
