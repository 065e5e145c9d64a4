"""The one formatter for rates, ratios, intervals and noise: every face (terminal, HTML, web, notebook,
compare, the fix loop's reasons) writes one figure for one quantity through these functions.

A leaf module: it imports nothing of tfdoctor but the model (and only for type hints).

Conventions:

* a rate: examples/s where known, else steps/s; thousands separators; 1 decimal (examples/s) or 2
  (steps/s) below 100, none above;
* a ratio: ``1.23x`` (2 decimals; 3 when within 5 % of 1, where the keep bar 1.02x lives);
* an interval: ``[1.10x, 1.35x]`` with the same decimals as its ratio;
* noise of a throughput: ``±N %``, **half** the range of its sub-window rates around their median
  (``spread / 2``): the distance a single window may lie from the figure.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tfdoctor.model import FixSummary, FixTrial, Report, Throughput


class _Interval(Protocol):
    @property
    def ratio(self) -> float: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...


def _decimals(x: float) -> int:
    """3 near 1 (a ratio near the bar), two significant digits below 0.1 (XLA retracing every step of a
    padded loop: 0.040x [0.0020x, 0.11x] read "0.04x [0.00x, 0.11x]"), else 2."""
    if 0 < abs(x) < 0.1:
        return min(5, 1 - math.floor(math.log10(abs(x))))
    return 3 if abs(x - 1) < 0.05 else 2


def trial_result(t: FixTrial) -> str:
    """A trial's result word, the same in the table and in the fix loop's progress lines: its status,
    "not decided" where the judge's round budget ran out (the trial's status is then "rejected": nothing
    is kept on it), and "kept (together)" for an undecided fix kept by the pooled trial of the undecided
    fixes."""
    if t.verdict == "undecided":
        return "kept (together)" if t.status == "kept" else "not decided"
    return t.status


def ratio(x: float | None, *, decimals: int | None = None) -> str:
    """``1.23x``; ``1.018x`` near 1; ``n/a`` when unknown; ``inf`` as ``∞x``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "∞x"
    d = _decimals(x) if decimals is None else decimals
    return f"{x:.{d}f}x"


def interval(low: float | None, high: float | None, *, around: float | None = None) -> str:
    """``[1.10x, 1.35x]`` (decimals of the ratio it surrounds, ``around``)."""
    if low is None or high is None:
        return ""
    d = _decimals(around if around is not None else (low + high) / 2)
    d = max(d, _decimals(low), _decimals(high))
    return f"[{ratio(low, decimals=d)}, {ratio(high, decimals=d)}]"


def ratio_ci(x: float | None, ci: tuple[float, float] | list[float] | None) -> str:
    """``1.23x [1.10x, 1.35x]`` (just the ratio without an interval)."""
    if not ci or len(ci) != 2:
        return ratio(x)
    d = max(_decimals(x or 1.0), _decimals(ci[0]), _decimals(ci[1]))
    return f"{ratio(x, decimals=d)} {interval(ci[0], ci[1], around=x)}"


def estimate_text(est: _Interval) -> str:
    """An estimate (ratio, low, high): ``1.23x [1.10x, 1.35x]``."""
    return ratio_ci(est.ratio, (est.low, est.high))


def rate(value: float | None, unit: str) -> str:
    """``1,234 examples/s`` / ``12.3 examples/s`` / ``4.56 steps/s``."""
    if value is None:
        return "n/a"
    if value >= 100:
        return f"{value:,.0f} {unit}"
    return f"{value:,.1f} {unit}" if unit.startswith("ex") else f"{value:,.2f} {unit}"


def against(reference: Throughput) -> str:
    """``against 3,479 examples/s``: beside a trial's rate, the median run of the state it was paired
    with, so that the two rates read as the trial's ratio does."""
    return f"against {headline_rate(reference)}"


def headline_rate(t: Throughput | None, *, short: bool = False) -> str:
    """The run's rate: examples/s where known, else steps/s (``ex/s`` with ``short``)."""
    if t is None:
        return "n/a"
    if t.examples_per_s is not None:
        return rate(t.examples_per_s, "ex/s" if short else "examples/s")
    return rate(t.steps_per_s, "steps/s")


def noise_fraction(t: Throughput) -> float:
    """Half the relative range of the sub-window rates (the ± of :func:`noise`)."""
    return t.spread / 2


def noise(t: Throughput | None) -> str:
    """``±4 %`` (half the sub-windows' range around their median); empty without windows."""
    if t is None or not t.windows:
        return ""
    return f"±{noise_fraction(t) * 100:.0f} %"


