"""TFD102 repeated-preprocessing."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, pct

_CACHE_STAGES = ("MemoryCache", "Cache", "CacheDataset", "Snapshot", "SaveDataset", "LoadDataset")
_MAP_STAGES = (
    "Map",
    "ParallelMap",
    "ParallelMapV2",
    "MapAndBatch",
    "ParallelInterleave",
    "ParallelInterleaveV4",
)
_RANDOM_HINTS = ("random", "augment", "flip", "crop", "jitter", "noise", "shuffle")


class RepeatedPreprocessing(Rule):
    """Deterministic preprocessing is recomputed for every batch of every epoch.

    What it detects:
        A tf.data pipeline with a ``map`` (or fused map-and-batch) stage that costs input time, and no
        ``cache()`` or ``snapshot()`` anywhere. The map is taken as deterministic unless the harness saw a
        random op in it (``tf.random``/``stateless_random``/augmentation).

    Why it costs throughput:
        Decoding, resizing and normalising the same examples again each epoch is pure repeated work on
        the host. ``cache()`` after the deterministic part (in memory, or to a file) or
        ``tf.data.Dataset.snapshot`` does it once.

    Evidence:
        The map stage's time per step (self time in the trace), the input-wait share, the dataset's
        stages, the user's ``map`` source line.

    Fix:
        ``tfdata-cache``: ``.cache()`` right after the deterministic ``map`` (before shuffle/augmentation),
        or ``snapshot()`` when the data does not fit in memory. Estimated saving: the smaller of the
        input-wait share and the map's share of step time.

    Fix safety:
        Unsafe when the map is random (augmentation would be frozen to one draw) or the data does not fit
        in memory; the first epoch is not faster.
    """

    ID = "TFD102"
    NAME = "repeated-preprocessing"
    EXAMPLES = [
        Example("sample_traces/rules-input-sequential-map", True, "a heavy map, no cache"),
        Example("sample_traces/rules-input-autotuned-saturated", True, "parallel heavy map, no cache"),
        Example("sample_traces/rules-well-fed", False, "cache() after the map"),
        Example("sample_traces/rules-input-generator", False, "no map stage (a generator)"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        ops = ctx.stage_ops()
        stage_names = {s.name for s in ctx.details.tfdata_stages}
        if any(o in ("cache", "snapshot") for o in ops) or stage_names & set(_CACHE_STAGES):
            return None
        maps = [s for s in ctx.facts.dataset if s.op.lower() in ("map", "interleave")]
        if any(any(h in s.detail.lower() for h in _RANDOM_HINTS) for s in maps):
            return None
        map_times = [(n, p, t) for n, p, t in fig.tfdata_self_times(ctx) if n in _MAP_STAGES]
        if not maps and not map_times:
            return None
        share = ctx.share.get("input_wait", 0.0)
        map_ms = sum(t for _, _, t in map_times)
        map_share = map_ms / ctx.avg_step_ms if ctx.avg_step_ms else 0.0
        if share < 0.05 or map_share < 0.05:
            return None
        est = min(share, map_share)
        ev = [
            Evidence(
                label="map time",
                value=f"{map_ms:.2f} ms/step in {', '.join(sorted({n for n, _, _ in map_times})) or 'map'}",
                source=ctx.source("dataset_map", "dataset"),
            ),
            Evidence(label="input wait", value=pct(share), time_ranges_ms=ctx.worst_steps("input_wait")),
        ]
        if ops:
            ev.append(Evidence(label="dataset", value=" → ".join(s.op for s in ctx.facts.dataset)))
        claim = (
            f"the map stage spends {map_ms:.2f} ms per step ({pct(map_share)} of step time) redoing the same "
            "preprocessing every epoch; no cache() or snapshot()"
        )
        return self.finding(
            "medium" if est >= 0.1 else "low", claim, ev, est_saving=est, fix_ids=["tfdata-cache"]
        )


RULE = RepeatedPreprocessing
