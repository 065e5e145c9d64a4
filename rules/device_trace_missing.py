"""TFD002 device-trace-missing."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule

PFE = "../shared/traces/PFE_TensorFlow_Profiler/applications/cnn"


class DeviceTraceMissing(Rule):
    """A GPU run without device events: the GPU rules could not decide.

    What it detects:
        The harness saw a GPU, or the trace has a GPU plane, but there are no kernels or copies in it
        during the steps (device tracing failed: CUPTI unavailable or without permission, or the plane is
        empty). The GPU rules (launch overhead, copies, precision) are listed as not evaluated.

    Why it costs throughput:
        It does not; without device events the breakdown cannot tell kernels from launches from idle time.

    Evidence:
        The device planes present and empty, the rules not evaluated.

    Fix:
        Make CUPTI available to the profiler (``libcupti`` on the library path; on some systems the
        ``NVreg_RestrictProfilingToAdminUsers=0`` driver option) and profile again.

    Fix safety:
        Nothing is changed.
    """

    ID = "TFD002"
    NAME = "device-trace-missing"
    META = True
    EXAMPLES = [
        Example(f"{PFE}/log_prefetch/256_20210203-204242", True, "RTX 5000 run whose GPU plane is EMPTY"),
        Example(f"{PFE}/logs_load/download8-20210202-122657", False, "GPU plane with kernels"),
        Example("sample_traces/rules-well-fed", False, "CPU-only run"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        if not ctx.skipped_no_device_trace:
            return None
        planes = (
            [p.name for p in ctx.analysis.trace.device_planes() if p.device_kind in ("GPU", "TPU")]
            if ctx.analysis
            else []
        )
        return self.undecided(
            "the run had a GPU but the trace holds no device events in the steps (device tracing failed)",
            claim=f"{len(ctx.skipped_no_device_trace)} GPU rules could not decide: no device events in the trace",
            evidence=[
                Evidence(label="device planes", value=", ".join(planes) + " (empty)" if planes else "none"),
                Evidence(label="rules not evaluated", value=", ".join(ctx.skipped_no_device_trace)),
            ],
        )


RULE = DeviceTraceMissing
