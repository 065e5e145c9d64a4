"""TFD501 unfused-small-ops."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, pct, us

PFE = "../shared/traces/PFE_TensorFlow_Profiler/applications/cnn/logs_load"


class UnfusedSmallOps(Rule):
    """Many small ops run one kernel each where XLA would fuse them.

    What it detects:
        XLA is off (not in the facts, no XLA executables or compilations in the trace) and small ops
        dominate. On a GPU: 50+ kernels per step, 70 % of them under 10 µs, and launch/dispatch 30 % or more
        of step time. On a CPU: 50+ op kernels per step, 60 % of them under 20 µs, and those small ops
        covering 20 % or more of step time.

    Why it costs throughput:
        Every op is a separate kernel with its own launch (GPU) or executor scheduling (CPU) and its own
        round trip through memory. XLA fuses chains of elementwise ops into one kernel.

    Evidence:
        Kernels (ops) per step, their median/mean time, the share under the size cut-off, the step-time
        share of small ops or of launch, the most frequent op types, the jit setting as recorded.

    Fix:
        ``xla-jit``: ``model.compile(jit_compile=True)`` or ``tf.function(jit_compile=True)``. Estimated
        saving: half the time of the small ops (GPU: half the launch time of the small kernels, the part
        fusion removes; TFD202 reports the launch overhead as a whole and what else reduces it).

    Fix safety:
        Mostly safe; numerics can differ in the last bits, the first steps compile, changing shapes
        recompile (TFD502), and a few ops have no XLA kernel (the fix then fails and is rolled back).
    """

    ID = "TFD501"
    NAME = "unfused-small-ops"
    EXAMPLES = [
        Example(
            "sample_traces/rules-small-ops-no-xla", True, "12 gelu/sigmoid chains around one matmul, no XLA"
        ),
        Example("sample_traces/rules-small-ops-xla", False, "the same step with jit_compile=True"),
        Example("sample_traces/rules-well-fed", False, "large matmuls dominate"),
        Example(f"{PFE}/download8-20210202-122657", True, "GPU batch 8: 100 kernels/step, 88 % under 10 µs"),
        Example(f"{PFE}/download512-20210202-131913", False, "GPU batch 512: launch 25 %, kernels larger"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        if ctx.facts.jit_compile is True or ctx.facts.auto_jit is True or fig.xla_in_use(ctx):
            return None
        d = ctx.details
        if ctx.has_device_trace:
            launch = ctx.share.get("dispatch", 0.0)
            if d.kernels_per_step < 50 or d.small_kernel_share < 0.7 or launch < 0.3:
                return None
            small = d.kernels_per_step * d.small_kernel_share
            ev = [
                Evidence(
                    label="small kernels",
                    value=f"{small:.0f} of {d.kernels_per_step:.0f} per step under 10 µs (mean of all {us(d.kernel_mean_us)})",
                ),
                Evidence(
                    label="their share of the launches",
                    value=f"{pct(d.small_kernel_share * launch)} of step time (of {pct(launch)} launching, TFD202)",
                    time_ranges_ms=ctx.worst_steps("dispatch"),
                ),
            ]
            # what fusion removes: the launches of the small kernels, about half of them (chains of
            # elementwise ops fuse; matmuls/convs stay) -- not TFD202's whole launch share
            claim = (
                f"{small:.0f} of {d.kernels_per_step:.0f} kernels per step run under 10 µs each, one launch per op; "
                "XLA is off and would fuse their elementwise chains into fewer kernels"
            )
            est = 0.5 * launch * d.small_kernel_share
        elif ctx.is_accelerator_run:
            return None  # GPU run without device events: TFD002 reports it
        else:
            ops = fig.cpu_ops(ctx)
            if ops.per_step < 50 or ops.small_share_count < 0.6 or ops.small_share_time < 0.2:
                return None
            ev = [
                Evidence(
                    label="op kernels",
                    value=f"{ops.per_step:.0f} per step, median {us(ops.median_us)}, {pct(ops.small_share_count)} under {fig.SMALL_US:.0f} µs",
                ),
                Evidence(
                    label="small ops",
                    value=f"cover {pct(ops.small_share_time)} of step time",
                    time_ranges_ms=ctx.worst_steps("device_compute"),
                ),
                Evidence(label="most frequent ops", value=", ".join(f"{t} ×{c}" for t, c in ops.top_types)),
            ]
            claim = (
                f"{ops.per_step:.0f} op kernels per step, {pct(ops.small_share_count)} under {fig.SMALL_US:.0f} µs, "
                f"covering {pct(ops.small_share_time)} of step time; XLA is off"
            )
            est = 0.5 * ops.small_share_time
        ev.append(
            Evidence(
                label="jit_compile", value=str(ctx.facts.jit_compile), source=ctx.source("compile", "step_fn")
            )
        )
        return self.finding("medium" if est >= 0.1 else "low", claim, ev, est_saving=est, fix_ids=["xla-jit"])


RULE = UnfusedSmallOps
