"""Two runs side by side: throughput ratio and the per-category step-time deltas.

Pure data (a pydantic model, also the ``/api/compare`` response); the terminal, the web page and
``tfdoctor compare --html`` render it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tfdoctor.model import CATEGORIES, CATEGORY_LABELS, Report, Throughput


class CategoryDelta(BaseModel):
    category: str
    label: str
    a_ms: float | None
    b_ms: float | None
    delta_ms: float | None  # b - a
    a_share: float | None
    b_share: float | None


class RunSide(BaseModel):
    run_id: str
    script: str
    created: str
    status: str
    verdict: str
    throughput: Throughput | None
    avg_step_ms: float | None
    findings: list[str] = Field(default_factory=list)  # "TFD101 input-stall"


class Comparison(BaseModel):
    a: RunSide
    b: RunSide
    unit: str  # "examples/s" or "steps/s": what ``speedup`` compares
    speedup: float | None  # throughput of b / throughput of a
    step_ms_ratio: float | None  # mean profiled step of b / of a
    within_noise: bool | None  # the two medians lie within each other's sub-window spread
    categories: list[CategoryDelta]
    only_a: list[str] = Field(default_factory=list)  # finding rule ids present in a only
    only_b: list[str] = Field(default_factory=list)
    both: list[str] = Field(default_factory=list)


def _side(r: Report) -> RunSide:
    return RunSide(
        run_id=r.run_id,
        script=r.script,
        created=r.created,
        status=r.status,
        verdict=r.verdict,
        throughput=r.throughput,
        avg_step_ms=r.breakdown.avg_step_ms if r.breakdown and r.breakdown.steps else None,
        findings=[f"{f.rule_id} {f.name}" for f in r.findings],
    )


def _mean_ms(r: Report) -> dict[str, float] | None:
    bd = r.breakdown
    if bd is None or not bd.steps:
        return None
    n = len(bd.steps)
    return {c: sum(s.ms.get(c, 0.0) for s in bd.steps) / n for c in CATEGORIES}


def compare(a: Report, b: Report) -> Comparison:
    ta, tb = a.throughput, b.throughput
    unit, speedup, within = "steps/s", None, None
    if ta is not None and tb is not None:
        if ta.examples_per_s and tb.examples_per_s:
            unit, va, vb = "examples/s", ta.examples_per_s, tb.examples_per_s
            sa = ta.examples_per_s / ta.steps_per_s if ta.steps_per_s else 1.0
            sb = tb.examples_per_s / tb.steps_per_s if tb.steps_per_s else 1.0
        else:
            va, vb, sa, sb = ta.steps_per_s, tb.steps_per_s, 1.0, 1.0
        speedup = vb / va if va > 0 else None
        if ta.windows and tb.windows:
            a_lo, a_hi = min(ta.windows) * sa, max(ta.windows) * sa
            b_lo, b_hi = min(tb.windows) * sb, max(tb.windows) * sb
            within = a_lo <= vb <= a_hi or b_lo <= va <= b_hi
    ma, mb = _mean_ms(a), _mean_ms(b)
    cats = []
    for c in CATEGORIES:
        x = ma[c] if ma else None
        y = mb[c] if mb else None
        if (x or 0.0) == 0.0 and (y or 0.0) == 0.0:
            continue
        cats.append(
            CategoryDelta(
                category=c,
                label=CATEGORY_LABELS[c],
                a_ms=x,
                b_ms=y,
                delta_ms=(y - x) if x is not None and y is not None else None,
                a_share=a.breakdown.share.get(c) if a.breakdown and ma else None,
                b_share=b.breakdown.share.get(c) if b.breakdown and mb else None,
            )
        )
    sa_side, sb_side = _side(a), _side(b)
    ra = {f.rule_id for f in a.findings}
    rb = {f.rule_id for f in b.findings}
    ratio = None
    if sa_side.avg_step_ms and sb_side.avg_step_ms:
        ratio = sb_side.avg_step_ms / sa_side.avg_step_ms
    return Comparison(
        a=sa_side,
        b=sb_side,
        unit=unit,
        speedup=speedup,
        step_ms_ratio=ratio,
        within_noise=within,
        categories=cats,
        only_a=sorted(ra - rb),
        only_b=sorted(rb - ra),
        both=sorted(ra & rb),
    )
