"""The JSON API: ``/api/runs``, ``/api/runs/{id}``, ``/api/runs/{id}/findings``, progress,
timeline, ``/api/compare``. Every route declares its response model."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from tfdoctor import __version__
from tfdoctor.model import Finding
from tfdoctor.report.charts import timeline_figure
from tfdoctor.report.compare import Comparison, compare
from tfdoctor.report.timeline import Timeline, timeline_for_run
from tfdoctor.web.deps import RunDep, SettingsDep, StoreDep, lookup_run, read_report
from tfdoctor.web.schemas import ErrorBody, Health, Progress, RunDetail, RunSummary, TimelineFigure
from tfdoctor.web.service import list_summaries, progress, summary

router = APIRouter(prefix="/api", tags=["api"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "no such run"}}


@router.get("/health", response_model=Health)
def health(settings: SettingsDep) -> Health:
    return Health(version=__version__, home=str(settings.home))


@router.get("/runs", response_model=list[RunSummary])
def list_runs(
    store: StoreDep, settings: SettingsDep, limit: Annotated[int, Query(ge=1, le=1000)] = 200
) -> list[RunSummary]:
    """Runs in the store, newest first."""
    return list_summaries(settings, store, min(limit, settings.max_runs))


@router.get("/runs/{run_id}", response_model=RunDetail, responses=NOT_FOUND)
def get_run(
    run: RunDep, settings: SettingsDep, max_steps: Annotated[int, Query(ge=0, le=100_000)] = 2000
) -> RunDetail:
    """One run: its summary, progress and report (``report.steps`` cut to ``max_steps``)."""
    report, err = read_report(settings, run)
    truncated = False
    if report is not None and len(report.steps) > max_steps:
        report = report.model_copy(update={"steps": report.steps[:max_steps]})
        truncated = True
    return RunDetail(
        summary=summary(run, report),
        progress=progress(run),
        report=report,
        report_error=err,
        steps_truncated=truncated,
    )


@router.get("/runs/{run_id}/findings", response_model=list[Finding], responses=NOT_FOUND)
def get_findings(run: RunDep, settings: SettingsDep) -> list[Finding]:
    report, err = read_report(settings, run)
    if err:
        raise HTTPException(status_code=409, detail=err)
    return list(report.findings) if report else []


@router.get("/runs/{run_id}/progress", response_model=Progress, responses=NOT_FOUND)
def get_progress(run: RunDep) -> Progress:
    return progress(run)


@router.get("/runs/{run_id}/timeline", response_model=Timeline, responses=NOT_FOUND)
def get_timeline(run: RunDep) -> Timeline:
    """The downsampled timeline (built from the trace once, then cached in the run directory)."""
    tl = timeline_for_run(run)
    if tl is None:
        raise HTTPException(status_code=404, detail=f"run {run.id} has no trace")
    return tl


@router.get("/runs/{run_id}/timeline/figure", response_model=TimelineFigure, responses=NOT_FOUND)
def get_timeline_figure(run: RunDep) -> TimelineFigure:
    """The timeline as a plotly figure, what the run page draws."""
    tl = timeline_for_run(run)
    if tl is None:
        return TimelineFigure(note="No trace recorded for this run.")
    note = "; ".join(tl.notes)
    if tl.truncated:
        note += ("; " if note else "") + "deepest nesting levels or smallest events left out"
    if tl.rows:
        note += (
            f" · {tl.events_in_window:,} events drawn as {tl.blocks:,} blocks (runs of sub-pixel events merged;"
            f" every gap wider than {tl.resolution_ms:.3g} ms stays visible)"
        )
    return TimelineFigure(figure=timeline_figure(tl), note=note, blocks=tl.blocks, events=tl.events_in_window)


@router.get("/compare", response_model=Comparison, responses=NOT_FOUND)
def get_compare(a: str, b: str, store: StoreDep, settings: SettingsDep) -> Comparison:
    """Run ``b`` against run ``a``: throughput ratio, per-category step-time deltas, findings."""
    ra, _ = read_report(settings, lookup_run(store, a))
    rb, _ = read_report(settings, lookup_run(store, b))
    if ra is None or rb is None:
        raise HTTPException(status_code=409, detail="both runs need a report (is one still running?)")
    return compare(ra, rb)
