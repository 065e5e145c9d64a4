"""The measure / keep / roll-back loop behind ``tfdoctor profile --fix`` and ``tfdoctor fix``.

Baseline (an existing run) → candidate fixes, best estimated gain first (the findings' ``est_saving``;
without findings, every fix whose transform finds its pattern, in default order) → each fix applied to a
*copy* of the script's folder on top of the fixes kept so far, and run with :func:`run_capture` (a
timing-only run, its own run directory: kind "fix", parent = the baseline) → kept only when the run
is sane and throughput rises beyond the noise band: decided on that one run when its speedup is decisive
(outside [1/DECISIVE, DECISIVE]), else on paired rounds, the reference state and the trial re-measured
back to back → a final profiled run of all kept fixes → a :class:`~tfdoctor.model.FixSummary` in the
baseline's report and ``<baseline>/fix.patch``. The user's files are never written here.
"""

from __future__ import annotations

import math
import re
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from tfdoctor.capture.runner import CaptureConfig, CaptureProgress, CaptureResult, run_capture
from tfdoctor.errors import RunError
from tfdoctor.fixes import Fix, FixContext, FixOutcome, Hardware, all_fixes
from tfdoctor.fixes.workspace import make_workspace, unified_diff
from tfdoctor.model import Facts, FixSummary, FixTrial, Report, StepTiming, Throughput
from tfdoctor.rundir import PATCH, STDOUT, RunDir
from tfdoctor.session.build import finish_run
from tfdoctor.store import RunStore

#: a kept fix must gain at least this much even when the noise band is narrower
MIN_GAIN = 0.02
#: a single trial run's speedup over the state it must beat (measured minutes apart) outside
#: [1/DECISIVE, DECISIVE] decides on that run; inside, paired rounds decide. On this shared 2-core machine
#: one run of an unchanged script measured up to 2.06x another (docs/benchmarks.md, perturbation: per-pair
#: range -13 … +106 %), and whole trials flipped inside that range (batch-scale ×2 kept at >1x once and
#: rejected at 0.58x once; generator-prefetch measured 1.92x once, its combined run half that rate), while
#: clear outcomes stay well outside it (tf-function 4-6x, XLA on a CPU 0.12-0.33x).
DECISIVE = 2.0
#: losses must stay within this relative distance (plus LOSS_ABS) of the reference's over the same steps
LOSS_REL = 0.3
LOSS_ABS = 0.1


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
    # paired rounds (reference and trial back to back) for a trial whose single run is not decisive;
    # 0: every trial is decided on its one run (the rule before paired rounds)
    confirm_rounds: int = 2


@dataclass
class Event:
    """Progress of the loop: ``kind`` is candidates | trial | result | final | done."""

    kind: str
    message: str
    fix_id: str | None = None
    index: int = 0
    total: int = 0


@dataclass
class _State:
    source: str
    switches: dict[str, str]
    throughput: Throughput
    examples: int | None
    steps: list[StepTiming]
    stdout: str
    facts: Facts


# -- ordering --------------------------------------------------------------------------------------
def order_candidates(fixes: list[Fix], report: Report) -> list[tuple[Fix, float]]:
    """Fixes by estimated gain (the best finding naming them), then default order; AFTER respected."""
    est: dict[str, float] = {}
    for finding in report.findings:
        if not finding.decided:
            continue
        for fid in finding.fix_ids:
            est[fid] = max(est.get(fid, 0.0), finding.est_saving)
    ranked = sorted(fixes, key=lambda f: (-est.get(f.ID, 0.0), f.PRIORITY, f.ID))
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


# -- judging ---------------------------------------------------------------------------------------
def rate(tp: Throughput) -> tuple[float, str]:
    if tp.examples_per_s:
        return tp.examples_per_s, "examples/s"
    return tp.steps_per_s, "steps/s"


def noise_band(tp: Throughput) -> float:
    """Half the relative range of the sub-window rates around their median. With 4 or more windows the
    single highest and lowest are dropped first: one window hit by another process on a shared machine
    should widen the band, not make it useless. Falls back to ``spread / 2`` without windows."""
    w = sorted(tp.windows)
    if not w:
        return tp.spread / 2
    if len(w) >= 4:
        w = w[1:-1]
    med = statistics.median(tp.windows)
    return (w[-1] - w[0]) / med / 2 if med > 0 else tp.spread / 2


