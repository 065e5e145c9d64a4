"""Terminal rendering of a :class:`~tfdoctor.model.Report` with rich: verdict, throughput, the
step-time breakdown, findings, and (after ``--fix``) the per-fix table.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tfdoctor.model import CATEGORIES, CATEGORY_LABELS, FixSummary, Report, Throughput
from tfdoctor.report import format as fmt
from tfdoctor.report.measured import corrected_ms, precision_view, tracer_cost_view

_SEV_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}
_BAR = 28
#: below this many columns (a laptop split, a CI log at 80) findings and fixes are stacked blocks, not
#: tables squeezing their text into narrow columns
WIDE = 100
#: how tfdoctor.analysis begins its note on the profiler's cost (shown here as measured_lines instead)
_TRACER_NOTE = "the profiler slowed the step "
_STATUS_STYLE = {
    "kept": "green",
    "superseded": "green dim",
    "rejected": "yellow",
    "failed": "red",
    "skipped": "dim",
}


def fmt_throughput(t: Throughput | None) -> str:
    if t is None:
        return "n/a"
    parts = []
    if t.examples_per_s is not None:
        parts.append(fmt.rate(t.examples_per_s, "examples/s"))
    parts.append(fmt.rate(t.steps_per_s, "steps/s"))
    parts.append(f"{fmt.ms(t.step_ms_median)}/step{fmt.per_step(t)}")
    if t.windows:
        parts.append(f"{fmt.noise(t)} over {len(t.windows)} windows")
    return " · ".join(parts)


def breakdown_table(report: Report, *, bar: int = _BAR) -> Table | None:
    """The mean step per category. Where the profiler's cost was corrected (``unprofiled_share``) the
    rows are the unprofiled step's, with the profiled step's share beside them."""
    bd = report.breakdown
    if bd is None or not bd.steps:
        return None
    fixed = corrected_ms(bd)
    caption = f"{len(bd.steps)} profiled steps · {bd.device_kind} · steps from {bd.source}"
    if fixed is not None:
        caption += " · corrected to the unprofiled step"
    table = Table(
        title="Step-time breakdown",
        caption=caption,
        title_justify="left",
        caption_justify="left",
        expand=False,
    )
    table.add_column("category")
    table.add_column("ms/step", justify="right")
    table.add_column("share", justify="right")
    if fixed is not None:
        table.add_column("profiled", justify="right", style="dim")
    table.add_column("", min_width=bar)
    n = len(bd.steps)
    for cat in CATEGORIES:
        prof_share = bd.share.get(cat, 0.0)
        prof_ms = sum(s.ms.get(cat, 0.0) for s in bd.steps) / n
        share = (bd.unprofiled_share or {}).get(cat, 0.0) if fixed is not None else prof_share
        ms = fixed.get(cat, 0.0) if fixed is not None else prof_ms
        if max(share, prof_share) < 0.0005 and max(ms, prof_ms) < 0.0005:
            continue
        cells = [CATEGORY_LABELS.get(cat, cat), f"{ms:.2f}", fmt.percent(share, decimals=1)]
        if fixed is not None:
            cells.append(fmt.percent(prof_share, decimals=1))
        table.add_row(*cells, Text("█" * round(share * bar), style="cyan"))
    if fixed is not None:
        table.add_row(
            "step", f"{bd.unprofiled_step_ms:.2f}", "100 %", f"{bd.avg_step_ms:.2f} ms", "", style="bold"
        )
    else:
        table.add_row("step", f"{bd.avg_step_ms:.2f}", "100 %", "", style="bold")
    return table


def measured_lines(report: Report) -> list[Text]:
    """Below the breakdown: what the profiler's cost means for the shares, and the compute precision
    measured from the trace."""
    bd = report.breakdown
    if bd is None or not bd.steps:
        return []
    out = []
    cost = tracer_cost_view(bd)
    if cost is not None:
        out.append(Text(cost.sentence, style="yellow" if cost.state != "small" else "dim"))
    prec = precision_view(bd.precision)
    if prec is not None:
        line = Text("Compute precision (measured): ")
        line.append(prec.value, style="bold")
        if prec.detail:
            line.append(f" · {prec.detail}", style="dim")
        out.append(line)
    return out


def _finding_text(f) -> Text:  # type: ignore[no-untyped-def]
    claim = Text(f.claim)
    if not f.decided and f.why_not:
        claim.append(f"\n  undecided: {f.why_not}", style="dim")
    for ev in f.evidence[:3]:
        src = f" ({ev.source})" if ev.source else ""
        claim.append(f"\n  · {ev.label}: {ev.value}{src}", style="dim")
    return claim


def findings_blocks(report: Report) -> list[RenderableType]:
    """The findings for a narrow terminal: a heading line per finding (id, severity, saving, fixes),
    then its claim and evidence indented below at the full width."""
    if not report.findings:
        return []
    out: list[RenderableType] = [Text("Findings", style="italic")]
    for f in report.findings:
        head = Text(f.rule_id, style="bold")
        head.append("  ")
        head.append(f.severity, style=_SEV_STYLE.get(f.severity, ""))
        if f.est_saving:
            head.append(f"  saving {f.est_saving * 100:.0f} %")
        if f.fix_ids:
            head.append(f"  fix: {', '.join(f.fix_ids)}", style="cyan")
        out.append(head)
        out.append(Padding(_finding_text(f), (0, 0, 0, 4), expand=False))
    return out


def findings_table(report: Report) -> Table | None:
    if not report.findings:
        return None
    table = Table(title="Findings", title_justify="left", show_lines=False, expand=False)
    table.add_column("id", no_wrap=True)
    table.add_column("sev", no_wrap=True)
    table.add_column("finding")
    table.add_column("saving", justify="right", no_wrap=True)
    table.add_column("fix", no_wrap=False)
    for f in report.findings:
        table.add_row(
            f.rule_id,
            Text(f.severity, style=_SEV_STYLE.get(f.severity, "")),
            _finding_text(f),
            f"{f.est_saving * 100:.0f} %" if f.est_saving else "",
            ", ".join(f.fix_ids),
        )
    return table


def fix_caption(fx: FixSummary) -> str:
    return (
        "speedup: each fix's own ratio over the state it was tried on, with its 95 % interval "
        + (
            f"from paired rounds back to back (at most {fx.confirm_rounds}); "
            if fx.confirm_rounds
            else "from one run each; "
        )
        + "combined: the final state against the baseline, side by side"
        + (
            "; rates of the whole loop (a burst of training steps and the script's work until the next; "
            "ms/step: the steps')"
            if fx.whole_loop
            else ""
        )
    )


def fix_table(report: Report) -> Table | None:
    fx = report.fix
    if fx is None:
        return None
    caption = fix_caption(fx)
    table = Table(title="Fixes (measured)", title_justify="left", caption=caption, expand=False)
    table.add_column("fix", no_wrap=True)
    table.add_column("throughput", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("result")
    table.add_column("why")
    table.add_row("baseline", fmt_throughput(fx.baseline), fmt.ratio(1.0, decimals=2), "", "")
    if note := fmt.timed_baseline(fx):
        table.add_row("baseline, re-run", fmt_throughput(fx.baseline_timed), "", "", Text(note, style="dim"))
    for t in fx.trials:
        # the reason's first clause stays whole; advice after it is clipped (docs/fixes.md has it all)
        why = _why(t)
        speedup = Text(fmt.ratio_ci(t.speedup, t.speedup_ci) if t.speedup else "")
        if t.paired_ratios:
            speedup.append("\npaired " + ", ".join(fmt.ratio(r) for r in t.paired_ratios), style="dim")
        result = fmt.trial_result(t)
        table.add_row(
            t.name,
            _rate_cell(t.throughput, t.reference),
            speedup,
            Text(result, style=_STATUS_STYLE.get(t.status, "")),
            why,
        )
    if fx.combined is not None:
        table.add_row(
            "combined",
            _rate_cell(fx.combined, fx.combined_reference),
            fmt.ratio_ci(fx.combined_speedup, fx.combined_ci) if fx.combined_speedup else "",
            Text("final", style="bold green"),
            f"{', '.join(fx.kept)}: {fmt.training(fx.training_changes, fx.combined_verdict)}",
            style="bold",
        )
    return table


def _rate_cell(rate: Throughput | None, reference: Throughput | None) -> Text:
    """A trial's (or the combined result's) median run, and under it, dim, the median run of the state
    it was measured against in its paired rounds: the two rates its ratio compares."""
    cell = Text(fmt_throughput(rate) if rate else "")
    if rate and reference:
        cell.append(f"\n{fmt.against(reference)}", style="dim")
    return cell


def _why(t) -> Text:  # type: ignore[no-untyped-def]
    head, _, advice = t.reason.partition("; advice:")
    why = Text(head)
    if t.training_changes and fmt.training(t.training_changes) not in head:
        why.append("\n" + fmt.training(t.training_changes), style="bold")
    if advice:
        advice = advice.strip()
        why.append("\n" + (advice if len(advice) <= 140 else advice[:139] + "…"), style="dim")
    return why


def fix_parts(report: Report, *, narrow: bool) -> list[RenderableType | None]:
    """The fix trials as a table, or for a narrow console (a terminal or a log file under
    :data:`WIDE` columns) as blocks and the table's caption."""
    if not narrow:
        return [fix_table(report)]
    parts: list[RenderableType | None] = [*fix_blocks(report)]
    if report.fix is not None and (cap := fix_caption(report.fix)):
        parts.append(Text(cap, style="dim"))
    return parts


