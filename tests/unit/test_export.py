"""``tfdoctor export``: a recorded run (sample_traces/) exported, checked against the Chrome trace-event
format's rules, then opened again with tfdoctor's own Chrome-trace reader and analysed."""

from __future__ import annotations

import gzip
import json
import os
import stat
from pathlib import Path

import pytest

from tfdoctor.cli import main
from tfdoctor.report.export import CATEGORY_TRACKS
from tfdoctor.session.build import report_from_trace
from tfdoctor.trace import load
from tfdoctor.trace.chrome import read_chrome

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "sample_traces" / "cpu-naive_loop"
META_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def check_trace_event_format(doc: dict) -> None:
    """The JSON object form of the Trace Event Format, as chrome://tracing and Perfetto read it."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit") in (None, "ms", "ns")
    named_procs, named_threads, used = set(), set(), set()
    for ev in doc["traceEvents"]:
        assert ev["ph"] in ("X", "M"), ev
        assert isinstance(ev["pid"], int)
        if ev["ph"] == "M":
            assert ev["name"] in META_NAMES, ev
            if ev["name"] == "process_name":
                named_procs.add(ev["pid"])
                assert isinstance(ev["args"]["name"], str)
            elif ev["name"] == "thread_name":
                named_threads.add((ev["pid"], ev["tid"]))
                assert isinstance(ev["args"]["name"], str)
            else:
                assert isinstance(ev["args"]["sort_index"], int)
            continue
        assert isinstance(ev["name"], str) and ev["name"], ev
        assert isinstance(ev["cat"], str)
        assert isinstance(ev["tid"], int)
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0, ev
        assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0, ev
        used.add((ev["pid"], ev["tid"]))
    assert used <= named_threads, "every thread with events is named"
    assert {p for p, _ in used} <= named_procs, "every process with events is named"


def export(tmp_path: Path, fmt: str, *extra: str) -> Path:
    out = tmp_path / f"out.{fmt}"
    rc = main(["export", str(RUN), "--format", fmt, "-o", str(out), *extra])
    assert rc == 0
    return out


def test_chrome_export_follows_the_format_and_reads_back_with_every_event(tmp_path: Path) -> None:
    out = export(tmp_path, "chrome")
    doc = json.loads(out.read_text())
    check_trace_event_format(doc)
    assert doc["otherData"]["run_id"] == "cpu-naive_loop"

    original = load(RUN / "logdir")
    back = read_chrome(out)
    planes = {p.name: p for p in back.planes}
    # the trace's own lines come back whole: same events per line
    for plane in original.planes:
        for line in plane.lines:
            if len(line):
                got = next(ln for ln in planes[plane.name].lines if ln.label == line.label)
                assert len(got) == len(line)
                assert int(got.dur_ps.sum()) == pytest.approx(int(line.dur_ps.sum()), rel=1e-6)
    # tfdoctor's process: its steps, one per step it counted, and the category tracks
    ours = planes["tfdoctor"]
    lines = {ln.label: ln for ln in ours.lines}
    report = json.loads((RUN / "report.json").read_text())
    assert len(lines["Steps"]) == len(report["breakdown"]["steps"])
    assert {"input", "dispatch"} <= set(lines) <= {"Steps", "Findings", *CATEGORY_TRACKS}
    for cat in set(lines) & set(CATEGORY_TRACKS):  # a union: sorted, never overlapping
        ln = lines[cat]
        assert (ln.start_ps[1:] >= ln.end_ps[:-1]).all()


def test_export_analyses_like_the_run(tmp_path: Path) -> None:
    out = export(tmp_path, "chrome")
    again = report_from_trace(out)
    stored = json.loads((RUN / "report.json").read_text())
    assert len(again.breakdown.steps) == len(stored["breakdown"]["steps"])
    assert {f.rule_id for f in again.findings if f.severity == "high"} >= {"TFD201"}


def test_perfetto_export_is_gzipped_and_the_same_events(tmp_path: Path) -> None:
    chrome = json.loads(export(tmp_path, "chrome").read_text())
    raw = export(tmp_path, "perfetto").read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    doc = json.loads(gzip.decompress(raw))
    check_trace_event_format(doc)
    assert len(doc["traceEvents"]) == len(chrome["traceEvents"])


def test_existing_output_needs_force_and_mode_follows_umask(tmp_path: Path, capsys) -> None:
    out = export(tmp_path, "chrome")
    before = out.read_bytes()
    assert main(["export", str(RUN), "-o", str(out)]) == 6
    assert "pass --force" in capsys.readouterr().err and out.read_bytes() == before
    old = os.umask(0o022)
    try:
        export(tmp_path, "chrome", "--force")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_a_run_without_trace_is_one_clear_line(tmp_path: Path, capsys) -> None:
    from tfdoctor.store import RunStore

    store = RunStore(tmp_path / "home")
    store.new_run("train.py", [], run_id="notrace")
    assert main(["export", "notrace", "--home", str(store.home)]) == 3
    assert "has no trace to export" in capsys.readouterr().err
