"""From a run directory (facts, step timings, trace) to a :class:`~tfdoctor.model.Report`.

``build_report(run)`` is what ``profile``, ``analyze``, ``fix`` and the notebook magic call after the
script ran. It never imports TensorFlow.
"""

from __future__ import annotations

from tfdoctor.model import Facts, Report, StepTiming, Throughput
from tfdoctor.store import RunDir, now_iso


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


def build_report(run: RunDir) -> Report:
    meta = run.meta
    facts = Facts.model_validate(run.read_json("facts.json", {}) or {})
    steps = load_steps(run)
    timing = [s for s in steps if s.window == "timing"] or [s for s in steps if s.window != "warmup"]
    throughput = Throughput.from_steps(timing, facts.batch_size)
    return Report(
        run_id=run.id,
        script=meta.get("script", ""),
        args=meta.get("args", []),
        created=meta.get("created") or now_iso(),
        status=meta.get("status", "complete"),
        error=meta.get("error"),
        facts=facts,
        throughput=throughput,
        steps=steps,
        trace_files=[str(p.relative_to(run.path)) for p in run.trace_files()],
        logdir="logdir" if run.logdir.exists() else None,
    )
