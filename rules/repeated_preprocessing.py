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
#: busy host threads per core from which the model's own ops occupy the cores: a core the pipeline's
#: threads take is then one the step waits for (a mostly idle host runs the pipeline for free)
BUSY_HOST = 0.5
MIN_COST = 0.05  # the preprocessing's cost (input wait, or the busy host's time it takes) worth a finding


class RepeatedPreprocessing(Rule):
    """Deterministic preprocessing is recomputed for every batch of every epoch.

    What it detects:
        A tf.data pipeline with a ``map`` (or fused map-and-batch) stage that costs time, and no
        ``cache()`` or ``snapshot()`` anywhere. The cost is either input wait (5 % of step time or more,
        with the map taking 5 % or more), or, on a CPU-only run whose cores are busy (half of them or more on
        average during the steps), the host time tf.data's threads spend running the pipeline's
        functions (5 % or more of the busy host's time): there the model computes on the same cores, so a
        pipeline that keeps up (TensorFlow injects a prefetch into a pipeline without one) shows no
        input wait and slows every step instead. The map is taken as deterministic unless the harness
        saw a random op in the first map (``tf.random``/``stateless_random``/augmentation: the stage
        detail names it); a random map after a deterministic one leaves the deterministic one to cache.

    Why it costs throughput:
        Decoding, resizing and normalising the same examples again each epoch is pure repeated work on
        the host. ``cache()`` after the deterministic part (in memory, or to a file) or
        ``tf.data.Dataset.snapshot`` does it once.

    Evidence:
        The map stage's time per step (self time in the trace), the input-wait share, on a busy CPU-only
        host the core time of the pipeline's functions per step and the busy host threads, the dataset's
        stages, the user's ``map`` source line.

    Fix:
        ``tfdata-cache``: ``.cache()`` right after the deterministic ``map`` (before shuffle/augmentation),
        or ``snapshot()`` when the data does not fit in memory. Estimated saving: the smaller of the
        input-wait share and the map's share of step time; on a busy CPU-only host at least the pipeline
        functions' share of the host's busy time (an upper bound: only the deterministic part is cached).

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
        Example(
            "sample_traces/corpus-tfdata-progbar",
            True,
            "examples/corpus/tfdata_progbar_fit.py: fit, JPEG decode + resize + augment maps on 2 busy "
            "CPU cores, under 5 % input wait: the functions take ~10 % of the host",
        ),
        Example(
            "sample_traces/cpu-tfdata_loop",
            False,
            "a heavy map but the host is idle most of the step (0.2 busy threads): nothing competes",
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        ops = ctx.stage_ops()
        stage_names = {s.name for s in ctx.details.tfdata_stages}
        if any(o in ("cache", "snapshot") for o in ops) or stage_names & set(_CACHE_STAGES):
            return None
        maps = [s for s in ctx.facts.dataset if s.op.lower() in ("map", "interleave")]
        if maps and any(h in maps[0].detail.lower() for h in _RANDOM_HINTS):
            return None  # the first map already draws random numbers: no deterministic part to cache
        map_times = [(n, p, t) for n, p, t in fig.tfdata_self_times(ctx) if n in _MAP_STAGES]
        if not maps and not map_times:
            return None
        share = ctx.share.get("input_wait", 0.0)
        map_ms = sum(t for _, _, t in map_times)
        map_share = map_ms / ctx.avg_step_ms if ctx.avg_step_ms else 0.0
        waits = share >= MIN_COST and map_share >= MIN_COST
        fn_ms, busy, host_share = self._host_cost(ctx)
        if not waits and host_share < MIN_COST:
            return None
        est = max(min(share, map_share) if waits else 0.0, host_share)
        ev = [
            Evidence(
                label="map time",
                value=f"{map_ms:.2f} ms/step in {', '.join(sorted({n for n, _, _ in map_times})) or 'map'}",
                source=ctx.source("dataset_map", "dataset"),
            ),
            Evidence(label="input wait", value=pct(share), time_ranges_ms=ctx.worst_steps("input_wait")),
        ]
        if host_share >= MIN_COST:
            ev.append(
                Evidence(
                    label="host CPU",
                    value=f"tf.data's threads run the pipeline's functions {fn_ms:.2f} core-ms per step, "
                    f"{pct(host_share)} of the host's busy time ({busy:.1f} of {ctx.cpu_count} cores busy on "
                    "average, no GPU/TPU: the model computes on the same cores)",
                )
            )
        if ops:
            ev.append(Evidence(label="dataset", value=" → ".join(s.op for s in ctx.facts.dataset)))
        if waits:
            claim = (
                f"the map stage spends {map_ms:.2f} ms per step ({pct(map_share)} of step time) redoing the "
                "same preprocessing every epoch; no cache() or snapshot()"
            )
        else:
            claim = (
                f"the pipeline's functions take {pct(host_share)} of the busy CPU's time ({fn_ms:.2f} core-ms "
                "per step) redoing the same preprocessing every epoch, on the cores the model computes on; "
                "no cache() or snapshot()"
            )
        return self.finding(
            "medium" if est >= 0.1 else "low", claim, ev, est_saving=est, fix_ids=["tfdata-cache"]
        )

    @staticmethod
    def _host_cost(ctx: Context) -> tuple[float, float, float]:
        """(core-ms per step of the pipeline's functions, busy host threads, their share of the busy
        host's time) on a CPU-only run whose cores are busy; the share is 0 otherwise."""
        cores = ctx.cpu_count
        busy = ctx.details.host_threads_busy
        if ctx.is_accelerator_run or not cores or busy < BUSY_HOST * cores:
            return 0.0, busy, 0.0
        fn_ms = fig.tfdata_function_ms(ctx)
        step_ms = fig.profiled_step_ms(ctx)
        return fn_ms, busy, fn_ms / (busy * step_ms) if step_ms > 0 else 0.0


RULE = RepeatedPreprocessing