def per_step(t: Throughput) -> str:
    """`` of 8 batches`` after "steps/s" or "ms/step" where one measured step holds several batches
    (``steps_per_execution``); else empty."""
    k = t.batches_per_step
    return f" of {k} batches" if k and k > 1 else ""


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def timed_fit(report: Report) -> str | None:
    """Which ``fit()`` the throughput is of, where the script has several (keras-io's SimCLR fits a
    baseline, then pre-trains, then fine-tunes; the run times the first it reaches): ``timed: fit() at
    line 160, the 1st of 3 in the script``; None for one fit() or where it is not known."""
    f = report.facts
    if f.loop_kind != "keras_fit":
        return None
    phases = sorted({s.phase for s in report.steps if s.window == "timing" and s.phase is not None})
    sites = [f.source.get(f"fit_phase_{p}") for p in phases]
    if not phases or None in sites:
        return None
    lines = []
    script = report.script.replace("\\", "/").rpartition("/")[2]
    for site in sites:
        path, _, line = (site or "").rpartition(":")
        if not line.isdigit():
            return None
        if path.replace("\\", "/").rpartition("/")[2] != script:
            return None  # a fit() in a module beside the script: its lines are not the script's
        lines.append(int(line))
    if len(f.script_fit_lines) < 2 and len(lines) < 2:
        return None
    where = "line " + (
        str(lines[0]) if len(lines) == 1 else f"{', '.join(map(str, lines[:-1]))} and {lines[-1]}"
    )
    of = ""
    if len(lines) == 1 and lines[0] in f.script_fit_lines and len(f.script_fit_lines) > 1:
        of = f", the {_ordinal(f.script_fit_lines.index(lines[0]) + 1)} of {len(f.script_fit_lines)} in the script"
    return f"timed: fit() at {where}{of}"


def percent(x: float | None, *, decimals: int = 0) -> str:
    """``42 %`` of a fraction (0.42)."""
    if x is None:
        return "n/a"
    return f"{x * 100:.{decimals}f} %"


def ms(x: float | None) -> str:
    """``12.3 ms``."""
    if x is None:
        return "n/a"
    return f"{x:,.1f} ms"


def training(changes: dict[str, str], verdict: str | None = None) -> str:
    """``same training, faster`` (``verdict`` "faster": the side-by-side measurement decided it), ``same
    training`` (not decided, not faster, or not measured: no claim of speed), or ``changed batch size
    32 → 64, learning rate 0.001 → 0.002``."""
    if not changes:
        return "same training, faster" if verdict == "faster" else "same training"
    return "changed " + ", ".join(f"{k} {v}" for k, v in changes.items())


#: a file's part of a patch (tfdoctor.fixes.workspace.unified_diff): ``diff --git a/model.py b/model.py``
_DIFF = re.compile(r"^diff --git a/(.+) b/\1$", re.M)


#: how far the trials' re-runs of the baseline may measure from the profiled run's window before the
#: report shows both (within it, the profiled figure stands for both)
TIMED_APART = 1.15


#: other processes' share of the CPUs during a run from which its measurement describes a loaded machine
#: (one busy process on a 2-core machine is 0.5; this host's quiet background measured 0.02-0.03)
BUSY_SHARE = 0.25


def busy_machine(fx: FixSummary) -> str:
    """Where other processes kept a quarter of the CPUs or more busy during some of the loop's runs: a
    sentence saying so (the figures describe that load), else ""."""
    if not fx.busy_runs or fx.outside_load is None:
        return ""
    return (
        f"Other processes kept up to {percent(fx.outside_load)} of the CPUs busy during {fx.busy_runs} of "
        f"the {fx.measured_runs} measured runs: these figures describe a loaded machine; run --fix again "
        "on a quiet one to confirm them."
    )


def timed_apart(a: float, b: float) -> bool:
    """Two rates of the unchanged script more than :data:`TIMED_APART` apart (the profiled window's and
    the timing-only re-runs'): then they were measured in different conditions, not one repeated."""
    return not 1 / TIMED_APART <= a / b <= TIMED_APART


def timed_baseline(fx: FixSummary) -> str:
    """Where the trials' timing re-runs of the unchanged script measured it more than
    :data:`TIMED_APART` apart from the profiled run's window, what they measured and how to read it;
    else empty. Each trial's absolute rate compares with the re-runs (the same measurement), not with
    the profiled window: on a fast step that window is a few steps inside one epoch, the re-runs'
    windows of at least a second span the epochs' ends (a shuffle buffer refilled, validation)."""
    b, t = fx.baseline, fx.baseline_timed
    if b is None or t is None:
        return ""
    both = b.examples_per_s is not None and t.examples_per_s is not None
    rb = b.examples_per_s if both else b.steps_per_s
    rt = t.examples_per_s if both else t.steps_per_s
    if not rb or not rt or not timed_apart(rt, rb):
        return ""
    n = fx.baseline_timed_runs
    return (
        f"the unchanged script re-run as the trials are measured: {ratio(rt / rb)} the profiled window's "
        f"rate (median of {n} timing run{'s' if n != 1 else ''}); the trials' rates compare with this"
    )