def _rates(after: Throughput, before: Throughput, examples_factor: float) -> tuple[float, float, str]:
    """The two rates to compare, in examples/s where both know it, else steps/s (``after`` scaled)."""
    if after.examples_per_s and before.examples_per_s:
        return after.examples_per_s, before.examples_per_s, "examples/s"
    # no batch size on one side: steps/s, scaled by the examples per step the fix changed
    unit = "steps/s" + (" (scaled)" if examples_factor != 1 else "")
    return after.steps_per_s * examples_factor, before.steps_per_s, unit


def beats(after: Throughput, before: Throughput, examples_factor: float = 1.0) -> tuple[bool, float, str]:
    """Does ``after`` beat ``before`` beyond both noise bands? (decision, speedup, why)."""
    a, b, unit = _rates(after, before, examples_factor)
    speedup = a / b if b > 0 else math.inf
    band_a, band_b = noise_band(after), noise_band(before)
    lo, hi = a * (1 - band_a), b * (1 + band_b)
    text = (
        f"{b:.1f} → {a:.1f} {unit} ({speedup:.2f}x; noise band ±{band_b * 100:.0f} % / ±{band_a * 100:.0f} %)"
    )
    return lo > hi and speedup > 1 + MIN_GAIN, speedup, text


@dataclass(frozen=True)
class Round:
    """One paired round: the trial's rate over the reference state's, both measured in the round, back to
    back. ``band`` is the two runs' noise bands added: how far the ratio may move on their own noise."""

    ratio: float
    band: float

    @classmethod
    def of(cls, trial: Throughput, ref: Throughput, examples_factor: float = 1.0) -> Round:
        a, b, _ = _rates(trial, ref, examples_factor)
        return cls(a / b if b > 0 else math.inf, noise_band(trial) + noise_band(ref))

    @property
    def slower(self) -> bool:
        """The trial was slower than the reference by more than the round's band."""
        return self.ratio * (1 + self.band) < 1


def needs_confirmation(speedup: float, rounds: int) -> bool:
    """Is a single run's speedup over the state it must beat too close to 1 to decide on? (Only when
    paired rounds are allowed: ``rounds`` > 0.)"""
    return rounds > 0 and 1 / DECISIVE <= speedup <= DECISIVE


def settles(first_keep: bool, rnd: Round) -> bool:
    """Does the first paired round agree with the single run's verdict clearly: its ratio further from the
    bar (1 + MIN_GAIN) than its band, on the verdict's side? Then no second round is run."""
    bar = 1 + MIN_GAIN
    return rnd.ratio > bar * (1 + rnd.band) if first_keep else rnd.ratio * (1 + rnd.band) < bar


def paired_verdict(rounds: list[Round]) -> tuple[bool, str]:
    """Keep when the median paired ratio exceeds 1 + MIN_GAIN and no round shows the trial slower than the
    reference beyond that round's band; (decision, the figures)."""
    ratios = [r.ratio for r in rounds]
    med = statistics.median(ratios)
    text = f"paired round{'s' if len(rounds) > 1 else ''}: " + ", ".join(f"{r:.2f}x" for r in ratios)
    if len(rounds) > 1:  # three decimals: the bar is 1.02x
        text += f" → median {med:.3f}x"
    for i, r in enumerate(rounds, 1):
        if r.slower:
            return (
                False,
                f"{text}; round {i} slower than the reference beyond its band (±{r.band * 100:.0f} %)",
            )
    return med > 1 + MIN_GAIN, text


@dataclass(frozen=True)
class Verdict:
    """The speed verdict on a sane trial: keep it or not, and why (the figures that decided first)."""

    keep: bool
    reason: str


def judge(first: tuple[bool, float, str], rounds: list[Round]) -> Verdict:
    """Decide on the paired ``rounds`` where there are any, else on the single run (``first``, from
    :func:`beats` against the state to beat)."""
    ok, _, text = first
    if not rounds:
        return Verdict(ok, f"faster: {text}" if ok else f"not faster beyond the noise band: {text}")
    keep, paired = paired_verdict(rounds)
    side = "faster" if keep else "not faster"
    return Verdict(keep, f"{side} in {paired} (back to back with the reference); single run {text}")


