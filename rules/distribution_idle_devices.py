"""TFD602 distribution-idle-devices."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, pct
from tfdoctor.rules._distribution import multi_replica, summary

V100 = "sample_traces/third_party/tensorflow-profiler/demo/plugins/profile/GPU-multi-worker"
PFE = "../shared/traces/PFE_TensorFlow_Profiler/applications/cnn/logs_load/download512-20210202-131913"


class IdleReplicaDevices(Rule):
    """Accelerators in the trace that run no kernel while the others train.

    What it detects:
        The trace holds two or more GPU/TPU planes and at least one of them runs no kernel inside the
        profiled steps (copies alone do not count) while another does.

    Why it costs throughput:
        An accelerator that is allocated to the job but computes nothing adds no throughput: with a
        strategy it means replicas were placed on fewer devices than the job holds (a device list, a
        ``CUDA_VISIBLE_DEVICES`` mismatch, one process per GPU without a cluster), without one the other
        devices sit idle.

    Evidence:
        The devices with kernels and their busy share, the idle ones, the devices that only copied.

    Fix:
        Advice ``mirrored-strategy`` (put every device in the strategy: ``MirroredStrategy()`` takes all
        visible GPUs) and ``distribute-dataset`` (each replica needs its own share of the batch).
        Estimated saving: 80 % of the idle devices' share of the job.

    Fix safety:
        Advice only: more replicas change the global batch; the learning rate may need re-tuning.
    """

    ID = "TFD602"
    NAME = "distribution-idle-devices"
    DEVICE = True
    EXAMPLES = [
        Example(V100, True, "8x V100 BERT: kernels on GPU 4 and 6 only"),
        Example(PFE, False, "one Quadro RTX 5000, busy"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        s = summary(ctx)
        if s is None:
            return None
        devices = [r for r in s.replicas if r.kind == "device"]
        active = [r for r in devices if r.active]
        if len(devices) < 2 or not active or not s.idle_devices:
            return None
        n, k = len(devices), len(s.idle_devices)
        ev = [
            Evidence(
                label="devices with kernels",
                value=", ".join(f"{r.name} busy {pct(r.busy_share)}" for r in active),
            ),
            Evidence(label="idle devices", value=", ".join(s.idle_devices)),
            Evidence(
                label="strategy",
                value=f"{ctx.facts.strategy or 'not recorded'}, {ctx.facts.num_replicas} replica(s)"
                if ctx.facts.strategy or multi_replica(ctx)
                else "not recorded",
            ),
        ]
        ev += [Evidence(label="note", value=x) for x in s.notes]
        claim = f"{k} of {n} accelerators ran no kernel in the profiled steps; only {len(active)} trained"
        severity = "high" if k / n >= 0.5 else "medium"
        return self.finding(
            severity, claim, ev, est_saving=0.8 * k / n, fix_ids=["mirrored-strategy", "distribute-dataset"]
        )


RULE = IdleReplicaDevices
