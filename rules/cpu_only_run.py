"""TFD003 cpu-only-run."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule

PFE = "../shared/traces/PFE_TensorFlow_Profiler/applications/cnn"


class CpuOnlyRun(Rule):
    """A CPU-only run: the GPU rules were skipped.

    What it detects:
        Neither the harness nor the trace saw a GPU or TPU. The GPU-only rules (kernel launch, copies,
        fp16, multi-GPU) say nothing on such a run; this one info line says so once.

    Why it costs throughput:
        It does not. (On a CPU, low-precision advice is limited to bfloat16 on CPUs with AMX/AVX512-BF16:
        TFD403; a float16 policy on a CPU is told to leave it: TFD404.)

    Evidence:
        The devices recorded and the rules skipped.

    Fix:
        None needed.

    Fix safety:
        Nothing is changed.
    """

    ID = "TFD003"
    NAME = "cpu-only-run"
    META = True
    EXAMPLES = [
        Example("sample_traces/rules-well-fed", True, "CPU-only"),
        Example(f"{PFE}/logs_load/download8-20210202-122657", False, "GPU run"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        if not ctx.skipped_cpu:
            return None
        devices = ", ".join(d.model or d.name for d in ctx.facts.devices) or "no devices recorded"
        return self.finding(
            "info",
            f"CPU-only run: {len(ctx.skipped_cpu)} GPU rules skipped",
            [
                Evidence(label="devices", value=devices),
                Evidence(label="rules skipped", value=", ".join(ctx.skipped_cpu)),
            ],
        )


RULE = CpuOnlyRun
