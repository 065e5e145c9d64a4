"""The reader's memory shape: per-event stats are stored sparse (only the events that carry them), and a
line's events are found in the wire bytes without protobuf; the content is what the dense, upb-parsed
trace held."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfdoctor.errors import TraceError
from tfdoctor.trace import Line, Plane, StatColumn, Trace, _xplane_columnar, parse_chrome, xplane
from tfdoctor.trace._xplane_columnar import Unsupported, _event_records, _line_events_slow, convert_columnar
from tfdoctor.trace.model import check_consistent
from tfdoctor.trace.xplane import _convert, _xspace_class

N_OPS = 20_000
MARKERS = (100, 7_000, 19_999)  # positions of the step markers among the line's events


def xspace_bytes(n_ops: int = N_OPS, markers: tuple[int, ...] = MARKERS) -> bytes:
    """One host line of ``n_ops`` op events (offsets and ids full of 0x22 bytes) with a ``train`` step
    marker carrying ``step_num`` at each of ``markers`` (and a text stat on the first)."""
    xs = _xspace_class()()
    plane = xs.planes.add(id=1, name="/host:CPU")
    plane.event_metadata[0x22].id = 0x22
    plane.event_metadata[0x22].name = "MatMul"
    plane.event_metadata[3].id = 3
    plane.event_metadata[3].name = "train"
    plane.stat_metadata[0x22].id = 0x22
    plane.stat_metadata[0x22].name = "step_num"
    plane.stat_metadata[5].id = 5
    plane.stat_metadata[5].name = "graph_type"
    line = plane.lines.add(id=2, name="python3", timestamp_ns=1_000)
    for i in range(n_ops):
        if i in markers:
            ev = line.events.add(metadata_id=3, offset_ps=i * 0x2222, duration_ps=0x2222)
            ev.stats.add(metadata_id=0x22, int64_value=markers.index(i) + 0x22)
            if i == markers[0]:
                ev.stats.add(metadata_id=5, str_value="train")
        else:
            line.events.add(metadata_id=0x22, offset_ps=i * 0x2222 + 0x22, duration_ps=0x22 + i % 300)
    return xs.SerializeToString()


def upb(data: bytes):
    xs = _xspace_class()()
    xs.ParseFromString(data)
    return _convert(xs, "x")


def test_marker_stats_are_stored_for_the_marker_events_only():
    data = xspace_bytes()
    line = convert_columnar(data, "x").planes[0].lines[0]
    assert len(line) == N_OPS
    nums = line.stats["step_num"]
    assert isinstance(nums, StatColumn)
    assert nums.index.tolist() == list(MARKERS)
    assert nums.values.tolist() == [0x22, 0x23, 0x24] and nums.dtype == np.float64
    # 3 events' worth of storage, not one float per event of the line (N_OPS * 8 bytes before)
    assert nums.nbytes == len(MARKERS) * 16
    text = line.stats["graph_type"]
    assert text.dtype == object and text.index.tolist() == [MARKERS[0]] and text.values.tolist() == ["train"]


def test_sparse_columns_read_as_the_dense_columns_they_stand_for():
    line = convert_columnar(xspace_bytes(), "x").planes[0].lines[0]
    nums, text = line.stats["step_num"], line.stats["graph_type"]
    dense = np.full(N_OPS, np.nan)
    dense[list(MARKERS)] = [0x22, 0x23, 0x24]
    assert np.array_equal(nums.dense(), dense, equal_nan=True)
    assert np.array_equal(np.asarray(nums), dense, equal_nan=True)
    assert nums[MARKERS[1]] == 0x23 and np.isnan(nums[0]) and nums[-1] == 0x24
    assert np.array_equal(nums.at(np.array([5, 100, 19_999])), [np.nan, 0x22, 0x24], equal_nan=True)
    mask = np.zeros(N_OPS, bool)
    mask[[0, 7_000]] = True
    assert np.array_equal(nums.at(mask), [np.nan, 0x23], equal_nan=True)
    assert text[MARKERS[0]] == "train" and text[MARKERS[1]] is None
    assert len(text.tolist()) == N_OPS and text.tolist().count(None) == N_OPS - 1
    with pytest.raises(IndexError):
        nums[N_OPS]


def test_columnar_and_upb_paths_give_the_same_sparse_columns():
    data = xspace_bytes()
    a, b = convert_columnar(data, "x").planes[0].lines[0], upb(data).planes[0].lines[0]
    assert a.stats.keys() == b.stats.keys() == {"step_num", "graph_type"}
    for k in a.stats:
        assert a.stats[k] == b.stats[k]
    for col in ("start_ps", "dur_ps", "name_idx"):
        assert np.array_equal(getattr(a, col), getattr(b, col))


def test_chrome_stats_are_sparse_too():
    events = [{"ph": "X", "name": "op", "ts": i, "dur": 1, "pid": 1, "tid": 1} for i in range(1000)]
    events[10]["args"] = {"step_num": 4}
    events[500]["args"] = {"step_num": "5"}
    events[600]["args"] = {"long_name": "a/b"}
    line = parse_chrome(json.dumps({"traceEvents": events}).encode(), "x").planes[0].lines[0]
    assert line.stats["step_num"].index.tolist() == [10, 500]
    assert line.stats["step_num"].values.tolist() == [4.0, 5.0]
    assert line.stats["long_name"].dtype == object and line.stats["long_name"].values.tolist() == ["a/b"]


def line_span(data: bytes) -> tuple[int, int]:
    """The byte span of the first line of the first plane of an XSpace."""
    plane = _xspace_class()()
    plane.ParseFromString(data)
    line_bytes = plane.planes[0].lines[0].SerializeToString()
    a = data.index(line_bytes)
    return a, a + len(line_bytes)


def test_events_found_in_the_wire_bytes_are_the_python_walks():
    data = xspace_bytes()
    a, b = line_span(data)
    u8 = np.frombuffer(data, np.uint8)
    _header, starts, ends = _line_events_slow(data, a, b)
    p = a + data[a:b].index(b"\x22")  # the header (id, name, timestamp) comes first; 0x22 is not in it
    found = _event_records(u8, p, b)
    assert found is not None
    assert np.array_equal(found[0], starts) and np.array_equal(found[1], ends)
    assert len(starts) == N_OPS


def test_a_malformed_event_length_is_refused():
    data = bytearray(xspace_bytes(n_ops=50, markers=(3,)))
    a, b = line_span(bytes(data))
    # the last event's length byte made to run past the line: the Python walk refuses, so does the reader
    last = max(i for i in range(a, b) if data[i] == 0x22 and i + 1 < b and data[i + 1] == b - i - 2)
    data[last + 1] = 0x7F
    u8 = np.frombuffer(bytes(data), np.uint8)
    p = a + bytes(data[a:b]).index(b"\x22")
    assert _event_records(u8, p, b) is None
    with pytest.raises(Unsupported):
        convert_columnar(bytes(data), "x")


def test_a_file_that_ends_with_its_last_event():
    # a plane of one line and no metadata: the file's last bytes are the last event's
    xs = _xspace_class()()
    line = xs.planes.add().lines.add(timestamp_ns=5)
    for i in range(300):
        line.events.add(metadata_id=0x22, offset_ps=i * 0x22, duration_ps=0x22)
    data = xs.SerializeToString()
    a, b = line_span(data)
    assert b == len(data)
    found = _event_records(np.frombuffer(data, np.uint8), a + data[a:b].index(b"\x22"), b)
    assert found is not None and len(found[0]) == 300 and int(found[1][-1]) == len(data)
    trace = convert_columnar(data, "x")
    assert trace.planes[0].event_names == ["<event 34>"] and len(trace.planes[0].lines[0]) == 300


def test_a_mapped_file_released_block_by_block_reads_the_same(tmp_path, monkeypatch):
    # small scan blocks and chunks, every file mapped: the pages of each scanned block and each decoded
    # chunk are given back and read again where needed (the marker events' stats)
    monkeypatch.setattr(xplane, "MMAP_MIN_BYTES", 0)
    monkeypatch.setattr(_xplane_columnar, "SCAN", 1 << 13)
    monkeypatch.setattr(_xplane_columnar, "CHUNK", 1 << 10)
    released: list[tuple[int, int]] = []
    real = _xplane_columnar._releaser

    def spy(data):
        release = real(data)
        assert release is not None  # a mapped file

        def counted(a: int, b: int) -> None:
            released.append((a, b))
            release(a, b)

        return counted

    monkeypatch.setattr(_xplane_columnar, "_releaser", spy)
    data = xspace_bytes()
    f = tmp_path / "big.xplane.pb"
    f.write_bytes(data)
    mapped = xplane.read_xplane(f)
    assert len(released) > 20
    a, b = mapped.planes[0].lines[0], upb(data).planes[0].lines[0]
    for col in ("start_ps", "dur_ps", "name_idx"):
        assert np.array_equal(getattr(a, col), getattr(b, col))
    assert a.stats.keys() == b.stats.keys() and all(a.stats[k] == b.stats[k] for k in a.stats)


def test_the_consistency_check_reads_min_and_max_and_still_refuses_the_extremes():
    # int64's most negative start: abs() would wrap it to a negative number and let it through
    for start, dur in ((-(2**63), 1), (2**62 + 1, 1), (0, -5)):
        line = Line(
            1, "l", "", np.array([0, start], np.int64), np.array([1, dur], np.int64), np.zeros(2, np.int32)
        )
        with pytest.raises(TraceError, match="inconsistent trace"):
            check_consistent(Trace([Plane(1, "/host:CPU", [line], ["op"])], 0, "x", "xplane"))
