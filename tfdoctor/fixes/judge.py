"""The one judge of a fix: is the trial faster than the state it was tried on, and by how much?

Used by every face that measures fixes (the script loop behind ``tfdoctor profile --fix`` and
``tfdoctor fix``, and the notebook's ``%%tfdoctor --fix``). It is pure statistics: no TensorFlow, no
runs; the loops hand it measurements and ask whether to measure again.

Measurements come in **paired rounds**: the reference state and the trial measured back to back, the
order alternating (BA, AB, BA, …) so that load drifting across the rounds weighs on both sides alike.
Each run brings its rate and the rates of its sub-windows (:attr:`Throughput.windows`). The ratio
trial / reference gets a **confidence interval** from a two-level bootstrap: rounds are resampled (the
run-to-run noise of a shared machine), and inside each chosen round each run's sub-windows are
resampled (the noise within a run, so one round still has an interval). The point estimate is the
geometric mean of the rounds' ratios.

A bootstrap over one or two rounds does not know the run-to-run noise that a repeat of the whole
comparison sees (one round: not at all; two rounds that agree by chance: barely). So the interval has a
**between-run floor** (:func:`between_runs`): every state measured more than once (the reference: its
earlier measurement and each round's re-run; the trial: each round's run) tells how far one run's
rate moves from the next; the pooled standard deviation ``s`` of log(rate) over those repeats gives a
round's log ratio a run-to-run spread of ``s·√2`` (two runs in it), the mean over ``n`` rounds
``s·√(2/n)``. In log space each side of the interval is at least ``√(w² + (z·s·√(2/n))²)``, ``w`` that
side of the within-run interval (sub-windows only), ``z`` Student's t quantile of the confidence at the
floor's degrees of freedom (:func:`floor_quantile`: ``s`` is estimated from a handful of repeats, and the
normal 1.96 would treat it as known; two rounds have 3 degrees of freedom, t = 3.18). No state measured
twice (``--fix-rounds 0``): no floor, and the interval knows only the within-run noise.

That spread is each state's own, so load that drifts over minutes and weighs on both runs of a round
counts in it although the pairing cancels it, and a trial's few repeats give it few degrees of freedom.
Within one ``--fix`` run the judge sees many paired rounds, though: every trial's and the combined check's
(``pool``). Their **paired spread** (:func:`paired_spread`) is the standard deviation of a round's log
ratio around its own trial's mean, pooled over the trials (the paired analysis of a one-way layout: each
trial its own mean, one noise for the run's rounds), with ``Σ(rounds - 1)`` degrees of freedom. It is
what a round's log ratio really varies by, drift that hits both runs of a round cancelled, so the floor
becomes ``t·s_d/√n``. It takes over from the per-state floor once it has at least as many degrees of
freedom (a rule on counts, never on which interval comes out narrower), which the run's first trials do
not have yet. It assumes the trials of one run share a noise level (same script, same machine, runs of
one length). A trial whose own rounds scatter more than the run's (a **louder** trial, :func:`louder`:
a prefetch thread competing with the step for two cores) is judged on its own rounds: its own standard
deviation, and a keep waits until they give :data:`LOUD_DF` degrees of freedom (four rounds, within the
budget), Student's t then taken at those, not at the pool's many (the run's rounds say nothing of how
well a trial's few rounds measure its own noise). Simulated when it came in (4 % noise a run, 4 rounds
at most, the fourth trial of a run; ``tests/unit/test_judge.py`` holds the coverage checks): a 1.15x
gain is kept 97 % of the time under 3 % drift a round (89 % with each state's own spread) and 97 % under
12 % drift (27 %). A neutral trial three times as noisy as the run's others, judged through the loop's
sequential rounds (``tests/unit/test_fix_loop_logic.py``), was kept in 16 % of simulated runs on the
run's scale; with the louder-trial rule in 10 % (2026-12-03; what still leaks is two rounds that agree
by chance, which no judge can tell from a calm trial), five times as noisy 17 % → 12 %; in a calm run
(4 % noise throughout, 300 runs) a 1.15x gain is kept 99 % of the time either way, a 1.1x gain 81 %
(85 % before: a calm trial whose rounds happen to scatter more is judged at its own few degrees of
freedom), a neutral trial 0.7 % either way.

The scale ``s_d`` taken from the pooled rounds is **robust** (:func:`round_scale`, Shamos's estimator)
rather than their standard deviation, once it rests on :data:`DISTURBED_DF` differences of two rounds
(a median of two or three differences is a worse scale than their standard deviation, which stays until
then). A run's rounds are heavy-tailed (most within a few %, a few 30-60 % off when a load spike hits
one run), and a standard deviation would take its measure from one trial's spikes and widen every later
trial's interval. class_trainer, 2026-11-26: batch ×2's six rounds all stood at 1.07-1.20x, yet it was
*not decided* at [0.96x, 1.29x] because generator-prefetch before it had rounds of 1.57x and 0.66x among
rounds near 1; on the robust scale, [1.05x, 1.18x], as the repeat run had measured it. The trial with
the spikes keeps its own wide interval (its own standard deviation is the larger). Simulated: a calm
1.11x gain over 6 rounds after a trial whose runs are slowed 20-50 % one time in four is kept in 94 % of
runs (23 % with the standard deviation), every trial's interval still covering its true ratio ≥ 96 %;
under normal noise the two scales decide alike (a 1.15x gain kept 92 % vs 94 %, coverage 97 % vs 95 %).
``benchmarks/fix_repeat.py`` checks what it buys on real runs: repeat runs agreeing on their kept set
and their intervals overlapping.

Decision (:func:`decide`), on that interval:

* **faster** when the whole interval lies above :data:`KEEP_ABOVE` (a gain of at least 2 %);
* **not faster** when the whole interval lies below :data:`WORTH` (whatever it gains is under 5 %:
  not worth a change the user has to review), or below 1 (slower);
* otherwise another round is measured, until the round budget is spent: then **undecided** ("not
  decided (noisy machine)"), and the fix is not kept.

At least :data:`MIN_ROUNDS` rounds (one AB and one BA) decide, except a *clear* rejection: one round
whose interval lies entirely below 1/:data:`DECISIVE` with the reference re-measured steady (within
:data:`STEADY` of its previous measurement) decides alone. A keep always rests on :data:`MIN_ROUNDS`
rounds (a printed speed-up carries a second pair of runs), unless the round budget is smaller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, median
from typing import Literal

import numpy as np

from tfdoctor.model import Throughput
from tfdoctor.report.format import estimate_text

#: a kept fix gains at least this much: the whole interval must lie above it
KEEP_ABOVE = 1.02
#: a fix whose whole interval lies below this gains under 5 %: rejected without more rounds
WORTH = 1.05
#: the confidence of the interval (two-sided, percentile bootstrap)
CONFIDENCE = 0.95
#: bootstrap resamples: the interval's ends move by well under 1 % between seeds at this count
RESAMPLES = 2000
#: rounds (one BA, one AB) before a decision, unless a round is a clear rejection (see DECISIVE); a keep
#: always waits for them (within the budget): one round's figure did not cover its repeat's
#: (docs/benchmarks.md §6: tf-function 4.95x [4.50, 5.40] vs 4.27x [4.14, 4.50])
MIN_ROUNDS = 2
#: a round whose whole interval lies below 1/DECISIVE is a clear rejection: on this shared 2-core machine
#: one run of an unchanged script measured up to 2.06x another *minutes apart* (docs/benchmarks.md), but
#: back to back with a steady reference such outcomes (XLA on a CPU 0.12-0.33x) do not flip
DECISIVE = 2.0
#: with this many sub-windows or more, a run's fastest and slowest are dropped before resampling: a
#: 500 ms hiccup among 25 ms steps lands in one window and would otherwise make every interval useless
TRIM_FROM = 4
#: the reference re-measured in a round is steady when its rate is within this relative distance of its
#: previous measurement: no load spike hit the round's reference side
STEADY = 0.3

#: a round is *disturbed* (a load spike hit one of its runs) when its log ratio lies more than this many
#: robust standard deviations of the run's rounds (judge.round_scale) from the median of the trial's
#: other rounds …
DISTURBED = 4.0
#: … and more than this far in ratio (log 1.15: a 15 % step), the scale resting on at least DISTURBED_DF
#: differences of two rounds; one such round per trial is not counted
DISTURBED_STEP = math.log(1.15)
DISTURBED_DF = 6
#: … among at least this many rounds of the trial (three agreeing, one off: never a 2-to-1 majority)
DISTURBED_AMONG = 4

#: Student's t, the 0.975 quantile (a two-sided 95 % interval) by degrees of freedom 1..30 (standard
#: tables; beyond 30 the normal 1.96 is within 4 %)
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip

Verdict = Literal["faster", "not faster", "undecided"]


@dataclass(frozen=True)
class Sample:
    """One measured run: its rate in the unit being compared, and its sub-window rates (any unit: only
    their spread around their mean is used)."""

    rate: float
    windows: tuple[float, ...] = ()

    @classmethod
    def of(cls, tp: Throughput, *, examples: bool = True, scale: float = 1.0) -> Sample:
        """From a run's throughput: examples/s when ``examples`` and known, else steps/s × ``scale`` (the
        examples per step a fix changed, when the batch size is unknown)."""
        rate = tp.examples_per_s if examples and tp.examples_per_s else tp.steps_per_s * scale
        return cls(rate, tuple(w for w in tp.windows if w > 0))


def comparable(trial: Throughput, ref: Throughput, scale: float = 1.0) -> tuple[Sample, Sample, str]:
    """(trial, reference, unit): examples/s where both runs know it, else steps/s with the trial scaled by
    ``scale`` (the examples per step the fix changed)."""
    if trial.examples_per_s and ref.examples_per_s:
        return Sample.of(trial), Sample.of(ref), "examples/s"
    unit = "steps/s" + (" (scaled)" if scale != 1 else "")
    return Sample.of(trial, examples=False, scale=scale), Sample.of(ref, examples=False), unit


@dataclass(frozen=True)
class Pair:
    """One round: the reference and the trial measured back to back (``order`` "AB": reference first).
    ``back_to_back`` is False for a trial compared with a reference measured earlier."""

    ref: Sample
    trial: Sample
    order: Literal["AB", "BA"] = "AB"
    back_to_back: bool = True

    @property
    def ratio(self) -> float:
        return self.trial.rate / self.ref.rate if self.ref.rate > 0 else math.inf


@dataclass(frozen=True)
class Estimate:
    """The ratio trial / reference over some rounds, with its confidence interval."""

    ratio: float
    low: float
    high: float
    rounds: int

    @property
    def ci(self) -> tuple[float, float]:
        return (self.low, self.high)


def _log_rates(s: Sample, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` bootstrap draws of log(rate): the rate scaled by the mean of resampled sub-windows over their
    mean (the extreme windows dropped first, see TRIM_FROM)."""
    base = math.log(s.rate) if s.rate > 0 else -math.inf
    w = np.sort(np.asarray(s.windows, dtype=float))
    if len(w) >= TRIM_FROM:  # one window hit by another process widens nothing: extremes dropped
        w = w[1:-1]
    if len(w) < 2:
        return np.full(n, base)
    draws = w[rng.integers(0, len(w), size=(n, len(w)))].mean(axis=1)
    return base + np.log(draws / w.mean())


