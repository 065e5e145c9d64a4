"""The measure / keep / roll-back loop behind ``tfdoctor profile --fix`` and ``tfdoctor fix``.

Baseline (an existing run) → candidate fixes, best estimated gain first (the findings' ``est_saving``;
without findings, every fix whose transform finds its pattern, in default order) → each fix applied to a
*copy* of the script's folder on top of the fixes kept so far, and run with :func:`run_capture` (a
timing-only run, its own run directory: kind "fix", parent = the baseline) → the run's sanity
(:mod:`tfdoctor.fixes.sanity`: it did not fail, the examples per step are as intended, the facts show
the change in effect, the output says the same things, the loss is not higher than the reference's
beyond its own noise) → paired rounds, the state it must beat and the trial back to back, judged by
:mod:`tfdoctor.fixes.judge` (kept when the ratio's interval lies above the bar; "not decided (noisy
machine)" when the round budget is spent first) → the final state measured in paired rounds against
the best intermediate state (later fixes that lower it are dropped) and against the baseline (the
headline) → a :class:`~tfdoctor.model.FixSummary` in the baseline's report and ``<baseline>/fix.patch``.

Before the combined result, the fixes the judge left *undecided* with a point estimate above 1 (none
that changes the training) are applied together on the current state and judged as one trial
(:meth:`FixLoop.pool`): small gains summed clear the noise that each alone straddles. Kept, each member
is kept with a reason citing the pooled ratio; not kept, they stay as they were.
The user's files are never written here.

:func:`judge_rounds` is the one place paired rounds are run and judged; the notebook's kernel loop
(:mod:`tfdoctor.notebook.magics`) calls it with its own measurer.
"""

from __future__ import annotations

import difflib
import math
import re
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tfdoctor.capture.child.guard import MARK as GUARD_MARK
from tfdoctor.capture.child.guard import changed_links, link_states
from tfdoctor.capture.runner import BETWEEN_FITS_S, CaptureConfig, CaptureProgress, CaptureResult, run_capture
from tfdoctor.errors import RunError
from tfdoctor.fixes import Fix, FixContext, FixOutcome, Hardware, all_fixes, get_fix
from tfdoctor.fixes.batch_scale import LINEAR_RULE
from tfdoctor.fixes.judge import (
    KEEP_ABOVE,
    WORTH,
    Decision,
    Estimate,
    Pair,
    Sample,
    between_runs,
    chained,
    comparable,
    decide,
    disjoint,
    disturbed,
    log_ratios,
    slowed,
    steady,
)
from tfdoctor.fixes.project import local_modules
from tfdoctor.fixes.sanity import (
    CHANGES_TRAINING,
    loss_check,
    not_in_effect,
    other_phase,
    output_change,
    output_spread,
    training_changes,
)
from tfdoctor.fixes.workspace import (
    check_module_root,
    make_workspace,
    modules_diff,
    patch_bytes,
    patch_files,
    unified_diff,
    workspace_root,
    write_copy,
    write_modules,
)
from tfdoctor.model import (
    CACHE_FILL_SWITCH,
    WHOLE_LOOP_SHARE,
    Facts,
    FixSummary,
    FixTrial,
    Report,
    StepTiming,
    Throughput,
    lone_stalls,
)
from tfdoctor.report.format import (
    BUSY_SHARE,
    estimate_text,
    loop_speedup,
    percent,
    ratio,
    ratio_ci,
    timed_apart,
    training,
    trial_result,
)
from tfdoctor.rundir import PATCH, STDOUT, RunDir
from tfdoctor.session.build import finish_run
from tfdoctor.store import RunStore
from tfdoctor.userfiles import Source, UserFileError, read_source

#: paired rounds per comparison at most (``--fix-rounds``): a trial whose interval still straddles the bar
#: after this many is "not decided (noisy machine)"
DEFAULT_ROUNDS = 4
#: a trial still undecided when the budget is spent, its estimate above judge.WORTH (a gain worth a
#: change), gets up to this many more rounds: on this 2-core host one spiky round leaves a real 1.2-1.3x
#: gain undecided in one --fix run and kept in the next (docs/benchmarks.md §6), and those are the
#: trials worth the runs; a budget under 2 rounds (--fix-rounds 0 or 1) is never extended
EXTRA_ROUNDS = 2
#: a timing-only run's timing window goes on past its planned steps until it has lasted this long
#: (capture/child/clock.py, StepClock; at most 20 times its steps): a fast state's planned window is a
#: few tens of milliseconds, whose rate one thread wake-up or an epoch boundary (a shuffle buffer
#: refilled, a log line) moves by 10-30 %; the fixes that matter most make states fast
MIN_TIMING_S = 1.0
#: a run whose steps hold more examples than the baseline's runs fewer steps, never fewer than its
#: warm-up and this many timed steps
MIN_TIMED_STEPS = 3


def result_line(label: str, trial: FixTrial) -> str:
    """The progress line of a decided trial, with the table's result word (:func:`trial_result`):
    "xla-jit: not decided (noisy machine): 0.997x [0.931x, 1.067x] …", not "rejected (not decided …)"."""
    word = trial_result(trial)
    if trial.reason.startswith(word):
        return f"{label}: {trial.reason}"
    return f"{label}: {word} ({trial.reason})"


def burst_pause_s(gap_s: float) -> float:
    """The pause that starts a burst in a whole-loop trial (CaptureConfig.burst_pause_s): a fifth of the
    baseline's gap between bursts, from 50 ms to 2 s. A fix that moves the eager calls between bursts
    into a graph shortens that gap (PPO's: 3.5-4.0 s to 1.9-2.3 s), so a burst must still be told after
    a shorter pause (the tail also wants 20 steps' time); a stall inside a burst on a loaded machine
    (0.9 s in one of PPO's runs beside a test suite, against a 12 s gap) must not pass for one."""
    return min(2.0, max(0.05, gap_s / 5))


def loop_throughput(
    tp: Throughput | None,
    facts: Facts | None,
    unit: tuple[int, float | None] | None = None,
    run_steps: Sequence[StepTiming] = (),
) -> tuple[Throughput | None, str]:
    """The whole loop's rate of a run that timed one burst of steps and the script's work until the next
    (``facts.between_fits``, loop "steps", ended by the next step): passes of the loop a second (a burst's
    steps at the run's steady step rate, then the gap), in the units of ``unit``: (steps, examples a
    step) of the baseline's burst, so runs whose bursts hold other counts of steps (PPO's policy updates
    stop early at a KL bound: 81-160 steps a burst) compare as passes of the loop; without ``unit``, this
    run's own. The sub-window rates are scaled alike (their relative spread is the steps'). None, with why,
    where the run did not time such a gap.

    ``run_steps``: the run's steps; its timing window's steady rate is then taken without the few that held
    the gap between two bursts or a function's first trace (:func:`tfdoctor.model.lone_stalls`), which the
    gap counts already: a timing window of at least a second holds one of PPO's 0.17 s bursts, the 1.8-3.5 s
    of collection after it and the value function's 0.3 s first call, and its sub-windows read 0.3-45
    steps/s about a median of 38; every host-calls round stood at 1.26-1.83x, yet the within-run
    bootstrap over those sub-windows left it *not decided* at [0.61x, 3.75x]."""
    gap = facts.between_fits if facts is not None else None
    timed = [s for s in run_steps if s.window == "timing"]
    steady = lone_stalls(timed)
    if tp is not None and facts is not None and len(steady) < len(timed):
        tp = (
            Throughput.from_steps(steady, facts.batch_size, steps_per_execution=facts.steps_per_execution)
            or tp
        )
    if tp is None or tp.steps_per_s <= 0:
        return None, "no steps timed"
    if gap is None or gap.loop != "steps":
        return None, "the work between the bursts of steps was not timed"
    if gap.ended_by != "next_step" or not gap.fit_steps:
        why = {"limit": f"still going after {gap.limit_s:g} s", "write": "the script wrote a file"}
        return None, (
            f"the work between the bursts of steps was not timed to the next burst "
            f"({why.get(gap.ended_by, gap.ended_by.replace('_', ' '))})"
        )
    passes = 1 / (gap.fit_steps / tp.steps_per_s + gap.seconds)  # of the loop, a second
    steps, per_step = unit or (gap.fit_steps, None)
    if per_step is None and tp.examples_per_s:
        per_step = tp.examples_per_s / tp.steps_per_s
    rate = steps * passes
    return (
        tp.model_copy(
            update={
                "steps_per_s": rate,
                "examples_per_s": rate * per_step if per_step else None,
                "windows": [w * rate / tp.steps_per_s for w in tp.windows],
            }
        ),
        "",
    )


@dataclass
class LoopConfig:
    """What to run (the baseline's script, arguments and working directory) and how to measure it."""

    script: Path
    args: list[str] = field(default_factory=list)
    cwd: Path | None = None
    steps: int = 40
    warmup: int | None = None
    timeout_s: float | None = None  # per fix run; default from the baseline's duration
    only: list[str] | None = None
    skip: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    final_profile: bool = True  # the combined run is profiled (a breakdown for the "after" view)
    # paired rounds (reference and trial back to back, order alternating) per comparison at most;
    # 0: every trial is judged on its one run against the reference's earlier measurement
    confirm_rounds: int = DEFAULT_ROUNDS
    # keep fixes that change the training (precision, batch, learning rate) even when no loss could be
    # read to check them by
    allow_unchecked: bool = False
    # each timing-only run's timing window lasts at least this long (0: exactly its planned steps)
    min_timing_s: float = MIN_TIMING_S
    fit: int | None = None  # --fit N: every run times phase N of the script's fit() training
    # -m MODULE: every run is ``python -m MODULE`` from the copy of ``cwd`` (``script``: the module's file)
    module: str | None = None


@dataclass
class Event:
    """Progress of the loop: ``kind`` is candidates | trial | result | final | done."""

    kind: str
    message: str
    fix_id: str | None = None
    index: int = 0
    total: int = 0
    label: str = ""  # a trial event's trial ("batch-scale ×2", "pooled: a + b", "combined vs the baseline")


@dataclass(frozen=True)
class Pooled:
    """The fix of a pooled trial (:meth:`FixLoop.pool`): the undecided fixes applied together, judged as
    one change by :meth:`FixLoop.trial` (its sanity checks per member, its paired rounds once)."""

    members: tuple[str, ...]  # the members' names ("generator-prefetch"), in the order they were applied
    fix_ids: tuple[str, ...]  # their fix ids, the same order
    ID: str = "pooled"
    DESCRIPTION: str = "the fixes not decided alone, tried together"

    def failure_hint(self, error: str) -> str:
        """Each member's hint for the error (:meth:`tfdoctor.fixes.Fix.failure_hint`), joined."""
        return "; ".join(h for f in self.fix_ids if (h := get_fix(f).failure_hint(error)))


#: what identifies a state: the script's source, the run-time switches, the modules beside the script
StateKey = tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


#: run-time switches that set how a run is measured rather than what it runs: a trial's apply to its
#: reference's paired runs too (tfdata_cache_fill: the harness fills the in-memory tf.data caches first)
MEASUREMENT_SWITCHES = frozenset({CACHE_FILL_SWITCH})


