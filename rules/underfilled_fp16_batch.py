"""TFD401 underfilled-fp16-batch."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, pct, us

PFE = "../shared/traces/PFE_TensorFlow_Profiler/applications/cnn/logs_load"


class UnderfilledFp16Batch(Rule):
    """Mixed precision is on, but the batch is too small to keep the GPU busy.

    What it detects:
        A mixed-precision run (``mixed_float16``/``mixed_bfloat16`` policy, or half of kernel time in
        16-bit kernels) where the busiest GPU is idle 60 % or more of the step and kernels are tiny (70 %
        under 10 µs), or the batch size is not a multiple of 8 (tensor cores need dims in multiples of 8;
        XProf's tensor-core eligibility).

    Why it costs throughput:
        Half precision makes each kernel faster, so a small batch finishes even sooner and the GPU waits on
        the host for longer: the fp16 speed-up is lost. Tensor cores only engage for fp16 matmuls/convs with
        dimensions in multiples of 8.

    Evidence:
        16-bit share of kernel time, tensor-core share of kernel time, the GPU's busy and idle shares, the
        share of kernels under 10 µs, batch size and whether it is a multiple of 8.

    Fix:
        ``batch-scale``: a larger batch (a multiple of 8) with the learning rate scaled. Estimated saving:
        half the GPU's idle share.

    Fix safety:
        Changes the optimisation (batch size and learning rate); needs device memory.
    """

    ID = "TFD401"
    NAME = "underfilled-fp16-batch"
    HEADLINE = "Launch-bound"
    DEVICE = True
    EXAMPLES = [
        Example(
            f"{PFE}/download8-20210202-123317",
            True,
            "mixed_float16 at batch 8: GPU busy 14 %",
            {"batch_size": 8, "dtype_policy": "mixed_float16"},
        ),
        Example(
            f"{PFE}/download512-20210202-132005",
            False,
            "mixed_float16 at batch 512: GPU busy ~50 %",
            {"batch_size": 512, "dtype_policy": "mixed_float16"},
        ),
        Example(
            f"{PFE}/download8-20210202-122657",
            False,
            "batch 8 but fp32: TFD202/TFD402's case",
            {"batch_size": 8},
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        d = ctx.details
        if not (ctx.mixed_policy or d.fp16_kernel_share >= 0.5):
            return None
        gaps = fig.device_gaps(ctx)
        if gaps is None or gaps.idle_share < 0.6:
            return None
        bs = ctx.batch_size
        not_mult8 = bs is not None and bs % 8 != 0
        if d.small_kernel_share < 0.7 and not not_mult8:
            return None
        ev = [
            Evidence(
                label="16-bit kernels",
                value=f"{pct(d.fp16_kernel_share)} of kernel time (policy {ctx.facts.dtype_policy or 'not recorded'})",
            ),
            Evidence(label="tensor cores", value=f"{pct(d.tensor_core_share)} of kernel time"),
            Evidence(
                label=f"{gaps.device}",
                value=f"busy {pct(gaps.busy_share)}, idle {pct(gaps.idle_share)} of step time",
            ),
            Evidence(
                label="kernels", value=f"{pct(d.small_kernel_share)} under 10 µs, mean {us(d.kernel_mean_us)}"
            ),
        ]
        if bs is not None:
            ev.append(
                Evidence(
                    label="batch size",
                    value=f"{bs}" + (" (not a multiple of 8)" if not_mult8 else ""),
                    source=ctx.source("batch", "dataset", "fit"),
                )
            )
        claim = f"mixed precision is on but the GPU idles {pct(gaps.idle_share)} of the step"
        claim += (
            f"; batch {bs} " + ("is not a multiple of 8" if not_mult8 else "is too small to fill it")
            if bs
            else "; kernels are tiny"
        )
        sev = "high" if gaps.idle_share >= 0.75 else "medium"
        return self.finding(sev, claim, ev, est_saving=0.5 * gaps.idle_share, fix_ids=["batch-scale"])


RULE = UnderfilledFp16Batch
