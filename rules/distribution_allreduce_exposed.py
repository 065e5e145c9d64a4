"""TFD605 distribution-allreduce-exposed."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, ms, pct
from tfdoctor.rules._distribution import summary

MIN_SHARE = 0.1  # collective time under this share of the step is not worth a finding
MAX_OVERLAP = 0.3


class AllreduceNotOverlapped(Rule):
    """All-reduce time sits on the critical path instead of overlapping compute.

    What it detects:
        Collective (all-reduce) time is at least 10 % of the step and less than 30 % of it overlaps
        compute (device kernels, or TF op kernels on the CPU) on the same replica or worker.

    Why it costs throughput:
        Time in a collective that no compute hides is added to every step: the devices wait for the
        gradients to travel. This is the usual reason scaling efficiency falls short of 80-95 %.

    Evidence:
        The collective share of step time, its overlap with compute, per worker or device.

    Fix:
        Advice ``overlap-allreduce``: larger per-replica batches (more compute per byte reduced), fewer
        and larger gradient packs (``tf.distribute.experimental.CommunicationOptions(bytes_per_pack=...)``),
        NCCL on GPUs, mixed precision (half the bytes), fewer steps between reductions. A straggler
        (TFD606) also shows up as collective wait. Estimated saving: half the exposed collective time.

    Fix safety:
        Advice only: the batch and communication options change the run's numerics or its memory.
    """

    ID = "TFD605"
    NAME = "distribution-allreduce-exposed"
    HEADLINE = "Communication-bound"
    EXAMPLES = [
        Example(
            "sample_traces/distribution-two-workers", True, "two CPU workers, MultiWorkerMirroredStrategy"
        ),
        Example(
            "sample_traces/distribution-mirrored-cpu", False, "two logical CPU replicas: 19 %, overlapped"
        ),
        Example(
            "sample_traces/third_party/tensorflow-profiler/demo/plugins/profile/GPU-multi-worker",
            False,
            "no collectives traced",
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        s = summary(ctx)
        if s is None or s.collective_share < MIN_SHARE or s.collective_overlap >= MAX_OVERLAP:
            return None
        exposed = s.collective_share * (1 - s.collective_overlap)
        parts = [r for r in (s.workers or s.replicas) if r.collective_ms > 0]
        ev = [
            Evidence(label="collective share", value=f"{pct(s.collective_share)} of step time"),
            Evidence(label="overlapped with compute", value=pct(s.collective_overlap)),
        ]
        ev += [
            Evidence(
                label=r.name,
                value=f"{ms(r.collective_ms)} collective of {ms(r.step_ms)}/step, {pct(r.collective_overlap)} overlapped",
            )
            for r in parts[:8]
        ]
        if s.straggler:
            ev.append(
                Evidence(label="straggler", value=f"{s.straggler}: part of this is waiting for it (TFD606)")
            )
        severity = "high" if exposed >= 0.25 else "medium"
        claim = f"all-reduce takes {pct(s.collective_share)} of step time and only {pct(s.collective_overlap)} of it overlaps compute"
        return self.finding(severity, claim, ev, est_saving=0.5 * exposed, fix_ids=["overlap-allreduce"])


RULE = AllreduceNotOverlapped
