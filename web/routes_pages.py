"""HTML pages: the runs list, a run, two runs compared, the patch, the static report download."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from tfdoctor.report.compare import compare
from tfdoctor.report.html import compare_page, render_compare, render_run, report_html
from tfdoctor.report.timeline import timeline_for_run
from tfdoctor.rundir import PATCH, RunDir
from tfdoctor.web.deps import RunDep, SettingsDep, StoreDep, lookup_run, read_report, read_run_text
from tfdoctor.web.service import build_page, group_trials, list_summaries

router = APIRouter(include_in_schema=False)


def _env(request: Request):  # type: ignore[no-untyped-def]
    return request.app.state.templates


@router.get("/", response_class=HTMLResponse)
def runs_page(request: Request, store: StoreDep, settings: SettingsDep) -> HTMLResponse:
    runs = list_summaries(settings, store, settings.max_runs)
    groups = group_trials(runs)
    html = (
        _env(request)
        .get_template("runs.html.j2")
        .render(groups=groups, runs=[r for r, _ in groups], home=str(settings.home), standalone=False)
    )
    return HTMLResponse(html)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run: RunDep, store: StoreDep, settings: SettingsDep) -> HTMLResponse:
    page, pending = build_page(settings, store, run)
    html = render_run(
        page,
        standalone=False,
        env=_env(request),
        timeline_url=f"/api/runs/{run.id}/timeline/figure" if pending else None,
        progress_url=f"/api/runs/{run.id}/progress",
    )
    return HTMLResponse(html)


@router.get("/runs/{run_id}/patch", response_class=PlainTextResponse)
def run_patch(run: RunDep, settings: SettingsDep) -> PlainTextResponse:
    report, _ = read_report(settings, run)
    patch = report.fix.patch if report is not None and report.fix is not None else ""
    if not patch:
        patch = read_run_text(run, PATCH, limit=20_000_000) or ""  # never through a link
    if not patch:
        raise HTTPException(status_code=404, detail=f"run {run.id} has no patch")
    return PlainTextResponse(patch, media_type="text/x-diff; charset=utf-8")


@router.get("/runs/{run_id}/report.html")
def run_report_download(run: RunDep, store: StoreDep, settings: SettingsDep) -> Response:
    """The self-contained report of this run, as ``tfdoctor report --html`` writes it."""
    report, err = read_report(settings, run)
    if report is None:
        raise HTTPException(status_code=409, detail=err or f"run {run.id} has no report yet")

    def load(rid: str):  # type: ignore[no-untyped-def]
        try:
            return read_report(settings, lookup_run(store, rid))[0]
        except HTTPException:
            return None

    html = report_html(report, run_path=run.path, load_report=load, timeline=timeline_for_run(run))
    return Response(
        html,
        media_type="text/html; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="tfdoctor-{run.id}.html"'},
    )


@router.get("/compare", response_class=HTMLResponse)
def compare_view(
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    a: Annotated[str | None, Query()] = None,
    b: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    runs = [r for r, _ in group_trials(list_summaries(settings, store, settings.max_runs))]
    env = _env(request)
    if not a or not b:
        return HTMLResponse(
            env.get_template("compare_pick.html.j2").render(runs=runs, a=a, b=b, standalone=False)
        )
    ra_dir: RunDir = lookup_run(store, a)
    rb_dir: RunDir = lookup_run(store, b)
    ra, _ = read_report(settings, ra_dir)
    rb, _ = read_report(settings, rb_dir)
    if ra is None or rb is None:
        raise HTTPException(status_code=409, detail="both runs need a report (is one still running?)")
    page = compare_page(compare(ra, rb), ra, rb)
    return HTMLResponse(render_compare(page, standalone=False, env=env))
