"""Hostile trace files (issue 16, items 13-16): each is refused with one line naming what is wrong, or read
without hanging and without unbounded memory; never a traceback, never a "complete" diagnosis of nonsense."""

from __future__ import annotations

import gzip
import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from tfdoctor.analysis import analyze
from tfdoctor.errors import TraceError
from tfdoctor.trace import chrome, load, parse_chrome, parse_xspace
from tfdoctor.trace.xplane import _xspace_class

ROOT = Path(__file__).resolve().parents[2]
DENSE = next((ROOT / "sample_traces" / "keras-dense").rglob("*.xplane.pb"))
OK = {"ph": "X", "pid": 1, "tid": 1, "name": "step", "ts": 10, "dur": 5}


def _doc(*events: dict) -> bytes:
    return json.dumps({"traceEvents": list(events)}).encode()


def _refused(data: bytes, match: str) -> str:
    with pytest.raises(TraceError, match=match) as e:
        parse_chrome(data, "t.json")
    assert "\n" not in str(e.value) and str(e.value).startswith("t.json: ")
    return str(e.value)


# -- 13: numbers a trace cannot hold ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('"ts": NaN', "NaN"),
        ('"ts": Infinity', "Infinity"),
        ('"dur": -Infinity', "Infinity"),
        ('"ts": 1e300', "without a usable timestamp"),
        ('"ts": ' + "9" * 4000, "without a usable timestamp"),
        ('"dur": 1e300', "negative or unusable duration"),
    ],
    ids=["nan", "inf", "minus-inf", "1e300", "4000-digits", "dur-1e300"],
)
def test_non_numbers_and_huge_numbers_are_one_line_errors(text: str, match: str) -> None:
    key = text.split(":")[0].strip('"')
    data = json.dumps({"traceEvents": [OK]}).replace(f'"{key}": {OK[key]}', text).encode()
    _refused(data, match)


def test_events_spanning_centuries_are_refused() -> None:
    _refused(_doc(OK, {**OK, "ts": 9e16}), "span")


# -- 16: inconsistent durations --------------------------------------------------------------------------
def test_negative_durations_are_refused_in_json() -> None:
    _refused(_doc({**OK, "dur": -10}), "negative")
    _refused(_doc({**OK, "ph": "B"}, {**OK, "ph": "E", "ts": 5}), "ends before it begins")


def test_all_events_at_zero_are_refused() -> None:
    _refused(_doc(*[{**OK, "ts": 0, "dur": 0}] * 5), "all 5 events are at time 0")


def _xspace_with(edit) -> bytes:
    xs = _xspace_class()()
    xs.ParseFromString(DENSE.read_bytes())
    edit(xs)
    return xs.SerializeToString()


def _events(xs):
    for p in xs.planes:
        for ln in p.lines:
            yield from ln.events


def test_negative_duration_in_xplane_is_refused() -> None:
    def edit(xs):
        next(e for e in _events(xs) if e.duration_ps > 0).duration_ps = -10_000_000_000

    with pytest.raises(TraceError, match="negative duration"):
        parse_xspace(_xspace_with(edit), "neg.xplane.pb")


def test_overflowing_times_in_xplane_are_refused() -> None:
    def edit(xs):
        next(e for e in _events(xs) if e.duration_ps > 0).offset_ps = (1 << 63) - 1

    with pytest.raises(TraceError, match="inconsistent"):
        parse_xspace(_xspace_with(edit), "over.xplane.pb")


def test_all_zero_xplane_is_refused() -> None:
    def edit(xs):
        for p in xs.planes:
            for ln in p.lines:
                ln.timestamp_ns = 0
                for e in ln.events:
                    e.offset_ps = 0
                    e.duration_ps = 0

    with pytest.raises(TraceError, match="at time 0"):
        parse_xspace(_xspace_with(edit), "zero.xplane.pb")


def test_zero_length_steps_are_dropped_not_diagnosed() -> None:
    def edit(xs):  # the one step marker ("Profiled batch") lasts 0 ps: no step to diagnose
        for p in xs.planes:
            ids = {k for k, m in p.event_metadata.items() if m.name == "Profiled batch"}
            for ln in p.lines:
                for e in ln.events:
                    if e.metadata_id in ids:
                        e.duration_ps = 0

    a = analyze(parse_xspace(_xspace_with(edit), "zero-step.xplane.pb"))
    assert a.steps is None or (a.steps.durations > 0).all()


# -- 14: regular files only ---------------------------------------------------------------------------------
@pytest.fixture
def alarm():
    """Fail instead of hanging: a blocked open/read is interrupted after 20 s."""

    def boom(*_):
        raise TimeoutError("the reader blocked")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_named_xplane_does_not_hang(tmp_path: Path, alarm) -> None:
    fifo = tmp_path / "host.xplane.pb"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="is a FIFO"):
        load(fifo)
    # in a logdir: skipped as not a trace file, the real one beside it is read
    sess = tmp_path / "logdir" / "plugins" / "profile" / "2026_01_01_00_00_00"
    sess.mkdir(parents=True)
    os.mkfifo(sess / "a.xplane.pb")
    with pytest.raises(TraceError, match="no profile found"):
        load(tmp_path / "logdir")
    (sess / "b.xplane.pb").write_bytes(DENSE.read_bytes())
    assert load(tmp_path / "logdir").n_events > 0


# -- 15: bounded inflation and event count ------------------------------------------------------------------
def test_a_gzip_bomb_is_refused_while_inflating(tmp_path: Path) -> None:
    p = tmp_path / "bomb.trace.json.gz"
    ev = json.dumps(OK).encode() + b","
    with gzip.open(p, "wb", compresslevel=9) as f:
        f.write(b'{"traceEvents":[')
        for _ in range(40):
            f.write(ev * 20_000)  # ~40 MiB inflated from ~0.1 MiB
        f.write(json.dumps(OK).encode() + b"]}")
    assert p.stat().st_size < 1 << 20
    with pytest.raises(TraceError, match="inflates to over 8 MiB"):
        chrome.read_chrome(p, max_bytes=8 << 20)


def test_event_count_is_bounded_while_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chrome, "MAX_EVENTS", 1000)
    with pytest.raises(TraceError, match="more than 1,000 events"):
        parse_chrome(_doc(*[{**OK, "ts": i} for i in range(1001)]), "many.json")
    assert parse_chrome(_doc(*[{**OK, "ts": i} for i in range(1000)]), "ok.json").n_events == 1000


def test_a_real_trace_still_reads() -> None:
    t = load(DENSE)
    assert t.n_events > 500
    assert all((ln.dur_ps >= 0).all() for _, ln in t.iter_lines())
    assert np.int64(max(int(ln.end_ps.max()) for _, ln in t.iter_lines() if len(ln))) > 0
    assert sys.getrecursionlimit() > 0