def state_key(source: str, switches: dict[str, str], modules: dict[str, str]) -> StateKey:
    return source, tuple(sorted(switches.items())), tuple(sorted(modules.items()))


def reference_switches(ref: dict[str, str], trial: dict[str, str]) -> dict[str, str]:
    """The reference's switches for its paired runs against a trial: the trial's measurement conditions
    (:data:`MEASUREMENT_SWITCHES`) hold for both sides."""
    return {**ref, **{k: v for k, v in trial.items() if k in MEASUREMENT_SWITCHES}}


# -- the undecided fixes together (both loops) ------------------------------------------------------
def poolable(t: FixTrial) -> bool:
    """A trial the pooled trial takes: left undecided by the judge (not rejected on its loss) with a
    point estimate above 1, and not a fix that changes the training."""
    return (
        t.verdict == "undecided"
        and t.status == "rejected"
        and t.reason.startswith("not decided")
        and (t.speedup or 0.0) > 1.0
        and t.fix_id not in CHANGES_TRAINING
    )


def kept_together(t: FixTrial, names: tuple[str, ...] | list[str], pooled: FixTrial) -> FixTrial:
    """Member ``t`` of a kept pooled trial, kept: its reason cites the pooled ratio, its own figures stay."""
    n = len(pooled.paired_ratios)
    over = f"{n} paired round{'s' if n != 1 else ''}" if n else "one run against an earlier reference"
    together = f"together {ratio_ci(pooled.speedup, pooled.speedup_ci)} over {over}"
    others = ", ".join(x for x in names if x != t.name)
    alone = f"alone {ratio_ci(t.speedup, t.speedup_ci)}, not decided"
    return t.model_copy(
        update={"status": "kept", "reason": f"kept together with {others}: {together}; {alone}"}
    )


# -- do the kept trials' figures reproduce together (both loops) --------------------------------------
def chain_trials(trials: Sequence[FixTrial]) -> list[int]:
    """The trials the final state went through, in order: each kept trial (a kept pooled trial for its
    members), and a batch rung superseded by a bigger one of the same fix still kept (×2 then ×4: each
    measured against the state before it, so their ratios multiply)."""
    kept = [t for t in trials if t.status == "kept"]
    members = {m for t in kept for m in t.members}
    kept_fixes = {t.fix_id for t in kept if t.name not in members}
    return [
        j
        for j, t in enumerate(trials)
        if (t.status == "kept" and t.name not in members)
        or (t.status == "superseded" and t.fix_id in kept_fixes)
    ]


def reproduction(trials: list[FixTrial], combined: Estimate) -> tuple[list[float] | None, bool | None]:
    """The kept trials' own figures chained (:func:`~tfdoctor.fixes.judge.chained`: [ratio, low, high])
    and whether the combined check against the baseline reproduced them (the intervals overlap). When
    it did not and one trial carries the whole chain, that trial's reason says so (it is the same
    comparison measured again). ``trials`` is updated in place; (None, None) when a trial has no
    interval."""
    idx = chain_trials(trials)
    ests = [trials[j] for j in idx]
    if not ests or any(t.speedup is None or not t.speedup_ci for t in ests):
        return None, None
    chain = chained(
        [Estimate(t.speedup, t.speedup_ci[0], t.speedup_ci[1], len(t.paired_ratios)) for t in ests]  # type: ignore[arg-type,index]
    )
    assert chain is not None
    ok = not disjoint(chain, combined)
    if not ok and len(idx) == 1:
        j = idx[0]
        trials[j] = trials[j].model_copy(
            update={
                "reason": f"{trials[j].reason}; not reproduced: the combined check against the baseline "
                f"measured {ratio_ci(combined.ratio, [combined.low, combined.high])}"
            }
        )
    return [chain.ratio, chain.low, chain.high], ok


@dataclass
class _State:
    source: str
    switches: dict[str, str]
    throughput: Throughput  # its latest measurement
    examples: int | None
    steps: list[StepTiming]
    stdout: str
    facts: Facts
    loss_runs: list[list[StepTiming]] = field(default_factory=list)  # every run's steps (loss noise)
    # what other runs of it printed and their steps (a re-run for the output check: the script's own
    # variation)
    reruns: list[tuple[str, list[StepTiming]]] = field(default_factory=list)
    run_id: str | None = None  # its latest run
    # the modules beside the script that it imports (relative path → source), as this state has them
    modules: dict[str, str] = field(default_factory=dict)
    # its throughput is a timing-only run's, measured as the paired rounds' runs are (the profiled
    # baseline's is not: see _judge_rounds; once paired rounds re-measured it, it is)
    timed: bool = True
    # ``stdout`` and ``steps`` are a timing-only run's (the profiled baseline's are not, whatever its
    # throughput became: see comparable_outputs)
    output_timed: bool = True

    def key(self) -> StateKey:
        return state_key(self.source, self.switches, self.modules)


# -- ordering --------------------------------------------------------------------------------------
def order_candidates(fixes: list[Fix], report: Report) -> list[tuple[Fix, float]]:
    """Fixes by estimated gain (the best finding naming them), then default order; AFTER respected; a
    fix marked FIRST (debug-switches, keras-on-batch) before all."""
    est: dict[str, float] = {}
    for finding in report.findings:
        if not finding.decided:
            continue
        for fid in finding.fix_ids:
            est[fid] = max(est.get(fid, 0.0), finding.est_saving)
    ranked = sorted(fixes, key=lambda f: (not f.FIRST, -est.get(f.ID, 0.0), f.PRIORITY, f.ID))
    ids = [f.ID for f in ranked]
    for _ in range(len(ranked) ** 2):  # move each fix after the fixes it must follow
        moved = False
        for i, f in enumerate(ranked):
            deps = [ids.index(d) for d in f.AFTER if d in ids]
            if deps and max(deps) > i:
                j = max(deps)
                ranked.insert(j, ranked.pop(i))
                ids.insert(j, ids.pop(i))
                moved = True
                break
        if not moved:
            break
    return [(f, est.get(f.ID, 0.0)) for f in ranked]


# -- judging: paired rounds, the same for every measurer ----------------------------------------------
@dataclass
class Measured:
    """One run of a state, whatever measured it (a child process, or the kernel)."""

    run_id: str
    status: str  # "complete", "failed", "timeout", ...
    throughput: Throughput | None = None
    steps: list[StepTiming] = field(default_factory=list)
    facts: Facts | None = None
    message: str = ""
    error: str | None = None


Side = Literal["reference", "trial"]


@dataclass
class Rounds:
    """What the paired rounds of one comparison measured, and the judge's decision on them."""

    decision: Decision | None = None
    pairs: list[Pair] = field(default_factory=list)
    ref: Throughput | None = None  # the latest measurement of each side
    trial: Throughput | None = None
    trial_runs: list[Throughput] = field(default_factory=list)  # every measurement of the trial, first too
    # the reference's runs the trial was paired with (its earlier measurement too, where round 1 or a
    # single-run judgement paired with it)
    ref_runs: list[Throughput] = field(default_factory=list)
    ref_steps: list[list[StepTiming]] = field(default_factory=list)  # each re-run of the reference
    trial_steps: list[list[StepTiming]] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)  # the extra runs, in the order they ran
    # the reference's rate before the rounds when round 1 re-measured it (the pairs' unit): one more
    # repeat of the reference for the judge's between-run floor
    ref_earlier: list[float] = field(default_factory=list)
    # the trial's rates measured before these rounds (the combined check: the final state's runs against
    # the best intermediate state), for the floor likewise
    trial_earlier: list[float] = field(default_factory=list)
    failed: tuple[str, str | None] | None = None  # a trial run failed: (reason, error)
    cold: bool = False  # a trial run's caches did not warm
    note: str = ""  # why the rounds stopped early
    # a round set aside as disturbed (tfdoctor.fixes.judge.disturbed): (its number, its ratio, how many
    # paired standard deviations off); the budget counts the other rounds, so another may be measured
    set_aside: tuple[int, float, float] | None = None
    # a second round set aside, after that one, where one of its runs ran slowed as a whole
    # (tfdoctor.fixes.judge.slowed): (its number, its ratio, the side, that run's rate over the median of
    # its state's other runs)
    slowed: tuple[int, float, str, float] | None = None

    @property
    def ratios(self) -> list[float]:
        return [round(p.ratio, 4) for p in self.pairs if p.back_to_back]

    @property
    def trial_median(self) -> Throughput | None:
        """The trial's median run (:func:`median_run`): the absolute rate shown beside the rounds'
        ratio, rather than one run of a noisy machine (its first, or its latest)."""
        return median_run(self.trial_runs)

    @property
    def ref_median(self) -> Throughput | None:
        """The median run of the reference it was paired with: shown beside the trial's, so that a row's
        two rates read as its ratio does."""
        return median_run(self.ref_runs)


_LINE_REF = re.compile(r"\b(lines?) (\d+)(?:-(\d+))?\b")


def user_lines(text: str, current: str, original: str) -> str:
    """``text`` (a fix's reason or note, citing ``line N`` / ``lines A-B`` of ``current``: the script as
    the fixes kept so far left it) with the lines of ``original`` (the user's file) instead. A line an
    earlier fix added or rewrote is cited by the user's line it stands at ("line 185 (as an earlier fix
    left it)")."""
    if current == original or "line" not in text:
        return text
    matcher = difflib.SequenceMatcher(None, original.splitlines(), current.splitlines(), autojunk=False)
    opcodes = matcher.get_opcodes()

    def at(n: int) -> tuple[int, bool]:  # the user's line of current's line n (1-based), exactly or not
        for tag, i1, i2, j1, j2 in opcodes:
            if j1 < n <= j2:
                if tag == "equal":
                    return i1 + (n - j1), True
                # rewritten lines: the user's lines they replaced; added ones: the line before them
                return (min(i1 + (n - j1), i2) if i2 > i1 else max(i1, 1)), False
        return n, False

    def sub(m: re.Match[str]) -> str:
        a, exact = at(int(m.group(2)))
        if m.group(3) is None:
            return f"{m.group(1)} {a}" + ("" if exact else " (as an earlier fix left it)")
        b, exact_b = at(int(m.group(3)))
        return f"{m.group(1)} {a}-{max(a, b)}" + (
            "" if exact and exact_b else " (as earlier fixes left them)"
        )

    return _LINE_REF.sub(sub, text)


def startup_excess(steps: Sequence[StepTiming]) -> float | None:
    """Seconds a run's warm-up steps took beyond as many of its steady (timing-window) steps: the
    one-off work of its first steps (tracing the step, compiling it with XLA, building Keras's
    functions), which the timed windows leave out. None without both windows."""
    warm = [s.duration_ns for s in steps if s.window == "warmup"]
    timed = [s.duration_ns for s in steps if s.window == "timing"]
    if not warm or not timed:
        return None
    steady = statistics.median(timed)
    return max(0.0, sum(w - steady for w in warm) / 1e9)


def startup_added(
    trial_runs: Sequence[Sequence[StepTiming]], ref_runs: Sequence[Sequence[StepTiming]]
) -> float | None:
    """The one-off seconds a state adds at the start against the reference (:func:`startup_excess`,
    the median over each side's runs); None where a side has no run to read it from."""

    def med(runs: Sequence[Sequence[StepTiming]]) -> float | None:
        xs = [x for r in runs if (x := startup_excess(r)) is not None]
        return statistics.median(xs) if xs else None

    t, r = med(trial_runs), med(ref_runs)
    return None if t is None or r is None else round(t - r, 3)


