"""The rule catalog (importable as ``tfdoctor.rules``).

One module per rule (``rules/<problem>.py`` defining ``RULE``); the registry is discovered from the
package, so adding a rule means adding a module. IDs: 0xx meta (what could not be evaluated),
1xx input pipeline, 2xx dispatch/launch, 3xx host<->device, 4xx precision & batch, 5xx compilation,
6xx distribution.

``evaluate(analysis, facts) -> (findings, verdict)`` is what the pipeline calls: findings sorted by
estimated saving then severity (undecided ones last), and a one-sentence verdict: what the highest-saving
finding names, with its figure (the breakdown's largest category beside it when that is another one).
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import TYPE_CHECKING

from tfdoctor.analysis.breakdown import NO_OPS_NOTE
from tfdoctor.model import CATEGORY_LABELS, Facts, Finding
from tfdoctor.rules._base import ADVICE_IDS, FIX_IDS, SEVERITY_RANK, Context, Example, Rule, pct

if TYPE_CHECKING:
    from tfdoctor.analysis import Analysis

__all__ = [
    "ADVICE_IDS",
    "FIX_IDS",
    "Context",
    "Example",
    "Rule",
    "all_rules",
    "evaluate",
    "get_rule",
    "top_finding",
    "verdict",
]


@lru_cache(maxsize=1)
def _registry() -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        cls = getattr(module, "RULE", None)
        if cls is None:
            raise ImportError(f"rule module {module.__name__} defines no RULE")
        rules.append(cls())
    return tuple(sorted(rules, key=lambda r: r.ID))


def all_rules() -> list[Rule]:
    """Every rule, by ID."""
    return list(_registry())


def get_rule(rule_id: str) -> Rule:
    for r in _registry():
        if rule_id == r.ID:
            return r
    raise KeyError(rule_id)


def _crashed(rule: Rule, err: Exception) -> Finding:
    # a bug in one rule must not hide the others' findings; it is shown, not swallowed
    return rule.undecided(f"the rule failed on this trace: {type(err).__name__}: {err}")


def _sort_key(f: Finding, outside: float = 0.0) -> tuple:
    """Decided findings first, by their saving of the loop's time (see :func:`top_finding`), so the list
    leads with the finding the verdict names."""
    saving = f.est_saving if f.rule_id == LOOP_RULE else f.est_saving * (1 - outside)
    return (not f.decided, -saving, SEVERITY_RANK.get(f.severity, 9), f.rule_id)


def run_rules(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    rules = all_rules()
    for rule in (r for r in rules if not r.META):
        if rule.DEVICE and not ctx.is_accelerator_run:
            ctx.skipped_cpu.append(rule.ID)
            continue
        if rule.NEEDS_STEPS and not ctx.has_steps:
            ctx.skipped_no_steps.append(rule.ID)
            continue
        if rule.DEVICE and rule.NEEDS_STEPS and not ctx.has_device_trace:
            ctx.skipped_no_device_trace.append(rule.ID)
            continue
        _detect(rule, ctx, findings)
    for rule in (r for r in rules if r.META):
        _detect(rule, ctx, findings)
    outside = loop_outside(ctx, findings)
    return sorted(findings, key=lambda f: _sort_key(f, outside))


def _detect(rule: Rule, ctx: Context, findings: list[Finding]) -> None:
    """Run one rule; a rule that crashes becomes an undecided finding (the others still run)."""
    try:
        f = rule.detect(ctx)
    except Exception as err:
        f = _crashed(rule, err)
    if f is not None:
        findings.append(f)


_BOUND = {
    "input_wait": ("Input-bound", "waits for input"),
    "dispatch": ("Launch-bound", "is op dispatch / kernel launch on the host"),
    "host_compute": ("Host-bound", "is Python and host work outside TF ops"),
    "device_compute": ("Compute-bound", "is device compute"),
    "device_idle": ("Host-bound", "has the device idle, waiting on the host"),
    "h2d": ("Copy-bound", "is host→device copies"),
    "d2h": ("Copy-bound", "is device→host copies"),
    "collective": ("Communication-bound", "is collectives (all-reduce)"),
    "other": ("Unexplained", "is not explained by the trace"),
}
#: the step-time categories each rule family explains
_FAMILY_CATEGORIES: dict[str, tuple[str, ...]] = {
    "input": ("input_wait",),
    "dispatch": ("dispatch", "host_compute", "device_idle"),
    "copy": ("h2d", "d2h"),
    "precision": ("device_compute", "device_idle", "dispatch"),
    "compilation": ("dispatch", "host_compute", "device_compute"),
    "distribution": ("device_compute", "collective"),
}


#: the step-time categories each verdict label names as the step's bound: the breakdown's largest category
#: is cited beside a label that names another one, whatever the finding's family covers (a 5xx small-ops
#: finding covers device compute, yet "Dispatch-bound" beside a step that computes 78 % of the time needs
#: that share beside it: keras.io's multi-input LSTM model, TFD501 at 10 %)
_LABEL_CATEGORIES: dict[str, tuple[str, ...]] = {
    "Input-bound": ("input_wait",),
    "Launch-bound": ("dispatch", "device_idle"),
    "Dispatch-bound": ("dispatch", "host_compute"),  # on a CPU: Python dispatching ops one by one
    "Host-bound": ("host_compute", "device_idle"),
    "Compute-bound": ("device_compute",),
    "Copy-bound": ("h2d", "d2h"),
    "Communication-bound": ("collective",),
    "Scaling-bound": ("device_compute", "collective"),
}


#: the verdict's label for a finding of each rule family; a rule's HEADLINE wins
_FAMILY_HEADLINE: dict[str, str] = {
    "input": "Input-bound",
    "dispatch": "Launch-bound",
    "copy": "Copy-bound",
    "precision": "Compute-bound",
    "compilation": "Launch-bound",
    "distribution": "Scaling-bound",
}


def _headline(f: Finding, ctx: Context) -> str:
    try:
        own = get_rule(f.rule_id).HEADLINE
    except KeyError:
        own = ""
    label = own or _FAMILY_HEADLINE.get(f.family, "Bound")
    gap = ctx.facts.between_fits
    if f.rule_id == LOOP_RULE and gap is not None and gap.loop == "steps":
        label = "Bound between bursts of steps"
    if label == "Launch-bound" and not ctx.is_accelerator_run:
        label = "Dispatch-bound"  # no kernels to launch on a CPU: ops are dispatched
    return label


#: a top finding estimated to save less than this does not name the step's bound when half the step or
#: more is a category outside its family: the verdict leads with that category and cites the finding
MINOR_SAVING = 0.10


def top_finding(findings: list[Finding], outside: float = 0.0) -> Finding | None:
    """The finding that heads the verdict: the decided one with the highest estimated saving; None when
    no finding estimates a saving. ``outside``: the share of the loop's time outside the training steps
    (TFD207's): its saving is of the loop's time, every other finding's of a step's, which is then
    ``1 - outside`` of the loop (keras-io's PPO: 30 % of a step saved is 1.2 % of a loop spending 96 % of
    its time collecting)."""

    def of_loop(f: Finding) -> float:
        return f.est_saving if f.rule_id == LOOP_RULE else f.est_saving * (1 - outside)

    cands = [
        f for f in findings if f.decided and f.est_saving > 0 and f.severity in ("high", "medium", "low")
    ]
    return max(cands, key=of_loop, default=None)  # the first of equals: findings come in this order


#: the rule whose saving is of the loop's time, not a step's (the script's own work between fit() calls
#: or bursts of steps)
LOOP_RULE = "TFD207"


def loop_outside(ctx: Context, findings: list[Finding]) -> float:
    """The share of the loop's time outside the training steps, where TFD207 found it (else 0)."""
    gap = ctx.facts.between_fits
    if gap is None or not any(f.rule_id == LOOP_RULE and f.decided for f in findings) or ctx.avg_step_ms <= 0:
        return 0.0
    outside, steps, _ = gap.loop_time(ctx.avg_step_ms, max(1, ctx.facts.steps_per_execution or 1))
    return outside / (outside + steps) if outside + steps > 0 else 0.0


def _largest(ctx: Context) -> tuple[str, str, str]:
    """(category, label, what) of the largest step-time category (input wait at 20 % and up wins, as XProf's
    'HIGHLY input-bound')."""
    share = ctx.share
    cat = max((c for c in share if c != "other"), key=lambda c: share[c], default="other")
    if share.get("input_wait", 0.0) >= 0.2:
        cat = "input_wait"
    label, what = _BOUND.get(cat, ("Bound", CATEGORY_LABELS.get(cat, cat)))
    if cat == "device_compute" and not ctx.has_device_trace:
        what = (
            "is TF op kernels on the CPU" if not ctx.is_accelerator_run else "is op kernels (no device trace)"
        )
    if cat == "dispatch" and not ctx.is_accelerator_run:
        label, what = "Dispatch-bound", "is op dispatch on the host"
    return cat, label, what


def verdict(ctx: Context, findings: list[Finding]) -> str:
    """One sentence on what bounds this run. It names what the highest-saving finding names, with that
    finding's figures and estimated saving; the breakdown's largest category is added when it is another
    one (so the two never contradict each other silently). When that finding would save under
    :data:`MINOR_SAVING` and half the step or more is another category, that category leads and the
    finding is cited. Without a finding that estimates a saving, the largest category is the verdict. A GPU run without device events says so first."""
    if ctx.analysis is None:
        return "Not diagnosed: no trace was analysed."
    if not ctx.has_steps:
        return f"Not diagnosed: {ctx.analysis.why_no_steps or 'no steps were found in the trace'}."
    share = ctx.share
    cat, label, what = _largest(ctx)
    largest = f"{pct(share.get(cat, 0.0))} of step time {what}"
    if ctx.is_accelerator_run and not ctx.has_device_trace:
        return (
            f"No device trace: the run had a GPU but the trace holds no kernels or copies (device tracing "
            f"failed: give the profiler CUPTI access, e.g. libcupti on LD_LIBRARY_PATH and "
            f"NVreg_RestrictProfilingToAdminUsers=0, and keep device_tracer_level=1), so only the host side is "
            f"classified: {largest}."
        )
    top = top_finding(findings, loop_outside(ctx, findings))
    notes = ctx.analysis.breakdown.notes if ctx.analysis.breakdown is not None else []
    no_ops = next((n for n in notes if n.startswith(NO_OPS_NOTE)), None)
    if top is None and no_ops is not None:
        return f"Not split: {no_ops.removeprefix(NO_OPS_NOTE + ': ')}; profile with host_tracer_level=2."
    if top is None:
        return f"{label}: {largest}."
    cited = f"{top.claim.rstrip('.')} ({top.rule_id}, est. saving {pct(top.est_saving)})"
    elsewhere = cat not in _FAMILY_CATEGORIES.get(top.family, ())
    if elsewhere and top.est_saving < MINOR_SAVING and share.get(cat, 0.0) >= 0.5:
        # the findings explain little of a step that is mostly something else: the step's bound is that
        # (a 1 % precision finding does not make an H100 step that computes 5 % of the time compute-bound)
        return f"{label}: {largest}; top finding: {cited}."
    head = _headline(top, ctx)
    elsewhere = elsewhere or cat not in _LABEL_CATEGORIES.get(head, (cat,))
    sentence = f"{head}: {cited}"
    if elsewhere and share.get(cat, 0.0) > 0:
        sentence += f"; largest share: {largest}"
    return sentence + "."


def evaluate(analysis: Analysis | None, facts: Facts) -> tuple[list[Finding], str]:
    """Run every rule on the analysis of a run; findings (best saving first) and the verdict."""
    ctx = Context(analysis=analysis, facts=facts)
    findings = run_rules(ctx)
    return findings, verdict(ctx, findings)