def fix_blocks(report: Report) -> list[RenderableType]:
    """The fix trials for a narrow terminal: per trial a heading line (name whole, result, speedup),
    then its throughput and why, indented."""
    fx = report.fix
    if fx is None:
        return []
    out: list[RenderableType] = [Text("Fixes (measured)", style="italic")]
    base = Text("baseline", style="bold")
    out.append(base)
    out.append(Padding(Text(fmt_throughput(fx.baseline)), (0, 0, 0, 4), expand=False))
    if note := fmt.timed_baseline(fx):
        out.append(Text("baseline, re-run", style="bold"))
        body = Text(fmt_throughput(fx.baseline_timed) + "\n")
        body.append(note, style="dim")
        out.append(Padding(body, (0, 0, 0, 4), expand=False))
    for t in fx.trials:
        head = Text(t.name, style="bold")
        result = fmt.trial_result(t)
        head.append("  ")
        head.append(result, style=_STATUS_STYLE.get(t.status, ""))
        if t.speedup:
            head.append("  " + fmt.ratio_ci(t.speedup, t.speedup_ci))
        out.append(head)
        body = _rate_cell(t.throughput, t.reference)
        body.append("\n" if t.throughput else "")
        if t.paired_ratios:
            body.append("paired " + ", ".join(fmt.ratio(r) for r in t.paired_ratios) + "\n", style="dim")
        body.append_text(_why(t))
        out.append(Padding(body, (0, 0, 0, 4), expand=False))
    if fx.combined is not None:
        head = Text("combined", style="bold")
        head.append("  ")
        head.append("final", style="bold green")
        if fx.combined_speedup:
            head.append("  " + fmt.ratio_ci(fx.combined_speedup, fx.combined_ci))
        out.append(head)
        body = _rate_cell(fx.combined, fx.combined_reference)
        body.append("\n")
        body.append(f"{', '.join(fx.kept)}: {fmt.training(fx.training_changes, fx.combined_verdict)}")
        out.append(Padding(body, (0, 0, 0, 4), expand=False))
    return out


