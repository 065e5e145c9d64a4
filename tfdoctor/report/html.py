"""HTML rendering of a :class:`~tfdoctor.model.Report`: the run page the web UI serves and the
self-contained report ``tfdoctor report RUN --html out.html`` writes are the same template.

Data first: :func:`run_page` turns a Report (plus, when known, the report of the run after fixes and
the downsampled timeline) into a :class:`RunPage` payload — figures as plotly dicts, findings,
facts, the highlighted patch — and tests assert on that. :func:`render_run` is the thin Jinja2 step
(autoescape on: every script name, op name, claim and error is escaped). ``standalone=True`` inlines
plotly.js, CSS, JS and the timeline, so the file opens offline and makes no network request.
"""

from __future__ import annotations

import datetime as _dt
import html as _html
import importlib.resources
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from tfdoctor import __version__
from tfdoctor.errors import TfdoctorError
from tfdoctor.model import (
    CATEGORY_LABELS,
    Breakdown,
    Facts,
    Finding,
    FixTrial,
    Report,
    StepBreakdown,
    Throughput,
)
from tfdoctor.report import charts
from tfdoctor.report import format as fmt
from tfdoctor.report.compare import Comparison
from tfdoctor.report.measured import (
    PrecisionView,
    TracerCostView,
    corrected_ms,
    precision_view,
    tracer_cost_view,
)
from tfdoctor.report.timeline import KINDS, Timeline
from tfdoctor.rundir import PATCH, RunDir

TEMPLATES = Path(__file__).with_name("templates")
STATIC = Path(__file__).with_name("static")

MAX_PATCH_CHARS = 200_000
MAX_TEXT = 4_000  # one error message / evidence value shown at most this long


class OutputExists(TfdoctorError):
    """An output file is there already and ``--force`` was not given."""

    exit_code = 6


# -- payload -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    label: str
    value: str
    sub: str = ""
    tone: str = ""  # "" | "good" | "bad"


@dataclass(frozen=True)
class EvidenceView:
    label: str
    value: str
    source: str | None
    ranges: list[tuple[float, float]]


@dataclass(frozen=True)
class FindingView:
    anchor: str
    rule_id: str
    name: str
    severity: str
    claim: str
    saving: str
    fixes: list[tuple[str, str | None]]  # (fix id, anchor of its trial row or None)
    evidence: list[EvidenceView]
    decided: bool
    why_not: str | None

    @property
    def ranges(self) -> list[tuple[float, float]]:
        return [r for e in self.evidence for r in e.ranges]


@dataclass(frozen=True)
class FixRow:
    anchor: str
    fix_id: str
    description: str
    status: str
    reason: str
    throughput: str
    speedup: str
    error: str | None
    run_id: str | None
    reference: str = ""  # "against 3,479 examples/s": the median run of the state it was paired with


@dataclass(frozen=True)
class ReplicaRow:
    name: str
    kind: str  # "worker" | "device" | "replica"
    step_ms: str
    busy_ms: str
    input_ms: str
    collective_ms: str
    overlap: str
    busy: str
    straggler: bool
    active: bool


@dataclass(frozen=True)
class DistributedView:
    """Report.distributed for the page: one row per worker, then per device / replica."""

    summary: str  # "MirroredStrategy × 2 · collectives 12 % of step, 80 % overlapped · straggler ..."
    rows: list[ReplicaRow]
    idle_devices: list[str]
    notes: list[str]