def kept_files(fx: FixSummary) -> str:
    """The kept fixes, and where the combined patch changes several files (a model or an optimizer
    built in a module beside the script), the files each changed: ``batch-scale ×2 (train.py, model.py)``."""
    if len(set(_DIFF.findall(fx.patch))) < 2:
        return ", ".join(fx.kept)
    files = {t.name: _DIFF.findall(t.patch) for t in fx.trials if t.status == "kept"}
    return ", ".join(f"{k} ({', '.join(files[k])})" if files.get(k) else k for k in fx.kept)


def fix_headline(fx: FixSummary) -> str:
    """The one sentence on a --fix run: the combined ratio with its interval, measured side by side
    against the baseline, and whether the training is the same."""
    busy = busy_machine(fx)
    busy = f" {busy}" if busy else ""
    if not fx.kept:
        return "No fix kept." + busy
    what = kept_files(fx)
    if fx.combined_speedup is None:
        return f"Kept {what}; the combined result was not measured ({fx.combined_note or 'no run'}).{busy}"
    fig = ratio_ci(fx.combined_speedup, fx.combined_ci)
    verdict = {
        "faster": "",
        "undecided": " (not decided: noisy machine)",
        "not faster": " (not faster side by side)",
    }.get(fx.combined_verdict or "", "")
    loop = " for the whole loop (a burst of steps and the work until the next)" if fx.whole_loop else ""
    line = f"Combined: {fig}{loop} vs the baseline, side by side{verdict}; {training(fx.training_changes, fx.combined_verdict)} ({what})."
    if fx.reproduced is False and fx.trials_chained:
        chain, one = fx.trials_chained, len(fx.kept) == 1
        line += (
            f" The kept {'trial' if one else 'trials'} measured {ratio_ci(chain[0], chain[1:])}"
            f"{'' if one else ' together'}: not reproduced side by side; the combined figure stands."
        )
    return line + loop_caveat(fx) + startup_caveat(fx) + busy


#: one-off seconds at the start worth a sentence in the headline
STARTUP_NOTE_S = 1.0


def startup_caveat(fx: FixSummary) -> str:
    """Where the kept fixes add a one-off cost at the start (tracing, XLA compiling: the first steps,
    which the timed windows leave out), how much, and after how long a training it has paid for itself:
    ``extra / (1 - 1 / speed-up)`` seconds of the original's training."""
    extra, speedup = fx.combined_startup_s, fx.combined_speedup
    if extra is None or extra < STARTUP_NOTE_S or speedup is None or speedup <= 1:
        return ""
    payback = extra / (1 - 1 / speedup)
    return (
        f" The kept fixes add a one-off {extra:.1f} s in the first steps (tracing, compiling), which these "
        f"figures leave out: it has paid for itself after about {payback:.0f} s of the original's training."
    )


def loop_speedup(outside: float | None, speedup: float | None) -> float | None:
    """What a speed-up of the training steps makes of a loop spending ``outside`` of its time outside
    them (TFD207: 0.2 or more): 1 / (outside + steps / speed-up); None where that does not apply."""
    if outside is None or outside < 0.2 or speedup is None or speedup <= 0:
        return None
    return 1 / (outside + (1 - outside) / speedup)


def loop_caveat(fx: FixSummary) -> str:
    """Where the script's loop (fit() calls or bursts of steps) spends most of its time outside the training steps (TFD207), what
    the steps' speed-up makes of the whole loop (:func:`loop_speedup`)."""
    out = fx.loop_outside_share
    whole = loop_speedup(out, fx.combined_speedup)
    if out is None or whole is None or fx.whole_loop:  # the figures time the whole loop already
        return ""
    return (
        f" These figures time the training steps; the script's loop spends {percent(out)} of its "
        f"time outside them (TFD207), which no fix here changes: about {ratio(whole)} for the loop as a whole."
    )


__all__ = [
    "BUSY_SHARE",
    "busy_machine",
    "estimate_text",
    "fix_headline",
    "headline_rate",
    "interval",
    "kept_files",
    "loop_caveat",
    "loop_speedup",
    "ms",
    "noise",
    "noise_fraction",
    "percent",
    "rate",
    "ratio",
    "ratio_ci",
    "startup_caveat",
    "timed_baseline",
    "training",
]
