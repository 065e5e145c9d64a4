"""TFD601 single-gpu-of-many."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, pct

SHARED = "../shared/traces"
PFE = f"{SHARED}/PFE_TensorFlow_Profiler/applications/cnn/logs_load"
_TWO_GPUS = {
    "devices": [
        {
            "name": "/physical_device:GPU:0",
            "kind": "GPU",
            "model": "Quadro RTX 5000",
            "compute_capability": "7.5",
        },
        {
            "name": "/physical_device:GPU:1",
            "kind": "GPU",
            "model": "Quadro RTX 5000",
            "compute_capability": "7.5",
        },
    ]
}
_ONE_DEVICE = ("", "_DefaultDistributionStrategy", "DefaultDistributionStrategy", "OneDeviceStrategy")


class SingleGpuOfMany(Rule):
    """Several GPUs are visible but the training uses one.

    What it detects:
        The harness saw two or more GPUs, no multi-device ``tf.distribute`` strategy is active (none, the
        default strategy or ``OneDeviceStrategy``; one replica), and the trace (when there is one) shows
        kernels on a single GPU.

    Why it costs throughput:
        The other GPUs sit idle. Data parallelism (``MirroredStrategy``) splits each global batch over all
        of them; throughput scales close to linearly for most models that are not input-bound.

    Evidence:
        The GPUs visible, the strategy and replica count recorded, the GPUs with activity in the trace and
        their busy share.

    Fix:
        Advice ``mirrored-strategy`` (build and compile the model under
        ``tf.distribute.MirroredStrategy().scope()``) and ``distribute-dataset`` (batch by the global batch
        size; Keras ``fit`` distributes the dataset). Estimated saving: 80 % of ``1 - 1/n_gpus``.

    Fix safety:
        Advice only: the global batch grows with the replicas (learning rate to re-tune); custom loops need
        ``strategy.run`` and a distributed dataset.
    """

    ID = "TFD601"
    NAME = "single-gpu-of-many"
    DEVICE = True
    NEEDS_STEPS = False
    EXAMPLES = [
        Example(
            f"{PFE}/download512-20210202-131913",
            True,
            "the RTX 5000 run as if a second GPU were visible",
            _TWO_GPUS,
        ),
        Example(
            f"{PFE}/download512-20210202-131913",
            False,
            "the same run with its one GPU",
            {"devices": _TWO_GPUS["devices"][:1]},
        ),
        Example(
            "sample_traces/third_party/tensorflow-profiler/demo/plugins/profile/GPU-multi-worker",
            False,
            "8x V100 under MultiWorkerMirroredStrategy",
            {
                "devices": [{"name": f"/physical_device:GPU:{i}", "kind": "GPU"} for i in range(8)],
                "strategy": "MultiWorkerMirroredStrategy",
                "num_replicas": 16,
            },
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        gpus = ctx.facts.gpus
        if len(gpus) < 2:
            return None
        strategy = ctx.facts.strategy or ""
        if strategy not in _ONE_DEVICE or ctx.facts.num_replicas > 1:
            return None
        ev = [
            Evidence(
                label="GPUs visible", value=f"{len(gpus)}: " + ", ".join(g.model or g.name for g in gpus)
            ),
            Evidence(label="strategy", value=f"{strategy or 'none'}, {ctx.facts.num_replicas} replica"),
        ]
        if ctx.analysis is not None and ctx.has_device_trace:
            busy = ctx.details.per_device_busy
            active = [n for n, b in busy.items() if b > 0]
            if len(active) > 1:
                return None
            ev.append(
                Evidence(
                    label="GPUs active in the trace",
                    value=", ".join(f"{n} busy {pct(b)}" for n, b in busy.items()),
                )
            )
        n = len(gpus)
        est = 0.8 * (1 - 1 / n)
        claim = f"{n} GPUs are visible but training runs on one; no tf.distribute strategy is active"
        return self.finding(
            "high", claim, ev, est_saving=est, fix_ids=["mirrored-strategy", "distribute-dataset"]
        )


RULE = SingleGpuOfMany
