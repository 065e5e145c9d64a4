"""TFD604 distribution-loss-not-scaled."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule
from tfdoctor.rules._distribution import loop_source, multi_replica

MIRRORED = "sample_traces/distribution-mirrored-cpu"
SRC = "sample_traces/distribution-source"


class LossNotScaledByGlobalBatch(Rule):
    """The per-replica loss is a plain mean, not scaled by the global batch size.

    What it detects:
        A custom loop under a multi-replica strategy whose replica function (the one given to
        ``strategy.run``, and the helpers it calls) takes ``tf.reduce_mean`` of the loss and neither calls
        ``tf.nn.compute_average_loss`` nor divides by a global batch size (read with ``ast``).

    Why it costs throughput:
        Gradients are *summed* across replicas by the all-reduce, so a per-replica mean makes the update
        N times too large: training diverges or needs a smaller learning rate, and the scaling from more
        replicas is lost to worse convergence per step (time-to-accuracy, not step time).

    Evidence:
        The ``reduce_mean`` line in the replica function, the strategy and replica count.

    Fix:
        Advice ``global-batch-loss``: ``loss = tf.nn.compute_average_loss(per_example_loss,
        global_batch_size=GLOBAL_BATCH)`` with a loss built with ``reduction="none"``.

    Fix safety:
        Advice only: it changes the numbers the optimizer sees (that is the point); compare loss curves.
    """

    ID = "TFD604"
    NAME = "distribution-loss-not-scaled"
    NEEDS_STEPS = False
    EXAMPLES = [
        Example(MIRRORED, False, "examples/mirrored.py: compute_average_loss"),
        Example(
            MIRRORED,
            True,
            "tf.reduce_mean of the per-example loss inside strategy.run",
            {"source": {"step_fn": f"{SRC}/mean_loss_loop.py:25"}},
        ),
        Example(
            MIRRORED,
            False,
            "the same loop on one replica: a mean is right there",
            {"num_replicas": 1, "source": {"step_fn": f"{SRC}/mean_loss_loop.py:25"}},
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        if not multi_replica(ctx) or ctx.facts.loop_kind == "keras_fit":
            return None
        src = loop_source(ctx)
        if src is None or not src.mean_losses or src.scaled:
            return None
        n = ctx.facts.num_replicas
        where = f"{src.path.name}:{src.mean_losses[0]}"
        ev = [
            Evidence(label="loss", value=f"tf.reduce_mean in the replica function at {where}", source=where),
            Evidence(label="replica function", value=", ".join(sorted(set(src.replica_fns)))),
            Evidence(
                label="strategy", value=f"{ctx.facts.strategy}, {n} replicas: gradients summed over {n}"
            ),
        ]
        claim = (
            f"the loss inside strategy.run is a per-replica mean: summed over {n} replicas the gradients are "
            f"{n}x too large (use tf.nn.compute_average_loss with the global batch)"
        )
        return self.finding("medium", claim, ev, est_saving=0.0, fix_ids=["global-batch-loss"])


RULE = LossNotScaledByGlobalBatch
