"""TFD402 fp32-on-tensor-core-gpu."""

from __future__ import annotations

from tfdoctor.model import TENSOR_CORE_CC, Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, pct

SHARED = "../shared/traces"
PFE = f"{SHARED}/PFE_TensorFlow_Profiler/applications/cnn/logs_load"


class Fp32OnTensorCoreGpu(Rule):
    """Matmuls and convolutions run in fp32 on a GPU with tensor cores.

    What it detects:
        A GPU of compute capability 7.0 or newer (Volta, Turing, Ampere, Hopper: tensor cores) where under
        10 % of kernel time is 16-bit, the dtype policy is not mixed, and matmul/convolution kernels make up
        30 % or more of kernel time. XProf says the same as "Only 0.0 % of device computation is 16 bit".

    Why it costs throughput:
        Tensor cores run fp16/bf16 matmuls and convolutions several times faster than fp32 ones, and half
        precision halves the memory traffic of activations.

    Evidence:
        Compute capability, the 16-bit and tensor-core shares of kernel time, the matmul/conv share of kernel
        time, the device-compute share of step time, the dtype policy as recorded.

    Fix:
        ``mixed-precision``: ``keras.mixed_precision.set_global_policy("mixed_float16")`` (``mixed_bfloat16``
        on compute capability 8.0+), with loss scaling (Keras does it in ``fit``). Estimated saving: half of
        the matmul/conv part of device compute.

    Fix safety:
        Unsafe in general: numerics change; the output layer should stay float32; custom training loops
        need a ``LossScaleOptimizer``. tfdoctor keeps the fix only if losses stay within tolerance.
    """

    ID = "TFD402"
    NAME = "fp32-on-tensor-core-gpu"
    DEVICE = True
    EXAMPLES = [
        Example(f"{PFE}/download512-20210202-131913", True, "RTX 5000 (7.5), fp32: XProf says 0.0 % 16 bit"),
        Example(f"{PFE}/download8-20210202-122657", True, "batch 8, fp32: XProf says 0.0 % 16 bit"),
        Example(
            f"{SHARED}/e4040-2023fall-assign2-hd2551/logs/fit/20231107-181856",
            True,
            "T4 (7.5) fp32 CNN: XProf says 0.0 % 16 bit",
        ),
        Example(
            f"{PFE}/download512-20210202-132005",
            False,
            "mixed_float16: 95 % of kernel time is 16 bit",
            {"dtype_policy": "mixed_float16"},
        ),
        Example("sample_traces/rules-well-fed", False, "CPU-only run: no fp16 advice on CPU"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        d = ctx.details
        cc = ctx.compute_capability
        if cc is None:
            return self.undecided("the GPU's compute capability is unknown (tensor cores need 7.0+)")
        if cc < TENSOR_CORE_CC or ctx.mixed_policy or d.fp16_kernel_share >= 0.1:
            return None
        gaps = fig.device_gaps(ctx)
        mm = gaps.matmul_kernel_share if gaps else 0.0
        if mm < 0.3:
            return None
        comp = ctx.share.get("device_compute", 0.0)
        est = 0.5 * mm * comp
        policy = "mixed_bfloat16" if cc >= 8.0 else "mixed_float16"
        ev = [
            Evidence(label="compute capability", value=f"{cc:.1f} (tensor cores)"),
            Evidence(label="16-bit kernels", value=f"{pct(d.fp16_kernel_share)} of kernel time"),
            Evidence(label="matmul / conv kernels", value=f"{pct(mm)} of kernel time"),
            Evidence(
                label="device compute",
                value=f"{pct(comp)} of step time",
                time_ranges_ms=ctx.worst_steps("device_compute"),
            ),
            Evidence(
                label="dtype policy",
                value=ctx.facts.dtype_policy or "not recorded",
                source=ctx.source("model", "compile"),
            ),
        ]
        claim = (
            f"{pct(1 - d.fp16_kernel_share)} of kernel time is fp32 on a compute-capability {cc:.1f} GPU; "
            f"matmul/conv kernels ({pct(mm)} of kernel time) could use tensor cores with {policy}"
        )
        sev = "medium" if est >= 0.1 else "low"
        return self.finding(sev, claim, ev, est_saving=est, fix_ids=["mixed-precision"])


RULE = Fp32OnTensorCoreGpu