#: why a trial whose memo caches (the ``generator-cache`` fix) never served in the warm-up is not judged
MEMO_COLD = (
    "its cache did not warm within the warm-up limit (an epoch is longer than the limit): not measurable "
    "here; apply by hand for multi-epoch runs"
)


def memo_problem(facts: Facts | None) -> str | None:
    """A run whose caches did not warm before the timing window timed the cache filling, not the cache
    serving: its speed says nothing about the fix (Facts.memo_warm is False)."""
    return MEMO_COLD if facts is not None and facts.memo_warm is False else None


@dataclass
class _Confirmation:
    """What the paired rounds of one trial measured (latest throughputs; the runs in the order run)."""

    rounds: list[Round] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    ref: Throughput | None = None
    trial: Throughput | None = None
    failed: tuple[str, str] | None = None  # a trial run failed: (reason, error)
    cold: bool = False  # a trial run's caches did not warm
    note: str = ""  # why the rounds stopped early


_NUM = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def normalized_output(stdout: str) -> Counter[str]:
    """The script's printed lines with every number masked: what it says, not the values."""
    lines = (ln.strip() for ln in stdout.splitlines())
    return Counter(
        _NUM.sub("#", ln) for ln in lines if ln and not ln.startswith(("WARNING", "I0000", "W0000"))
    )


#: a new kind of line that means trouble even when the fixed run went further through the data
_TROUBLE = re.compile(r"error|exception|traceback|warning|retrac|\bnan\b|\binf\b", re.I)


def output_change(before: str, after: str, *, further: bool = False) -> str | None:
    """Lines the reference printed that the fixed script no longer prints (or new kinds of lines).

    ``further``: the fixed run went further through the data than the reference (more steps after a
    longer warm-up, or bigger batches): more lines of a kind the reference printed, and new kinds of
    ordinary lines (an epoch's end the shorter reference never reached), are then expected; fewer lines
    of a kind, and new lines that look like trouble (errors, warnings, retracing, NaN), still count.
    """
    b, a = normalized_output(before), normalized_output(after)
    missing = b - a
    extra = a - b
    if further:
        extra = Counter({ln: n for ln, n in extra.items() if ln not in b and _TROUBLE.search(ln)})
    if not missing and not extra:
        return None
    bits = []
    if missing:
        line, n = missing.most_common(1)[0]
        bits.append(f"{n}× fewer '{line[:60]}'")
    if extra:
        line, n = extra.most_common(1)[0]
        bits.append(f"{n}× new '{line[:60]}'")
    return "the script's output changed: " + "; ".join(bits)


def examples_seen(steps: list[StepTiming], per_step: int | None) -> float:
    """Examples the run went through (the harness's counts, else steps × ``per_step``)."""
    return float(sum(s.examples or per_step or 1 for s in steps))


def _losses(steps: list[StepTiming]) -> dict[int, float]:
    """Losses by step index, warm-up included: an adaptive warm-up makes the runs' windows start at
    different steps (a trial waiting for its cache to warm times steps the reference never ran), and a
    warm-up step's loss is as real as any other."""
    return {s.index: s.loss for s in steps if s.loss is not None}


def loss_problem(ref: list[StepTiming], new: list[StepTiming], scaled: bool) -> str | None:
    """Losses not finite, or off the reference's trajectory over the same steps."""
    lt = _losses(new)
    bad = [i for i, v in sorted(lt.items()) if not math.isfinite(v)]
    if bad:
        return f"loss is not finite from step {bad[0]} on ({lt[bad[0]]})"
    lb = _losses(ref)
    common = sorted(set(lb) & set(lt))
    if len(common) < 3:
        return None  # nothing to compare (no losses recorded)
    mb = statistics.median(lb[i] for i in common)
    mt = statistics.median(lt[i] for i in common)
    tol = LOSS_REL * abs(mb) + LOSS_ABS
    if mt > mb + tol or (not scaled and mt < mb - tol):
        return (
            f"loss off the baseline's trajectory: median {mt:.4g} vs {mb:.4g} over steps "
            f"{common[0]}-{common[-1]} (tolerance ±{tol:.3g})"
        )
    return None


