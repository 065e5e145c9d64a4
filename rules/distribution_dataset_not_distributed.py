"""TFD603 distribution-dataset-not-distributed."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule
from tfdoctor.rules._distribution import loop_source, multi_replica

MIRRORED = "sample_traces/distribution-mirrored-cpu"
SRC = "sample_traces/distribution-source"


class DatasetNotDistributed(Rule):
    """A custom loop under a multi-replica strategy feeds ``strategy.run`` from a plain dataset.

    What it detects:
        The run has a strategy with two or more replicas, a custom training loop (``strategy.run``), and
        the script (read with ``ast``, never run) calls neither ``experimental_distribute_dataset`` nor
        ``distribute_datasets_from_function``.

    Why it costs throughput:
        Every replica then receives the whole batch instead of its shard: each one computes the global
        batch (N times the work for the same examples), and the input is copied from one device to all.

    Evidence:
        The strategy and replica count, the ``strategy.run`` call in the script, the absence of a dataset
        distribution call.

    Fix:
        Advice ``distribute-dataset``: ``dist = strategy.experimental_distribute_dataset(dataset)`` (the
        dataset batched by the *global* batch size) and iterate ``dist``. Estimated saving: ``1 - 1/N``
        of the compute.

    Fix safety:
        Advice only: each replica sees 1/N of the batch, so the loss must be scaled by the global batch
        (see TFD604).
    """

    ID = "TFD603"
    NAME = "distribution-dataset-not-distributed"
    NEEDS_STEPS = False
    EXAMPLES = [
        Example(MIRRORED, False, "examples/mirrored.py: experimental_distribute_dataset"),
        Example(
            MIRRORED,
            True,
            "a loop that iterates the plain dataset into strategy.run",
            {"source": {"step_fn": f"{SRC}/plain_dataset_loop.py:32"}},
        ),
        Example(
            MIRRORED,
            False,
            "the same loop on one replica",
            {"num_replicas": 1, "source": {"step_fn": f"{SRC}/plain_dataset_loop.py:32"}},
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        if not multi_replica(ctx) or ctx.facts.loop_kind == "keras_fit":
            return None
        src = loop_source(ctx)
        if src is None or not src.run_calls or src.distribute_calls:
            return None
        n = ctx.facts.num_replicas
        where = f"{src.path.name}:{src.run_calls[0]}"
        ev = [
            Evidence(label="strategy", value=f"{ctx.facts.strategy}, {n} replicas"),
            Evidence(label="strategy.run", value=f"called at {where}", source=where),
            Evidence(
                label="dataset distribution",
                value="no experimental_distribute_dataset / distribute_datasets_from_function in the script",
            ),
        ]
        claim = f"strategy.run gets batches from a plain dataset: each of the {n} replicas computes the whole batch"
        return self.finding("high", claim, ev, est_saving=1 - 1 / n, fix_ids=["distribute-dataset"])


RULE = DatasetNotDistributed
