"""Plotly figures as plain ``{"data": [...], "layout": {...}}`` dicts, built from the report model.

No plotting library is imported here: the dicts are the payload (tests assert on them), the page
hands them to ``Plotly.newPlot``. Every figure is bounded in size: per-step charts bin long runs
into at most ``MAX_BARS`` bars, the timeline is downsampled by :mod:`tfdoctor.report.timeline`.
"""

from __future__ import annotations

from typing import Any

from tfdoctor.model import CATEGORIES, CATEGORY_LABELS, Breakdown, Report, StepBreakdown, Throughput
from tfdoctor.report import format as fmt
from tfdoctor.report.timeline import KINDS, Timeline

Figure = dict[str, Any]

MAX_BARS = 400

COLORS: dict[str, str] = {
    "input_wait": "#e8615a",
    "host_compute": "#f0b03f",
    "dispatch": "#9a7fd6",
    "device_compute": "#3aa17e",
    "device_idle": "#aab4c3",
    "h2d": "#4a90d9",
    "d2h": "#7cc3ee",
    "collective": "#dd7fb9",
    "other": "#d5dae1",
}

KIND_COLORS: dict[str, str] = {
    "step": "#dfe4ec",
    "input": "#e8615a",
    "dispatch": "#9a7fd6",
    "compute": "#3aa17e",
    "function": "#2f7f8f",
    "copy": "#4a90d9",
    "collective": "#dd7fb9",
    "other": "#aab4c3",
}

STATUS_COLORS = {
    "baseline": "#7b8794",
    "kept": "#3aa17e",
    "superseded": "#9fd4bf",
    "rejected": "#e8615a",
    "failed": "#b23b3b",
    "skipped": "#c9cfd8",
    "combined": "#2f6fd0",
    "run": "#2f6fd0",
}

_FONT = {
    "family": "Inter, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif",
    "size": 12,
}


def base_layout(**kw: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "font": _FONT,
        "margin": {"l": 56, "r": 16, "t": 28, "b": 44},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "hoverlabel": {"font": {"size": 12}},
        "legend": {"orientation": "h", "y": -0.18, "x": 0, "font": {"size": 11}},
    }
    layout.update(kw)
    return layout


def used_categories(*breakdowns: Breakdown | None) -> list[str]:
    """Categories with any time in any of the breakdowns, in display order."""
    used = []
    for c in CATEGORIES:
        for bd in breakdowns:
            if bd is not None and any(s.ms.get(c, 0.0) > 0 for s in bd.steps):
                used.append(c)
                break
    return used