def examples_per_step(steps: list[StepTiming], facts: Facts | None) -> int | None:
    ex = [s.examples for s in steps if s.examples and s.window != "warmup"]
    if ex:
        return Counter(ex).most_common(1)[0][0]
    return facts.batch_size if facts else None


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
        self.on_event = on_event or (lambda e: None)
        self.on_capture = on_capture
        self.script = cfg.script.resolve()
        self.relpath = self.script.name
        self.final_source: str | None = None  # the script with every kept fix, once run() is done
        self._at = (0, 0)  # the candidate being measured, of how many (for progress events)

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

    def run(self) -> FixSummary:
        t0 = time.monotonic()
        base_tp = self.report.throughput
        if base_tp is None:
            raise RunError(
                f"run {self.baseline.id} has no throughput measurement (status {self.report.status}): "
                "nothing to compare fixes against",
                run_dir=str(self.baseline.path),
            )
        source = self.script.read_text(encoding="utf-8")
        facts = self.report.facts
        state = _State(
            source=source,
            switches={},
            throughput=base_tp,
            examples=examples_per_step(self.report.steps, facts),
            steps=self.report.steps,
            stdout=_read(self.baseline.file(STDOUT)),
            facts=facts,
        )
        hardware = Hardware.detect(facts)
        cands = self.candidates()
        self.event("candidates", ", ".join(f.ID for f, _ in cands), total=len(cands))
        trials: list[FixTrial] = []
        kept: list[str] = []
        for i, (fix, est) in enumerate(cands, 1):
            self._at = (i, len(cands))
            before = state  # the state this fix is applied to (variants all start from it)
            for k, variant in enumerate(fix.variants(FixContext())):
                ctx = FixContext(
                    facts=before.facts,
                    findings=tuple(self.report.findings),
                    script_args=tuple(self.cfg.args),
                    hardware=hardware,
                    params=variant,
                    filename=self.relpath,
                )
                outcome = fix.apply(before.source, ctx)
                label = fix.ID + (f" ×{variant['factor']}" if "factor" in variant else "")
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
                    "trial", f"{label}: {outcome.reason}{gain}", fix_id=fix.ID, index=i, total=len(cands)
                )
                expected = before.examples * outcome.examples_factor if before.examples else None
                trial, state = self.trial(fix, outcome, state, before, expected, label)
                if k > 0 and trial.status == "kept":  # a bigger batch beat the smaller one
                    trials[-1] = trials[-1].model_copy(
                        update={"status": "rejected", "reason": f"superseded by {label}; {trials[-1].reason}"}
                    )
                trials.append(trial)
                self.event("result", f"{label}: {trial.status} ({trial.reason})", fix_id=fix.ID)
                if trial.status != "kept":
                    break
                kept[:] = [x for x in kept if x.split(" ×")[0] != fix.ID] + [label]
        self.final_source = state.source
        patch = unified_diff(source, state.source, self.relpath)
        combined = combined_speedup = combined_run_id = None
        if kept:
            self.event("final", f"final run with {', '.join(kept)}")
            run, res, rep = self.measure(
                "combined: " + ", ".join(kept), state.source, state.switches, profile=self.cfg.final_profile
            )
            combined_run_id = run.id
            if res.ok and rep.throughput is not None:
                combined = rep.throughput
                _, combined_speedup, _ = beats(
                    combined, base_tp, _factor(state.examples, before_examples(self.report))
                )
        summary = FixSummary(
            baseline=base_tp,
            trials=trials,
            combined=combined,
            combined_speedup=combined_speedup,
            patch=patch,
            kept=kept,
            combined_run_id=combined_run_id,
            wall_s=time.monotonic() - t0,
            confirm_rounds=max(0, self.cfg.confirm_rounds),
        )
        self.baseline.file(PATCH).write_text(patch, encoding="utf-8")
        report = self.report.model_copy(update={"fix": summary})
        self.baseline.write_report(report)
        self.store.update(self.baseline, speedup=combined_speedup)
        self.event(
            "done", f"{len(kept)} fix(es) kept" + (f", {combined_speedup:.2f}x" if combined_speedup else "")
        )
        return summary

    def measure(
        self, label: str, code: str, switches: dict[str, str], *, profile: bool = False
    ) -> tuple[RunDir, CaptureResult, Report]:
        run = self.store.new_run(str(self.script), self.cfg.args, kind="fix", parent=self.baseline.id)
        self.store.update(run, fix=label)
        run.file(PATCH).write_text(
            unified_diff(self.script.read_text(encoding="utf-8"), code, self.relpath), encoding="utf-8"
        )
        work = Path(tempfile.mkdtemp(prefix="tfdoctor-fix-"))
        try:
            copy = make_workspace(self.script, work / "src")
            copy.write_text(code, encoding="utf-8")
            cwd = Path(self.cfg.cwd).resolve() if self.cfg.cwd else Path.cwd().resolve()
            folder = self.script.parent
            if cwd == folder or folder in cwd.parents:  # the script's own folder: use the copy's
                cwd = copy.parent / cwd.relative_to(folder)
            ccfg = CaptureConfig(
                script=copy,
                args=list(self.cfg.args),
                steps=self.cfg.steps,
                warmup=self.cfg.warmup,
                profile=profile,
                timeout_s=self.timeout(),
                env=dict(self.cfg.env),
                switches=dict(switches),
                cwd=cwd,
            )
            res = run_capture(ccfg, run, progress=self.on_capture)
            rep = finish_run(self.store, run, res)
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
        return run, res, rep

    def trial(
        self,
        fix: Fix,
        outcome: FixOutcome,
        ref: _State,
        before: _State,
        expected: float | None,
        label: str,
    ) -> tuple[FixTrial, _State]:
        """Measure ``outcome`` (applied to ``before``) and judge it against ``ref`` (the state to beat).
        Returns the trial and the state to go on from: the fix's when kept, else ``ref``; either with its
        latest throughput when paired rounds re-measured it."""
        switches = {**before.switches, **outcome.switches}
        run, res, rep = self.measure(label, outcome.code, switches)
        tp = rep.throughput if res.ok else None
        vs_base: float | None = None
        paired: list[float] = []
        paired_ids: list[str] = []

        def decided(
            status: Literal["kept", "rejected", "failed"], reason: str, error: str | None = None
        ) -> FixTrial:
            return FixTrial(
                fix_id=fix.ID,
                label=label if label != fix.ID else "",
                description=f"{fix.DESCRIPTION}: {outcome.reason}",
                status=status,
                reason=reason,
                error=error,
                throughput=tp,
                speedup=vs_base,
                patch=unified_diff(before.source, outcome.code, self.relpath),
                runtime_switch=dict(outcome.switches),
                run_id=run.id,
                paired_ratios=paired,
                paired_run_ids=paired_ids,
            )

        if not res.ok:
            err = (res.error or res.message or res.status).strip()
            status_word = "timed out" if res.status == "timeout" else "failed"
            why = f"{status_word}, rolled back: {res.message or res.status}"
            return decided("failed", why, "\n".join(err.splitlines()[-20:])), ref
        if tp is None:
            return decided("failed", "no throughput measured, rolled back"), ref
        examples = examples_per_step(res.steps, res.facts)
        factor = expected / ref.examples if expected and ref.examples else outcome.examples_factor
        first = beats(tp, ref.throughput, factor)
        text = first[2]
        _, vs_base, _ = beats(
            tp, self.report.throughput or before.throughput, _factor(examples, before_examples(self.report))
        )
        state = _State(
            source=outcome.code,
            switches=switches,
            throughput=tp,
            examples=examples,
            steps=res.steps,
            stdout=_read(run.file(STDOUT)),
            facts=res.facts or before.facts,
        )
        # sanity first: a fast but broken run is rejected whatever its speed
        if expected is not None and examples is not None and abs(examples - expected) > 0.01 * expected:
            why = f"examples per step changed ({before.examples} → {examples}, expected {expected:g}); measured {text}"
            return decided("rejected", why), ref
        bad_loss = loss_problem(ref.steps, res.steps, scaled=fix.SCALES_EXAMPLES)
        if bad_loss:
            return decided("rejected", f"{bad_loss}; {text}"), ref
        if outcome.side_effects:
            effects = "; ".join(outcome.side_effects)
            why = f"Python side effects in the step would change behaviour under it ({effects}); measured {text}"
            return decided("rejected", why), ref
        further = examples_seen(res.steps, examples) > examples_seen(ref.steps, ref.examples)
        changed = output_change(ref.stdout, state.stdout, further=further)
        if changed:
            return decided("rejected", f"{changed}; measured {text}"), ref
        cold = memo_problem(res.facts)
        if cold:  # it timed the cache filling, not serving: no verdict on speed
            return decided("rejected", cold), ref
        rounds: list[Round] = []
        note = ""
        if needs_confirmation(first[1], self.cfg.confirm_rounds):
            c = self.confirm(fix.ID, label, ref, outcome.code, switches, factor, first[0])
            paired[:] = [round(r.ratio, 4) for r in c.rounds]
            paired_ids[:] = c.run_ids
            if c.ref is not None:  # the latest measurement of each state is the one to go on with
                ref = replace(ref, throughput=c.ref)
            if c.trial is not None:
                state = replace(state, throughput=c.trial)
            if c.failed:
                return decided("failed", *c.failed), ref
            if c.cold:
                return decided("rejected", MEMO_COLD), ref
            rounds, note = c.rounds, (f"; {c.note}" if c.note else "")
        verdict = judge(first, rounds)
        if not verdict.keep:
            return decided("rejected", verdict.reason + note), ref
        notes = [w for w in outcome.warnings if not w.startswith("advice:")]
        advice = [w for w in outcome.warnings if w.startswith("advice:")]
        reason = (
            verdict.reason
            + note
            + (f"; note: {'; '.join(notes)}" if notes else "")
            + (f"; {advice[0]}" if advice else "")
        )
        return decided("kept", reason), state

    def confirm(
        self,
        fix_id: str,
        label: str,
        ref: _State,
        code: str,
        switches: dict[str, str],
        factor: float,
        first_keep: bool,
    ) -> _Confirmation:
        """Paired rounds: the reference state (``ref``'s source and switches) and the trial (``code``,
        ``switches``) measured back to back, reference first in odd rounds and trial first in even ones, so
        load drifting across the rounds weighs on both sides alike. Up to ``confirm_rounds``; one when the
        first round agrees clearly with the single run's verdict (``first_keep``, see :func:`settles`)."""
        c = _Confirmation()
        n = max(0, self.cfg.confirm_rounds)
        index, total = self._at
        for i in range(n):
            got: dict[str, Throughput] = {}
            for which in ("reference", "trial") if i % 2 == 0 else ("trial", "reference"):
                self.event(
                    "trial",
                    f"{label} paired round {i + 1}/{n}, {which}: back to back",
                    fix_id=fix_id,
                    index=index,
                    total=total,
                )
                if which == "reference":
                    run, res, rep = self.measure(
                        f"{label}: reference, paired round {i + 1}", ref.source, ref.switches
                    )
                else:
                    run, res, rep = self.measure(f"{label}: paired round {i + 1}", code, switches)
                c.run_ids.append(run.id)
                tp = rep.throughput if res.ok else None
                if which == "trial":
                    if tp is None:
                        err = (res.error or res.message or res.status).strip()
                        what = {"complete": "measured no throughput", "timeout": "timed out"}
                        c.failed = (
                            f"its run in paired round {i + 1} {what.get(res.status, 'failed')}, rolled back"
                            + ("" if res.ok else f": {res.message or res.status}"),
                            "\n".join(err.splitlines()[-20:]),
                        )
                        return c
                    if memo_problem(res.facts):
                        c.cold = True
                        return c
                    c.trial = tp
                elif tp is None:
                    on = f"{len(c.rounds)} paired round(s)" if c.rounds else "the single run"
                    c.note = (
                        f"the reference's re-run in paired round {i + 1} measured nothing "
                        f"({res.message or res.status}): decided on {on}"
                    )
                    return c
                else:
                    c.ref = tp
                got[which] = tp
            c.rounds.append(Round.of(got["trial"], got["reference"], factor))
            if i == 0 and settles(first_keep, c.rounds[0]):
                break
        return c


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
    "DECISIVE",
    "MEMO_COLD",
    "Event",
    "FixLoop",
    "LoopConfig",
    "Round",
    "Verdict",
    "beats",
    "judge",
    "memo_problem",
    "needs_confirmation",
    "order_candidates",
    "output_change",
    "paired_verdict",
    "run_fix_loop",
    "settles",
]
