"""The terminal report at 80 and 160 columns, through the real command (``tfdoctor report``) with rich
sizing itself from COLUMNS as it does in a terminal or a CI log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tfdoctor.cli import main
from tfdoctor.model import FixSummary, FixTrial, Report, Throughput
from tfdoctor.report.terminal import error_line
from tfdoctor.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_traces" / "cpu-naive_loop"
LONG = "a-run-directory-name-long-enough-that-the-path-passes-eighty-columns"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    path = tmp_path / LONG
    shutil.copytree(SAMPLE, path)
    return path


def report_at(
    width: int, run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["report", str(run)]) == 0
    return capsys.readouterr().out


def _commands_whole(out: str, run: Path) -> None:
    lines = out.splitlines()
    assert any(
        ln.strip() == f"tensorboard --logdir {run}/logdir"
        or ln.endswith(f"tensorboard --logdir {run}/logdir")
        for ln in lines
    ), "the tensorboard command is on one line"
    assert any(ln.strip().endswith(str(run)) for ln in lines), "the run directory is on one line"


def test_at_80_columns_findings_are_stacked_blocks_and_nothing_is_squeezed(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = report_at(80, run, monkeypatch, capsys)
    _commands_whole(out, run)
    long_lines = [ln for ln in out.splitlines() if len(ln) > 80]
    assert all(str(run) in ln for ln in long_lines), long_lines  # only a path/command may pass 80
    assert "┃ id" not in out  # no findings table
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("TFD201"))
    assert "high" in lines[head] and "fix: tf-function" in lines[head]
    assert lines[head + 1].startswith("    811 ops per step")  # the claim, indented, at the full width


def test_at_160_columns_findings_are_a_table(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = report_at(160, run, monkeypatch, capsys)
    _commands_whole(out, run)
    assert "┃ id" in out
    assert [ln for ln in out.splitlines() if len(ln) > 160 and str(run) not in ln] == []  # a path may pass
    assert any(
        "811 ops per step are dispatched one by one from Python; dispatch and Python take 51 %" in ln
        for ln in out.splitlines()
    )


def _with_fixes(run: Path) -> None:
    rd = RunDir(run)
    report = rd.report()
    assert report is not None
    tp = Throughput.model_validate(json.loads(report.throughput.model_dump_json()))
    trials = [
        FixTrial(
            fix_id="generator-prefetch",
            description="d",
            status="kept",
            reason="×1.40 beyond the noise band",
            throughput=tp,
            speedup=1.4,
            speedup_ci=[1.3, 1.5],
        ),
        FixTrial(
            fix_id="tfdata-parallel-map",
            description="d",
            status="rejected",
            reason="×1.01 is within the noise band; advice: " + "long advice " * 20,
            throughput=tp,
            speedup=1.01,
        ),
        FixTrial(
            fix_id="batch-scale", label="batch-scale ×4", description="d", status="failed", reason="OOM"
        ),
    ]
    fx = FixSummary(
        baseline=tp, trials=trials, combined=tp, combined_speedup=1.4, kept=["generator-prefetch"]
    )
    rd.write_report(Report.model_validate({**report.model_dump(), "fix": fx.model_dump()}))


def test_fix_trials_at_80_columns_keep_their_names_whole(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_fixes(run)
    out = report_at(80, run, monkeypatch, capsys)
    lines = out.splitlines()
    for name in ("generator-prefetch", "tfdata-parallel-map", "batch-scale ×4"):
        assert any(ln.startswith(name + "  ") for ln in lines), name
    assert any(ln.startswith("combined  final") for ln in lines)
    assert [ln for ln in lines if len(ln) > 80 and str(run) not in ln] == []
    # at 160 the fix table has the whole names too (no "generator-pre…")
    out = report_at(160, run, monkeypatch, capsys)
    assert "generator-prefetch" in out and "generator-pre…" not in out and "tfdata-parallel-map" in out


def test_error_line_is_the_exception_and_its_first_line() -> None:
    tb = (
        'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n    f()\n'
        "TypeError: Failed to convert elements of {\n  0: array([1, 2]),\n}) to a Tensor.\n"
    )
    assert error_line(tb) == "TypeError: Failed to convert elements of {"
    assert error_line("interrupted after 3 steps\nmore") == "interrupted after 3 steps"


def _rebuilt(tmp_path: Path, name: str) -> Path:
    """A recorded sample run whose report is built anew by ``tfdoctor report`` (its report.json
    predates the profiler-cost and precision figures)."""
    path = tmp_path / name
    shutil.copytree(ROOT / "sample_traces" / name, path)
    (path / "report.json").unlink()
    return path


def test_profiler_cost_corrected_at_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # cpu-keras_fit: profiled steps 1.43x the unprofiled ones (harness clock), significant and separated
    run = _rebuilt(tmp_path, "cpu-keras_fit")
    out = report_at(80, run, monkeypatch, capsys)
    lines = out.splitlines()
    assert [ln for ln in lines if len(ln) > 80 and str(run) not in ln] == []
    flat = " ".join(ln.strip() for ln in lines)
    assert (
        "The profiler slowed the profiled steps 1.43x; the shares are corrected to the unprofiled step"
        in flat
    )
    assert flat.count("profiler slowed") == 1  # said once: the analysis's note is not repeated below
    assert "┃ profiled ┃" in out and "steps from tfdoctor markers · corrected to the unprofiled step" in flat
    step = next(ln for ln in lines if ln.startswith("│ step"))
    cells = [c.strip() for c in step.strip("│").split("│")]
    assert cells[:4] == ["step", "6.26", "100 %", "8.72 ms"]  # the unprofiled step, the profiled one beside
    assert "Compute precision (measured): not measurable · CPU op events carry no dtype" in flat


def test_profiler_cost_recorded_not_corrected_and_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # cpu-side_effects: 1.22x, but the unprofiled steps range 97-376 ms: not told from the noise
    out = report_at(160, _rebuilt(tmp_path, "cpu-side_effects"), monkeypatch, capsys)
    flat = " ".join(ln.strip() for ln in out.splitlines())
    assert (
        "The profiler slowed the profiled steps 1.22x; recorded, not corrected: the unprofiled steps vary"
        in flat
    )
    assert "┃ profiled ┃" not in out
    # cpu-expert: 1.012x, under the bar
    out = report_at(80, _rebuilt(tmp_path, "cpu-expert"), monkeypatch, capsys)
    flat = " ".join(ln.strip() for ln in out.splitlines())
    assert "The profiler's cost was small (1.012x the unprofiled step, under 1.10x)" in flat