def distributed_view(report: Report) -> DistributedView | None:
    d = report.distributed
    if d is None or not (d.workers or d.replicas):
        return None
    bits = [f"{d.strategy} × {d.num_replicas}" if d.strategy else f"{d.num_replicas} replica(s)"]
    if len(d.hosts) > 1:
        bits.append(f"{len(d.hosts)} hosts")
    bits.append(
        f"collectives {100 * d.collective_share:.0f} % of step, {100 * d.collective_overlap:.0f} % overlapped"
    )
    if d.input_imbalance:
        bits.append(f"input imbalance {100 * d.input_imbalance:.0f} % of a step")
    if d.straggler:
        bits.append(f"straggler {d.straggler} ({d.straggler_ratio:.2f}x the fastest)")
    rows = []
    for r in [*d.workers, *d.replicas]:
        name = f"{r.host} {r.name}" if r.kind == "device" and len(d.hosts) > 1 and r.host else r.name
        rows.append(
            ReplicaRow(
                name=name,
                kind=r.kind,
                step_ms=f"{r.step_ms:,.2f}",
                busy_ms=f"{r.busy_ms:,.2f}",
                input_ms=f"{r.input_wait_ms:,.2f}" if r.kind == "worker" else "",
                collective_ms=f"{r.collective_ms:,.2f}" if r.kind != "replica" else "",
                overlap=f"{100 * r.collective_overlap:.0f} %" if r.collective_ms else "",
                busy=f"{100 * r.busy_share:.0f} %",
                straggler=r.name == d.straggler,
                active=r.active,
            )
        )
    return DistributedView(
        summary=" · ".join(bits), rows=rows, idle_devices=list(d.idle_devices), notes=list(d.notes)
    )


@dataclass(frozen=True)
class RunPage:
    run_id: str
    title: str
    script: str
    command: str
    target: str  # what follows `tfdoctor profile`: the script, or -m MODULE
    created: str
    created_human: str
    status: str
    error: str | None
    verdict: str
    verdict_derived: bool  # True: no rule verdict; the sentence comes from the breakdown
    metrics: list[Metric]
    figures: dict[str, dict[str, Any]]
    findings: list[FindingView]
    fix_rows: list[FixRow]
    kept: list[str]
    patch_html: Markup | None
    patch_stats: str
    facts: list[tuple[str, str]]
    notes: list[str]
    run_path: str | None
    tensorboard_cmd: str | None
    timeline: Timeline | None
    timeline_note: str
    after_run_id: str | None
    live: bool
    n_steps: int
    legend: list[tuple[str, str, str]] = field(default_factory=list)  # (label, colour, kind)
    distributed: DistributedView | None = None
    fix_headline: str = ""  # report.format.fix_headline: the combined ratio, its interval, the training
    tracer_cost: TracerCostView | None = None  # the profiler's cost and what it means for the shares
    precision: PrecisionView | None = None  # the compute precision measured from the trace


def _clip(text: str | None, n: int = MAX_TEXT) -> str | None:
    if text is None:
        return None
    return text if len(text) <= n else text[:n] + f"… ({len(text) - n:,} more characters)"


def fmt_rate(t: Throughput | None) -> tuple[str, str]:
    """("1,234 ex/s", "12.3 ms/step · ±4 %") for a metric card."""
    if t is None:
        return "n/a", ""
    main = fmt.headline_rate(t, short=True)
    sub = f"{fmt.ms(t.step_ms_median)}/step{fmt.per_step(t)}"
    if t.windows:
        sub += f" · {fmt.noise(t)}"
    return main, sub


def human_time(iso: str) -> str:
    try:
        d = _dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return d.strftime("%Y-%m-%d %H:%M")


def derived_verdict(report: Report) -> str:
    """A verdict from the breakdown alone, for reports the rules did not give one."""
    bd = report.breakdown
    if bd is None or not bd.steps or not bd.share:
        if report.status == "running":
            return "Profiling is in progress."
        if report.error:
            return f"The run ended with status “{report.status}” before it could be diagnosed."
        return "Not enough was recorded to diagnose this run."
    top = sorted(bd.share.items(), key=lambda kv: -kv[1])
    c, share = top[0]
    s = f"Step time ({bd.avg_step_ms:,.1f} ms on average) is dominated by {CATEGORY_LABELS[c].lower()} ({share * 100:.0f} %)"
    if len(top) > 1 and top[1][1] >= 0.15:
        s += f", then {CATEGORY_LABELS[top[1][0]].lower()} ({top[1][1] * 100:.0f} %)"
    return s + "."


