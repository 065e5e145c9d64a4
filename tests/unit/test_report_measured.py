"""The profiler's cost and the measured compute precision on every face: the wording
(tfdoctor.report.measured), the HTML run page payload and page, the web run page, all on reports built
from recorded runs (sample_traces/) and a recorded GPU trace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import web_samples as ws
from fastapi.testclient import TestClient
from real_traces import shared

from tfdoctor.analysis import tracer
from tfdoctor.report import measured
from tfdoctor.report.html import render_run, run_page
from tfdoctor.rundir import RunDir
from tfdoctor.session.build import build_report, report_from_trace
from tfdoctor.store import RunStore
from tfdoctor.web.main import create_app

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
MULTI_WORKER = "tensorflow-profiler/demo/plugins/profile/GPU-multi-worker"


@pytest.fixture(scope="module")
def keras_fit():
    """cpu-keras_fit rebuilt: profiled steps 1.43x the unprofiled ones, corrected."""
    return build_report(RunDir(SAMPLES / "cpu-keras_fit"))


def test_the_bar_is_the_analysis_bar():
    assert measured.SIGNIFICANT == tracer.SIGNIFICANT


def test_wording_of_the_three_cases(keras_fit):
    cost = measured.tracer_cost_view(keras_fit.breakdown)
    assert cost is not None and cost.state == "corrected" and cost.ratio == "1.43x"
    assert cost.sentence.startswith("The profiler slowed the profiled steps 1.43x; the shares are corrected")
    side = build_report(RunDir(SAMPLES / "cpu-side_effects")).breakdown
    cost = measured.tracer_cost_view(side)
    assert cost is not None and cost.state == "not corrected" and "recorded, not corrected" in cost.sentence
    small = build_report(RunDir(SAMPLES / "cpu-naive_loop")).breakdown
    cost = measured.tracer_cost_view(small)
    assert cost is not None and cost.state == "small" and "(0.980x)" in cost.sentence
    # a bare trace has no harness windows: not measured, nothing said
    assert (
        measured.tracer_cost_view(report_from_trace(SAMPLES / "cpu-keras_fit" / "logdir").breakdown) is None
    )


def test_run_page_payload_and_html(keras_fit):
    page = run_page(keras_fit)
    by = {m.label: m for m in page.metrics}
    assert by["Profiler cost"].value == "1.43x" and "corrected" in by["Profiler cost"].sub
    assert by["Compute precision"].value == "not measurable"
    assert "CPU op events carry no dtype" in by["Compute precision"].sub
    assert by["Largest share"].sub == "Device compute (unprofiled step)"
    # the share chart: the profiled step as traced and the unprofiled one (corrected), in ms
    dev = next(t for t in page.figures["share"]["data"] if t["name"] == "Device compute")
    assert dev["y"] == ["unprofiled", "profiled"]
    bd = keras_fit.breakdown
    assert dev["x"][0] == pytest.approx(
        bd.unprofiled_share["device_compute"] * bd.unprofiled_step_ms, abs=1e-3
    )
    assert sum(t["x"][0] for t in page.figures["share"]["data"]) == pytest.approx(
        bd.unprofiled_step_ms, rel=1e-3
    )
    assert ("Compute precision (measured)", "not measurable") in page.facts
    html = render_run(page, standalone=True)
    para = re.search(r'<p class="caption tracer-cost tracer-corrected" id="tracer-cost">([^<]+)</p>', html)
    assert para and para.group(1).startswith("The profiler slowed the profiled steps 1.43x")


def test_gpu_precision_is_measured_from_kernel_names():
    r = report_from_trace(shared(MULTI_WORKER))
    view = measured.precision_view(r.breakdown.precision)
    assert view is not None and view.value == "16-bit"
    assert view.detail == "100 % of GPU kernel time in 16-bit · from GPU kernel names"
    assert r.facts.extra["compute_precision"].startswith("16-bit (")
    by = {m.label: m for m in run_page(r).metrics}
    assert by["Compute precision"].value == "16-bit" and "Profiler cost" not in by


def test_web_run_page_shows_both(tmp_path, keras_fit):
    store = RunStore(tmp_path / "home")
    run = ws.save(store, keras_fit.model_copy(update={"run_id": "20261123-200000-keras_fit"}))
    page = TestClient(create_app(store.home)).get(f"/runs/{run.id}", headers={"Accept": "text/html"}).text
    assert 'id="tracer-cost"' in page and "The profiler slowed the profiled steps 1.43x" in page
    assert "Profiler cost" in page and "Compute precision" in page and "not measurable" in page