def distributed_table(report: Report) -> Table | None:
    """Per-worker and per-replica timing of a distributed run (tfdoctor.analysis.distributed)."""
    d = report.distributed
    if d is None or not (d.workers or d.replicas):
        return None
    bits = [
        f"collectives {100 * d.collective_share:.0f} % of step, {100 * d.collective_overlap:.0f} % overlapped"
    ]
    if d.straggler:
        bits.append(f"straggler {d.straggler} ({d.straggler_ratio:.1f}x)")
    if d.idle_devices:
        bits.append(f"{len(d.idle_devices)} idle device(s)")
    table = Table(title="Replicas and workers", title_justify="left", caption=" · ".join(bits), expand=False)
    for col in ("", "step ms", "compute ms", "input ms", "collective ms", "overlap", "busy"):
        table.add_column(col, justify="left" if not col else "right")
    for r in [*d.workers, *d.replicas]:
        name = f"{r.host} {r.name}" if r.kind == "device" and len(d.hosts) > 1 else r.name
        style = "bold red" if r.name == d.straggler else ("dim" if not r.active else None)
        table.add_row(
            escape(name),
            f"{r.step_ms:.2f}",
            f"{r.busy_ms:.2f}",
            f"{r.input_wait_ms:.2f}" if r.kind == "worker" else "",
            f"{r.collective_ms:.2f}" if r.kind != "replica" else "",
            f"{100 * r.collective_overlap:.0f} %" if r.collective_ms else "",
            f"{100 * r.busy_share:.0f} %",
            style=style,
        )
    return table