def facts_rows(f: Facts, timed: str | None = None) -> list[tuple[str, str]]:
    """The facts table; ``timed``: which fit() the throughput is of (:func:`fmt.timed_fit`)."""

    def yn(v: bool | None) -> str | None:
        return None if v is None else ("on" if v else "off")

    devs = ", ".join(
        f"{d.kind} {d.model or d.name}" + (f" (cc {d.compute_capability})" if d.compute_capability else "")
        for d in f.devices
    )
    rows: list[tuple[str, str | None]] = [
        ("TensorFlow", f.tf_version),
        ("Keras", f.keras_version),
        ("Python", f.python_version),
        ("Platform", f.platform),
        ("Host", f.hostname),
        ("Devices", devs or None),
        ("Training loop", None if f.loop_kind == "unknown" else f.loop_kind),
        ("Timed", (timed or "").removeprefix("timed: ") or None),
        ("Step", None if f.step_kind == "unknown" else f.step_kind),
        ("Steps counted by", f.step_counter),
        ("Input", None if f.input_kind == "unknown" else f.input_kind),
        ("Batch size", None if f.batch_size is None else str(f.batch_size)),
        ("dtype policy", f.dtype_policy),
        ("XLA (jit_compile)", yn(f.jit_compile)),
        ("XLA auto-jit", yn(f.auto_jit)),
        ("Strategy", f.strategy and f"{f.strategy} × {f.num_replicas}"),
        (
            # a custom loop's tf.function looping over its batches in its graph: the updates a call ran
            "steps_per_execution" if f.loop_kind == "keras_fit" else "Batches a call (in-graph loop)",
            None if f.steps_per_execution is None else str(f.steps_per_execution),
        ),
        (
            "Optimizer",
            f.optimizer and (f.optimizer + (f" (lr {f.learning_rate:g})" if f.learning_rate else "")),
        ),
        ("Retraces", None if f.retraces is None else str(f.retraces)),
        (
            "Warm-up",
            None
            if f.warmup_steps is None
            else f"{f.warmup_steps} steps" + (f" ({f.warmup_note})" if f.warmup_note else ""),
        ),
        (
            "Memo cache (generator-cache)",
            None
            if f.memo_hits is None
            else f"{f.memo_hits:,} hits, {f.memo_misses or 0:,} misses at the end of the warm-up"
            + (", full" if f.memo_full else "")
            + ("" if f.memo_warm is None else (", warm" if f.memo_warm else ", still cold")),
        ),
        (
            "Dataset",
            " → ".join(
                d.op
                + (
                    f"({d.detail})"
                    if d.detail
                    else ("(parallel" + (", AUTOTUNE)" if d.autotune else ")") if d.parallel else "")
                )
                for d in f.dataset
            )
            or None,
        ),
    ]
    rows.append(("CPU cores", None if f.cpu_count is None else str(f.cpu_count)))
    rows.append(("CPU features", ", ".join(f.cpu_flags) or None))
    rows += [(f"Where: {SOURCE_LABELS.get(k, k.replace('_', ' '))}", v) for k, v in f.source.items()]
    seen = [(k[len("seen_") :], v) for k, v in f.extra.items() if k.startswith("seen_")]
    if seen:
        rows.append(("Calls seen by the hooks", " · ".join(f"{k.replace('_', ' ')} {v}" for k, v in seen)))
    for k, v in f.extra.items():
        if k.startswith("switch_"):
            rows.append((f"Run-time switch: {k[len('switch_') :].replace('_', ' ')}", v))
        elif k == "compute_precision":
            rows.append(("Compute precision (measured)", v))
        elif not k.startswith("seen_"):
            rows.append((k.replace("_", " ").capitalize(), v))
    return [(k, _clip(v, 600) or "") for k, v in rows if v]


#: what each ``Facts.source`` role names, for the Facts table ("Where: the training step function")
SOURCE_LABELS = {
    "step_fn": "the training step function",
    "apply_gradients": "the optimizer step",
    "gradient": "the gradient (GradientTape)",
    "fit": "the Model.fit call",
    "input": "the input (Python generator)",
    "dataset": "the tf.data pipeline",
    "dataset_map": "the tf.data map",
    "dataset_source": "the dataset's source",
    "generator": "the Python generator",
    "model": "the model",
    "compile": "Model.compile",
    "batch": "the batch size",
}


