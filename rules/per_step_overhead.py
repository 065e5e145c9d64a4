"""TFD203 per-step-overhead."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, ms, pct


class PerStepOverhead(Rule):
    """Steps are so short that the per-step Python round trip dominates.

    What it detects:
        A compiled (traced) step whose calls take under 70 % of the step: 30 % or more of every step is
        spent outside the step function (the training loop's Python, callbacks, fetching the batch,
        reading the loss back), on steps averaging under 20 ms. Keras ``fit`` with
        ``steps_per_execution`` 1 (the default) pays this once per batch.

    Why it costs throughput:
        The step function itself is fast; the fixed cost of returning to Python between steps is not.
        Running several steps per call amortises it (Keras ``steps_per_execution``; in a custom loop, a
        ``tf.range`` loop inside the ``tf.function``).

    Evidence:
        Average step time, the share of step time inside the traced step function and outside it,
        traced-function calls per step, ``steps_per_execution`` as recorded, the fit call's source line.

    Fix:
        Keras ``fit``: ``steps-per-execution`` (``model.compile(steps_per_execution=N)``). Custom loops:
        advice ``multi-step-function`` (loop over several batches inside the tf.function). Estimated
        saving: 80 % of the overhead share.

    Fix safety:
        Safe for training results; per-batch callbacks (``on_train_batch_*``) then run every N steps, and
        the progress bar updates less often.
    """

    ID = "TFD203"
    NAME = "per-step-overhead"
    HEADLINE = "Host-bound"
    EXAMPLES = [
        Example(
            "sample_traces/rules-keras-fit-tiny", True, "fit, batch 8, ~1 ms steps, steps_per_execution=1"
        ),
        Example("sample_traces/rules-well-fed", False, "10 ms steps, the step function fills them"),
        Example("sample_traces/rules-eager-loop", False, "no traced step: TFD201's case"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        d = ctx.details
        if d.function_calls_per_step < 0.5 or d.eager_ops_per_step >= 20:
            return None
        spe = ctx.facts.steps_per_execution
        if spe is not None and spe > 1:
            return None
        if ctx.avg_step_ms >= 20 or ctx.share.get("input_wait", 0.0) >= 0.2:
            return None  # long steps, or an input stall explains the time outside the function
        inside = fig.function_share(ctx)
        outside = 1.0 - inside
        if outside < 0.3:
            return None
        keras = ctx.facts.loop_kind == "keras_fit" or "multi_step_on_iterator" in d.functions
        ev = [
            Evidence(label="step time", value=f"{ms(ctx.avg_step_ms)} on average"),
            Evidence(
                label="outside the step function",
                value=f"{pct(outside)} of step time ({pct(inside)} inside the traced call)",
                time_ranges_ms=ctx.worst_steps("host_compute"),
                source=ctx.source("fit", "step_fn"),
            ),
            Evidence(
                label="steps_per_execution", value=str(spe) if spe is not None else "not recorded (default 1)"
            ),
        ]
        claim = f"{pct(outside)} of each {ms(ctx.avg_step_ms)} step is spent outside the step function; " + (
            "fit runs one batch per call (steps_per_execution=1)"
            if keras
            else "one batch per tf.function call"
        )
        sev = "high" if outside >= 0.5 else "medium"
        fixes = ["steps-per-execution"] if keras else ["multi-step-function"]
        return self.finding(sev, claim, ev, est_saving=0.8 * outside, fix_ids=fixes)


RULE = PerStepOverhead
