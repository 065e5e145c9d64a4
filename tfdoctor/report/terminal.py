"""Terminal rendering of a :class:`~tfdoctor.model.Report` with rich: verdict, throughput, the
step-time breakdown, findings, and (after ``--fix``) the per-fix table.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tfdoctor.model import CATEGORIES, CATEGORY_LABELS, Report, Throughput
from tfdoctor.report import format as fmt

_SEV_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}
_BAR = 28


def fmt_throughput(t: Throughput | None) -> str:
    if t is None:
        return "n/a"
    parts = []
    if t.examples_per_s is not None:
        parts.append(fmt.rate(t.examples_per_s, "examples/s"))
    parts.append(fmt.rate(t.steps_per_s, "steps/s"))
    parts.append(f"{fmt.ms(t.step_ms_median)}/step")
    if t.windows:
        parts.append(f"{fmt.noise(t)} over {len(t.windows)} windows")
    return " · ".join(parts)


def breakdown_table(report: Report) -> Table | None:
    bd = report.breakdown
    if bd is None or not bd.steps:
        return None
    table = Table(
        title="Step-time breakdown",
        caption=f"{len(bd.steps)} profiled steps · {bd.device_kind} · steps from {bd.source}",
        title_justify="left",
        caption_justify="left",
        expand=False,
    )
    table.add_column("category")
    table.add_column("ms/step", justify="right")
    table.add_column("share", justify="right")
    table.add_column("", min_width=_BAR)
    n = len(bd.steps)
    for cat in CATEGORIES:
        share = bd.share.get(cat, 0.0)
        ms = sum(s.ms.get(cat, 0.0) for s in bd.steps) / n
        if share < 0.0005 and ms < 0.0005:
            continue
        bar = "█" * round(share * _BAR)
        table.add_row(
            CATEGORY_LABELS.get(cat, cat), f"{ms:.2f}", f"{share * 100:.1f} %", Text(bar, style="cyan")
        )
    table.add_row("step", f"{bd.avg_step_ms:.2f}", "100 %", "", style="bold")
    return table


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
        claim = Text(f.claim)
        if not f.decided and f.why_not:
            claim.append(f"\n  undecided: {f.why_not}", style="dim")
        for ev in f.evidence[:3]:
            src = f" ({ev.source})" if ev.source else ""
            claim.append(f"\n  · {ev.label}: {ev.value}{src}", style="dim")
        table.add_row(
            f.rule_id,
            Text(f.severity, style=_SEV_STYLE.get(f.severity, "")),
            claim,
            f"{f.est_saving * 100:.0f} %" if f.est_saving else "",
            ", ".join(f.fix_ids),
        )
    return table


def fix_table(report: Report) -> Table | None:
    fx = report.fix
    if fx is None:
        return None
    caption = (
        "speedup: each fix's own ratio over the state it was tried on, with its 95 % interval "
        + (
            f"from paired rounds back to back (at most {fx.confirm_rounds}); "
            if fx.confirm_rounds
            else "from one run each; "
        )
        + "combined: the final state against the baseline, side by side"
    )
    table = Table(title="Fixes (measured)", title_justify="left", caption=caption, expand=False)
    table.add_column("fix")
    table.add_column("throughput", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("result")
    table.add_column("why")
    table.add_row("baseline", fmt_throughput(fx.baseline), fmt.ratio(1.0, decimals=2), "", "")
    style = {"kept": "green", "rejected": "yellow", "failed": "red", "skipped": "dim"}
    for t in fx.trials:
        # the reason's first clause stays whole; advice after it is clipped (docs/fixes.md has it all)
        head, _, advice = t.reason.partition("; advice:")
        why = Text(head)
        if t.training_changes and fmt.training(t.training_changes) not in head:
            why.append("\n" + fmt.training(t.training_changes), style="bold")
        if advice:
            advice = advice.strip()
            why.append("\n" + (advice if len(advice) <= 140 else advice[:139] + "…"), style="dim")
        speedup = Text(fmt.ratio_ci(t.speedup, t.speedup_ci) if t.speedup else "")
        if t.paired_ratios:
            speedup.append("\npaired " + ", ".join(fmt.ratio(r) for r in t.paired_ratios), style="dim")
        result = t.status if t.verdict != "undecided" else "not decided"
        table.add_row(
            t.name,
            fmt_throughput(t.throughput) if t.throughput else "",
            speedup,
            Text(result, style=style.get(t.status, "")),
            why,
        )
    if fx.combined is not None:
        table.add_row(
            "combined",
            fmt_throughput(fx.combined),
            fmt.ratio_ci(fx.combined_speedup, fx.combined_ci) if fx.combined_speedup else "",
            Text("final", style="bold green"),
            f"{', '.join(fx.kept)}: {fmt.training(fx.training_changes)}",
            style="bold",
        )
    return table


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
    head.append(f"{report.script}", style="bold")
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
        lines.append(Text(report.error.strip().splitlines()[-1] if report.error.strip() else "", style="red"))
    console.print(Panel(Group(*lines), title="tfdoctor", title_align="left", expand=False))
    for table in (
        breakdown_table(report),
        distributed_table(report),
        findings_table(report),
        fix_table(report),
    ):
        if table is not None:
            console.print(table)
    if report.fix is not None:
        console.print(Text(fmt.fix_headline(report.fix), style="bold"))
    if report.breakdown is not None:
        for note in report.breakdown.notes:
            console.print(f"[dim]note: {escape(note)}[/]")
    if run_dir:
        console.print(f"Run directory: {escape(run_dir)}")
        if report.logdir:
            console.print(
                f"[dim]Raw trace: tensorboard --logdir {escape(run_dir)}/{escape(report.logdir)}[/]"
            )