def between_runs(
    pairs: Sequence[Pair], ref_earlier: Sequence[float] = (), trial_earlier: Sequence[float] = ()
) -> tuple[float, int]:
    """The run-to-run standard deviation of one run's log(rate), pooled over each state's repeated runs
    (the reference: ``ref_earlier``, its measurements before the rounds that no pair holds, and every
    pair's; the trial: ``trial_earlier``, likewise, and every pair's), and its degrees of freedom (0: no
    state was measured twice)."""
    ss, df = 0.0, 0
    trial = [*trial_earlier, *(p.trial.rate for p in pairs)]
    for rates in ([*ref_earlier, *(p.ref.rate for p in pairs)], trial):
        logs = [math.log(r) for r in rates if r > 0]
        if len(logs) >= 2:
            mean = sum(logs) / len(logs)
            ss += sum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    return (math.sqrt(ss / df) if df else 0.0), df


def paired_spread(pairs: Sequence[Pair], pool: Sequence[Sequence[float]] = ()) -> tuple[float, int]:
    """The standard deviation of one round's log ratio (trial / reference, both runs back to back) around
    its trial's mean, pooled over ``pairs`` (this trial's rounds) and ``pool`` (the log ratios of the
    other trials' back-to-back rounds in the same run, one sequence per trial), with its degrees of
    freedom (``Σ(rounds - 1)``; a trial of one round adds none)."""
    ss, df = 0.0, 0
    for logs in (log_ratios(pairs), *(list(g) for g in pool)):
        if len(logs) >= 2:
            mean = sum(logs) / len(logs)
            ss += sum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    return (math.sqrt(ss / df) if df else 0.0), df


