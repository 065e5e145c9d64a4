"""TFD103 input-cpu-saturated."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, pct

# stages that are parallel whatever their arguments (MapAndBatch is also what a *sequential* map fuses into)
_PARALLEL_STAGES = (
    "ParallelMap",
    "ParallelMapV2",
    "ParallelInterleaveV2",
    "ParallelInterleaveV4",
    "ParallelBatch",
)


class InputCpuSaturated(Rule):
    """Still input-bound with a parallel, autotuned pipeline: the host has no cores left to give.

    What it detects:
        Input wait of 20 % or more although the pipeline already maps in parallel (AUTOTUNE) and
        prefetches, while the host's threads are busy for at least 80 % of its cores' time during the steps.

    Why it costs throughput:
        AUTOTUNE can only spread preprocessing over the cores this machine has. When they are all busy,
        more ``num_parallel_calls`` does nothing; the preprocessing has to get cheaper (cache, lighter
        decoding, preprocessed files) or run elsewhere.

    Evidence:
        Input-wait share, mean number of busy host threads against the core count (CPU utilisation during
        the steps), the slowest tf.data stages and their time per step.

    Fix:
        Advice ``tfdata-service``: move preprocessing to tf.data service workers on other machines
        (``tf.data.experimental.service.distribute``), and cache what is deterministic (TFD102).
        Estimated saving: half the input-wait share (what more CPU typically buys back).

    Fix safety:
        Advice only (needs extra machines); nothing is changed automatically.
    """

    ID = "TFD103"
    NAME = "input-cpu-saturated"
    EXAMPLES = [
        Example("sample_traces/rules-input-autotuned-saturated", True, "AUTOTUNE map on 2 busy cores"),
        Example("sample_traces/rules-input-sequential-map", False, "map not parallel yet: TFD101 first"),
        Example("sample_traces/rules-well-fed", False, "not input-bound"),
        Example(
            "sample_traces/rules-input-sequential-map/logdir",
            False,
            "trace only: its MapAndBatch may be sequential, so no claim without the harness's facts",
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        share = ctx.share.get("input_wait", 0.0)
        if share < 0.2:
            return None
        d = ctx.details
        maps = [s for s in ctx.facts.dataset if s.op.lower() in ("map", "interleave")]
        if ctx.facts.dataset:
            parallel = bool(maps) and all(s.parallel for s in maps)
            prefetch = "prefetch" in ctx.stage_ops()
        else:
            parallel = any(s.name in _PARALLEL_STAGES for s in d.tfdata_stages)
            prefetch = d.has_prefetch
        if not (parallel and prefetch):
            return None
        cores = ctx.cpu_count
        busy = d.host_threads_busy
        ev = [
            Evidence(label="input wait", value=pct(share), time_ranges_ms=ctx.worst_steps("input_wait")),
            Evidence(label="busy host threads", value=f"{busy:.1f} on average during the steps"),
        ]
        slow = fig.tfdata_self_times(ctx)[:2]
        if slow:
            ev.append(
                Evidence(label="slowest stages", value=", ".join(f"{n} {t:.2f} ms/step" for n, _, t in slow))
            )
        if cores is None:
            return self.undecided(
                "the host's core count was not recorded, so CPU saturation cannot be judged",
                claim=f"{pct(share)} of step time waits for input despite a parallel, prefetched pipeline",
                evidence=ev,
            )
        ev.insert(1, Evidence(label="host cores", value=str(cores)))
        if busy < 0.8 * cores:
            return None
        claim = (
            f"{pct(share)} of step time waits for input although map is parallel (AUTOTUNE) and prefetched; "
            f"the host is saturated ({busy:.1f} busy threads on {cores} cores)"
        )
        return self.finding("medium", claim, ev, est_saving=share * 0.5, fix_ids=["tfdata-service"])


RULE = InputCpuSaturated
