"""The breakdown's measured figures in words, one wording for every face (terminal, HTML, web run page):
the compute precision measured from the trace and the profiler's own cost (``Breakdown.precision``,
``Breakdown.tracer_cost``, ``Breakdown.unprofiled_share``: tfdoctor.analysis and its ``tracer`` module).
Every ratio and percentage goes through :mod:`tfdoctor.report.format`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfdoctor.model import Breakdown, ComputePrecision
from tfdoctor.report import format as fmt

#: the profiler's cost at or above which the analysis corrects the shares (tfdoctor.analysis.tracer
#: SIGNIFICANT, not imported: rendering a stored report does not load the analysis)
SIGNIFICANT = 1.10


@dataclass(frozen=True)
class PrecisionView:
    value: str  # "float32", "16-bit", "mixed", "not measurable"
    detail: str  # "2 % of GPU kernel time in 16-bit · from GPU kernel names"

    @property
    def line(self) -> str:
        return f"{self.value} · {self.detail}" if self.detail else self.value


def precision_view(p: ComputePrecision | None) -> PrecisionView | None:
    """The measured compute precision: its short label, the 16-bit share of GPU kernel time and how it
    was measured (on a CPU trace: not measurable, and why)."""
    if p is None:
        return None
    value = p.label.split(" (", 1)[0]
    bits = []
    if p.sixteen_bit_share is not None:
        bits.append(f"{fmt.percent(p.sixteen_bit_share)} of GPU kernel time in 16-bit")
    if p.source:
        bits.append(p.source if p.sixteen_bit_share is None else f"from {p.source}")
    return PrecisionView(value=value, detail=" · ".join(bits))


@dataclass(frozen=True)
class TracerCostView:
    ratio: str  # "1.43x"
    state: str  # "corrected" | "not corrected" | "small"
    short: str  # a metric card's line: "shares corrected to a 6.3 ms step"
    sentence: str  # what it means for the user, in full


def tracer_cost_view(bd: Breakdown | None) -> TracerCostView | None:
    """What the profiler's cost (median profiled step ÷ median unprofiled step) means for the shares
    shown: corrected to the unprofiled step, recorded but not corrected, or too small to matter.
    None where it was not measured (a trace without the harness's two windows)."""
    if bd is None or bd.tracer_cost is None:
        return None
    r = bd.tracer_cost
    x = fmt.ratio(r)
    if bd.unprofiled_share is not None and bd.unprofiled_step_ms is not None:
        return TracerCostView(
            ratio=x,
            state="corrected",
            short=f"shares corrected to the {fmt.ms(bd.unprofiled_step_ms)} unprofiled step",
            sentence=(
                f"The profiler slowed the profiled steps {x}; the shares are corrected to the unprofiled "
                f"step ({fmt.ms(bd.unprofiled_step_ms)} against {fmt.ms(bd.avg_step_ms)} profiled), "
                "and the findings read the corrected shares."
            ),
        )
    if r >= SIGNIFICANT:
        return TracerCostView(
            ratio=x,
            state="not corrected",
            short="recorded, not corrected: unprofiled steps vary too much",
            sentence=(
                f"The profiler slowed the profiled steps {x}; recorded, not corrected: the unprofiled steps "
                "vary too much to tell the profiler's cost from the machine's noise, so the shares are of "
                "the profiled step."
            ),
        )
    if r < 1:
        sentence = f"The profiled steps were no slower than the unprofiled ones ({x}): the shares describe the real step."
    else:
        sentence = (
            f"The profiler's cost was small ({x} the unprofiled step, under {fmt.ratio(SIGNIFICANT)}): "
            "the shares describe the real step."
        )
    return TracerCostView(
        ratio=x, state="small", short="small: the shares describe the real step", sentence=sentence
    )


def corrected_ms(bd: Breakdown) -> dict[str, float] | None:
    """Milliseconds per category of the unprofiled step (``unprofiled_share × unprofiled_step_ms``);
    None where the breakdown was not corrected."""
    if bd.unprofiled_share is None or bd.unprofiled_step_ms is None:
        return None
    return {c: s * bd.unprofiled_step_ms for c, s in bd.unprofiled_share.items()}


__all__ = ["PrecisionView", "TracerCostView", "corrected_ms", "precision_view", "tracer_cost_view"]
