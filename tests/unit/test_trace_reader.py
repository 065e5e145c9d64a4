"""The trace reader on every real trace in ../shared/traces and on recorded sample runs."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from real_traces import find_shared, in_ci

from tfdoctor.errors import TraceError
from tfdoctor.trace import find_session, load, parse_chrome, parse_xspace

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "traces"
ALL_FILES = (
    sorted(p for p in SHARED.rglob("*") if p.is_file() and p.suffix not in (".md", ".jsonl"))
    if SHARED.exists()
    else []
)
# outside CI a missing ../shared skips these; under CI=true they run and fail (tests/unit/real_traces.py)
needs_shared = pytest.mark.skipif(
    not SHARED.exists() and not in_ci(), reason="../shared/traces not present beside the checkout"
)


@needs_shared
@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(SHARED)))
def test_every_shared_file_is_read_or_cleanly_rejected(path):
    try:
        tr = load(path)
    except TraceError as e:
        msg = str(e)
        assert str(path) in msg and "\n" not in msg
        # only tool outputs / non-trace files may be rejected; every trace must be read
        assert not path.name.endswith((".xplane.pb", ".trace.json.gz", "timeline.json", ".json_0"))
        return
    assert tr.planes
    assert tr.n_events > 0
    for _, ln in tr.iter_lines():
        assert ln.start_ps.dtype == np.int64 and ln.dur_ps.dtype == np.int64
        assert len(ln.start_ps) == len(ln.dur_ps) == len(ln.name_idx)
        assert (ln.dur_ps >= 0).all()


@needs_shared
def test_multi_worker_v100_planes_and_streams():
    f = find_shared("GPU-multi-worker/*.xplane.pb")
    tr = load(f)
    assert [p.name for p in tr.device_planes("GPU")] == [f"/device:GPU:{i}" for i in range(8)]
    assert tr.hostnames == ["34.83.195.179:6003"]
    gpu4 = tr.planes[[p.name for p in tr.planes].index("/device:GPU:4")]
    kinds = {k for ln in gpu4.lines for k in ln.stream_kinds()}
    assert {"MemcpyH2D", "MemcpyD2H", "Compute"} <= kinds
    assert gpu4.stats["compute_cap_major"] == 7
    assert tr.n_events == 23128


@needs_shared
def test_xplane_and_its_chrome_export_agree():
    d = find_shared("download512-20210202-131913")
    sess = next(d.rglob("*.xplane.pb")).parent
    x = load(next(sess.glob("*.xplane.pb")))
    c = load(next(sess.glob("*.trace.json.gz")))
    x_mem = sum(1 for p in x.planes for ln in p.lines for i in ln.name_idx if p.event_names[i] == "MemcpyH2D")
    c_mem = sum(1 for p in c.planes for ln in p.lines for i in ln.name_idx if p.event_names[i] == "MemcpyH2D")
    assert x_mem == c_mem > 0


@needs_shared
def test_tool_outputs_only_is_a_clear_error():
    with pytest.raises(TraceError, match="only XProf tool outputs"):
        find_session(SHARED / "tensorflow-profiler/demo/plugins/profile/GPU-input-bound")


def test_empty_and_garbage_inputs(tmp_path):
    with pytest.raises(TraceError, match="empty"):
        parse_xspace(b"", "x")
    with pytest.raises(TraceError):
        parse_xspace(b"\xff\xfe\xfd garbage", "x")
    with pytest.raises(TraceError, match="traceEvents"):
        parse_chrome(b'{"a": 1}', "x")
    with pytest.raises(TraceError, match="not valid JSON"):
        parse_chrome(b'{"traceEvents": [', "x")
    empty_dir = tmp_path / "logdir"
    empty_dir.mkdir()
    with pytest.raises(TraceError, match="no profile found"):
        load(empty_dir)
    with pytest.raises(TraceError, match="no such file"):
        load(tmp_path / "missing")


def test_size_limit_is_a_clear_error(tmp_path):
    f = tmp_path / "big.xplane.pb"
    f.write_bytes(b"\x0a" * 4096)
    with pytest.raises(TraceError, match="limit"):
        load(f, max_bytes=1024)


def test_reader_does_not_import_tensorflow():
    code = (
        "import sys, glob; from tfdoctor.trace import load; from tfdoctor.analysis import analyze;"
        "import tfdoctor.session.build, tfdoctor.rules, tfdoctor.report.terminal;"
        f"[analyze(load(f)) for f in glob.glob({str(SHARED)!r} + '/**/*.xplane.pb', recursive=True)];"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
