"""What the routes serve, built from the run store: summaries, progress, pages. No FastAPI here."""

from __future__ import annotations

import statistics
from typing import Any, cast, get_args

from tfdoctor.model import Report, RunStatus
from tfdoctor.report.html import RunPage, after_run_id, run_page
from tfdoctor.report.timeline import timeline_for_run
from tfdoctor.rundir import FACTS, PATCH, REPORT, RunDir, tail_step_records, valid_run_id
from tfdoctor.store import RunStore
from tfdoctor.web.deps import Settings, read_report, read_run_text
from tfdoctor.web.schemas import Progress, RunSummary

MAX_BACKFILL = 100
_PHASES = {"warmup": "warm-up", "timing": "timing window", "profile": "profiling"}


def summary_from_row(row: dict[str, Any]) -> RunSummary:
    return RunSummary.model_validate({k: row[k] for k in RunSummary.model_fields if row.get(k) is not None})


def list_summaries(settings: Settings, store: RunStore, limit: int) -> list[RunSummary]:
    """The runs list, newest first. Rows the index has no throughput/device for are filled in from
    the run's report (read once, then cached by mtime), at most ``MAX_BACKFILL`` per request."""
    out = []
    budget = MAX_BACKFILL
    for row in store.list(limit=limit):
        s = summary_from_row(row)
        if budget > 0 and s.status != "running" and (s.device is None or s.steps_per_s is None):
            budget -= 1
            run = RunDir(store.runs_dir / s.id)
            report, _ = read_report(settings, run)
            if report is not None:
                full = summary(run, report)
                s = s.model_copy(
                    update={
                        k: getattr(full, k)
                        for k in ("device", "examples_per_s", "steps_per_s", "speedup")
                        if getattr(s, k) is None
                    }
                )
        out.append(s)
    return out


def is_trial(s: RunSummary) -> bool:
    """A fix trial (``fix`` / ``notebook-fix`` run with a parent): shown under its ``--fix`` run."""
    return bool(s.parent) and s.kind.endswith("fix")


def group_trials(runs: list[RunSummary]) -> list[tuple[RunSummary, list[RunSummary]]]:
    """(run, its fix trials, oldest first) in the list's order; a trial whose parent is not in the
    list stays a row of its own."""
    top = {r.id for r in runs if not is_trial(r)}
    trials: dict[str, list[RunSummary]] = {}
    for r in runs:
        if is_trial(r) and r.parent in top:
            trials.setdefault(str(r.parent), []).append(r)
    return [
        (r, sorted(trials.get(r.id, []), key=lambda t: (t.created, t.id)))
        for r in runs
        if not (is_trial(r) and r.parent in top)
    ]


def summary(run: RunDir, report: Report | None = None) -> RunSummary:
    meta = run.meta
    t = report.throughput if report else None
    device = meta.get("device")
    if device is None and report is not None and report.facts.devices:
        gpus = report.facts.gpus
        device = f"{len(gpus)}× {gpus[0].model or 'GPU'}" if gpus else "CPU"
    return RunSummary(
        id=run.id,
        script=str(meta.get("script") or (report.script if report else "")),
        created=str(meta.get("created") or (report.created if report else "")),
        status=str(meta.get("status") or (report.status if report else "unknown")),
        kind=str(meta.get("kind") or "profile"),
        device=device,
        examples_per_s=meta.get("examples_per_s", t.examples_per_s if t else None),
        steps_per_s=meta.get("steps_per_s", t.steps_per_s if t else None),
        speedup=meta.get("speedup", report.fix.combined_speedup if report and report.fix else None),
        parent=meta.get("parent"),
        error=meta.get("error"),
    )


def progress(run: RunDir) -> Progress:
    meta = run.meta
    status = str(meta.get("status") or "unknown")
    n, last = tail_step_records(run)
    durs = [(s["end_ns"] - s["start_ns"]) / 1e6 for s in last if "end_ns" in s and "start_ns" in s]
    target = meta.get("target_steps") or meta.get("steps")
    target = int(target) if isinstance(target, int | float) and target > 0 else None
    phase = str(meta.get("phase") or "")
    if not phase and last:
        phase = _PHASES.get(str(last[-1].get("window")), "")
    if status == "running" and not last:
        phase = phase or "starting the script"
    losses = [s.get("loss") for s in last if isinstance(s.get("loss"), int | float)]
    return Progress(
        run_id=run.id,
        status=status,
        phase=phase,
        steps_done=n,
        target_steps=target,
        fraction=min(1.0, n / target) if target else None,
        last_step_ms=durs[-1] if durs else None,
        median_step_ms=statistics.median(durs[-50:]) if durs else None,
        last_loss=losses[-1] if losses else None,
        updated=meta.get("updated"),
        error=meta.get("error"),
        has_report=run.file(REPORT).is_file(),
    )


def placeholder_report(run: RunDir) -> Report:
    """A report for a run that has none yet (running, or crashed before writing one)."""
    meta = run.meta
    from tfdoctor.model import Facts
    from tfdoctor.rundir import load_steps, now_iso

    facts = Facts.model_validate(run.read_json(FACTS, {}) or {})
    raw = meta.get("status") or "running"
    status = cast(RunStatus, raw if raw in get_args(RunStatus) else "failed")
    return Report(
        run_id=run.id,
        script=str(meta.get("script") or ""),
        args=[str(a) for a in meta.get("args") or []],
        created=str(meta.get("created") or now_iso()),
        status=status,
        error=meta.get("error"),
        facts=facts,
        steps=load_steps(run)[-2000:],
    )


def build_page(settings: Settings, store: RunStore, run: RunDir) -> tuple[RunPage, bool]:
    """(the run page payload, whether the timeline must still be fetched by the browser)."""
    report, err = read_report(settings, run)
    if report is None:
        report = placeholder_report(run)
        if err:
            report = report.model_copy(update={"error": err})
    else:
        meta_status = run.meta.get("status")
        if report.status == "running" and meta_status and meta_status != "running":
            report = report.model_copy(update={"status": meta_status})
    after = None
    aid = after_run_id(report)
    if aid and valid_run_id(aid) and (store.runs_dir / aid).is_dir():
        after, _ = read_report(settings, RunDir(store.runs_dir / aid))
    patch_text = read_run_text(run, PATCH, limit=2_000_000)  # never through a link
    timeline = timeline_for_run(run, build=False)
    page = run_page(report, run_path=run.path, after=after, timeline=timeline, patch_file=patch_text)
    pending = timeline is None and bool(run.trace_files())
    return page, pending
