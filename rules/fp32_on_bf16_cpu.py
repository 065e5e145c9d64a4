"""TFD403 fp32-on-bf16-cpu."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, pct

BF16_FLAGS = ("amx_bf16", "avx512_bf16")


class Fp32OnBf16Cpu(Rule):
    """Matmul-heavy fp32 training on a CPU that computes bfloat16 natively.

    What it detects:
        A CPU-only run whose CPU has bfloat16 instructions (``amx_bf16`` or ``avx512_bf16`` in the CPU
        flags the harness recorded), a float32 dtype policy, op kernels taking 40 % or more of step time and
        MatMul/Conv ops 40 % or more of op time. Ops are classified by op type family
        (``tfdoctor.analysis.ops``), so oneDNN's renamed kernels count (``_MklNativeFusedConv2D``,
        ``_MklNativeConv2DBackpropFilterWithBias``, ``_MklFusedMatMul``, ...). Never fires without those flags: no fp16/bf16 advice on a
        CPU that would emulate it.

    Why it costs throughput:
        oneDNN runs bf16 matmuls and convolutions on AMX/AVX512-BF16 units at several times the fp32 rate.

    Evidence:
        The bf16 CPU flags, op-kernel share of step time, MatMul/Conv share of op time, the dtype policy.

    Fix:
        ``mixed-precision`` with ``mixed_bfloat16`` (no loss scaling needed). Estimated saving: a third of
        the MatMul/Conv part of op time.

    Fix safety:
        Unsafe in general: bf16 has 8 bits of mantissa; keep the output layer in float32. tfdoctor keeps the
        fix only when losses stay within tolerance.
    """

    ID = "TFD403"
    NAME = "fp32-on-bf16-cpu"
    EXAMPLES = [
        Example(
            "sample_traces/rules-well-fed",
            True,
            "512-wide dense layers, the recording CPU has AMX-BF16",
            {"cpu_count": 2, "cpu_flags": ["amx_bf16", "amx_tile", "avx512_bf16", "avx512f"]},
        ),
        Example(
            "sample_traces/rules-well-fed",
            False,
            "the same run on a CPU without bf16 instructions",
            {"cpu_count": 2, "cpu_flags": ["avx2", "fma"]},
        ),
        Example(
            "sample_traces/keras-conv2d",
            True,
            "Keras Conv2D model, TensorBoard(profile_batch=2): oneDNN kernels (_MklNativeFusedConv2D, "
            "_MklNativeConv2DBackpropFilter...) on an AVX512-BF16 CPU",
        ),
        Example("sample_traces/keras-dense", True, "Keras Dense model (512-wide), one profiled step"),
        Example("sample_traces/keras-conv2d-bf16", False, "the Conv2D model under mixed_bfloat16"),
        Example(
            "sample_traces/rules-small-ops-no-xla",
            False,
            "elementwise ops dominate, not matmuls",
            {"cpu_count": 2, "cpu_flags": ["amx_bf16", "amx_tile", "avx512_bf16", "avx512f"]},
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        if ctx.is_accelerator_run or ctx.mixed_policy:
            return None
        flags = sorted(ctx.cpu_flags & set(BF16_FLAGS))
        if not flags:
            return None
        ops = fig.matmul_bound(ctx)
        if ops is None:
            return None
        est = ops.op_time_share * ops.matmul_share / 3
        ev = [
            Evidence(label="CPU bf16 support", value=" ".join(flags)),
            *fig.matmul_evidence(ctx, ops),
            Evidence(
                label="dtype policy",
                value=ctx.facts.dtype_policy or "not recorded",
                source=ctx.source("model", "compile"),
            ),
        ]
        claim = (
            f"MatMul/Conv ops take {pct(ops.matmul_share)} of op time in float32; "
            f"this CPU has {'/'.join(flags)} for mixed_bfloat16"
        )
        return self.finding(
            "medium" if est >= 0.1 else "low", claim, ev, est_saving=est, fix_ids=["mixed-precision"]
        )


RULE = Fp32OnBf16Cpu