def bin_steps(
    steps: list[StepBreakdown], max_bars: int = MAX_BARS
) -> list[tuple[str, str, dict[str, float]]]:
    """(x label, hover label, mean ms per category) for each bar; consecutive steps are averaged
    into one bar when there are more than ``max_bars`` of them."""
    if not steps:
        return []
    size = max(1, -(-len(steps) // max_bars))
    out = []
    for i in range(0, len(steps), size):
        part = steps[i : i + size]
        mean = {c: sum(s.ms.get(c, 0.0) for s in part) / len(part) for c in CATEGORIES}
        if len(part) == 1:
            out.append((str(part[0].step), f"step {part[0].step}", mean))
        else:
            out.append((str(part[0].step), f"steps {part[0].step}–{part[-1].step} (mean)", mean))
    return out


def breakdown_figure(before: Breakdown | None, after: Breakdown | None = None) -> Figure | None:
    """Stacked bar of the step-time breakdown per profiled step; a second panel for ``after``."""
    panels = [
        (b, name) for b, name in ((before, "before"), (after, "after fixes")) if b is not None and b.steps
    ]
    if not panels:
        return None
    cats = used_categories(*(b for b, _ in panels))
    data: list[dict[str, Any]] = []
    layout = base_layout(barmode="stack", bargap=0.15)
    n = len(panels)
    for k, (bd, name) in enumerate(panels):
        bars = bin_steps(bd.steps)
        xa = "x" if k == 0 else f"x{k + 1}"
        for c in cats:
            data.append(
                {
                    "type": "bar",
                    "name": CATEGORY_LABELS[c],
                    "legendgroup": c,
                    "showlegend": k == 0,
                    "x": [b[0] for b in bars],
                    "y": [round(b[2][c], 4) for b in bars],
                    "customdata": [b[1] for b in bars],
                    "marker": {"color": COLORS[c]},
                    "xaxis": xa,
                    "yaxis": "y",
                    "hovertemplate": "%{customdata}<br>"
                    + CATEGORY_LABELS[c]
                    + ": %{y:.2f} ms<extra></extra>",
                }
            )
        dom = [k / n + (0.04 if k else 0.0), (k + 1) / n - (0.04 if k < n - 1 else 0.0)]
        key = "xaxis" if k == 0 else f"xaxis{k + 1}"
        layout[key] = {
            "domain": dom,
            "type": "category",
            "title": {"text": f"step ({name})" if n > 1 else "step", "standoff": 6},
            "tickfont": {"size": 10},
            "nticks": 20,
        }
    layout["yaxis"] = {"title": {"text": "ms"}, "gridcolor": "#e8ecf1", "rangemode": "tozero"}
    return {"data": data, "layout": layout}


def share_figure(rows: list[tuple[str, Breakdown]]) -> Figure | None:
    """One horizontal stacked bar per (label, breakdown): the mean step split by category."""
    rows = [(label, bd) for label, bd in rows if bd.steps]
    if not rows:
        return None
    cats = used_categories(*(bd for _, bd in rows))
    labels = [label for label, _ in rows][::-1]
    data = []
    for c in cats:
        vals, pct = [], []
        for _, bd in rows[::-1]:
            ms = sum(s.ms.get(c, 0.0) for s in bd.steps) / len(bd.steps)
            vals.append(round(ms, 4))
            pct.append(round(100 * bd.share.get(c, 0.0), 1))
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": CATEGORY_LABELS[c],
                "y": labels,
                "x": vals,
                "customdata": pct,
                "marker": {"color": COLORS[c]},
                "hovertemplate": CATEGORY_LABELS[c] + ": %{x:.2f} ms (%{customdata} %)<extra>%{y}</extra>",
            }
        )
    layout = base_layout(
        barmode="stack",
        height=110 + 46 * len(rows),
        margin={"l": 110, "r": 16, "t": 8, "b": 40},
        xaxis={"title": {"text": "mean step, ms", "standoff": 4}, "gridcolor": "#e8ecf1"},
        yaxis={"automargin": True},
        legend={"orientation": "h", "y": -0.45, "x": 0, "font": {"size": 11}, "traceorder": "normal"},
    )
    return {"data": data, "layout": layout}


def _rate(t: Throughput) -> tuple[float, list[float], str]:
    """(median, sub-window rates, unit) in examples/s where known, else steps/s."""
    if t.examples_per_s is not None and t.steps_per_s > 0:
        scale = t.examples_per_s / t.steps_per_s
        return t.examples_per_s, [w * scale for w in t.windows], "examples/s"
    return t.steps_per_s, list(t.windows), "steps/s"


