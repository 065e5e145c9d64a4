"""TFD201 eager-dispatch."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, pct


class EagerDispatch(Rule):
    """The training step runs op by op in eager mode.

    What it detects:
        Many single ops dispatched eagerly from Python per step (``EagerLocalExecute`` of single ops on the
        training thread: 20 or more per step) with no traced function doing the step's work, while host
        dispatch and Python take 30 % or more of step time.

    Why it costs throughput:
        Each eager op pays Python-to-C++ dispatch, placement and tensor-handle bookkeeping; for small ops
        that overhead is larger than the math. ``tf.function`` traces the step once and runs it as one graph
        (ops dispatched inside the runtime, in parallel where possible).

    Evidence:
        Eager ops per step, traced-function calls per step, the dispatch and host shares of step time, the
        steps with the most dispatch (time ranges), the step function's source line.

    Fix:
        ``tf-function``: decorate the train step with ``@tf.function``; where the script switches eager
        execution on itself (``compile(run_eagerly=True)``, ``tf.config.run_functions_eagerly(True)``:
        debugging settings left in, named in the claim), switch it off. Estimated saving: 80 % of the
        dispatch + host-compute share (the op kernels themselves still run).

    Fix safety:
        Usually safe for a pure train step; Python side effects (prints, appending to lists, Python
        randomness) run only while tracing, and data-dependent Python control flow must become tf.cond /
        tf.while_loop (AutoGraph converts most of it).
    """

    ID = "TFD201"
    NAME = "eager-dispatch"
    HEADLINE = "Dispatch-bound"
    EXAMPLES = [
        Example("sample_traces/walkthrough-metrics", True, "eager walkthrough loop: ~200 ops per step"),
        Example(
            "sample_traces/full-batch-loop", True, "tf.Module of two variables, assign_sub: 44 ops per step"
        ),
        Example("sample_traces/rules-eager-loop", True, "plain-Python train step: ~86 eager ops per step"),
        Example("sample_traces/rules-well-fed", False, "tf.function step"),
        Example("sample_traces/rules-keras-fit-tiny", False, "Keras fit runs a traced function"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        d = ctx.details
        if d.eager_ops_per_step < 20:
            return None
        if ctx.facts.step_kind == "tf.function" or (
            d.function_calls_per_step >= 1 and d.eager_ops_per_step < 50
        ):
            return None
        overhead = ctx.share.get("dispatch", 0.0) + ctx.share.get("host_compute", 0.0)
        if overhead < 0.3:
            return None
        ev = [
            Evidence(label="eager ops per step", value=f"{d.eager_ops_per_step:.0f}"),
            Evidence(label="traced-function calls per step", value=f"{d.function_calls_per_step:.1f}"),
            Evidence(
                label="dispatch + host",
                value=f"{pct(ctx.share.get('dispatch', 0.0))} dispatch + {pct(ctx.share.get('host_compute', 0.0))} "
                "Python/host of step time",
                time_ranges_ms=ctx.worst_steps("dispatch"),
                source=ctx.source("step_fn"),
            ),
        ]
        claim = (
            f"{d.eager_ops_per_step:.0f} ops per step are dispatched one by one from Python; "
            f"dispatch and Python take {pct(overhead)} of step time"
        )
        if ctx.facts.functions_run_eagerly:
            claim += ": tf.config.run_functions_eagerly(True) is on, so the step's tf.function runs op by op"
        elif ctx.facts.loop_kind == "keras_fit":
            claim += ": Keras fit runs the step eagerly (run_eagerly=True, a debugging setting)"
        sev = "high" if overhead >= 0.5 else "medium"
        return self.finding(sev, claim, ev, est_saving=0.8 * overhead, fix_ids=["tf-function"])


RULE = EagerDispatch
