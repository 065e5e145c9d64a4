"""``tfdoctor analyze --json`` loads only what it uses: start-up is most of its time on a small trace
(docs/benchmarks.md §2b), so the terminal renderer (rich), the HTML report (Jinja2, plotly), the fix stack
(LibCST), the web app and protobuf's descriptor_pb2 stay out of its process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "sample_traces" / "keras-dense"
NOT_LOADED = (
    "rich",
    "jinja2",
    "plotly",
    "libcst",
    "fastapi",
    "starlette",
    "tensorflow",
    "google.protobuf.descriptor_pb2",
    "tfdoctor.report",
    "tfdoctor.fixes",
    "tfdoctor.web",
    "tfdoctor.capture.runner",  # the capture stack: session.build names CaptureResult as a type only
)

PROBE = """
import contextlib, io, json, sys
from tfdoctor.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(["analyze", "--no-save", "--json", sys.argv[1]])
loaded = sorted({m for m in sys.modules for n in json.loads(sys.argv[2]) if m == n or m.startswith(n + ".")})
print(json.dumps({"rc": rc, "report": json.loads(out.getvalue()), "loaded": loaded}))
"""


def test_analyze_json_does_not_import_what_it_does_not_use():
    res = subprocess.run(
        [sys.executable, "-c", PROBE, str(TRACE), json.dumps(NOT_LOADED)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["rc"] == 0 and got["report"]["breakdown"]["steps"]  # it did the whole analysis
    assert got["loaded"] == []


def test_text_output_still_renders_with_rich():
    res = subprocess.run(
        [sys.executable, "-m", "tfdoctor", "analyze", "--no-save", str(TRACE)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr
    assert "Step-time breakdown" in res.stdout and "Device compute" in res.stdout


def test_an_error_is_still_one_line_on_stderr():  # rich is loaded for it only then
    res = subprocess.run(
        [sys.executable, "-m", "tfdoctor", "analyze", "--json", str(ROOT / "no-such-trace.xplane.pb")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert res.returncode == 2
    assert res.stderr.startswith("tfdoctor: ") and "no-such-trace.xplane.pb" in res.stderr
    assert res.stderr.count("\n") == 1
    assert res.stdout == ""