def log_ratios(pairs: Sequence[Pair]) -> list[float]:
    """The log ratios of the back-to-back rounds: what a trial adds to the run's ``pool``."""
    return [math.log(p.ratio) for p in pairs if p.back_to_back and p.ref.rate > 0 and p.trial.rate > 0]


def round_scale(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """A robust standard deviation of one round's log ratio, and how many differences it rests on: the
    median of the absolute differences between two rounds of the same trial, over every trial's pairs of
    rounds, × 1.0484 (Shamos's estimator: a difference of two rounds has √2 σ, its median absolute value
    0.6745 of that). A run's rounds are heavy-tailed here (most within ±5 %, a few ±30-50 % when a
    load spike hits one run), and a standard deviation would take its measure from the spikes."""
    diffs = [abs(a - b) for g in groups for i, a in enumerate(g) for b in g[i + 1 :]]
    return (1.0484 * median(diffs), len(diffs)) if diffs else (0.0, 0)


def disturbed(pairs: Sequence[Pair], pool: Sequence[Sequence[float]] = ()) -> tuple[int, float] | None:
    """The round a load spike evidently hit, as (its index in ``pairs``, how many standard deviations it
    lies off), or None. With four back-to-back rounds or more, a round whose log ratio is more than
    :data:`DISTURBED` robust standard deviations of the run's rounds (:func:`round_scale` over the
    trial's and ``pool``'s rounds, on at least :data:`DISTURBED_DF` differences) and more than 15 % from
    the median of the trial's other rounds. One hiccup among 20 ms steps is trimmed inside a run
    (TRIM_FROM); this is the same for a whole run: rounds of 1.22x, 1.16x, 1.17x and 0.72x are three
    agreeing rounds and a disturbed one, and the geometric mean of all four (1.04x) describes none.
    Three rounds are not enough: one far from two others may be a fix whose effect varies, and
    setting it aside would decide on a 2-to-1 majority (gan_fit, 2026-11-26: steps-per-execution kept
    at 1.69x on two rounds after a 1.09x one, where the combined result measured 1.41x). Nor where a
    second round is as far from the rest once the first is left out: keras-io's WGAN-GP, batch-scale ×4
    at 1.29x, 0.98x, 1.28x, 1.004x (then 1.10x, 1.04x, 0.998x) set 0.98x aside as a spike though 1.004x
    was as low."""
    logs = [math.log(p.ratio) if p.ref.rate > 0 and p.trial.rate > 0 else math.nan for p in pairs]
    if (
        len(pairs) < DISTURBED_AMONG
        or any(math.isnan(x) for x in logs)
        or not all(p.back_to_back for p in pairs)
    ):
        return None
    s, n = round_scale([logs, *pool])
    if n < DISTURBED_DF or s <= 0:
        return None

    def far(xs: list[float]) -> tuple[int, float] | None:
        worst: tuple[int, float] | None = None
        for i, x in enumerate(xs):
            off = abs(x - median(xs[:i] + xs[i + 1 :]))
            if off > DISTURBED * s and off > DISTURBED_STEP and (worst is None or off / s > worst[1]):
                worst = (i, off / s)
        return worst

    worst = far(logs)
    if worst is None or far(logs[: worst[0]] + logs[worst[0] + 1 :]) is not None:
        return None  # a second round as far off: two kinds of rounds (a bimodal effect), not one spike
    return worst


#: a run measuring below this fraction of the median of its own state's other runs in the same rounds
#: ran slowed as a whole (the ``1 - STEADY`` of a steady reference)
SLOWED = 1 - STEADY
#: … among at least this many other runs of that state
SLOWED_AMONG = 3


def slowed(pairs: Sequence[Pair]) -> tuple[int, Literal["reference", "trial"], float] | None:
    """The round one of whose runs ran slowed as a whole, as (its index in ``pairs``, which side, its
    rate over the median of the same side's other runs), or None: a run below :data:`SLOWED` of the
    median of its state's other runs in these back-to-back rounds (at least :data:`SLOWED_AMONG` of them);
    the slowest such run where there are several. This compares a run with its own state's runs, not
    with the rounds' ratios (:func:`disturbed`): a second load spike in one comparison shows here
    (keras-io's timeseries classification, 2026-11-28: a combined check's trial ran at 804 examples/s,
    every other run of that state 1,450-1,530, its sub-windows steady; a reference at 849 in the same
    comparison had been set aside as disturbed). The fix loop sets such a round aside only after
    :func:`disturbed` set one aside: the host has shown a spike, not a state whose speed varies."""
    if not all(p.back_to_back for p in pairs):
        return None
    worst: tuple[int, Literal["reference", "trial"], float] | None = None
    sides: tuple[Literal["reference", "trial"], ...] = ("reference", "trial")
    for side in sides:
        rates = [(p.ref if side == "reference" else p.trial).rate for p in pairs]
        for i, x in enumerate(rates):
            others = [y for j, y in enumerate(rates) if j != i and y > 0]
            if len(others) < SLOWED_AMONG or x <= 0:
                continue
            frac = x / median(others)
            if frac < SLOWED and (worst is None or frac < worst[2]):
                worst = (i, side, frac)
    return worst


def floor_quantile(confidence: float, df: int) -> float:
    """The multiplier of the between-run floor: Student's t at ``df`` degrees of freedom for the 95 %
    interval (``df`` 2-30: :data:`T975`), else the normal quantile. One degree of freedom (one round:
    the reference measured twice) keeps the normal one: t would be 12.7, and a one-round decision is only
    ever a clear rejection, which its own margin (:data:`DECISIVE`, a steady reference) guards."""
    if abs(confidence - 0.95) < 1e-9 and 2 <= df <= len(T975):
        return T975[df - 1]
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def estimate(
    pairs: Sequence[Pair],
    *,
    ref_earlier: Sequence[float] = (),
    pool: Sequence[Sequence[float]] = (),
    confidence: float = CONFIDENCE,
    seed: int = 0,
    trial_earlier: Sequence[float] = (),
    states: bool = False,
) -> Estimate:
    """The geometric-mean ratio over ``pairs`` and its two-level bootstrap interval, each side widened to
    the between-run floor: the paired spread of the run's rounds (:func:`paired_spread`, ``pool``: the
    other trials' round log ratios) once it has as many degrees of freedom as the per-state one, else
    each state's own run-to-run spread (:func:`between_runs`; ``ref_earlier``: the reference's rates
    measured before the rounds, in the pairs' unit, that no pair holds; ``trial_earlier`` the trial's).
    ``states``: the floor is at least each state's own spread, even where the paired spread rules
    (:func:`floor`). Deterministic: a fixed seed, so the same measurements always give the same
    interval."""
    if not pairs:
        raise ValueError("no measurements to estimate from")
    if any(p.ref.rate <= 0 or p.trial.rate <= 0 for p in pairs):
        r = pairs[0].ratio
        return Estimate(r, r, r, len(pairs))
    rng = np.random.default_rng(seed)
    n = len(pairs)
    # per round, RESAMPLES draws of its log ratio (noise inside the two runs)
    per_round = np.stack(
        [_log_rates(p.trial, rng, RESAMPLES) - _log_rates(p.ref, rng, RESAMPLES) for p in pairs]
    )
    # resample the rounds (noise between runs), one set of rounds per draw
    pick = rng.integers(0, n, size=(RESAMPLES, n)) if n > 1 else np.zeros((RESAMPLES, 1), dtype=int)
    draws = per_round[pick, np.arange(RESAMPLES)[:, None]].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    log_point = sum(math.log(p.ratio) for p in pairs) / n
    # the floor: the within-run interval (every round kept) widened by the repeats' run-to-run spread
    w_lo, w_hi = np.quantile(per_round.mean(axis=0), [alpha, 1 - alpha])
    between = floor(
        pairs,
        ref_earlier=ref_earlier,
        pool=pool,
        confidence=confidence,
        trial_earlier=trial_earlier,
        states=states,
    )
    below = max(log_point - float(lo), math.hypot(max(log_point - float(w_lo), 0.0), between), 0.0)
    above = max(float(hi) - log_point, math.hypot(max(float(w_hi) - log_point, 0.0), between), 0.0)
    return Estimate(math.exp(log_point), math.exp(log_point - below), math.exp(log_point + above), n)


def floor(
    pairs: Sequence[Pair],
    *,
    ref_earlier: Sequence[float] = (),
    pool: Sequence[Sequence[float]] = (),
    confidence: float = CONFIDENCE,
    trial_earlier: Sequence[float] = (),
    states: bool = False,
) -> float:
    """The between-run floor of the interval's half-width in log space over ``pairs``: ``t·s_d/√n`` when
    the run's paired rounds have at least as many degrees of freedom (:func:`paired_spread`) as the
    per-state spread (and at least 2), ``s_d`` their robust scale (:func:`round_scale` over this trial's
    and ``pool``'s rounds, once it rests on :data:`DISTURBED_DF` differences; their standard deviation
    before) and never below the standard deviation of the trial's own rounds, else
    ``t·s·√(2/n)`` from each state's repeats (:func:`between_runs`); 0 with neither (no state measured
    twice, no pool).

    ``states`` (the combined check, whose interval is the headline): never below the per-state floor
    either. Pairing cancels drift common to both runs of a round, not a state that runs at one of two
    speeds from one process to the next: quickstart_closure's final state (XLA, batch ×2) measured 1073,
    1553 and 1455 examples/s in one --fix run and 1001-1055 in the next; each run's two paired rounds
    against the baseline agreed with each other, and the two headlines, 1.38x [1.17x, 1.62x] and 2.15x
    [1.73x, 2.67x], did not overlap. With the final state's earlier runs (``trial_earlier``) in its
    spread, the second reads [1.29x, 3.59x]."""
    n = len(pairs)
    s, df = between_runs(pairs, ref_earlier, trial_earlier)
    per_state = floor_quantile(confidence, df) * s * math.sqrt(2 / n) if df else 0.0
    scales = _paired_scales(pairs, pool, df)
    if scales is not None:
        common, own, own_df, dfd = scales
        if own > common and own_df >= LOUD_DF:
            # a trial noisier than the run's others is judged on its own rounds: its spread, and Student's
            # t at its own degrees of freedom (the run's many rounds say nothing of how well its few
            # rounds measure its own noise)
            paired = floor_quantile(confidence, own_df) * own / math.sqrt(n)
        else:
            paired = floor_quantile(confidence, dfd) * max(common, own) / math.sqrt(n)
        return max(paired, per_state) if states else paired
    return per_state


#: a trial whose own rounds scatter more than the run's common scale (:func:`louder`) is kept only on this
#: many degrees of freedom of its own (rounds - 1), and its interval takes Student's t at them
LOUD_DF = 3


def _paired_scales(
    pairs: Sequence[Pair], pool: Sequence[Sequence[float]], per_state_df: int
) -> tuple[float, float, int, int] | None:
    """(common, own, own_df, dfd): the run's common scale of a round's log ratio (:func:`round_scale` over
    this trial's and ``pool``'s rounds once it rests on :data:`DISTURBED_DF` differences, their pooled
    standard deviation before), the standard deviation of this trial's own rounds and its degrees of
    freedom, and the pooled degrees of freedom; None where the paired floor does not rule (fewer pooled
    degrees of freedom than ``per_state_df``, or under 2)."""
    sd, dfd = paired_spread(pairs, pool)
    if dfd < max(per_state_df, 2):
        return None
    # the run's common scatter, not its spikes (round_scale)
    robust, diffs = round_scale([log_ratios(pairs), *pool])
    common = robust if diffs >= DISTURBED_DF else sd  # a median of a few differences: no better
    own, own_df = paired_spread(pairs)
    return common, own, own_df, dfd


def louder(
    pairs: Sequence[Pair],
    *,
    ref_earlier: Sequence[float] = (),
    pool: Sequence[Sequence[float]] = (),
    trial_earlier: Sequence[float] = (),
) -> bool:
    """Do this trial's rounds scatter more than the run's other rounds, on fewer than :data:`LOUD_DF`
    degrees of freedom of their own? Then a keep waits for more rounds (:func:`decide`): two or three
    rounds that agree by chance say little of a trial's noise, and a prefetch thread competing with the
    step for two cores makes a trial several times as noisy as the run's others (class_trainer's
    generator-prefetch, 2026-11-26: rounds 0.99, 0.95, 1.57, 1.15, 0.66, 1.07 among trials within ±4 %)."""
    scales = _paired_scales(pairs, pool, between_runs(pairs, ref_earlier, trial_earlier)[1])
    return scales is not None and scales[1] > scales[0] and scales[2] < LOUD_DF


def chained(estimates: Sequence[Estimate]) -> Estimate | None:
    """The ratio of the last state to the first over a chain of states each measured against the one
    before it (the kept trials of a --fix run, in order): the product of the ratios, its interval the
    log half-widths added in quadrature on each side (the trials' rounds are separate runs: independent
    errors). None for an empty chain."""
    if not estimates:
        return None
    logs = [math.log(e.ratio) for e in estimates]
    below = math.sqrt(sum((x - math.log(e.low)) ** 2 for x, e in zip(logs, estimates, strict=True)))
    above = math.sqrt(sum((math.log(e.high) - x) ** 2 for x, e in zip(logs, estimates, strict=True)))
    point = sum(logs)
    return Estimate(
        math.exp(point), math.exp(point - below), math.exp(point + above), sum(e.rounds for e in estimates)
    )


def disjoint(a: Estimate, b: Estimate) -> bool:
    """Two measurements of the same ratio whose intervals do not overlap: one of them did not reproduce."""
    return a.low > b.high or b.low > a.high


@dataclass(frozen=True)
class Decision:
    """The judge's word on one trial: its verdict, the estimate it rests on, and the sentence citing it."""

    verdict: Verdict
    estimate: Estimate
    reason: str

    @property
    def keep(self) -> bool:
        return self.verdict == "faster"


def steady(previous: float | None, now: float) -> bool:
    """Is a re-measured reference within STEADY of its previous measurement (or is there none)?"""
    return previous is None or previous <= 0 or abs(now / previous - 1) <= STEADY


def decide(
    pairs: Sequence[Pair],
    *,
    max_rounds: int,
    min_rounds: int = MIN_ROUNDS,
    keep_above: float = KEEP_ABOVE,
    worth: float = WORTH,
    steady_ref: bool = True,
    ref_earlier: Sequence[float] = (),
    pool: Sequence[Sequence[float]] = (),
    trial_earlier: Sequence[float] = (),
    states: bool = False,
) -> Decision | None:
    """The decision on the rounds so far, or None: measure another round.

    ``max_rounds`` is the budget: with that many rounds an interval still straddling the thresholds is
    *undecided*. ``steady_ref``: the reference re-measured in the latest round matched its previous
    rate (a clear rejection decides alone only then). ``ref_earlier``: the reference's measurements
    before the rounds that no pair holds (they widen the interval, see :func:`estimate`). ``pool``: the
    log ratios of the run's other trials' rounds (:func:`log_ratios`), for the paired floor.
    ``trial_earlier`` and ``states``: see :func:`estimate`.
    """
    est = estimate(pairs, ref_earlier=ref_earlier, pool=pool, trial_earlier=trial_earlier, states=states)
    n = len(pairs)

    def loud(rounds: Sequence[Pair]) -> bool:
        return louder(rounds, ref_earlier=ref_earlier, pool=pool, trial_earlier=trial_earlier)

    clear = n == 1 and steady_ref and est.high < 1 / DECISIVE  # a keep waits for min_rounds
    what = _what(pairs)
    if n >= min_rounds or clear or n >= max_rounds:
        cited = f"{estimate_text(est)} over {what}"
        if est.low > keep_above and not (n < max_rounds and loud(pairs)):
            # the rounds before this one cleared the bar but scattered more than the run's: a keep waited
            waited = (
                n > min_rounds
                and loud(pairs[:-1])
                and estimate(
                    pairs[:-1], ref_earlier=ref_earlier, pool=pool, trial_earlier=trial_earlier, states=states
                ).low
                > keep_above
            )
            return Decision(
                "faster",
                est,
                f"faster: {cited}, above the {keep_above:.2f}x bar"
                + (
                    f"; its first rounds scattered more than this run's others: kept once {n} of its own agreed"
                    if waited
                    else ""
                ),
            )
        if est.high < 1:
            return Decision("not faster", est, f"slower: {cited}")
        if est.high < worth:
            return Decision(
                "not faster", est, f"not faster: {cited}; any gain is under {(worth - 1) * 100:.0f} %"
            )
    if n >= max_rounds:
        cited = f"{estimate_text(est)} over {what}"
        return Decision(
            "undecided",
            est,
            f"not decided (noisy machine): {cited} straddles the {keep_above:.2f}x bar after the "
            f"round budget ({max_rounds})",
        )
    return None


def _what(pairs: Sequence[Pair]) -> str:
    if len(pairs) == 1 and not pairs[0].back_to_back:
        return "one run against an earlier reference"
    n = len(pairs)
    return f"{n} paired round{'s' if n != 1 else ''} ({'/'.join(p.order for p in pairs)})"


__all__ = [
    "CONFIDENCE",
    "DECISIVE",
    "DISTURBED",
    "KEEP_ABOVE",
    "LOUD_DF",
    "MIN_ROUNDS",
    "STEADY",
    "WORTH",
    "Decision",
    "Estimate",
    "Pair",
    "Sample",
    "Verdict",
    "between_runs",
    "chained",
    "comparable",
    "decide",
    "disjoint",
    "disturbed",
    "estimate",
    "floor",
    "floor_quantile",
    "log_ratios",
    "louder",
    "paired_spread",
    "round_scale",
    "slowed",
    "steady",
]
