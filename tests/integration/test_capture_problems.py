"""What tfdoctor's capture could not do reaches the report (issue 17: hook_errors were written to
harness.json and read by nothing; a failing device listing made a run look CPU-only in silence)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.rundir import HarnessRecord
from tfdoctor.session.build import build_report, capture_problem_notes
from tfdoctor.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "device_listing_fails.py"


def test_problem_notes_name_what_failed_first_and_last_line():
    tb = "stopping the profiler: Traceback (most recent call last):\n  File x\nRuntimeError: boom"
    [note] = capture_problem_notes([tb, "  "])
    assert note.startswith("tfdoctor's capture hit a problem (stopping the profiler: Traceback")
    assert "RuntimeError: boom" in note


def test_harness_record_keeps_unknown_keys_and_defaults():
    rec = HarnessRecord.model_validate({"status": "complete", "started_ns": 5})
    assert rec.hook_errors == [] and rec.model_extra == {"started_ns": 5}


@pytest.mark.integration
def test_a_failing_device_listing_is_in_the_report(tmp_path):
    store = RunStore(tmp_path)
    run = store.new_run(str(SCRIPT), [])
    cfg = CaptureConfig(script=SCRIPT, args=[], steps=8, timeout_s=300, env={"TF_CPP_MIN_LOG_LEVEL": "2"})
    result = run_capture(cfg, run)
    assert result.status == "complete", result.error
    harness = run.harness()
    assert harness is not None
    assert any("listing devices" in e and "CUDA driver version" in e for e in harness.hook_errors)
    report = build_report(run)
    assert report.breakdown is not None
    assert any("listing devices" in n and "figures that depend on it" in n for n in report.breakdown.notes)
