"""TFD202 kernel-launch-overhead."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, pct, severity_for, us

PFE = "../shared/traces/PFE_TensorFlow_Profiler/applications/cnn/logs_load"


class KernelLaunchOverhead(Rule):
    """The GPU waits for the host to launch its kernels.

    What it detects:
        On a GPU trace: 20 % or more of step time is host-side op dispatch / kernel launch while the busiest
        GPU is idle for 40 % or more of the step. The device's idle gaps are split like HTA does: idle while
        the host is launching (launch-bound) vs idle while the host does something else.

    Why it costs throughput:
        Each kernel launch costs the host a few microseconds; when kernels are tiny (small batch, many
        small ops) the GPU finishes them faster than the host can issue them and sits idle between them.
        XProf reports this as "Kernel Launch" time and suggests ``TF_GPU_THREAD_MODE=gpu_private`` when
        tf.data threads compete with the launching threads.

    Evidence:
        Launch/dispatch share of step time, GPU busy share, idle split (launching / other), kernels per
        step, mean kernel time, share of kernels under 10 µs, the steps with the most launch time.

    Fix:
        ``batch-scale`` (more work per kernel) when the batch is small, ``xla-jit`` (fuses small kernels:
        fewer launches) when XLA is off; advice ``gpu-private-threads`` (``TF_GPU_THREAD_MODE=gpu_private``).
        Estimated saving: half the launch share.

    Fix safety:
        ``xla-jit`` is safe for most models (numerics can differ slightly; first steps compile);
        ``batch-scale`` changes the optimisation (learning rate is scaled with it) and needs memory.
    """

    ID = "TFD202"
    NAME = "kernel-launch-overhead"
    DEVICE = True
    EXAMPLES = [
        Example(
            f"{PFE}/download8-20210202-122657",
            True,
            "RTX 5000, batch 8: XProf 61.5 % kernel launch",
            {"batch_size": 8},
        ),
        Example(
            f"{PFE}/download8-20210202-123317",
            True,
            "batch 8, mixed_float16: XProf 71.3 %",
            {"batch_size": 8},
        ),
        Example(
            f"{PFE}/download512-20210202-132005", True, "batch 512 fp16: XProf 36.9 %", {"batch_size": 512}
        ),
        Example(
            f"{PFE}/download512-20210202-131913",
            False,
            "batch 512 fp32: GPU busy 66 % of the step",
            {"batch_size": 512},
        ),
        Example("sample_traces/rules-eager-loop", False, "CPU-only run: no GPU rules"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        launch = ctx.share.get("dispatch", 0.0)
        gaps = fig.device_gaps(ctx)
        if gaps is None or launch < 0.2 or gaps.idle_share < 0.4:
            return None
        d = ctx.details
        sev = severity_for(launch, 0.5, 0.3, 0.2)
        assert sev is not None
        ev = [
            Evidence(
                label="launch / dispatch",
                value=f"{pct(launch)} of step time",
                time_ranges_ms=ctx.worst_steps("dispatch"),
            ),
            Evidence(
                label=f"{gaps.device} idle",
                value=f"{pct(gaps.idle_share)} of step time: {pct(gaps.idle_while_launching)} while the host launches, "
                f"{pct(gaps.idle_other)} while it does other work",
            ),
            Evidence(
                label="kernels",
                value=f"{d.kernels_per_step:.0f} per step, mean {us(d.kernel_mean_us)}, "
                f"{pct(d.small_kernel_share)} under 10 µs",
            ),
        ]
        fixes = []
        bs = ctx.batch_size
        if bs is not None:
            ev.append(
                Evidence(label="batch size", value=str(bs), source=ctx.source("batch", "dataset", "fit"))
            )
        if bs is None or bs <= 64:
            fixes.append("batch-scale")
        jit = ctx.facts.jit_compile is True or fig.xla_in_use(ctx)
        if not jit:
            fixes.append("xla-jit")
        fixes.append("gpu-private-threads")
        claim = (
            f"{pct(launch)} of step time is spent launching kernels while the GPU idles {pct(gaps.idle_share)}; "
            f"{d.kernels_per_step:.0f} kernels per step averaging {us(d.kernel_mean_us)}"
        )
        return self.finding(sev, claim, ev, est_saving=0.5 * launch, fix_ids=fixes)


RULE = KernelLaunchOverhead
