"""From a run directory (facts, step timings, trace) to a :class:`~tfdoctor.model.Report`.

``build_report(run)`` is what ``profile``, ``analyze``, ``fix`` and the notebook magic call after the
script ran; ``report_from_trace(path)`` analyses any TensorBoard profile without a run. Neither
imports TensorFlow.
"""

from __future__ import annotations

from pathlib import Path

from tfdoctor.analysis import Analysis, analyze
from tfdoctor.errors import TraceError
from tfdoctor.model import Breakdown, Facts, Report, StepTiming, Throughput
from tfdoctor.store import RunDir, now_iso
from tfdoctor.trace import load


def load_steps(run: RunDir) -> list[StepTiming]:
    path = run.file("steps.jsonl")
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(StepTiming.model_validate_json(line))
        except ValueError:
            continue  # a line cut short by a crash: the rest of the run still counts
    return out


def timing_throughput(steps: list[StepTiming], batch_size: int | None) -> Throughput | None:
    """Throughput over the unprofiled timing window (falls back to all post-warm-up steps)."""
    timing = [s for s in steps if s.window == "timing"] or [s for s in steps if s.window != "warmup"]
    return Throughput.from_steps(timing, batch_size)


def _evaluate(analysis: Analysis | None, facts: Facts):
    from tfdoctor.rules import evaluate

    return evaluate(analysis, facts)


def _distributed(analysis: Analysis | None, facts: Facts, run: RunDir | None = None):
    """The replica / worker balance (tfdoctor.analysis.distributed), None for one device of one host."""
    from tfdoctor.analysis.distributed import summary_for

    workers = None
    if run is not None and (run.path / "workers").is_dir():
        from tfdoctor.capture.multiworker import worker_steps_by_host

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


def build_report(run: RunDir) -> Report:
    meta = run.meta
    facts = Facts.model_validate(run.read_json("facts.json", {}) or {})
    steps = load_steps(run)
    profiler_error = (run.read_json("harness.json", {}) or {}).get("profiler_error")
    why = f"the profiler failed: {profiler_error}" if profiler_error else "the profile window was not reached"
    analysis, notes = (None, [f"no trace recorded ({why})"])
    if run.trace_files():
        analysis, notes = analyze_path(run.logdir, steps)
    breakdown = analysis.breakdown if analysis is not None else None
    if breakdown is not None and notes:
        breakdown = breakdown.model_copy(update={"notes": [*breakdown.notes, *notes]})
    elif breakdown is None and notes:
        breakdown = Breakdown(source="none", notes=notes)
    findings, verdict = _evaluate(analysis, facts)
    return Report(
        distributed=_distributed(analysis, facts, run),
        run_id=run.id,
        script=meta.get("script", ""),
        args=meta.get("args", []),
        created=meta.get("created") or now_iso(),
        status=meta.get("status", "complete"),
        error=meta.get("error"),
        facts=facts,
        throughput=timing_throughput(steps, facts.batch_size),
        steps=steps,
        breakdown=breakdown,
        findings=findings,
        verdict=verdict,
        trace_files=[str(p.relative_to(run.path)) for p in run.trace_files()],
        logdir="logdir" if run.logdir.exists() else None,
    )


def report_from_trace(path: str | Path) -> Report:
    """A report for any TensorBoard profile (logdir, session dir or trace file), no run needed.

    Raises TraceError when nothing readable is there.
    """
    trace = load(path)
    analysis = analyze(trace)
    facts = Facts(hostname=(trace.hostnames or [None])[0])
    breakdown = analysis.breakdown or Breakdown(
        source="none", notes=[f"no steps found in the trace: {analysis.why_no_steps}"]
    )
    findings, verdict = _evaluate(analysis, facts)
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
