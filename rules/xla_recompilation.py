"""TFD502 xla-recompilation."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, ms, pct


class XlaRecompilation(Rule):
    """XLA compiles the step again during training (dynamic shapes).

    What it detects:
        XLA compilations (``JitCompiler::Compile``, ``CpuCompiler::RunBackend``, ``GpuCompiler::RunBackend``,
        ...) inside the profiled steps, after warm-up: in two or more steps, or taking 5 % or more of step
        time. XLA specialises a compiled program to exact shapes, so every new batch shape (the last
        partial batch, variable-length sequences) compiles again.

    Why it costs throughput:
        A compilation takes from a hundred milliseconds to minutes; repeated, it costs more than XLA's
        fusion saves.

    Evidence:
        Compilations inside the steps, their total time and share of step time, the steps they happened in
        (time ranges), retraced functions, the jit setting and the step function's source line.

    Fix:
        Advice ``static-shapes``: ``drop_remainder=True`` on ``batch``, pad variable-length inputs to a few
        bucket sizes (``bucket_by_sequence_length``, ``padded_batch``). If shapes cannot be made static,
        turn XLA off for this step. Estimated saving: the compile share of step time.

    Fix safety:
        Advice only; dropping the remainder skips up to one batch per epoch.
    """

    ID = "TFD502"
    NAME = "xla-recompilation"
    HEADLINE = "Compile-bound"
    EXAMPLES = [
        Example("sample_traces/rules-xla-recompile", True, "jit_compile=True, batch size changes every step"),
        Example("sample_traces/rules-small-ops-xla", False, "jit_compile=True, compiled once in warm-up"),
        Example("sample_traces/rules-small-ops-no-xla", False, "no XLA"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        c = fig.xla_compiles(ctx)
        if c.count == 0 or (c.steps_with < 2 and c.share < 0.05):
            return None
        ev = [
            Evidence(
                label="XLA compilations",
                value=f"{c.count} in {c.steps_with} of {ctx.n_steps} steps, {ms(c.total_ms)} ({pct(c.share)} of step time)",
                time_ranges_ms=ctx.step_window_ms(c.starts, c.ends),
                source=ctx.source("step_fn", "compile"),
            ),
            Evidence(label="jit_compile", value=str(ctx.facts.jit_compile)),
        ]
        if ctx.details.retraced_functions:
            ev.append(Evidence(label="retraced functions", value=", ".join(ctx.details.retraced_functions)))
        claim = f"XLA compiled {c.count} times in {ctx.n_steps} profiled steps, {pct(c.share)} of step time; input shapes change between steps"
        sev = "high" if c.share >= 0.2 else "medium" if c.share >= 0.05 else "low"
        return self.finding(sev, claim, ev, est_saving=c.share, fix_ids=["static-shapes"])


RULE = XlaRecompilation