def highlight_patch(patch: str) -> Markup:
    """The unified diff as HTML: pygments' diff lexer where installed, else line colouring."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import DiffLexer
    except ImportError:  # pragma: no cover - pygments is a dependency of rich, so normally there
        lines = []
        for ln in patch.splitlines():
            cls = {"+": "gi", "-": "gd", "@": "gu"}.get(ln[:1], "")
            if ln.startswith(("+++", "---")):
                cls = "gh"
            lines.append(f'<span class="{cls}">{_html.escape(ln)}</span>')
        return Markup('<div class="hl"><pre>' + "\n".join(lines) + "</pre></div>")
    return Markup(highlight(patch, DiffLexer(), HtmlFormatter(cssclass="hl", nowrap=False)))


@cache
def pygments_css() -> str:
    try:
        from pygments.formatters import HtmlFormatter
    except ImportError:  # pragma: no cover
        return ".hl .gi{color:#1a7f37}.hl .gd{color:#cf222e}.hl .gu{color:#8250df}"
    return HtmlFormatter(style="default").get_style_defs(".hl")


def _finding_view(f: Finding, trial_ids: set[str]) -> FindingView:
    return FindingView(
        anchor=f"finding-{f.rule_id}-{f.name}".replace(" ", "-"),
        rule_id=f.rule_id,
        name=f.name,
        severity=f.severity,
        claim=_clip(f.claim, 600) or "",
        saving=f"≈ {f.est_saving * 100:.0f} % of step time" if f.est_saving > 0 else "",
        fixes=[(fid, f"fix-{fid}" if fid in trial_ids else None) for fid in f.fix_ids],
        evidence=[
            EvidenceView(
                label=_clip(e.label, 200) or "",
                value=_clip(e.value, 600) or "",
                source=e.source,
                ranges=[(float(a), float(b)) for a, b in e.time_ranges_ms[:50]],
            )
            for e in f.evidence[:40]
        ],
        decided=f.decided,
        why_not=_clip(f.why_not, 600),
    )


def _fix_row(t: FixTrial) -> FixRow:
    main, _ = fmt_rate(t.throughput)
    return FixRow(
        anchor=f"fix-{t.fix_id}",
        fix_id=t.name,
        description=t.description,
        status=t.status,
        reason=(_clip(t.reason, 800) or "")
        + (f" ({fmt.training(t.training_changes)})" if t.training_changes else ""),
        throughput=main if t.throughput else "–",
        speedup=fmt.ratio_ci(t.speedup, t.speedup_ci) if t.speedup is not None else "–",
        error=_clip(t.error),
        run_id=t.run_id,
        reference=fmt.against(t.reference) if t.throughput and t.reference else "",
    )


def after_run_id(report: Report) -> str | None:
    """The run whose breakdown is the "after" panel: the combined run of the kept fixes if recorded
    (trial ``combined``), else the last kept trial."""
    fix = report.fix
    if fix is None:
        return None
    if fix.combined_run_id:
        return fix.combined_run_id
    for t in fix.trials:
        if t.fix_id == "combined" and t.run_id:
            return t.run_id
    kept = [t for t in fix.trials if t.status == "kept" and t.run_id]
    return kept[-1].run_id if kept else None


def unprofiled_breakdown(bd: Breakdown) -> Breakdown | None:
    """The mean unprofiled step as a one-step breakdown (for the share chart's corrected bar); None
    where the profiler's cost was not corrected."""
    ms = corrected_ms(bd)
    if ms is None or bd.unprofiled_share is None or bd.unprofiled_step_ms is None:
        return None
    step = StepBreakdown(step=0, start_ms=0.0, total_ms=bd.unprofiled_step_ms, ms=ms)
    return Breakdown(
        source=bd.source,
        device_kind=bd.device_kind,
        steps=[step],
        share=dict(bd.unprofiled_share),
        avg_step_ms=bd.unprofiled_step_ms,
    )


def run_page(
    report: Report,
    *,
    run_path: Path | None = None,
    after: Report | None = None,
    timeline: Timeline | None = None,
    patch_file: str | None = None,
) -> RunPage:
    """The payload of the run page (server and static report alike)."""
    figures: dict[str, dict[str, Any]] = {}
    after_bd = after.breakdown if after is not None and after.breakdown and after.breakdown.steps else None
    fig = charts.breakdown_figure(report.breakdown, after_bd)
    if fig:
        figures["breakdown"] = fig
    share_rows = []
    if report.breakdown is not None and report.breakdown.steps:
        fixed = unprofiled_breakdown(report.breakdown)
        if fixed is None:
            share_rows.append(("before" if after_bd else "this run", report.breakdown))
        else:  # the profiler's cost corrected: the profiled step as traced, and the unprofiled one
            share_rows.append(("before, profiled" if after_bd else "profiled", report.breakdown))
            share_rows.append(("before, unprofiled" if after_bd else "unprofiled", fixed))
    if after_bd is not None:
        share_rows.append(("after fixes", after_bd))
    fig = charts.share_figure(share_rows)
    if fig:
        figures["share"] = fig
    fig = charts.throughput_figure(report)
    if fig:
        figures["throughput"] = fig
    if timeline is not None:
        fig = charts.timeline_figure(timeline)
        if fig:
            figures["timeline"] = fig

    metrics: list[Metric] = []
    base = report.fix.baseline if report.fix and report.fix.baseline else report.throughput
    main, sub = fmt_rate(base)
    if report.fix is not None and (note := fmt.timed_baseline(report.fix)):
        sub = f"{sub} · {note}: {fmt.headline_rate(report.fix.baseline_timed)}"
    metrics.append(Metric("Throughput" if not report.fix else "Baseline", main, sub))
    if report.fix is not None:
        main, sub = fmt_rate(report.fix.combined)
        sp = report.fix.combined_speedup
        metrics.append(
            Metric(
                "After fixes",
                main,
                (f"{fmt.ratio_ci(sp, report.fix.combined_ci)} side by side · " if sp else "")
                + (
                    f"{fmt.against(report.fix.combined_reference)} · "
                    if sp and report.fix.combined_reference
                    else ""
                )
                + fmt.training(report.fix.training_changes, report.fix.combined_verdict),
                tone="good" if sp and sp > 1 else ("bad" if sp and sp < 1 else ""),
            )
        )
    bd = report.breakdown
    if bd is not None and bd.steps:
        metrics.append(
            Metric("Profiled step", f"{bd.avg_step_ms:,.1f} ms", f"{len(bd.steps)} steps · {bd.device_kind}")
        )
        shares = bd.unprofiled_share or bd.share
        top = max(shares.items(), key=lambda kv: kv[1]) if shares else None
        if top:
            metrics.append(
                Metric(
                    "Largest share",
                    fmt.percent(top[1]),
                    CATEGORY_LABELS[top[0]] + (" (unprofiled step)" if bd.unprofiled_share else ""),
                )
            )
    cost = tracer_cost_view(bd) if bd is not None and bd.steps else None
    if cost is not None:
        metrics.append(Metric("Profiler cost", cost.ratio, cost.short))
    prec = precision_view(bd.precision) if bd is not None and bd.steps else None
    if prec is not None:
        metrics.append(Metric("Compute precision", prec.value, prec.detail))
    high = sum(1 for f in report.findings if f.severity == "high")
    metrics.append(
        Metric(
            "Findings", str(len(report.findings)), f"{high} high" if high else "", tone="bad" if high else ""
        )
    )

    trial_ids = {t.fix_id for t in report.fix.trials} if report.fix else set()
    findings = report.findings  # the rules' order, the terminal's: the verdict's finding first
    patch = (report.fix.patch if report.fix else "") or (patch_file or "")
    patch_html, patch_stats = None, ""
    if patch.strip():
        added = sum(1 for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
        removed = sum(1 for ln in patch.splitlines() if ln.startswith("-") and not ln.startswith("---"))
        patch_stats = f"+{added} −{removed}"
        if len(patch) > MAX_PATCH_CHARS:
            patch = (
                patch[:MAX_PATCH_CHARS]
                + "\n… (patch cut here; the full patch is fix.patch in the run directory)\n"
            )
        patch_html = highlight_patch(patch)

    logdir = None
    tb = None
    if run_path is not None and report.logdir:
        logdir = Path(run_path) / report.logdir
        tb = f"tensorboard --logdir {shlex.quote(str(logdir))}"
    notes = list(report.breakdown.notes) if report.breakdown else []
    if timeline is not None:
        notes_tl = "; ".join(timeline.notes)
        if timeline.truncated:
            notes_tl += ("; " if notes_tl else "") + "deepest nesting levels or smallest events left out"
    else:
        notes_tl = ""
    args = " ".join(shlex.quote(a) for a in report.args)
    script_name = Path(report.script).name or report.script
    return RunPage(
        run_id=report.run_id,
        title=script_name,
        script=report.script,
        command=f"{report.target} {args}".strip(),
        target=report.target,
        created=report.created,
        created_human=human_time(report.created),
        status=report.status,
        error=_clip(report.error),
        verdict=report.verdict or derived_verdict(report),
        verdict_derived=not report.verdict,
        metrics=metrics,
        figures=figures,
        findings=[_finding_view(f, trial_ids) for f in findings],
        fix_rows=[_fix_row(t) for t in report.fix.trials] if report.fix else [],
        fix_headline=fmt.fix_headline(report.fix) if report.fix else "",
        kept=list(report.fix.kept) if report.fix else [],
        patch_html=patch_html,
        patch_stats=patch_stats,
        facts=facts_rows(report.facts, fmt.timed_fit(report)),
        notes=notes,
        run_path=str(run_path) if run_path is not None else None,
        tensorboard_cmd=tb,
        timeline=timeline,
        timeline_note=notes_tl,
        after_run_id=after.run_id if after is not None else None,
        live=report.status == "running",
        n_steps=len(report.steps),
        legend=[(KINDS[k], charts.KIND_COLORS[k], k) for k in KINDS],
        distributed=distributed_view(report),
        tracer_cost=cost,
        precision=prec,
    )


# -- rendering ---------------------------------------------------------------------------------


def environment(extra_dirs: Iterable[Path] = ()) -> jinja2.Environment:
    """The Jinja2 environment (autoescape on) over ``extra_dirs`` then this package's templates."""
    loader = jinja2.ChoiceLoader(
        [jinja2.FileSystemLoader([str(d) for d in extra_dirs]), jinja2.FileSystemLoader(str(TEMPLATES))]
    )
    env = jinja2.Environment(
        loader=loader,
        autoescape=True,  # every template here is HTML, whatever its suffix
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        version=__version__,
        category_labels=CATEGORY_LABELS,
        category_colors=charts.COLORS,
        asset=asset,
    )
    env.filters.update(ratio=fmt.ratio, ratio_ci=fmt.ratio_ci, rate=fmt.rate)
    return env


@cache
def _read_asset(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def asset(name: str) -> Markup:
    """A CSS/JS file of ``static/`` to inline in a ``<style>``/``<script>``."""
    text = _read_asset(name)
    if name.endswith(".css"):
        text += "\n" + pygments_css()
    return Markup(text.replace("</", "<\\/") if name.endswith(".js") else text)


@cache
def plotly_js() -> str:
    """plotly.min.js from the installed plotly package (inlined in standalone reports)."""
    return (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_text(
        encoding="utf-8"
    )


def plotly_js_path() -> Path:
    return Path(str(importlib.resources.files("plotly") / "package_data" / "plotly.min.js"))


@cache
def _default_env() -> jinja2.Environment:
    return environment()


def render_run(
    page: RunPage,
    *,
    standalone: bool,
    env: jinja2.Environment | None = None,
    timeline_url: str | None = None,
    progress_url: str | None = None,
    plotly: str = "inline",
) -> str:
    """HTML of the run page. ``standalone``: plotly and the timeline inlined, no server links.
    ``plotly="parent"`` (standalone): plotly.js is not inlined; the page runs the copy the embedding
    page holds (the notebook's first report of the kernel carries it once, not every report)."""
    env = env or _default_env()
    return env.get_template("run.html.j2").render(
        page=page,
        standalone=standalone,
        plotly_inline=Markup(plotly_js()) if standalone and plotly == "inline" else None,
        plotly_parent=standalone and plotly == "parent",
        timeline_url=None if standalone else timeline_url,
        progress_url=None if standalone else progress_url,
        generated=_dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M"),
    )


def write_output(path: Path, text: str, *, force: bool) -> Path:
    """Write ``text`` to ``path``; an existing file is kept unless ``force``."""
    from tfdoctor.rundir import atomic_write_text

    path = Path(path)
    if path.exists() and not force:
        raise OutputExists(f"{path} exists; pass --force to overwrite it")
    if path.is_dir():
        raise OutputExists(f"{path} is a directory")
    atomic_write_text(path, text)
    return path


def report_html(
    report: Report,
    *,
    run_path: Path | None = None,
    load_report: Callable[[str], Report | None] | None = None,
    timeline: Timeline | None = None,
    plotly: str = "inline",
) -> str:
    """The self-contained HTML report of one run (what ``tfdoctor report --html`` writes);
    ``plotly="parent"``: see :func:`render_run` (the notebook's inline report)."""
    after = None
    aid = after_run_id(report)
    if aid and load_report is not None:
        after = load_report(aid)
    patch_file = None
    if run_path is not None:
        try:  # never through a link out of the run directory, never a FIFO (RunDir.read_bytes)
            patch_file = RunDir(Path(run_path)).read_text(PATCH)
        except (TfdoctorError, OSError):
            patch_file = None
    page = run_page(report, run_path=run_path, after=after, timeline=timeline, patch_file=patch_file)
    return render_run(page, standalone=True, plotly=plotly)


# -- compare -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComparePage:
    comparison: Comparison
    a_title: str
    b_title: str
    headline: str  # "B is 1.42x faster than A (examples/s)"
    tone: str  # "good" | "bad" | ""
    figures: dict[str, dict[str, Any]]
    rows: list[tuple[str, str, str, str, str]]  # (category, a, b, delta, css class of delta)
    a_rate: tuple[str, str]
    b_rate: tuple[str, str]


def compare_page(c: Comparison, a: Report, b: Report) -> ComparePage:
    figures: dict[str, dict[str, Any]] = {}
    rows_bd = [("A", a.breakdown), ("B", b.breakdown)]
    fig = charts.share_figure([(label, bd) for label, bd in rows_bd if bd is not None])
    if fig:
        figures["share"] = fig
    fig = charts.compare_throughput_figure(("A", a.throughput), ("B", b.throughput))
    if fig:
        figures["throughput"] = fig
    if c.speedup is None:
        headline, tone = "Throughput cannot be compared: one of the runs has no timing window.", ""
    else:
        word = "faster" if c.speedup >= 1 else "slower"
        ratio = c.speedup if c.speedup >= 1 else 1 / c.speedup
        headline = f"B is {fmt.ratio(ratio)} {word} than A ({c.unit})"
        if c.within_noise:
            headline += ", within the noise of the two runs"
            tone = ""
        else:
            tone = "good" if c.speedup > 1 else "bad"
    rows = []
    for d in c.categories:
        fa = (
            "–"
            if d.a_ms is None
            else f"{d.a_ms:,.2f} ms" + (f" ({d.a_share * 100:.0f} %)" if d.a_share is not None else "")
        )
        fb = (
            "–"
            if d.b_ms is None
            else f"{d.b_ms:,.2f} ms" + (f" ({d.b_share * 100:.0f} %)" if d.b_share is not None else "")
        )
        if d.delta_ms is None:
            fd, cls = "–", ""
        else:
            fd = f"{d.delta_ms:+,.2f} ms"
            cls = "delta-pos" if d.delta_ms > 0.005 else ("delta-neg" if d.delta_ms < -0.005 else "")
        rows.append((d.label, fa, fb, fd, cls))
    return ComparePage(
        comparison=c,
        a_title=Path(a.script).name or a.run_id,
        b_title=Path(b.script).name or b.run_id,
        headline=headline,
        tone=tone,
        figures=figures,
        rows=rows,
        a_rate=fmt_rate(a.throughput),
        b_rate=fmt_rate(b.throughput),
    )


def render_compare(page: ComparePage, *, standalone: bool, env: jinja2.Environment | None = None) -> str:
    env = env or _default_env()
    return env.get_template("compare.html.j2").render(
        page=page,
        standalone=standalone,
        plotly_inline=Markup(plotly_js()) if standalone else None,
        progress_url=None,
        generated=_dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M"),
    )