def throughput_figure(report: Report) -> Figure | None:
    """Throughput of the baseline, each tried fix and the combination, with the sub-window spread as
    error bars and the baseline's noise band shaded behind."""
    bars: list[tuple[str, Throughput, str, str]] = []  # (label, throughput, status, hover)
    fix = report.fix
    if fix is not None and fix.baseline is not None:
        if fix.baseline_timed is not None:  # measured as the trials are: their bars compare with it
            n = fix.baseline_timed_runs
            hover = (
                f"baseline: median of {n} timing re-run{'s' if n != 1 else ''}, as the trials are measured"
            )
            bars.append(("baseline", fix.baseline_timed, "baseline", hover))
        else:
            bars.append(("baseline", fix.baseline, "baseline", "baseline"))
        for t in fix.trials:
            if t.throughput is not None:
                bars.append((t.name, t.throughput, t.status, f"{t.name}: {t.status}"))
        if fix.combined is not None:
            bars.append(("combined", fix.combined, "combined", "kept fixes combined"))
    elif report.throughput is not None:
        bars.append(("this run", report.throughput, "run", "timing window"))
    if not bars:
        return None
    units = {_rate(t)[2] for _, t, _, _ in bars}
    if len(units) > 1:  # mixed: compare on steps/s, which every throughput has
        vals = [(t.steps_per_s, list(t.windows), "steps/s") for _, t, _, _ in bars]
    else:
        vals = [_rate(t) for _, t, _, _ in bars]
    unit = vals[0][2]
    base = vals[0][0]
    ys, up, down, text = [], [], [], []
    for (_, _, status, _), (med, wins, _) in zip(bars, vals, strict=True):
        ys.append(round(med, 3))
        up.append(round(max(wins) - med, 3) if wins else 0.0)
        down.append(round(med - min(wins), 3) if wins else 0.0)
        text.append("" if status in ("baseline", "run") or base <= 0 else fmt.ratio(med / base))
    data = [
        {
            "type": "bar",
            "x": unique_labels([b[0] for b in bars]),
            "y": ys,
            "text": text,
            "textposition": "outside",
            "cliponaxis": False,
            "customdata": [b[3] for b in bars],
            "marker": {"color": [STATUS_COLORS.get(b[2], "#7b8794") for b in bars]},
            "error_y": {
                "type": "data",
                "array": up,
                "arrayminus": down,
                "color": "#4a5562",
                "thickness": 1.2,
            },
            "hovertemplate": "%{customdata}<br>%{y:,.1f} " + unit + "<extra></extra>",
            "showlegend": False,
            "width": [0.35 if len(bars) == 1 else 0.6] * len(bars),
        }
    ]
    shapes = []
    base_wins = vals[0][1]
    if base_wins:
        shapes.append(
            {
                "type": "rect",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": min(base_wins),
                "y1": max(base_wins),
                "fillcolor": "rgba(123,135,148,0.16)",
                "line": {"width": 0},
                "layer": "below",
            }
        )
    layout = base_layout(
        shapes=shapes,
        yaxis={"title": {"text": unit}, "gridcolor": "#e8ecf1", "rangemode": "tozero"},
        # long fix names are tilted and the margin grows to hold them (never clipped)
        xaxis={"type": "category", "automargin": True, "tickangle": -30 if len(bars) > 4 else 0},
    )
    return {"data": data, "layout": layout}


