"""TFD404 fp16-on-cpu."""

from __future__ import annotations

from tfdoctor.model import FP16_POLICIES, Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, pct
from tfdoctor.rules.fp32_on_bf16_cpu import BF16_FLAGS


class Fp16OnCpu(Rule):
    """A float16 dtype policy on a CPU-only run: a GPU script's mixed precision where nothing computes float16.

    What it detects:
        A CPU-only run (no GPU/TPU in the harness's devices or the trace) whose Keras dtype policy is
        ``mixed_float16`` or ``float16`` (the Keras mixed precision guide, or a GPU training script, run on
        a laptop or a CPU runtime), with op kernels taking 40 % or more of step time and MatMul/Conv ops
        40 % or more of op time (ops classified by op family, so oneDNN's renamed kernels count).

    Why it costs throughput:
        CPUs have no fast float16 matmul or convolution: oneDNN falls back to Eigen ("oneDNN supports
        DT_HALF only on platforms with AVX-512 ... Falling back to the default Eigen-based
        implementation"), and every layer adds casts. Measured on this project's CPU (AMD EPYC, 2 cores,
        TF 2.21, Keras ``fit``): a small Conv2D model 257 ms a step under ``mixed_float16`` against 64 ms
        in float32 and 24-28 ms under ``mixed_bfloat16``; a 1024-wide MLP 28-32 ms against 22-26 ms
        (float32) and 15-26 ms (bf16).

    Evidence:
        The dtype policy, the op-kernel share of step time, the MatMul/Conv share of op time, the CPU's
        bf16 flags (which policy replaces it).

    Fix:
        ``mixed-precision`` replaces the policy: ``mixed_bfloat16`` on a CPU with AVX512_BF16/AMX,
        ``float32`` otherwise. Estimated saving: half the MatMul/Conv part of op time (float16 matmuls and
        convolutions at least twice as slow as float32 here; 4x on the convolutions above).

    Fix safety:
        Safe for float32 (more precision; a ``LossScaleOptimizer`` left in place still trains). bf16 has
        8 bits of mantissa, fewer than float16's 10; tfdoctor keeps the fix only when losses stay within
        tolerance.
    """

    ID = "TFD404"
    NAME = "fp16-on-cpu"
    EXAMPLES = [
        Example(
            "sample_traces/keras-conv2d-fp16",
            True,
            "Keras Conv2D model under mixed_float16 on an AVX512-BF16 CPU, TensorBoard(profile_batch=2): "
            "244 ms a step against 68 ms in float32 (keras-conv2d)",
        ),
        Example(
            "sample_traces/keras-conv2d-fp16",
            True,
            "the same on a CPU without bf16 instructions: the fix is float32",
            {"extra": {"cpu_flags": "avx2 fma"}},
        ),
        Example("sample_traces/keras-conv2d", False, "the same model in float32"),
        Example("sample_traces/keras-conv2d-bf16", False, "the same model under mixed_bfloat16"),
        Example(
            "sample_traces/keras-conv2d-fp16",
            False,
            "the same policy where the harness saw a GPU (tensor cores compute float16)",
            {"devices": [{"name": "/physical_device:GPU:0", "kind": "GPU"}]},
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        policy = ctx.facts.dtype_policy or ""
        if ctx.is_accelerator_run or policy not in FP16_POLICIES:
            return None
        ops = fig.matmul_bound(ctx)
        if ops is None:
            return None
        flags = sorted(ctx.cpu_flags & set(BF16_FLAGS))
        target = "mixed_bfloat16" if flags else "float32"
        est = ops.op_time_share * ops.matmul_share / 2
        ev = [
            Evidence(label="dtype policy", value=policy, source=ctx.source("model", "compile")),
            *fig.matmul_evidence(ctx, ops),
            Evidence(
                label="CPU bf16 support",
                value=" ".join(flags) if flags else "none (AVX512_BF16/AMX not in the CPU flags)",
            ),
        ]
        claim = (
            f"{policy} on a CPU: MatMul/Conv ops take {pct(ops.matmul_share)} of op time in float16, which "
            f"this CPU has no fast kernels for; {target} "
            + ("computes them natively here" if flags else "runs them at full speed")
        )
        return self.finding(
            "high" if est >= 0.3 else "medium", claim, ev, est_saving=est, fix_ids=["mixed-precision"]
        )


RULE = Fp16OnCpu
