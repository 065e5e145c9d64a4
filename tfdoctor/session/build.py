"""From a run directory (facts, step timings, trace) to a :class:`~tfdoctor.model.Report`.

``build_report(run)`` is what ``profile``, ``analyze``, ``fix`` and the notebook magic call after the
script ran; ``report_from_trace(path)`` analyses any TensorBoard profile without a run. Neither
imports TensorFlow.
"""

from __future__ import annotations

import ast
import errno
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfdoctor.analysis import Analysis, analyze
from tfdoctor.errors import NO_SPACE, RunError, TraceError
from tfdoctor.model import Breakdown, Facts, Report, StepTiming, Throughput
from tfdoctor.rundir import FACTS, LOGDIR, HarnessRecord, RunDir, load_steps, now_iso, worker_steps_by_host
from tfdoctor.trace import load, read_xplane

if TYPE_CHECKING:  # the capture stack is not imported by `analyze` (a type only)
    from tfdoctor.capture.runner import CaptureResult


def timing_throughput(
    steps: list[StepTiming], batch_size: int | None, steps_per_execution: int | None = None
) -> Throughput | None:
    """Throughput over the unprofiled timing window (falls back to all post-warm-up steps)."""
    timing = [s for s in steps if s.window == "timing"] or [s for s in steps if s.window != "warmup"]
    return Throughput.from_steps(timing, batch_size, steps_per_execution=steps_per_execution)


def _evaluate(analysis: Analysis | None, facts: Facts):
    from tfdoctor.rules import evaluate

    return evaluate(analysis, facts)


def _distributed(analysis: Analysis | None, facts: Facts, run: RunDir | None = None):
    """The replica / worker balance (tfdoctor.analysis.distributed), None for one device of one host."""
    from tfdoctor.analysis.distributed import summary_for

    workers = None
    if run is not None and (run.path / "workers").is_dir():
        workers = worker_steps_by_host(run)
    return summary_for(analysis, facts, workers)


def analyze_path(
    path: str | Path, harness_steps: list[StepTiming] | None = None
) -> tuple[Analysis | None, list[str]]:
    """Analyse the trace under ``path``; returns (analysis or None, notes explaining what is missing)."""
    try:
        trace = load(path)
    except TraceError as e:
        return None, [f"no trace analysed: {e}"]
    a = analyze(trace, harness_steps)
    notes = [] if a.steps is not None else [f"no steps found in the trace: {a.why_no_steps}"]
    return a, notes


def _module(run: RunDir) -> str | None:
    """The ``-m MODULE`` the run was started with (capture.json), None for a script run as a file."""
    try:
        cap = run.capture_record()
    except Exception:  # unreadable capture.json: the report still builds, as for a run of a file
        return None
    return cap.module if cap is not None else None


def build_report(run: RunDir, *, steps: list[StepTiming] | None = None, facts: Facts | None = None) -> Report:
    """The report of a run directory. ``steps`` and ``facts``, when the caller holds them (a capture
    that just ended), are used as they are instead of being read back from the run's files."""
    meta = run.meta
    if facts is None:
        facts = Facts.model_validate(run.read_json(FACTS, {}) or {})
    if steps is None:
        steps = load_steps(run)
    harness = run.harness() or HarnessRecord()
    profiler_error = harness.profiler_error
    why = f"the profiler failed: {profiler_error}" if profiler_error else "the profile window was not reached"
    analysis, notes = (None, [f"no trace recorded ({why})"])
    if run.trace_files():
        analysis, notes = analyze_path(run.logdir, steps)
    notes = [
        *notes,
        *own_profiler_notes(harness.own_profiler),
        *debug_switch_notes(facts.debug_switches),
        *capture_problem_notes(harness.hook_errors),
    ]
    breakdown = analysis.breakdown if analysis is not None else None
    if breakdown is not None and notes:
        breakdown = breakdown.model_copy(update={"notes": [*breakdown.notes, *notes]})
    elif breakdown is None and notes:
        breakdown = Breakdown(source="none", notes=notes)
    findings, verdict = _evaluate(analysis, facts)
    facts = with_measured_precision(facts, breakdown)
    if facts.loop_kind == "keras_fit" and not facts.script_fit_lines:
        facts = facts.model_copy(update={"script_fit_lines": fit_lines(meta.get("script", ""))})
    return Report(
        distributed=_distributed(analysis, facts, run),
        run_id=run.id,
        script=meta.get("script", ""),
        args=meta.get("args", []),
        module=_module(run),
        created=meta.get("created") or now_iso(),
        # "finishing": the status the store records once this report is on disk (store.update)
        status=meta.get("finishing") or meta.get("status", "complete"),
        error=meta.get("error"),
        facts=facts,
        throughput=timing_throughput(steps, facts.batch_size, facts.steps_per_execution),
        steps=steps,
        breakdown=breakdown,
        findings=findings,
        verdict=verdict,
        trace_files=[str(p.relative_to(run.path)) for p in run.trace_files()],
        logdir=LOGDIR if run.logdir.exists() else None,
    )