def unique_labels(labels: list[str]) -> list[str]:
    """Category labels told apart: a repeated one gets " (2)", " (3)"... (a category axis would
    otherwise draw two trials of the same fix as one bar)."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def compare_throughput_figure(
    a: tuple[str, Throughput | None], b: tuple[str, Throughput | None]
) -> Figure | None:
    """Two bars (run A, run B) with their sub-window spread."""
    pairs = [(label, t) for label, t in (a, b) if t is not None]
    if not pairs:
        return None
    units = {_rate(t)[2] for _, t in pairs}
    vals = (
        [(t.steps_per_s, list(t.windows), "steps/s") for _, t in pairs]
        if len(units) > 1
        else [_rate(t) for _, t in pairs]
    )
    data = [
        {
            "type": "bar",
            "x": [label for label, _ in pairs],
            "y": [round(v[0], 3) for v in vals],
            "marker": {"color": ["#7b8794", "#2f6fd0"][: len(pairs)]},
            "error_y": {
                "type": "data",
                "array": [round(max(v[1]) - v[0], 3) if v[1] else 0 for v in vals],
                "arrayminus": [round(v[0] - min(v[1]), 3) if v[1] else 0 for v in vals],
                "color": "#4a5562",
            },
            "hovertemplate": "%{x}<br>%{y:,.1f} " + vals[0][2] + "<extra></extra>",
        }
    ]
    layout = base_layout(
        yaxis={"title": {"text": vals[0][2]}, "gridcolor": "#e8ecf1", "rangemode": "tozero"},
        xaxis={"type": "category"},
        height=300,
    )
    return {"data": data, "layout": layout}


def timeline_figure(tl: Timeline, highlight: list[tuple[float, float]] | None = None) -> Figure | None:
    """The downsampled timeline as horizontal bars (one bar trace per colour class), step bands
    shaded behind. Rows read top to bottom: host threads, tf.data, devices."""
    if not tl.rows:
        return None
    labels = []
    seen: dict[str, int] = {}
    for r in tl.rows:
        label = r.label
        if label in seen:
            seen[label] += 1
            label = f"{label} ({seen[label]})"
        else:
            seen[label] = 0
        labels.append(label)
    by_kind: dict[str, dict[str, list[Any]]] = {}
    for r, label in zip(tl.rows, labels, strict=True):
        for i in range(len(r.start_ms)):
            d = by_kind.setdefault(r.kind[i], {"x": [], "base": [], "y": [], "text": []})
            d["x"].append(max(r.dur_ms[i], tl.resolution_ms * 0.6))
            d["base"].append(r.start_ms[i])
            d["y"].append(label)
            d["text"].append(f"{r.name[i][:160]}<br>{r.dur_ms[i]:.3f} ms")
    data = []
    for kind in KINDS:
        bars = by_kind.get(kind)
        if not bars:
            continue
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": KINDS[kind],
                "x": bars["x"],
                "base": bars["base"],
                "y": bars["y"],
                "customdata": bars["text"],
                "marker": {"color": KIND_COLORS[kind], "line": {"width": 0}},
                "hovertemplate": "%{customdata}<br>at %{base:.3f} ms<extra>%{y}</extra>",
                "width": 0.8,
            }
        )
    shapes: list[dict[str, Any]] = []
    for k, s in enumerate(tl.steps):
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": s.start_ms,
                "x1": s.end_ms,
                "y0": 0,
                "y1": 1,
                "fillcolor": "rgba(47,111,208,0.05)" if k % 2 else "rgba(47,111,208,0.10)",
                "line": {"width": 0},
                "layer": "below",
            }
        )
    for lo, hi in highlight or []:
        shapes.append(highlight_shape(lo, hi))
    annotations = [
        {
            "x": (s.start_ms + s.end_ms) / 2,
            "y": 1.0,
            "xref": "x",
            "yref": "paper",
            "yanchor": "bottom",
            "text": f"step {s.step}",
            "showarrow": False,
            "font": {"size": 10, "color": "#5c6773"},
        }
        for s in tl.steps
        if s.end_ms > tl.window_ms[0] and s.start_ms < tl.window_ms[1]
    ]
    layout = base_layout(
        barmode="overlay",
        height=max(220, 60 + 22 * len(labels)),
        margin={"l": 16, "r": 16, "t": 26, "b": 40},
        shapes=shapes,
        annotations=annotations,
        xaxis={
            "range": list(tl.window_ms),
            "title": {"text": "ms from the first profiled step", "standoff": 4},
            "gridcolor": "#eef1f5",
            "zeroline": False,
        },
        yaxis={
            "type": "category",
            "categoryorder": "array",
            "categoryarray": labels[::-1],
            "automargin": True,
            "tickfont": {"size": 10},
        },
        legend={"orientation": "h", "y": -0.12, "x": 0, "font": {"size": 11}},
        hovermode="closest",
    )
    return {"data": data, "layout": layout}


def highlight_shape(lo: float, hi: float) -> dict[str, Any]:
    return {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": lo,
        "x1": hi,
        "y0": 0,
        "y1": 1,
        "fillcolor": "rgba(232,97,90,0.18)",
        "line": {"width": 1, "color": "rgba(232,97,90,0.8)"},
        "layer": "above",
        "name": "evidence",
    }
