"""Analysis: steps, per-step breakdown and the figures the rules read. Never imports TensorFlow.

``analyze(trace, harness_steps)`` -> :class:`Analysis`. When no steps can be found the analysis
says why (``Analysis.why_no_steps``) instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tfdoctor.analysis.breakdown import BreakdownResult, compute_breakdown
from tfdoctor.analysis.details import Details, TfDataStage, compute_details
from tfdoctor.analysis.steps import Steps, find_steps
from tfdoctor.analysis.tracer import SIGNIFICANT, corrected_share, event_weights, tracer_cost
from tfdoctor.model import INPUT_MARKER, STALL_STEP, STEP_MARKERS, Breakdown, ComputePrecision, StepTiming
from tfdoctor.trace.model import Trace

__all__ = ["Analysis", "Details", "Steps", "TfDataStage", "analyze"]


@dataclass
class Analysis:
    trace: Trace
    steps: Steps | None
    breakdown: Breakdown | None
    details: Details
    per_device: dict[str, dict[str, float]] = field(default_factory=dict)
    why_no_steps: str | None = None
    result: BreakdownResult | None = None

    @property
    def share(self) -> dict[str, float]:
        """The step-time shares the rules read: of the unprofiled step where the profiler's cost was
        significant (``Breakdown.unprofiled_share``), else of the profiled step."""
        if self.breakdown is None:
            return {}
        return self.breakdown.unprofiled_share or self.breakdown.share

    @property
    def step_ms(self) -> float:
        """The average step the rules describe (unprofiled where the share is)."""
        if self.breakdown is None:
            return 0.0
        return self.breakdown.unprofiled_step_ms or self.breakdown.avg_step_ms


def measured_precision(trace: Trace, steps: Steps, details: Details) -> ComputePrecision:
    """The precision the steps computed in, from the trace: the 16-bit share of GPU kernel time (kernel
    names say fp16/bf16); on a CPU-only trace op events carry no dtype, so it is not measurable."""
    if details.n_devices:
        share = details.fp16_kernel_share
        if share < 0.05:
            label = "float32"
        elif share > 0.9:
            label = f"16-bit ({share * 100:.0f} % of kernel time)"
        else:
            label = f"mixed ({share * 100:.0f} % of kernel time in 16-bit)"
        return ComputePrecision(label=label, sixteen_bit_share=round(share, 4), source="GPU kernel names")
    # Cast ops do not tell: a float32 Keras model runs ~10 per step too (the recorded Conv2D step: 10;
    # under mixed_bfloat16: 29)
    return ComputePrecision(
        label="not measurable",
        source="CPU op events carry no dtype: see the dtype policy in the facts",
    )


def _without_tracer_cost(
    bd: Breakdown, res: BreakdownResult, trace: Trace, steps: Steps, harness_steps: list[StepTiming] | None
) -> Breakdown:
    """Record the profiler's cost (profiled ÷ unprofiled step, harness clock) and, where it is significant,
    the shares of the unprofiled step beside the profiled ones (tfdoctor.analysis.tracer)."""
    cost = tracer_cost(harness_steps)
    if cost is None:
        return bd
    upd: dict = {"tracer_cost": round(cost.ratio, 4)}
    if cost.ratio < SIGNIFICANT or not cost.separated or bd.avg_step_ms <= 0:
        return bd.model_copy(update=upd)
    weights = event_weights(res, trace, steps)
    share, step_ms = corrected_share(bd.share, bd.avg_step_ms, cost, weights)
    top = sorted(weights.items(), key=lambda kv: -kv[1])[:2]
    note = (
        f"the profiler slowed the step {cost.ratio:.2f}x ({cost.profiled_ms:.1f} ms profiled vs "
        f"{cost.unprofiled_ms:.1f} ms unprofiled, harness clock): the findings read the shares of a "
        f"{step_ms:.1f} ms step (unprofiled_share), the tracer's cost taken out where it recorded events ("
        + ", ".join(f"{c} {w * 100:.0f} %" for c, w in top)
        + f"); the per-step rows and shares here are the profiled {bd.avg_step_ms:.1f} ms step's"
    )
    upd.update(unprofiled_share=share, unprofiled_step_ms=step_ms, notes=[*bd.notes, note])
    return bd.model_copy(update=upd)


#: a profiled step this many times the window's upper-quartile step is an outlier: left out of the breakdown
#: (the timing window's rate leaves out a lone step by the same factor: tfdoctor.model.lone_stalls)
OUTLIER_STEP = STALL_STEP

#: what the longest event of an outlier step means, where it is TensorFlow's and not the script's
EXPLAINED = {
    # seen with gdb in keras-io's anomaly detection (fit on arrays, 27 batches an epoch), plain and under
    # tfdoctor alike: the main thread in ~IteratorResource -> ~RootDataset::Iterator, waiting for the
    # iterator's tf.data autotuning thread (Model::OptimizeLoop), which sleeps out its optimization period
    # before it sees the cancellation: 0.5-1.2 s at one epoch start in two, with the CPU idle
    "TFE_DeleteTensorHandle": (
        ": a tensor freed, typically a tf.data iterator's (the previous epoch's, as the next begins), whose"
        " delete waits for the iterator's autotuning thread to wake; TensorFlow's own pause, which the"
        " script has without tfdoctor too"
    ),
}


def _outliers(steps: Steps) -> tuple[Steps, str | None]:
    """The profiled steps without the few far longer than the others, and a note saying which and what
    the longest thing in each was. The breakdown describes the typical step, as the throughput's median
    does: keras-io's segmentation example had one step in eight held 4 s by ``TFE_DeleteTensorHandle``
    (the epoch's old tf.data iterator freed as the next began; standalone too, one epoch start in three:
    :data:`EXPLAINED`),
    and its breakdown read "Dispatch-bound: 51 %" for steps that compute 97 % of their 0.4 s. Only with 5
    profiled steps or more; a step counts when it is 4 times the upper quartile of the steps or longer."""
    n = len(steps)
    if n < 5:
        return steps, None
    d = steps.durations.astype(np.float64)
    med = float(np.median(d))
    # against the upper quartile (no interpolation): at most a quarter of the steps can stand out, and a
    # step that recurs in the window (a tiny epoch's first, every fourth step) is not one of them
    upper = float(np.sort(d)[int(np.ceil(0.75 * n)) - 1])
    out = d > OUTLIER_STEP * upper
    k = int(out.sum())
    if med <= 0 or k == 0:
        return steps, None
    said = []
    for i in np.flatnonzero(out)[:3]:
        what = ""
        ln, plane = steps.main_line, steps.host_plane
        if ln is not None and plane is not None and len(ln):
            ends = ln.start_ps + ln.dur_ps
            inside = np.flatnonzero((ln.start_ps >= steps.starts[i]) & (ends <= steps.ends[i]))
            if inside.size:
                names = plane.names_of(ln)[inside]
                keep = np.array([nm not in STEP_MARKERS and nm != INPUT_MARKER for nm in names], dtype=bool)
                if keep.any():
                    j = int(np.argmax(np.where(keep, ln.dur_ps[inside], -1)))
                    what = f", {ln.dur_ps[inside[j]] / 1e12:.2f} s of it in {names[j]}"
                    what += EXPLAINED.get(str(names[j]), "")
        said.append(
            f"step {int(steps.numbers[i])} took {d[i] / 1e12:.2f} s ({d[i] / med:.0f}x the median{what})"
        )
    note = (
        f"{k} of {n} profiled steps left out of the breakdown, which describes the typical step "
        f"({med / 1e9:.1f} ms, the median): "
        + "; ".join(said)
        + ". Such time is the training's own: it is left out of the shares only"
    )
    keep_idx = ~out
    return (
        replace(
            steps, starts=steps.starts[keep_idx], ends=steps.ends[keep_idx], numbers=steps.numbers[keep_idx]
        ),
        note,
    )


def analyze(trace: Trace, harness_steps: list[StepTiming] | None = None) -> Analysis:
    steps = find_steps(trace, harness_steps)
    if steps is None:
        why = (
            "no step markers ('train' / 'TraceContext' / 'Profiled batch'), no XProf 'Steps' line, no repeated "
            "traced function and no call of a train function in the trace"
            + ("" if harness_steps else ", and no harness step clock")
        )
        return Analysis(trace=trace, steps=None, breakdown=None, details=Details(), why_no_steps=why)
    # a merged multi-host trace: the breakdown is the stepping host's (its input wait, its devices);
    # every host's own figures are in tfdoctor.analysis.distributed
    scope, notes = trace, []
    hosts = {p.host for p in trace.planes if p.is_host and p.host}
    if len(hosts) > 1 and steps.host_plane is not None and steps.host_plane.host:
        from tfdoctor.analysis.distributed import host_trace

        scope = host_trace(trace, steps.host_plane.host)
        notes.append(f"{len(hosts)} hosts in the trace: breakdown of {steps.host_plane.host}")
    steps, outlier_note = _outliers(steps)
    if outlier_note:
        notes.append(outlier_note)
    if len(steps) == 1:
        notes.append(
            "one profiled step (a Keras profile_batch profile or a single call of the step function): the "
            "breakdown describes that step only; profile several steps for firmer figures"
        )
    res = compute_breakdown(scope, steps, notes)
    details = compute_details(scope, steps)
    bd = res.breakdown.model_copy(update={"precision": measured_precision(scope, steps, details)})
    if steps.source in ("tfdoctor markers", "harness clock"):  # the harness's own windows: its own cost
        bd = _without_tracer_cost(bd, res, scope, steps, harness_steps)
    res.breakdown = bd
    return Analysis(
        trace=trace,
        steps=steps,
        breakdown=bd,
        details=details,
        per_device=res.per_device,
        result=res,
    )
