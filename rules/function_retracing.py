"""TFD204 function-retracing."""

from __future__ import annotations

from tfdoctor.model import RETRACES_RELAXED, Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, ms, pct


class FunctionRetracing(Rule):
    """A tf.function is traced again during training.

    What it detects:
        Graph building (``tf.function-graph_building``) inside the profiled steps, after warm-up, or one
        traced function seen with several concrete functions (``__inference_step_123``, ``_456``, ...),
        or the harness counting retraces. Typical causes: batches of changing shape (the last partial
        batch, variable sequence length), Python scalars or new Python objects as arguments.

    Why it costs throughput:
        Each trace re-runs the Python step function, builds and optimises a new graph (and with XLA
        compiles it, see TFD502): tens to hundreds of milliseconds, paid again and again.

    Evidence:
        Traces per call, time spent tracing inside the steps and its share, retraced function names, the
        harness's retrace count, the step function's source line, the steps that traced (time ranges).

    Fix:
        ``tf-function`` where the harness counted the step traced 3 times or more beyond the first: it
        adds ``reduce_retracing=True`` to the step's ``@tf.function`` (measured: an eager text loop with
        dynamic padding, compiled plainly, traced once per new length). Otherwise advice
        ``reduce-retracing``: give the function an ``input_signature`` with ``None`` for the
        changing dimension or ``reduce_retracing=True``, batch with ``drop_remainder=True``, pass tensors
        instead of Python scalars. Estimated saving: the tracing share of step time.

    Fix safety:
        Advice only: a relaxed signature can make some ops slower (unknown static shapes).
    """

    ID = "TFD204"
    NAME = "function-retracing"
    HEADLINE = "Tracing-bound"
    EXAMPLES = [
        Example("sample_traces/rules-retracing", True, "a new batch size each step: 8 traces in 8 calls"),
        Example("sample_traces/rules-well-fed", False, "traced once, in warm-up"),
        Example("sample_traces/rules-keras-fit-tiny", False, "Keras fit's function traced once"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        d = ctx.details
        gb = fig.graph_building(ctx)
        retraced = d.retraced_functions
        harness = ctx.facts.retraces or 0
        if gb.count == 0 and not retraced and harness < 2:
            return None
        calls = max(d.function_calls_per_step * ctx.n_steps, 1.0)
        ev = [
            Evidence(
                label="tracing inside the steps",
                value=f"{gb.count} traces, {ms(gb.total_ms)} ({pct(gb.share)} of step time)",
                time_ranges_ms=ctx.step_window_ms(gb.starts, gb.ends),
                source=ctx.source("step_fn"),
            )
        ]
        if retraced:
            ev.append(
                Evidence(
                    label="retraced functions",
                    value=", ".join(f"{n} ({d.functions.get(n, 0)} concrete functions)" for n in retraced),
                )
            )
        if ctx.facts.retraces is not None:
            ev.append(Evidence(label="retraces (harness)", value=str(ctx.facts.retraces)))
        if (
            gb.count == 0
            and gb.share == 0
            and harness < 2
            and not any(d.functions.get(n, 0) > 2 for n in retraced)
        ):
            return None  # a second concrete function traced once (e.g. the last partial batch) is normal
        per_call = gb.count / calls
        claim = f"{gb.count} tf.function traces in {calls:.0f} step calls ({per_call:.1f} per call)"
        claim += (
            f"; tracing takes {pct(gb.share)} of step time"
            if gb.share
            else (
                f"; the step function was traced {harness + 1} times in the run"
                if harness >= 2
                else "; the step function was retraced"
            )
        )
        sev = "high" if gb.share >= 0.2 else "medium" if gb.share >= 0.05 or per_call >= 0.5 else "low"
        # a step the harness saw traced again and again: the tf-function fix relaxes its decorator
        fixes = ["tf-function"] if harness >= RETRACES_RELAXED else ["reduce-retracing"]
        return self.finding(sev, claim, ev, est_saving=gb.share, fix_ids=fixes)


RULE = FunctionRetracing