def median_run(runs: list[Throughput]) -> Throughput | None:
    """The run whose rate (examples/s where known, else steps/s) is the median of ``runs``: the lower of
    the two middle ones for an even count; None for none."""
    ordered = sorted(runs, key=lambda t: t.examples_per_s or t.steps_per_s)
    return ordered[(len(ordered) - 1) // 2] if ordered else None


def judge_rounds(
    measure: Callable[[Side, int], Measured],
    *,
    first_trial: Throughput,
    ref_prev: Throughput,
    ref_fresh: bool = False,
    scale: float = 1.0,
    max_rounds: int = 4,
    pool: list[list[float]] | None = None,
    keep_above: float = KEEP_ABOVE,
    ref_timed: bool = True,
    trial_earlier: Sequence[Throughput] = (),
    states: bool = False,
    ref_history: Sequence[Throughput] = (),
) -> Rounds:
    """Paired rounds of a trial against its reference, judged (:func:`_judge_rounds`). ``pool``: the
    round log ratios of the comparisons judged before in the same run, for the judge's paired floor
    (:func:`tfdoctor.fixes.judge.paired_spread`); this comparison's rounds are added to it once judged,
    so a loop that keeps one list per run pools all of its comparisons. ``keep_above``: the bar the
    interval must clear (:func:`keep_bar`: higher for a fix that changes the training).
    ``trial_earlier``: the trial's measurements before ``first_trial`` (the same state), and ``states``:
    the interval is never narrower than each state's own run-to-run spread
    (:func:`tfdoctor.fixes.judge.floor`); both for the combined check, whose interval is the headline.
    ``ref_history``: the reference state's other timing-only runs in this ``--fix`` run (as a trial, or
    as the reference of the trials before), for the floor where the rounds alone measured no state
    twice: see :func:`_judge_rounds`."""
    r = _judge_rounds(
        measure,
        first_trial=first_trial,
        ref_prev=ref_prev,
        ref_fresh=ref_fresh,
        scale=scale,
        max_rounds=max_rounds,
        pool=pool or (),
        keep_above=keep_above,
        ref_timed=ref_timed,
        trial_earlier=trial_earlier,
        states=states,
        ref_history=ref_history,
    )
    if pool is not None:
        pool.append(log_ratios(r.pairs))
    return r


def _judge_rounds(
    measure: Callable[[Side, int], Measured],
    *,
    first_trial: Throughput,
    ref_prev: Throughput,
    ref_fresh: bool,
    scale: float,
    max_rounds: int,
    pool: Sequence[Sequence[float]],
    keep_above: float = KEEP_ABOVE,
    ref_timed: bool = True,
    trial_earlier: Sequence[Throughput] = (),
    states: bool = False,
    ref_history: Sequence[Throughput] = (),
) -> Rounds:
    """Paired rounds of a trial (its first run ``first_trial`` done) against its reference (last measured
    at ``ref_prev``), decided by :func:`tfdoctor.fixes.judge.decide`.

    ``ref_timed`` False: ``ref_prev`` was not measured as the rounds' runs are (the profiled baseline:
    a short timing window before the profile window, where the re-runs' windows grow to their time
    floor), so round 1 re-measures the reference, and ``ref_prev`` counts as a repeat of it for the
    floor only where the two agree within :data:`~tfdoctor.report.format.TIMED_APART` (as the summary's two baseline figures
    are told apart). TensorFlow's regression tutorial (8 steps an epoch, a validation after each): the
    profiled window measured 2.4x the re-runs, and that one rate widened steps-per-execution's interval
    from [1.17x, 1.43x] to [0.93x, 1.80x] over six rounds of 1.15-1.41x.

    Round 1 pairs the trial's first run with the reference re-measured right after it (BA; ``ref_prev``
    then counts as one more run of the reference for the judge's between-run floor), or with ``ref_prev``
    when that run was the one just before (``ref_fresh``: AB). Later rounds alternate the order (AB, BA,
    …), until the judge decides or ``max_rounds`` are spent; a keep takes at least two rounds within the
    budget. ``max_rounds`` 0: no rounds; the first run is judged against ``ref_prev`` alone.
    ``measure(side, round)`` runs one side. ``pool``: see :func:`judge_rounds`.

    Where the rounds so far measured no state twice (one AB round against the reference's run just
    before: ``--fix-rounds 1``, or the first round of a trial judged on it), the between-run floor would
    be 0 and the interval only the runs' sub-windows, none for a run of one window: heavy_callbacks'
    batch ×2, tried on a steps-per-execution state whose runs were 3 steps of 8 half-second batches, was
    kept at "1.45x [1.45x, 1.45x]" and ×4 rejected at "0.41x [0.41x, 0.41x]". The reference state's
    other runs (``ref_history``: its own trial's, earlier trials' re-runs of it, in the pairs' unit)
    then give the floor its run-to-run spread. Only then: once a state was measured twice in the rounds,
    the floor's degrees of freedom are the rounds' own, as before.
    """
    r = Rounds(ref=ref_prev, trial=first_trial, trial_runs=[first_trial])
    worth = max(WORTH, keep_above)  # "not faster" below it; undecided above it: worth more rounds
    unit = comparable(first_trial, ref_prev, scale)[2]
    for seen in trial_earlier:  # in the pairs' unit only
        t, _, u = comparable(seen, ref_prev, scale)
        if u == unit and t.rate > 0:
            r.trial_earlier.append(t.rate)

    def pair(trial: Throughput, ref: Throughput, order: Literal["AB", "BA"], b2b: bool = True) -> Pair:
        t, a, _ = comparable(trial, ref, scale)
        r.ref_runs.append(ref)
        return Pair(ref=a, trial=t, order=order, back_to_back=b2b)

    def run(side: Side, i: int) -> Throughput | None:
        m = measure(side, i)
        r.run_ids.append(m.run_id)
        tp = m.throughput if m.status == "complete" else None
        if side == "trial":
            if tp is None:
                what = {"complete": "measured no throughput", "timeout": "timed out"}
                r.failed = (
                    f"its run in paired round {i} {what.get(m.status, 'failed')}, rolled back"
                    + ("" if m.status == "complete" else f": {m.message or m.status}"),
                    "\n".join((m.error or m.message or m.status).strip().splitlines()[-20:]),
                )
                return None
            if memo_problem(m.facts):
                r.cold = True
                return None
            r.trial = tp
            r.trial_runs.append(tp)
            r.trial_steps.append(m.steps)
        elif tp is None:
            on = (
                f"{len(r.pairs)} paired round(s)"
                if r.pairs
                else "the single run against the earlier reference"
            )
            r.note = f"the reference's re-run in paired round {i} measured nothing ({m.message or m.status}): decided on {on}"
        else:
            r.ref = tp
            r.ref_steps.append(m.steps)
        return tp

    history: list[float] = []  # the reference's other runs, in the pairs' unit
    for seen in ref_history:
        if seen is ref_prev:
            continue
        _, a, u = comparable(first_trial, seen, scale)
        if u == unit and a.rate > 0:
            history.append(a.rate)

    def judged(**how: Any) -> Decision | None:  # the judge, with this trial's bar
        earlier = list(how.pop("ref_earlier", ()))
        if history and between_runs(r.pairs, earlier, r.trial_earlier)[1] == 0:
            earlier += history  # no state measured twice in the rounds: the reference's other runs
        return decide(
            r.pairs,
            keep_above=keep_above,
            worth=worth,
            trial_earlier=r.trial_earlier,
            states=states,
            ref_earlier=earlier,
            **how,
        )

    def alone() -> Rounds:  # the first run judged against the reference's earlier measurement
        r.pairs = [pair(first_trial, ref_prev, "AB", b2b=False)]
        r.decision = judged(max_rounds=1, min_rounds=1, steady_ref=False)
        return r

    if max_rounds <= 0:
        return alone()
    steady_ref = True
    budget = max_rounds  # grows by EXTRA_ROUNDS for a worthwhile gain still undecided
    if ref_fresh and ref_timed:
        r.pairs.append(pair(first_trial, ref_prev, "AB"))
    else:
        ref_now = run("reference", 1)
        if ref_now is None:
            return alone()
        steady_ref = steady(Sample.of(ref_prev).rate, Sample.of(ref_now).rate)
        r.pairs.append(pair(first_trial, ref_now, "BA"))
        _, before, unit_before = comparable(first_trial, ref_prev, scale)
        _, now, unit_now = comparable(first_trial, ref_now, scale)
        # a rate measured otherwise (the profiled window) is a repeat of the reference only where it
        # agrees with the re-runs as the summary's baseline figures do (:func:`timed_apart`)
        apart = not ref_timed and timed_apart(before.rate, now.rate)
        if unit_before == unit_now and not apart:  # the same unit as the pairs
            r.ref_earlier.append(before.rate)
    while True:
        hit = disturbed(r.pairs, pool) if r.set_aside is None else None
        if hit is not None:  # a load spike: the round is measured again (once per trial)
            k, sds = hit
            r.set_aside = (k + 1, r.pairs[k].ratio, sds)
            del r.pairs[k]
        elif r.set_aside is not None and r.slowed is None and (run_hit := slowed(r.pairs)) is not None:
            k, slow_side, frac = run_hit  # a second spike: one of its runs slowed as a whole
            number = k + 1 + (1 if r.set_aside[0] <= k + 1 else 0)
            r.slowed = (number, r.pairs[k].ratio, slow_side, frac)
            del r.pairs[k]
        n_ab = sum(p.order == "AB" for p in r.pairs)
        n_ba = len(r.pairs) - n_ab
        # with a round set aside the orders may be lopsided (BA, BA): the missing order is measured first
        lopsided = abs(n_ab - n_ba) > 1 and len(r.pairs) < budget
        d = None
        if not lopsided:
            d = judged(max_rounds=budget, steady_ref=steady_ref, ref_earlier=r.ref_earlier, pool=pool)
        if (
            d is not None
            and d.verdict == "undecided"
            and budget == max_rounds >= 2
            and d.estimate.ratio >= worth
            and EXTRA_ROUNDS > 0
        ):
            budget += EXTRA_ROUNDS  # a gain worth having, not yet decided: a few more rounds
            d = None
        if d is not None:
            r.decision = with_notes(
                d, r.set_aside, max_rounds, budget - max_rounds, worth, len(r.pairs) - max_rounds, r.slowed
            )
            return r
        i = len(r.pairs) + (r.set_aside is not None) + (r.slowed is not None) + 1
        order: Literal["AB", "BA"] = (
            ("AB" if r.pairs[-1].order == "BA" else "BA") if n_ab == n_ba else ("AB" if n_ab < n_ba else "BA")
        )
        got: dict[Side, Throughput] = {}
        for side in ("reference", "trial") if order == "AB" else ("trial", "reference"):
            previous = r.ref
            tp = run(side, i)  # type: ignore[arg-type]
            if tp is None:
                if r.failed or r.cold:
                    return r
                r.decision = with_notes(
                    judged(max_rounds=len(r.pairs), steady_ref=False, ref_earlier=r.ref_earlier, pool=pool),
                    r.set_aside,
                    max_rounds,
                    budget - max_rounds,
                    worth,
                    slowed=r.slowed,
                )
                return r
            if side == "reference" and previous is not None:
                steady_ref = steady(Sample.of(previous).rate, Sample.of(tp).rate)
            got[side] = tp  # type: ignore[index]
        r.pairs.append(pair(got["trial"], got["reference"], order))


def with_notes(
    d: Decision | None,
    set_aside: tuple[int, float, float] | None,
    budget: int = 0,
    extra: int = 0,
    worth: float = WORTH,
    past: int | None = None,
    slowed: tuple[int, float, str, float] | None = None,
) -> Decision | None:
    """``d`` with its reason saying which round was set aside as disturbed, and why, and whether the
    ``budget`` of rounds was extended (``extra`` rounds) for a gain still undecided whose estimate stood
    above ``worth``; ``past``: the rounds a decision took past the budget (``extra`` when not given; a
    keep may come before the extension is spent); ``slowed``: a second round set aside
    (:attr:`Rounds.slowed`)."""
    if d is None:
        return d
    reason = d.reason
    if extra:
        why = f"as its estimate stood above {worth:.2f}x when the budget was spent"
        spent = f"after the round budget ({budget + extra})"
        if spent in reason:
            reason = reason.replace(
                spent, f"after the round budget ({budget}) and {extra} more rounds, {why}"
            )
        else:
            n = extra if past is None else max(1, min(past, extra))
            reason += f"; decided in {n} round{'s' if n != 1 else ''} past the budget of {budget}, {why}"
    if set_aside is not None:
        k, ratio, sds = set_aside
        reason += (
            f"; round {k} ({ratio:.2f}x) set aside as disturbed: {sds:.1f} standard deviations of this "
            "run's paired rounds from the trial's others (a load spike): not counted"
        )
    if slowed is not None:
        k, ratio, side, frac = slowed
        reason += (
            f"; round {k} ({ratio:.2f}x) set aside too: its {side} run measured {frac:.2f}x the median "
            "of that state's other runs in these rounds (the whole run slowed): not counted"
        )
    return replace(d, reason=reason)


#: why a trial whose memo caches (the ``generator-cache`` fix) never served in the warm-up is not judged
MEMO_COLD = (
    "its cache did not warm within the warm-up limit (an epoch is longer than the limit): not measurable "
    "here; apply by hand for multi-epoch runs"
)


def memo_problem(facts: Facts | None) -> str | None:
    """A run whose caches did not warm before the timing window timed the cache filling, not the cache
    serving: its speed says nothing about the fix (Facts.memo_warm is False)."""
    return MEMO_COLD if facts is not None and facts.memo_warm is False else None


def comparable_outputs(ref: _State) -> list[tuple[str, list[StepTiming]]]:
    """The reference's outputs a trial's output is compared with, and each run's steps: runs measured as
    the trials are. The profiled baseline's own run is not one (``output_timed`` False): after its windows a
    custom loop's run goes on unprofiled watching for bursts of steps (hooks.steps_gap_ready), up to
    seconds of steps its steps.jsonl does not hold, so its output covers more of the script than its
    steps say (train_on_batch.py, 2026-12-03: 41 steps recorded, ~250 printed; every trial rejected as
    "no more 'epoch #: loss #'"); its re-runs, timing-only like the trials, are."""
    return [(ref.stdout, ref.steps), *ref.reruns] if ref.output_timed else list(ref.reruns)


def examples_seen(steps: list[StepTiming], per_step: int | None) -> float:
    """Examples the run went through (the harness's counts, else steps × ``per_step``)."""
    return float(sum(s.examples or per_step or 1 for s in steps))


def run_length(
    steps: list[StepTiming], ref_steps: list[StepTiming], ref_examples: int | None = None
) -> float | None:
    """A run's length relative to the reference's (its steps ``ref_steps``, ``ref_examples`` per step
    where its steps did not count them): the smaller of the steps and examples ratios (what a periodic
    print is proportional to), None when either side recorded no steps. The script loop and the
    notebook's kernel loop both measure it here."""
    if not steps or not ref_steps:
        return None
    by_steps = len(steps) / len(ref_steps)
    if any(not s.examples for s in steps) or (not ref_examples and any(not s.examples for s in ref_steps)):
        return by_steps  # examples not counted on one side: steps only
    return min(by_steps, examples_seen(steps, None) / max(examples_seen(ref_steps, ref_examples), 1.0))


def _batch_in_effect(ids: Sequence[str], before: Facts | None, after: Facts | None, factor: float) -> bool:
    """A batch-scale trial whose facts show the batch size scaled by ``factor``: in effect, whatever its
    steps hold. With ``steps_per_execution`` a step is at most an epoch: TensorFlow's regression
    tutorial (251 examples an epoch, 8 batches an execution) ran one 251-example step an epoch at batch
    32 and at 64 alike, and batch ×2 was rejected as "examples per step changed (256 → 256, expected
    512)"."""
    if "batch-scale" not in ids or before is None or after is None:
        return False
    if not before.batch_size or not after.batch_size:
        return False
    return abs(after.batch_size - before.batch_size * factor) <= 0.01 * before.batch_size * factor


def whole_epochs(steps: Sequence[StepTiming]) -> bool:
    """Is each timed step a whole epoch (every one after the first begins an epoch)? A step then holds the
    epoch's examples, fewer than ``steps_per_execution`` batches where the epoch is shorter: TensorFlow's
    regression tutorial (251 examples an epoch at batch 32, 8 batches) ran one 251-example execution an
    epoch, and steps-per-execution was rejected as "examples per step changed (32 → 251, expected 256)"."""
    timed = [s for s in steps if s.window != "warmup"]
    return len(timed) >= 2 and all(s.epoch_start for s in timed[1:])


#: how far a batch-scale trial's examples per step may be from the batch times its factor: a batch the
#: script derives from the constant scaled, by integer division, is not the exact multiple. keras-io's
#: SimCLR takes ``unlabeled_dataset_size // (dataset_size // batch_size)``: batch_size 100 → 200 gave 80 →
#: 166 images a step, not 160, and batch ×2 was rejected as "examples per step changed". The rate is
#: compared in examples/s, which the exact batch does not bias; the facts say the batch it ran with
DERIVED_BATCH_TOLERANCE = 0.10


def batch_tolerance(ids: Sequence[str], before: float | None, after: float | None) -> float:
    """The share of the expected examples per step a trial's may be off: 1 % (a fix that must not change
    the batch, or scales it by an exact factor), :data:`DERIVED_BATCH_TOLERANCE` for a batch-scale trial
    whose batch grew."""
    if "batch-scale" in ids and before and after and after > before:
        return DERIVED_BATCH_TOLERANCE
    return 0.01


def examples_per_step(steps: list[StepTiming], facts: Facts | None) -> int | None:
    """The size of a full step: the step size that carries the most examples (not the most steps). An
    epoch's last step is smaller (a last batch, the batches left for ``steps_per_execution``): keras-io's
    Siamese network has 10 batches an epoch, so its 8-batch steps alternate 256 and 64 examples, and
    the most common size was 64 when a 64 came first, "examples per step changed (32 → 64, expected
    256)" for a steps-per-execution that was in effect."""
    ex = [s.examples for s in steps if s.examples and s.window != "warmup"]
    if ex:
        carried: Counter[int] = Counter()
        for e in ex:
            carried[e] += e
        return max(carried, key=lambda e: (carried[e], e))
    return facts.batch_size if facts else None


#: the bar for a bigger variant of a fix over a smaller one kept already (batch ×4 over ×2, ×8 over ×4):
#: each step up moves the training further from what the user chose, and between two batch factors a
#: few percent apart the one a run kept was a coin toss (fix_repeat: naive_loop, epoch_counter and
#: eager_apply kept the same fixes at another factor from one run to the next). With this bar the factor
#: agreed in both repeats measured (docs/benchmarks.md §6); a gain under 15 % stays with the smaller step
ESCALATE = 1.15


def keep_bar(fix_ids: Sequence[str], *, over_kept: bool = False) -> float:
    """The bar a trial's interval must clear to be kept: :data:`~tfdoctor.fixes.judge.KEEP_ABOVE` (2 %)
    for a fix that keeps the training as it is, :data:`~tfdoctor.fixes.judge.WORTH` (5 %) for one that
    changes it (precision, batch size and learning rate: :data:`CHANGES_TRAINING`): a change the user
    has to weigh must earn more than noise-level gains. ``over_kept``: the trial is a bigger variant of
    the same fix over a smaller one kept already (batch ×4 over ×2): it must clear :data:`ESCALATE`
    (15 %), as among batch factors whose throughput differs by a few percent, the largest that happened
    to clear a lower bar changed from one run to the next."""
    if over_kept:
        return ESCALATE
    return WORTH if any(f in CHANGES_TRAINING for f in fix_ids) else KEEP_ABOVE


def unchecked_block(fix_id: str, unchecked: str | None, allow: bool) -> str | None:
    """Why a fix that changes the training is not kept when its loss could not be checked, or None."""
    what = CHANGES_TRAINING.get(fix_id)
    if unchecked is None or what is None or allow:
        return None
    return (
        f"{unchecked}: it changes the {what}, so it is not kept without a loss to check (--allow-unchecked)"
    )


def patch_header(
    script: str,
    kept: list[str],
    speedup: float | None,
    ci: list[float] | None,
    note: str,
    changes: dict[str, str],
    verdict: str | None = "faster",
    outside: float | None = None,
    *,
    whole_loop: bool = False,
) -> str:
    """The comment block on top of fix.patch: what is in it, what it measured (and the judge's word when
    that was not "faster"), and whether it changes the training. ``git apply`` and ``patch`` skip text
    before the first ``---`` line."""
    lines = [f"# tfdoctor: {', '.join(kept)} on {script}"]
    if speedup is not None:
        word = {"undecided": ": not decided (noisy machine)", "not faster": ": not faster"}.get(
            verdict or "", ""
        )
        lines.append(
            f"# measured: {ratio_ci(speedup, ci)} vs the baseline ({note}){word}"
            if note
            else f"# measured: {ratio_ci(speedup, ci)} vs the baseline{word}"
        )
    if whole_loop and speedup is not None:
        lines.append("# of the whole loop: a burst of training steps and the script's work until the next")
    elif outside is not None and (whole := loop_speedup(outside, speedup)) is not None:
        lines.append(
            f"# of the training steps only: the loop spends {percent(outside)} of its time outside them "
            f"(TFD207): about {ratio(whole)} for the loop as a whole"
        )
    lines.append(f"# {training(changes, verdict if speedup is not None else None)}")
    return "\n".join(lines) + "\n"


# -- the loop --------------------------------------------------------------------------------------
class FixLoop:
    def __init__(
        self,
        store: RunStore,
        baseline: RunDir,
        report: Report,
        cfg: LoopConfig,
        *,
        on_event: Callable[[Event], None] | None = None,
        on_capture: Callable[[CaptureProgress], None] | None = None,
    ):
        self.store, self.baseline, self.report, self.cfg = store, baseline, report, cfg
        self.base_examples: int | None = None  # the examples of a baseline step (run_steps)
        self.on_event = on_event or (lambda e: None)
        self.on_capture = on_capture
        self.script = cfg.script.resolve()
        self.cwd = Path(cfg.cwd).resolve() if cfg.cwd else Path.cwd().resolve()
        # the folder the patch's paths start from: the script's, or for ``-m pkg.train`` the folder
        # python -m starts in (the patch then names ``a/pkg/train.py``, its imports ``a/pkg/model.py``)
        self.base = self.cwd if cfg.module else self.script.parent
        self.relpath = self.script.relative_to(self.base).as_posix()
        # read as Python reads it (coding cookie, BOM), line endings noted: tfdoctor.userfiles
        self.user_source = read_source(self.script)
        self.final_source: str | None = None  # the script with every kept fix, once run() is done
        # the modules beside the script that it imports (tfdoctor.fixes.project), read once, as the
        # script is: a fix may edit them (the model or the optimizer built in model.py)
        self.module_sources: dict[str, Source] = {}
        for rel in local_modules(self.script, self.base):
            try:
                self.module_sources[rel] = read_source(self.base / rel)
            except UserFileError:
                continue  # undecodable: not the user's Python (and never edited)
        self.user_modules = {rel: src.text for rel, src in self.module_sources.items()}
        # the modules the kept fixes changed (relative path → source), once run() is done
        self.final_modules: dict[str, str] = {}
        self._at = (0, 0)  # the candidate being measured, of how many (for progress events)
        self._last: StateKey | None = None  # the state measured last
        # the timing-only re-runs of the unchanged script (the paired rounds' and the combined check's
        # references): the baseline as the trials are measured, for the summary's ``baseline_timed``
        self.base_reruns: list[Throughput] = []
        # each run's outside load (CaptureResult.outside_load): other processes' share of the CPUs
        self.loads: list[float] = []
        self._base_key = self.state_key(self.user_source.text, {}, self.user_modules)  # the unchanged script
        # every judged trial's round log ratios so far (the combined check's too): the judge's paired floor
        self.paired_logs: list[list[float]] = []
        # every timing-only run's throughput, by the state it measured (the judge's floor: judge_rounds)
        self.timed_runs: dict[StateKey, list[Throughput]] = {}
        # what a trial copies: the script's folder, or the working directory above it (workspace_root);
        # for a module, the folder its package lies in, whatever its size
        self.root = self.base if cfg.module else workspace_root(self.script, self.cwd)
        if cfg.module:
            check_module_root(self.root)
        self.since_ns = time.time_ns()  # files outside the copy made after this are the trials' own
        # every run is judged on the whole loop's rate (a burst of steps and the work until the next):
        # set by run() from the baseline (WHOLE_LOOP_SHARE)
        self.whole_loop = False
        self.base_tp: Throughput | None = None  # the baseline's rate in the judged unit
        self.burst_pause: float | None = None  # a whole-loop trial's pause that starts a burst
        self.loop_unit: tuple[int, float | None] | None = None  # the baseline's burst: steps, examples a step

    def event(self, kind: str, message: str, **kw: object) -> None:
        self.on_event(Event(kind, message, **kw))  # type: ignore[arg-type]

    def timeout(self) -> float:
        if self.cfg.timeout_s:
            return self.cfg.timeout_s
        steps = self.report.steps
        span = (max(s.end_ns for s in steps) - min(s.start_ns for s in steps)) / 1e9 if steps else 60.0
        return max(180.0, 4 * span + 90.0)

    def candidates(self) -> list[tuple[Fix, float]]:
        fixes = [f for f in all_fixes() if f.ID not in self.cfg.skip]
        if self.cfg.only:
            fixes = [f for f in fixes if f.ID in self.cfg.only]
        return order_candidates(fixes, self.report)

    @property
    def rounds(self) -> int:
        return max(0, self.cfg.confirm_rounds)

    def run(self) -> FixSummary:
        t0 = time.monotonic()
        base_tp = self.report.throughput
        if base_tp is None:
            raise RunError(
                f"run {self.baseline.id} has no throughput measurement (status {self.report.status}): "
                "nothing to compare fixes against",
                run_dir=str(self.baseline.path),
            )
        source = self.user_source.text
        facts = self.report.facts
        outside = self.loop_outside_share()
        gap = facts.between_fits
        if outside is not None and outside >= WHOLE_LOOP_SHARE and gap is not None and gap.loop == "steps":
            whole, _ = loop_throughput(base_tp, facts, run_steps=self.report.steps)
            if whole is not None and gap.fit_steps:
                self.whole_loop, base_tp = True, whole
                self.burst_pause = burst_pause_s(gap.seconds)
                per_step = whole.examples_per_s / whole.steps_per_s if whole.examples_per_s else None
                self.loop_unit = (gap.fit_steps, per_step)
                self.event(
                    "result",
                    f"the loop spends {percent(outside)} of its time between bursts of steps (TFD207): "
                    "every run is timed over a burst and the work until the next, and judged on that",
                )
        self.base_tp = base_tp
        state = _State(
            source=source,
            switches={},
            throughput=base_tp,
            examples=examples_per_step(self.report.steps, facts),
            steps=self.report.steps,
            stdout=_read(self.baseline.file(STDOUT)),
            facts=facts,
            loss_runs=[list(self.report.steps)],
            run_id=self.baseline.id,
            modules=dict(self.user_modules),
            timed=False,
            output_timed=False,
        )
        base_state = state
        self.base_examples = state.examples
        hardware = Hardware.detect(facts)
        cands = self.candidates()
        self.event("candidates", ", ".join(f.ID for f, _ in cands), total=len(cands))
        trials: list[FixTrial] = []
        kept: list[str] = []  # the kept fixes' labels ("batch-scale ×4"), in the order they were kept
        kept_label: dict[str, str] = {}  # fix id -> its kept label (a bigger batch replaces a smaller one)
        history: list[tuple[list[str], _State]] = []  # the state after each kept fix
        tried: list[tuple[Fix, dict[str, str], int]] = []  # each measured trial: fix, variant, index
        for i, (fix, est) in enumerate(cands, 1):
            self._at = (i, len(cands))
            before = state  # the state this fix is applied to (variants all start from it)
            variants = fix.variants(FixContext())
            tried_code = ""  # the source the variant before this one produced
            for k, variant in enumerate(variants):
                # a fallback variant is tried only when the one before it failed (a run error), and
                # only when its edit differs; the other variants only after the one before was kept
                fallback = bool(variant.get("fallback"))
                outcome = self.apply(
                    fix, before.source, self.context(before.facts, before.modules, variant, hardware)
                )
                if fallback and (not outcome.changed or outcome.code == tried_code):
                    break
                if fallback:
                    trials[-1] = trials[-1].model_copy(
                        update={"reason": f"{trials[-1].reason}; tried again as: {outcome.reason}"}
                    )
                tried_code = outcome.code
                label = fix.ID + (f" ×{variant['factor']}" if "factor" in variant else "")
                if variant.get("label"):
                    label += f" ({variant['label']})"
                if not outcome.changed:
                    if k == 0:
                        status: Literal["skipped", "failed"] = (
                            "skipped" if outcome.status == "skipped" else "failed"
                        )
                        trials.append(
                            FixTrial(
                                fix_id=fix.ID,
                                description=fix.DESCRIPTION,
                                status=status,
                                reason=outcome.reason,
                                error=outcome.reason if status == "failed" else None,
                            )
                        )
                        self.event("result", f"{label}: {status} ({outcome.reason})", fix_id=fix.ID)
                    break
                gain = f" (findings estimate {est * 100:.0f} % of step time)" if est else ""
                self.event(
                    "trial",
                    f"{label}: {outcome.reason}{gain}",
                    fix_id=fix.ID,
                    index=i,
                    total=len(cands),
                    label=label,
                )
                expected = before.examples * outcome.examples_factor if before.examples else None
                over_kept = k > 0 and not fallback  # a bigger batch over the smaller one just kept
                trial, state = self.trial(fix, outcome, state, before, expected, label, over_kept)
                if over_kept and trial.status == "kept":  # a bigger batch beat the smaller one
                    trials[-1] = trials[-1].model_copy(
                        update={
                            "status": "superseded",
                            "reason": f"superseded by {label}; {trials[-1].reason}",
                        }
                    )
                    history.pop()
                trials.append(trial)
                tried.append((fix, dict(variant), len(trials) - 1))
                files = patch_files(trial.patch)
                where = f" ({', '.join(files)})" if set(files) - {self.relpath} else ""  # a module too
                self.event("result", result_line(f"{label}{where}", trial), fix_id=fix.ID)
                then_fallback = k + 1 < len(variants) and bool(variants[k + 1].get("fallback"))
                if trial.status == "failed" and then_fallback:
                    continue
                if trial.status != "kept":
                    break
                kept_label.pop(fix.ID, None)
                kept_label[fix.ID] = label
                kept[:] = list(kept_label.values())
                history.append((list(kept), state))
                if then_fallback:
                    break
        state = self.pool(state, tried, trials, kept_label, history, hardware)
        kept[:] = list(kept_label.values())
        summary = self.combine(base_state, state, kept, history, trials, t0)
        self.baseline.file(PATCH).write_bytes(
            patch_bytes(summary.patch, self.user_source, self.module_sources)
        )
        report = self.report.model_copy(update={"fix": summary})
        self.baseline.write_report(report)
        self.store.update(self.baseline, speedup=summary.combined_speedup)
        done = f"{len(summary.kept)} fix(es) kept"
        if summary.combined_speedup:
            done += f", {ratio_ci(summary.combined_speedup, summary.combined_ci)}"
        self.event("done", done)
        return summary

    # -- the combined result -------------------------------------------------------------------------
    def combine(
        self,
        base: _State,
        state: _State,
        kept: list[str],
        history: list[tuple[list[str], _State]],
        trials: list[FixTrial],
        t0: float,
    ) -> FixSummary:
        """The final state judged in paired rounds against the best intermediate state (the fixes after
        it dropped when the final state is slower) and against the baseline: the headline ratio and its
        interval. Every run the judge pairs is timing-only, as the trials' are: a profiled run's timing
        window is shorter (the profile window takes its steps) and its profiler starts right after it,
        so a profiled run paired with a timing-only one compares unlike windows. The final state's
        latest measurement opens the rounds when it was the run just made (a kept trial's last paired
        round), else it is measured once more first. The profiled run (the "after" view's breakdown)
        comes last, outside the comparison."""
        dropped: list[str] = []
        ci: list[float] | None = None
        chain: list[float] | None = None
        reproduced: bool | None = None
        rounds_note = ""
        speedup: float | None = None
        startup: float | None = None
        verdict = None
        note = ""
        run_id: str | None = None
        combined: Throughput | None = None
        combined_ref: Throughput | None = None  # the baseline's median run in the combined check
        if kept:
            label = "combined: " + ", ".join(kept)
            self.event("final", f"final state with {', '.join(kept)}")
            ok, failed = True, ""
            if self._last != state.key():  # not the run just made: measured again, timing-only
                run, res, rep = self.measured_run(
                    label, state.source, state.switches, modules=state.modules, examples=state.examples
                )
                ok = res.ok and rep.throughput is not None
                failed = res.message or res.status
                if ok:
                    assert rep.throughput is not None
                    state = replace(
                        state, throughput=rep.throughput, run_id=run.id, facts=res.facts or state.facts
                    )
            if ok:
                earlier: list[Throughput] = []  # the final state's runs before its check against the baseline
                best = self._best_intermediate(base, history[:-1])
                if best is not None:
                    best_kept, best_state = best
                    r = self.compare(state, best_state, f"combined vs {', '.join(best_kept)}")
                    # dropped only when the judge puts the final state below the intermediate one (its
                    # interval under 1): a point estimate under 1 within the noise drops nothing, else
                    # noise alone would undo fixes each measured faster (and repeat runs would disagree)
                    lower = r.decision is not None and r.decision.estimate.high < 1
                    if r.decision is not None and not lower and r.decision.estimate.ratio < 1:
                        later = [x for x in kept if x not in best_kept]
                        note = (
                            f"the final state measured {estimate_text(r.decision.estimate)} of the state "
                            f"without {', '.join(later)}: not decided lower, kept; "
                        )
                    if r.decision is not None and lower:
                        dropped = [x for x in kept if x not in best_kept]
                        note = (
                            f"{', '.join(dropped)} dropped: the final state measured "
                            f"{estimate_text(r.decision.estimate)} of the state without "
                            f"{'it' if len(dropped) == 1 else 'them'}; "
                        )
                        gone = {t.fix_id for t in trials if t.status == "kept" and t.name in dropped}
                        for j, t in enumerate(trials):
                            if t.status == "kept" and (
                                t.name in dropped or (t.members and set(t.members) <= set(dropped))
                            ):
                                trials[j] = t.model_copy(
                                    update={
                                        "status": "rejected",
                                        "reason": f"dropped: it lowered the combined result "
                                        f"({estimate_text(r.decision.estimate)}); {t.reason}",
                                    }
                                )
                            elif t.status == "superseded" and t.fix_id in gone:  # its successor went
                                trials[j] = t.model_copy(
                                    update={"status": "rejected", "reason": f"dropped with it: {t.reason}"}
                                )
                        kept = list(best_kept)
                        state = best_state if r.ref is None else replace(best_state, throughput=r.ref)
                    elif r.trial is not None:
                        earlier = r.trial_runs[:-1]  # its last run is r.trial, the check's first
                        state = replace(state, throughput=r.trial)
                r = self.compare(state, base, "combined vs the baseline", trial_earlier=earlier, states=True)
                startup = startup_added(r.trial_steps, r.ref_steps)
                if r.decision is not None:
                    est = r.decision.estimate
                    speedup, ci, verdict = (
                        est.ratio,
                        [est.low, est.high],
                        r.decision.verdict,
                    )
                    note += f"vs the baseline: {r.decision.reason}"
                    chain, reproduced = reproduction(trials, est)
                    rounds_note = (
                        f"{len(r.pairs)} paired round{'s' if len(r.pairs) != 1 else ''}, side by side"
                    )
                combined, combined_ref = r.trial_median or state.throughput, r.ref_median
                if state.run_id:
                    run_id = state.run_id
            else:
                note = f"the final run failed ({failed}): the combined result is not measured"
            if ok and self.cfg.final_profile:  # the breakdown of the final state, for the "after" view
                self.event("final", f"profiled run with {', '.join(kept)}")
                prun, pres, _ = self.measured_run(
                    "combined (profiled): " + ", ".join(kept),
                    state.source,
                    state.switches,
                    profile=True,
                    modules=state.modules,
                    examples=state.examples,
                )
                if pres.ok:
                    run_id = prun.id
                else:
                    note += f"; the profiled run for the breakdown failed ({pres.message or pres.status})"
        self.final_source = state.source if kept else base.source
        self.final_modules = changed_modules(base.modules, state.modules) if kept else {}
        scaled = any(k.startswith("batch-scale") for k in kept)  # the only fix that sets a learning rate
        changes = training_changes(base.facts, state.facts, rate=scaled) if kept else {}
        patch = self.diff(base.source, base.modules, self.final_source, self.final_modules)
        outside = self.loop_outside_share()
        if patch:
            files = ", ".join(patch_files(patch))
            patch = (
                patch_header(
                    files,
                    kept,
                    speedup,
                    ci,
                    rounds_note,
                    changes,
                    verdict,
                    outside,
                    whole_loop=self.whole_loop,
                )
                + patch
            )
        return FixSummary(
            baseline=self.base_tp or self.report.throughput,
            whole_loop=self.whole_loop,
            baseline_timed=median_run(self.base_reruns),
            baseline_timed_runs=len(self.base_reruns),
            trials=trials,
            combined=combined,
            combined_reference=combined_ref,
            combined_speedup=speedup,
            loop_outside_share=outside,
            combined_ci=ci,
            combined_verdict=verdict,
            combined_note=note,
            combined_startup_s=startup,
            dropped=dropped,
            training_changes=changes,
            allow_unchecked=self.cfg.allow_unchecked,
            trials_chained=chain,
            reproduced=reproduced,
            patch=patch,
            kept=kept,
            combined_run_id=run_id,
            wall_s=time.monotonic() - t0,
            confirm_rounds=self.rounds,
            outside_load=max(self.loads) if self.loads else None,
            busy_runs=sum(v >= BUSY_SHARE for v in self.loads),
            measured_runs=len(self.loads),
        )

    def loop_outside_share(self) -> float | None:
        """The share of the script's fit() loop outside the training steps the trials time, as the profile
        timed it (TFD207's figure: the same step time, the same gap), where that finding was made."""
        gap = self.report.facts.between_fits
        bd = self.report.breakdown
        if gap is None or bd is None or not any(f.rule_id == "TFD207" for f in self.report.findings):
            return None
        step_ms = bd.unprofiled_step_ms or bd.avg_step_ms
        outside, fit_s, _ = gap.loop_time(step_ms, self.report.facts.steps_per_execution or 1)
        return round(outside / (outside + fit_s), 4) if outside + fit_s > 0 else None

    def apply(self, fix: Fix, source: str, ctx: FixContext) -> FixOutcome:
        """``fix`` applied to ``source`` (the script as the fixes kept so far left it), its reason and notes
        citing the lines of the user's file (:func:`user_lines`)."""
        out = fix.apply(source, ctx)
        original = self.user_source.text
        if source == original:
            return out

        def lines(xs: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(user_lines(x, source, original) for x in xs)

        return replace(
            out,
            reason=user_lines(out.reason, source, original),
            warnings=lines(out.warnings),
            side_effects=lines(out.side_effects),
            advice=lines(out.advice),
        )

    def context(
        self, facts: Facts, modules: dict[str, str], variant: dict[str, str], hardware: Hardware
    ) -> FixContext:
        """What a fix's transform sees of the state it is applied to. The work between the fit() calls of a
        loop is timed by the profile run only (a trial's run times its steps): the baseline's stays."""
        base = self.report.facts.between_fits
        if facts.between_fits is None and base is not None:
            facts = facts.model_copy(update={"between_fits": base})
        return FixContext(
            facts=facts,
            findings=tuple(self.report.findings),
            script_args=tuple(self.cfg.args),
            hardware=hardware,
            params=variant,
            filename=self.relpath,
            project=dict(modules),
            whole_loop=self.whole_loop,
        )

    # -- the undecided fixes together ----------------------------------------------------------------
    def pool(
        self,
        state: _State,
        tried: list[tuple[Fix, dict[str, str], int]],
        trials: list[FixTrial],
        kept_label: dict[str, str],
        history: list[tuple[list[str], _State]],
        hardware: Hardware,
    ) -> _State:
        """The trials the judge left undecided with a point estimate above 1 (none that changes the
        training: CHANGES_TRAINING never pools), when there are at least two, applied together on
        ``state`` (in the order they were tried; a member whose apply changes nothing there is left out)
        and judged as ONE trial by :meth:`trial`. Kept: every member's trial becomes kept (its reason
        cites the pooled ratio, its own figures stay), ``kept_label`` and ``history`` get them, and the
        pooled state is returned; else ``state`` (its latest measurement). The pooled trial is appended
        to ``trials`` either way."""
        cands = [(fix, variant, j) for fix, variant, j in tried if poolable(trials[j])]
        if len(cands) < 2:
            return state
        source, modules, switches = state.source, dict(state.modules), dict(state.switches)
        members: list[tuple[Fix, int]] = []
        reasons: list[str] = []
        warnings: list[str] = []
        advice: list[str] = []
        effects: list[str] = []
        factor = 1.0
        for fix, variant, j in cands:
            name = trials[j].name
            out = self.apply(fix, source, self.context(state.facts, modules, variant, hardware))
            if not out.changed:
                self.event("result", f"{name}: left out of the pooled trial ({out.reason})", fix_id=fix.ID)
                continue
            members.append((fix, j))
            source = out.code
            modules.update({r: t for r, t in out.files.items() if r in modules})
            switches.update(out.switches)
            factor *= out.examples_factor
            reasons.append(f"{name}: {out.reason}")
            warnings += out.warnings
            advice += out.advice
            effects += out.side_effects
        if len(members) < 2:
            return state
        names = tuple(trials[j].name for _, j in members)
        pooled = Pooled(members=names, fix_ids=tuple(f.ID for f, _ in members))
        outcome = FixOutcome(
            fix_id=pooled.ID,
            status="changed",
            code=source,
            reason="; ".join(reasons),
            warnings=tuple(warnings),
            switches={k: v for k, v in switches.items() if state.switches.get(k) != v},
            examples_factor=factor,
            side_effects=tuple(effects),
            advice=tuple(advice),
            files=changed_modules(state.modules, modules),
        )
        label = "pooled: " + " + ".join(names)
        self.event(
            "trial",
            f"{label}: not decided alone, tried together",
            fix_id=pooled.ID,
            index=self._at[0],
            total=self._at[1],
            label=label,
        )
        expected = state.examples * factor if state.examples else None
        trial, after = self.trial(pooled, outcome, state, state, expected, label)
        trials.append(trial)
        self.event("result", result_line(label, trial), fix_id=pooled.ID)
        if trial.status != "kept":
            return after
        for fix, j in members:
            trials[j] = kept_together(trials[j], names, trial)
            kept_label.pop(fix.ID, None)
            kept_label[fix.ID] = trials[j].name
        history.append((list(kept_label.values()), after))
        return after

    def _best_intermediate(
        self, base: _State, history: list[tuple[list[str], _State]]
    ) -> tuple[list[str], _State] | None:
        """The intermediate state (after some but not all kept fixes) with the highest measured rate
        relative to the baseline, or None (fewer than two kept fixes)."""
        best: tuple[float, tuple[list[str], _State]] | None = None
        for kept, st in history:
            t, a, _ = comparable(st.throughput, base.throughput, _factor(st.examples, base.examples))
            r = t.rate / a.rate if a.rate > 0 else 0.0
            if best is None or r > best[0]:
                best = (r, (kept, st))
        return best[1] if best else None

    def compare(
        self,
        trial: _State,
        ref: _State,
        label: str,
        *,
        trial_earlier: Sequence[Throughput] = (),
        states: bool = False,
    ) -> Rounds:
        """Paired rounds of two measured states (the trial's latest measurement is its first run;
        ``trial_earlier`` and ``states``: see :func:`judge_rounds`)."""
        index, total = self._at
        # the trial's measurement conditions hold for the reference's runs too (see trial())
        ref_switches = reference_switches(ref.switches, trial.switches)
        ref_key = state_key(ref.source, ref_switches, ref.modules)

        def measure(side: Side, i: int) -> Measured:
            st = ref if side == "reference" else trial
            sw = ref_switches if side == "reference" else trial.switches
            self.event("trial", f"{label}, paired round {i}, {side}", index=index, total=total, label=label)
            return self._measured(
                self.measured_run(
                    f"{label}: {side}, paired round {i}",
                    st.source,
                    sw,
                    modules=st.modules,
                    examples=st.examples,
                )
            )

        return judge_rounds(
            measure,
            first_trial=trial.throughput,
            ref_prev=ref.throughput,
            ref_fresh=self._last == ref_key and self._last != trial.key(),
            scale=_factor(trial.examples, ref.examples),
            max_rounds=self.rounds,
            pool=self.paired_logs,
            ref_timed=ref.timed,
            trial_earlier=trial_earlier,
            states=states,
            ref_history=self.timed_runs.get(ref_key, ()),
        )

    # -- one run -------------------------------------------------------------------------------------
    def _measured(self, got: tuple[RunDir, CaptureResult, Report]) -> Measured:
        """A paired round's run (timing-only), as the judge takes it; a re-run of the unchanged script
        is kept for the summary's ``baseline_timed``."""
        run, res, rep = got
        if res.ok and rep.throughput is not None and self._last == self._base_key:
            self.base_reruns.append(rep.throughput)
            self.note_base_gap(res.facts)
        return Measured(
            run_id=run.id,
            status=res.status if res.ok else (res.status if res.status != "complete" else "failed"),
            throughput=rep.throughput if res.ok else None,
            steps=list(res.steps),
            facts=res.facts,
            message=res.message or "",
            error=res.error,
        )

    def note_base_gap(self, facts: Facts | None) -> None:
        """A timing-only re-run of the unchanged script timed its work between bursts of steps: the later
        whole-loop trials tell a burst by a pause from the shortest such gap seen, the profiled run's
        included. The profiled run's gap alone set it, and it can run long (a loaded machine: cvae's
        eager evaluation between epochs took 6.6 s there, 1.5 s in the re-runs); its fifth (1.3 s) was
        then longer than the whole gap once host-calls had moved that evaluation into a graph, so the
        trial's next burst read as the same burst going on, and the run ended with its whole loop not
        measured."""
        gap = facts.between_fits if facts is not None else None
        if not self.whole_loop or self.burst_pause is None or gap is None:
            return
        if gap.loop == "steps" and gap.ended_by == "next_step" and gap.seconds > 0:
            self.burst_pause = min(self.burst_pause, burst_pause_s(gap.seconds))

    def diff(
        self, before: str, before_modules: dict[str, str], after: str, after_modules: dict[str, str]
    ) -> str:
        """The patch from one state to another: the script's part, then each changed module's (the
        paths relative to the script's folder, as ``patch -p1`` there wants them)."""
        return unified_diff(before, after, self.relpath) + modules_diff(
            before_modules, changed_modules(before_modules, after_modules)
        )

    def module_changes(self) -> dict[str, tuple[Source, str]]:
        """The modules beside the script the kept fixes changed, for ``--apply``
        (:func:`tfdoctor.session.profile.apply_project`): relative path → (as read, fixed)."""
        return {rel: (self.module_sources[rel], text) for rel, text in self.final_modules.items()}

    def state_key(self, code: str, switches: dict[str, str], modules: dict[str, str] | None) -> StateKey:
        """The key of the state a run measures (``modules`` None: the user's own)."""
        return state_key(code, switches, self.user_modules if modules is None else modules)

    def run_steps(self, examples: float | None, profile: bool = False) -> int:
        """The steps of a run whose steps hold ``examples`` each: as many examples as the baseline's
        run trained on. A step of ``steps_per_execution=8`` is 8 batches and a batch ×2 step two: in the
        baseline's steps such a run trained 8 (2) times as far, into the next ``fit()`` of a tutorial
        that trains a second model (a phase its reference never reached: not compared) or past the
        script's end. At least the warm-up and :data:`MIN_TIMED_STEPS` timed steps (and as many more for a
        profiled run's trace); the timing window's floor on time (:data:`MIN_TIMING_S`) still grows it a
        step at a time."""
        steps = self.cfg.steps
        base = self.base_examples
        if not examples or not base or examples <= base * 1.01:
            return steps
        floor = max(3, self.cfg.warmup or 0) + MIN_TIMED_STEPS * (2 if profile else 1)
        return max(min(steps, floor), math.ceil(steps * base / examples))

    def measured_run(
        self,
        label: str,
        code: str,
        switches: dict[str, str],
        *,
        profile: bool = False,
        modules: dict[str, str] | None = None,
        examples: float | None = None,
    ) -> tuple[RunDir, CaptureResult, Report]:
        """One run (:meth:`measure`), its throughput kept under the state it measured when it is a timing
        window's (``timed_runs``: the judge's floor, :func:`judge_rounds`)."""
        _, res, rep = got = self.measure(
            label, code, switches, profile=profile, modules=modules, examples=examples
        )
        if not profile and res.ok and rep.throughput is not None and self._last is not None:
            self.timed_runs.setdefault(self._last, []).append(rep.throughput)
        return got

    def measure(
        self,
        label: str,
        code: str,
        switches: dict[str, str],
        *,
        profile: bool = False,
        modules: dict[str, str] | None = None,
        examples: float | None = None,
    ) -> tuple[RunDir, CaptureResult, Report]:
        """One run of the script ``code`` with the modules beside it as ``modules`` (None: the user's
        own), in a copy of the script's folder; ``examples``: the examples a step of it holds
        (:meth:`run_steps`)."""
        modules = self.user_modules if modules is None else modules
        self._last = self.state_key(code, switches, modules)
        run = self.store.new_run(str(self.script), self.cfg.args, kind="fix", parent=self.baseline.id)
        self.store.update(run, fix=label)
        run.file(PATCH).write_bytes(
            patch_bytes(
                self.diff(self.user_source.text, self.user_modules, code, modules),
                self.user_source,
                self.module_sources,
            )
        )
        work = Path(tempfile.mkdtemp(prefix="tfdoctor-fix-"))
        changed: list[str] = []
        try:
            copy = make_workspace(self.script, work / "src", self.root)
            write_copy(copy, code, self.user_source)  # the original's encoding and line endings
            # the modules the fixes changed, each in its own encoding and line endings
            write_modules(
                work / "src" / self.base.relative_to(self.root),
                changed_modules(self.user_modules, modules),
                self.module_sources,
            )
            cwd = self.cwd
            if cwd == self.root or self.root in cwd.parents:  # inside what was copied: the copy's
                cwd = work / "src" / cwd.relative_to(self.root)
            links = link_states(str(work))
            ccfg = CaptureConfig(
                script=copy,
                args=list(self.cfg.args),
                steps=self.run_steps(examples, profile),
                warmup=self.cfg.warmup,
                profile=profile,
                timeout_s=self.timeout(),
                env=dict(self.cfg.env),
                switches=dict(switches),
                cwd=cwd,
                guard={"root": str(work), "since_ns": str(self.since_ns)},
                # the profiled run's timing window stays as planned: its profile window follows it
                min_timing_s=0.0 if profile else self.cfg.min_timing_s,
                fit=self.cfg.fit,
                module=self.cfg.module,
                # the whole loop judged: the run goes on past its windows to its burst's end and times the
                # script's work until the next burst
                between_fits_s=BETWEEN_FITS_S if self.whole_loop and not profile else 0.0,
                burst_pause_s=self.burst_pause if self.whole_loop and not profile else None,
            )
            res = run_capture(ccfg, run, progress=self.on_capture)
            if res.outside_load is not None:
                self.loads.append(res.outside_load)
            rep = finish_run(self.store, run, res)
            if self.whole_loop and not profile and res.ok:
                whole, why = loop_throughput(rep.throughput, res.facts, self.loop_unit, res.steps)
                rep = rep.model_copy(update={"throughput": whole})
                if whole is None:
                    res = replace(res, message=f"as a whole loop, {why}")
            changed = changed_links(links)
        except KeyboardInterrupt:  # ^C while the run was set up or collected: still say so in the store
            self.store.update(run, status="interrupted", error="interrupted")
            res = None
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if res is None or res.status == "interrupted":  # ^C stops the whole loop: nothing is kept or applied
            raise RunError(
                f"interrupted while measuring {label}: the fix loop stopped and nothing was applied "
                f"(the runs measured so far are kept in {self.store.runs_dir})",
                run_dir=str(run.path),
                exit_code=130,
            )
        refused = next((ln for ln in (res.error or "").splitlines() if GUARD_MARK in ln), None)
        if refused or changed:  # every later trial would do the same: the loop stops, nothing applied
            what = (
                re.sub(r": '[^']*'$", "", refused[refused.index(GUARD_MARK) :].rstrip())
                if refused
                else f"{', '.join(changed)} changed while it ran: the script wrote through the copy's "
                "link to your file, below Python (TensorFlow's file system?), which tfdoctor's write "
                "guard cannot see; give the script an output path of its own"
            )
            raise RunError(
                f"the fix loop stopped at {label}, nothing applied: {what}",
                run_dir=str(run.path),
                exit_code=1,
            )
        return run, res, rep

    # -- one trial -----------------------------------------------------------------------------------
    def trial(
        self,
        fix: Fix | Pooled,
        outcome: FixOutcome,
        ref: _State,
        before: _State,
        expected: float | None,
        label: str,
        over_kept: bool = False,
    ) -> tuple[FixTrial, _State]:
        """Measure ``outcome`` (applied to ``before``) and judge it against ``ref`` (the state to beat;
        ``over_kept``: a bigger variant of a fix over its smaller one in ``ref``, held to :func:`keep_bar`'s
        higher bar).
        Returns the trial and the state to go on from: the fix's when kept, else ``ref``; either with its
        latest measurement after the paired rounds. A :class:`Pooled` fix (several fixes' outcome applied
        together) passes each member's sanity checks (in effect, training changes, loss) and is judged
        once."""
        ids = fix.fix_ids if isinstance(fix, Pooled) else (fix.ID,)
        switches = {**before.switches, **outcome.switches}
        # the modules the fix edited (only those beside the script that it imports), over the state's
        modules = {**before.modules, **{r: t for r, t in outcome.files.items() if r in before.modules}}
        # the measurement conditions the trial sets (the in-memory caches filled before the timed steps)
        # hold for the reference's paired runs too: caches the script already had are then full on both
        # sides, and only the fix's own cache makes a difference
        ref_switches = reference_switches(ref.switches, switches)
        ref_key = state_key(ref.source, ref_switches, ref.modules)
        ref_was_last = self._last == ref_key
        run, res, rep = self.measured_run(label, outcome.code, switches, modules=modules, examples=expected)
        tp = rep.throughput if res.ok else None
        shown = tp  # after the paired rounds: the trial's median run
        shown_ref: Throughput | None = None  # and the median run of the state it was paired with
        extra: dict[str, object] = {}
        paired_ids: list[str] = []

        def decided(
            status: Literal["kept", "rejected", "failed", "skipped"], reason: str, error: str | None = None
        ) -> FixTrial:
            return FixTrial(
                fix_id=fix.ID,
                label=label if label != fix.ID else "",
                description=f"{fix.DESCRIPTION}: {outcome.reason}",
                status=status,
                reason=reason,
                error=error,
                throughput=shown,
                reference=shown_ref,
                patch=self.diff(before.source, before.modules, outcome.code, modules),
                runtime_switch=dict(outcome.switches),
                run_id=run.id,
                paired_run_ids=paired_ids,
                members=list(fix.members) if isinstance(fix, Pooled) else [],
                **extra,  # type: ignore[arg-type]
            )

        if not res.ok:
            err = (res.error or res.message or res.status).strip()
            status_word = "timed out" if res.status == "timeout" else "failed"
            why = f"{status_word}, rolled back: {res.message or res.status}"
            if hint := fix.failure_hint(res.error or res.message or ""):
                why += f"; {hint}"
            return decided("failed", why, "\n".join(err.splitlines()[-20:])), ref
        if tp is None:  # e.g. a bigger batch left the script too few steps to time: not measured
            why = res.message or f"no throughput measured ({res.status})"
            return decided("skipped", f"not measured: {why}; rolled back"), ref
        examples = examples_per_step(res.steps, res.facts)
        factor = expected / ref.examples if expected and ref.examples else outcome.examples_factor
        extra["training_changes"] = training_changes(before.facts, res.facts, rate="batch-scale" in ids)
        state = _State(
            source=outcome.code,
            switches=switches,
            throughput=tp,
            examples=examples,
            steps=res.steps,
            stdout=_read(run.file(STDOUT)),
            facts=res.facts or before.facts,
            loss_runs=[list(res.steps)],
            run_id=run.id,
            modules=modules,
        )
        # sanity first: a fast but broken run is rejected whatever its speed
        if (
            expected is not None
            and examples is not None
            and abs(examples - expected) > batch_tolerance(ids, ref.examples, examples) * expected
            and not _batch_in_effect(ids, before.facts, res.facts, outcome.examples_factor)
            and not (examples < expected and whole_epochs(res.steps))
        ):
            why = f"examples per step changed ({before.examples} → {examples}, expected {expected:g})"
            return decided("rejected", why), ref
        absent = next(
            (
                f"{fid}: {gone}" if isinstance(fix, Pooled) else gone
                for fid in ids
                if (gone := not_in_effect(fid, before.facts, res.facts))
            ),
            None,
        )
        if absent:
            return decided("skipped", f"not applied: {absent}; not measured"), ref
        if elsewhere := other_phase([ref.steps], [res.steps], disjoint=True):
            return decided("skipped", f"not measured: {elsewhere}"), ref
        if outcome.side_effects:
            effects = "; ".join(outcome.side_effects)
            why = f"Python side effects in the step would change behaviour under it ({effects})"
            return decided("rejected", why), ref

        def output_changed() -> str | None:
            runs = comparable_outputs(ref)
            out, steps = runs[0] if runs else (ref.stdout, ref.steps)
            spread = output_spread([o for o, _ in runs]) if len(runs) > 1 else None
            further = examples_seen(res.steps, examples) > examples_seen(steps, ref.examples)
            length = run_length(res.steps, steps, ref.examples)
            return output_change(out, state.stdout, further=further, length=length, spread=spread)

        changed = output_changed()
        while changed and len(comparable_outputs(ref)) < 2:
            # the script's own variation? (unseeded randomness: an agent's "episode: ..." lines, 0 to 4 in
            # as many steps) the reference once more, and what its two runs differ by is not a change
            at, of = self._at
            what = f"{label}: the reference again (its output's own variation)"
            self.event("trial", what, index=at, total=of, label=label)
            again, got, _ = self.measured_run(
                f"{label}: reference, its output again", ref.source, ref.switches, modules=ref.modules
            )
            if not got.ok:
                break
            ref = replace(
                ref,
                reruns=[*ref.reruns, (_read(again.file(STDOUT)), list(got.steps))],
                loss_runs=[*ref.loss_runs, list(got.steps)],
            )
            changed = output_changed()
        if changed:
            return decided("rejected", changed), ref
        cold = memo_problem(res.facts)
        if cold:  # it timed the cache filling, not serving: no verdict on speed
            return decided("rejected", cold), ref
        loss = loss_check(
            ref.loss_runs,
            res.steps,
            per_update="batch-scale" in ids,
            same_training=not any(fid in CHANGES_TRAINING for fid in ids),
        )
        if loss.status == "not finite":
            return decided("rejected", loss.text), ref
        unchecked = loss.text if loss.status == "unreadable" else None
        extra["unchecked"] = unchecked
        blocked = next(
            (b for fid in ids if (b := unchecked_block(fid, unchecked, self.cfg.allow_unchecked))), None
        )
        if blocked:
            return decided("rejected", blocked), ref
        # the speed: paired rounds against the state to beat
        index, total = self._at

        def measure(side: Side, i: int) -> Measured:
            self.event(
                "trial",
                f"{label} paired round {i}/{self.rounds}, {side}"
                if i <= self.rounds
                else f"{label} paired round {i} (past the budget of {self.rounds}: a gain still undecided), {side}",
                fix_id=fix.ID,
                index=index,
                total=total,
                label=label,
            )
            if side == "reference":
                got = self.measured_run(
                    f"{label}: reference, paired round {i}",
                    ref.source,
                    ref_switches,
                    modules=ref.modules,
                    examples=ref.examples,
                )
            else:
                got = self.measured_run(
                    f"{label}: paired round {i}", outcome.code, switches, modules=modules, examples=expected
                )
            return self._measured(got)

        r = judge_rounds(
            measure,
            first_trial=tp,
            ref_prev=ref.throughput,
            ref_fresh=ref_was_last,
            scale=factor,
            max_rounds=self.rounds,
            pool=self.paired_logs,
            keep_above=keep_bar(ids, over_kept=over_kept),
            ref_timed=ref.timed,
            ref_history=self.timed_runs.get(ref_key, ()),
        )
        paired_ids[:] = r.run_ids
        extra["paired_ratios"] = r.ratios
        shown, shown_ref = r.trial_median or tp, r.ref_median
        ref = replace(
            ref,
            throughput=r.ref or ref.throughput,
            loss_runs=[*ref.loss_runs, *r.ref_steps],
            timed=ref.timed or r.ref is not None,
        )
        state = replace(state, throughput=r.trial or tp, loss_runs=[*state.loss_runs, *r.trial_steps])
        if r.failed:
            return decided("failed", *r.failed), ref
        if r.cold:
            return decided("rejected", MEMO_COLD), ref
        if elsewhere := other_phase([ref.steps, *r.ref_steps], [res.steps, *r.trial_steps]):
            return decided("skipped", f"not measured: {elsewhere}"), ref
        assert r.decision is not None
        d: Decision = r.decision
        extra.update(
            speedup=d.estimate.ratio,
            speedup_ci=[d.estimate.low, d.estimate.high],
            verdict=d.verdict,
        )
        note = f"; {r.note}" if r.note else ""
        if over_kept and d.verdict != "faster":  # why its bar is higher than the smaller step's
            note += f"; a step up over the {fix.ID} kept must gain {ESCALATE:.2f}x: the smaller one stays"
        # the loss again, now with every run of the reference (its run-to-run spread learned)
        loss = loss_check(
            ref.loss_runs,
            res.steps,
            per_update="batch-scale" in ids,
            same_training=not any(fid in CHANGES_TRAINING for fid in ids),
        )
        if loss.bad and d.verdict in ("slower", "not faster"):  # the speed decides it: said first
            return decided("rejected", f"{d.reason}{note}; the loss too: {loss.text}"), ref
        if loss.bad:
            return decided("rejected", f"{loss.text}; measured {estimate_text(d.estimate)}"), ref
        if not d.keep:
            return decided("rejected", d.reason + note), ref
        if loss.note and "batch-scale" in ids and any(t in outcome.reason for t in LINEAR_RULE):
            # the codemod saw no sum in the source (keras-io's OCR: add_loss of per-example losses)
            return decided(
                "rejected",
                f"{loss.note}, and the learning rate was scaled linearly as well: with a summed loss SGD's "
                "step grows with the batch by itself, so it grew twice (the batch's factor squared); scale "
                f"the batch with the learning rate as it is; measured {estimate_text(d.estimate)}",
            ), ref
        if loss.batch_dependent and unchecked is None:  # told by the reference's runs since the first check
            unchecked = extra["unchecked"] = loss.text
            blocked = next(
                (b for fid in ids if (b := unchecked_block(fid, unchecked, self.cfg.allow_unchecked))), None
            )
            if blocked:
                return decided("rejected", f"{blocked}; measured {estimate_text(d.estimate)}"), ref
        notes, advice = list(outcome.warnings), list(outcome.advice)
        if loss.note:  # the loss compared per example: say so beside the gain it let through
            notes.append(loss.note)
        fill = res.facts.tfdata_cache_fill if res.facts is not None else None
        if "tfdata-cache" in ids and fill is not None and fill.filled:  # what its switch read first
            notes.append(
                f"{fill.elements:,} elements read into the cache in {fill.seconds:.1f} s before the first step"
            )
        changes = extra["training_changes"]
        reason = (
            d.reason
            + note
            + (f"; {training(changes)}" if changes else "")  # type: ignore[arg-type]
            + (
                f"; loss not checked ({unchecked}), kept as --allow-unchecked asked"
                if unchecked and any(fid in CHANGES_TRAINING for fid in ids)
                else ""
            )
            + (f"; note: {'; '.join(notes)}" if notes else "")
            + (f"; advice: {advice[0]}" if advice else "")
        )
        return decided("kept", reason), state


def changed_modules(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """The modules of ``after`` whose source differs from ``before``'s."""
    return {rel: text for rel, text in after.items() if before.get(rel) != text}


def _factor(examples: int | None, base_examples: int | None) -> float:
    if examples and base_examples:
        return examples / base_examples
    return 1.0


def before_examples(report: Report) -> int | None:
    return examples_per_step(report.steps, report.facts)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def run_fix_loop(
    store: RunStore,
    baseline: RunDir,
    report: Report,
    cfg: LoopConfig,
    *,
    on_event: Callable[[Event], None] | None = None,
    on_capture: Callable[[CaptureProgress], None] | None = None,
) -> FixSummary:
    """Run the loop on ``baseline`` (its report must have a throughput); writes the summary into the
    baseline's report and ``fix.patch``; returns the summary."""
    return FixLoop(store, baseline, report, cfg, on_event=on_event, on_capture=on_capture).run()


__all__ = [
    "DEFAULT_ROUNDS",
    "ESCALATE",
    "MEMO_COLD",
    "MIN_TIMING_S",
    "Event",
    "FixLoop",
    "LoopConfig",
    "Measured",
    "Pooled",
    "Rounds",
    "chain_trials",
    "judge_rounds",
    "keep_bar",
    "kept_together",
    "memo_problem",
    "order_candidates",
    "patch_header",
    "poolable",
    "reference_switches",
    "reproduction",
    "run_fix_loop",
    "run_length",
    "state_key",
    "unchecked_block",
]