def fit_lines(script: str) -> list[int]:
    """The lines of ``script``'s ``<anything>.fit(...)`` calls, in order; [] when it cannot be read."""
    try:
        tree = ast.parse(Path(script).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return []
    return sorted(
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "fit"
    )


def with_measured_precision(facts: Facts, breakdown: Breakdown | None) -> Facts:
    """The facts with the compute precision measured from the trace (``extra["compute_precision"]``:
    "float32", "16-bit (98 % of kernel time)", "not measurable"...), beside the dtype policy."""
    if breakdown is None or breakdown.precision is None:
        return facts
    return facts.model_copy(update={"extra": {**facts.extra, "compute_precision": breakdown.precision.label}})


def own_profiler_notes(calls: list[str]) -> list[str]:
    """The script profiles itself: its profiler calls did nothing under tfdoctor (one profiler session at
    a time: tfdoctor's window took it), and its own log directory got no trace from this run."""
    if not calls:
        return []
    return [
        f"the script runs TensorFlow's profiler itself ({', '.join(calls)}): left off under tfdoctor, "
        "whose profiler takes its place (one profiler session at a time); its own log directory gets no "
        "trace from this run"
    ]


def debug_switch_notes(switches: list[str]) -> list[str]:
    """A debugging switch on while the script trained: every step pays for it, the breakdown with it."""
    from tfdoctor.model import DEBUG_SWITCHES

    out = []
    for s in switches:
        cost = next((c for api, _, c in DEBUG_SWITCHES if s.startswith(f"{api}()")), "")
        out.append(
            f"a debugging switch was on while the script trained ({s}{': ' + cost if cost else ''}): every "
            "step pays for it, and the figures here include it; `--fix` measures the script without it "
            "(debug-switches)"
        )
    return out


def capture_problem_notes(errors: list[str]) -> list[str]:
    """One report note per thing tfdoctor's capture could not do (a hook that raised, facts it could
    not collect), its first line only: the figures that depend on it may be missing or wrong."""
    out = []
    for e in errors:
        lines = [ln.strip() for ln in e.strip().splitlines() if ln.strip()]
        if not lines:
            continue
        what = lines[0].rstrip(":")
        last = lines[-1] if len(lines) > 1 else ""
        out.append(
            f"tfdoctor's capture hit a problem ({what}{': ' + last if last and last != what else ''}); figures that depend on it may be incomplete"
        )
    return out


def report_from_trace(path: str | Path) -> Report:
    """A report for any TensorBoard profile (logdir, session dir or trace file), no run needed.

    Raises TraceError when nothing readable is there.
    """
    trace = load(path)
    analysis = analyze(trace)
    facts = Facts(hostname=trace.hostnames[0] if trace.hostnames else None)
    breakdown = analysis.breakdown or Breakdown(
        source="none", notes=[f"no steps found in the trace: {analysis.why_no_steps}"]
    )
    findings, verdict = _evaluate(analysis, facts)
    facts = with_measured_precision(facts, breakdown)
    return Report(
        distributed=_distributed(analysis, facts),
        run_id=Path(path).name,
        script=str(path),
        created=now_iso(),
        status="complete" if analysis.steps is not None else "no_steps",
        facts=facts,
        breakdown=breakdown,
        findings=findings,
        verdict=verdict,
        trace_files=trace.source.split(";"),
    )


# -- after a capture -------------------------------------------------------------------------------


def device_label(facts: Facts | None) -> str | None:
    """A short device label for the run index: "2x NVIDIA H200", "CPU"."""
    if facts is None or not facts.devices:
        return None
    gpus = facts.gpus
    if gpus:
        model = gpus[0].model or "GPU"
        return f"{len(gpus)}x {model}" if len(gpus) > 1 else model
    return "CPU"


def _is_disk_full(e: BaseException) -> bool:
    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(e, sqlite3.OperationalError) and "full" in str(e)


def _drop_unreadable_traces(run: RunDir) -> list[Path]:
    """Remove trace files that cannot be read (the profiler's write was cut short by a full disk)."""
    dropped = []
    for path in run.trace_files():
        try:
            read_xplane(path)
        except TraceError:
            path.unlink(missing_ok=True)
            dropped.append(path)
    return dropped


def finish_run(store: Any, run: RunDir, result: CaptureResult) -> Any:
    """After a capture: status into the store, the report built and written, throughput indexed.

    ``store`` is a :class:`tfdoctor.store.RunStore`; returns the :class:`tfdoctor.model.Report`.
    A full disk is a result too: the truncated trace (unreadable) is removed to make room, and the
    run is recorded as failed with that reason; when even that cannot be written, RunError says so.
    """
    try:
        return _finish_run(store, run, result)
    except (OSError, sqlite3.Error) as e:
        if not _is_disk_full(e):
            raise
        first = e
    dropped = _drop_unreadable_traces(run)
    msg = f"the disk is full ({NO_SPACE}) under {run.path.parent}: the run could not be written completely"
    if dropped:
        msg += " and its truncated trace was removed"
    result.status = "failed"
    result.message = msg
    result.error = f"{msg}\n{first}"
    result.trace_files = run.trace_files()
    try:
        return _finish_run(store, run, result)
    except (OSError, sqlite3.Error) as e:
        if not _is_disk_full(e):
            raise
        raise RunError(f"{msg}; not even its status could be saved ({e})", run_dir=str(run.path)) from None


def _finish_run(store: Any, run: RunDir, result: CaptureResult) -> Any:
    store.update(run, status=result.status, error=result.message if result.status != "complete" else None)
    report = build_report(run, steps=result.steps or None, facts=result.facts)
    if report.error is None and result.error and result.status != "complete":
        report = report.model_copy(update={"error": result.error})
    if result.status == "complete" and result.message and report.breakdown is not None:
        notes = [*report.breakdown.notes, result.message]  # the report says it too, not only the CLI
        report = report.model_copy(update={"breakdown": report.breakdown.model_copy(update={"notes": notes})})
    run.write_report(report)
    tp = report.throughput
    store.update(
        run,
        examples_per_s=tp.examples_per_s if tp else None,
        steps_per_s=tp.steps_per_s if tp else None,
        device=device_label(result.facts),
        note=result.message if result.status == "complete" else None,
    )
    return report