def render(report: Report, console: Console | None = None, *, run_dir: str | None = None) -> None:
    console = console or Console()
    head = Text()
    head.append(report.target, style="bold")
    if report.args:
        head.append(" " + " ".join(report.args))
    head.append(f"  [{report.status}]", style="green" if report.status == "complete" else "red")
    lines = [head]
    if report.verdict:
        lines.append(Text(report.verdict, style="bold"))
    lines.append(Text(f"Throughput (unprofiled timing window): {fmt_throughput(report.throughput)}"))
    f = report.facts
    facts_bits = [
        b
        for b in (
            f"TF {f.tf_version}" if f.tf_version else None,
            ", ".join(sorted({d.model or d.kind for d in f.devices})) if f.devices else None,
            f"batch {f.batch_size}" if f.batch_size else None,
            f"{f.loop_kind} loop" if f.loop_kind != "unknown" else None,
            fmt.timed_fit(report),
            f"{f.step_kind} step" if f.step_kind != "unknown" else None,
            f"input: {f.input_kind}" if f.input_kind != "unknown" else None,
            f"policy {f.dtype_policy}" if f.dtype_policy else None,
            "XLA on" if f.jit_compile or f.auto_jit else None,
            f"{f.strategy} ×{f.num_replicas}" if f.strategy else None,
        )
        if b
    ]
    if facts_bits:
        lines.append(Text(" · ".join(facts_bits), style="dim"))
    if report.error:
        lines.append(Text(error_line(report.error), style="red"))
    console.print(Panel(Group(*lines), title="tfdoctor", title_align="left", expand=False))
    narrow = console.width < WIDE
    # at 80 columns a corrected breakdown (one column more) keeps to the width with a shorter bar
    bar = 18 if narrow and report.breakdown is not None and corrected_ms(report.breakdown) else _BAR
    parts: list[RenderableType | None] = [
        breakdown_table(report, bar=bar),
        *measured_lines(report),
        distributed_table(report),
    ]
    parts += [*findings_blocks(report)] if narrow else [findings_table(report)]
    parts += fix_parts(report, narrow=narrow)
    for part in parts:
        if part is not None:
            console.print(part)
    if report.fix is not None:
        console.print(Text(fmt.fix_headline(report.fix), style="bold"))
    if report.breakdown is not None:
        # the analysis's note on the profiler's cost is what measured_lines says, for the table above
        said = tracer_cost_view(report.breakdown) is not None and report.breakdown.steps
        for note in report.breakdown.notes:
            if said and note.startswith(_TRACER_NOTE):
                continue
            console.print(f"[dim]note: {escape(note)}[/]")
    if run_dir:
        # a path or a command is never broken across lines (soft_wrap): a copied line must work
        if len(run_dir) + len("Run directory: ") > console.width:
            console.print("Run directory:")
            console.print(f"  {escape(run_dir)}", soft_wrap=True)
        else:
            console.print(f"Run directory: {escape(run_dir)}", soft_wrap=True)
        if report.logdir:
            cmd = f"tensorboard --logdir {run_dir}/{report.logdir}"
            if len(cmd) + len("Raw trace: ") > console.width:
                console.print("[dim]Raw trace:[/]")
                console.print(f"[dim]  {escape(cmd)}[/]", soft_wrap=True)
            else:
                console.print(f"[dim]Raw trace: {escape(cmd)}[/]", soft_wrap=True)


def error_line(text: str) -> str:
    """One line of an error text: a traceback's last exception as ``Type: first line`` (not the last
    line of a multi-line message), else the text's first line."""
    lines = text.strip().splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last):")]
    if not starts:
        return lines[0].strip() if lines else ""
    i = starts[-1] + 1
    while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
        i += 1
    return lines[i].strip() if i < len(lines) else lines[-1].strip()
