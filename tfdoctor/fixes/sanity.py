"""Is a fixed run still the same training? The checks a trial passes before its speed is judged.

* :func:`output_change`: the script's printed output, compared as *what it says*: progress bars (Keras
  3's Progbar with its ``\\r`` updates, backspaces, ANSI colours and ``━`` bars; Keras 2's
  ``[=====>...]``; tqdm) are dropped, durations and numbers masked, and lines that report timing (ETA,
  ms/step, it/s, "took 3.2 s") compared by kind only: a faster run prints them at other moments.
* :func:`loss_check`: the trial's losses against the reference's over the same steps, with a tolerance
  learned from the reference itself (the spread between its runs when it was run more than once, and
  the step-to-step noise of its trajectory), one-sided: a lower loss is fine.
* :func:`not_in_effect`: the run's facts must show that the fix's change took effect (jit_compile,
  steps_per_execution, the dtype policy, a tf.function step, the batch size, the tf.data caches filled
  before the timed steps) before it is measured.
* :func:`other_phase`: the trial's timing window must lie in the same phase of the training as the
  reference's (a frozen base, then fine-tuning, run at different speeds).
* :func:`training_changes`: what a fix changed of the training itself (batch size, learning rate,
  precision), with values, so the headline can say "same training, faster" or not.

Pure functions of recorded output, steps and facts: no TensorFlow.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from tfdoctor.model import CACHE_FILL_SWITCH, FP16_POLICIES, Facts, StepTiming

# -- output ------------------------------------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")
#: a progress bar line: Keras 3 (``12/32 ━━━━`` with or without colours), Keras 2 (``12/32 [====>..]``),
#: tqdm (``45%|████▌ | 18/40 [00:00<00:00, 95.4it/s]``, ``18it [00:00, 95.4it/s]``)
_PROGRESS = re.compile(
    r"━|"
    r"^\s*\d+/(\d+|Unknown)\s+\[[=>.]*\]|"
    r"\d+%\|.*\|\s*\d+/\d+|"
    r"\|\s*\d+/\d+\s*\[\d+:\d+|"
    r"^\s*[^|]*\d+(it|B)\s*\[\d+:\d+(:\d+)?,"
)
#: a duration or a clock time: "1.2s", "12 ms", "3 sec", "00:01<00:10", "1:15"
_DURATION = re.compile(
    r"\d+(\.\d+)?\s?(ns|us|µs|ms|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?)\b|\d+:\d{2}(:\d{2})?(\.\d+)?",
    re.I,
)
#: a line reporting timing or speed (compared by kind, not counted)
_TIMING = re.compile(
    r"<time>|/s\b|/sec\b|per sec|/step\b|\bETA\b|elapsed|\btook\b|throughput|it/s|s/it|"
    r"samples?/s|examples?/s|images?/s|img/s|tokens?/s",
    re.I,
)
_NUM = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
#: log lines of TF/absl/warnings printed to stdout: not the script's output
_LOG_PREFIX = ("WARNING", "I0000", "W0000", "E0000")


def terminal_lines(text: str) -> list[str]:
    """The lines a terminal would have shown one after another: ``\\r`` starts a new one (progress bars
    redraw in place), backspaces and ANSI escapes are dropped, blank lines too."""
    text = _ANSI.sub("", text).replace("\b", "")
    return [ln.strip() for ln in re.split(r"[\r\n]", text) if ln.strip()]


def is_progress(line: str) -> bool:
    """A progress bar's redraw (Keras 3 / Keras 2 Progbar, tqdm), after :func:`terminal_lines`."""
    return bool(_PROGRESS.search(line))


#: progress marks printed one per few steps (``print(".", end="")``, as the pix2pix tutorial does): a
#: run of one mark is one kind of text whatever its length, which depends on where the run stopped
_DOTS = re.compile(r"([.*=>~+|_-])\1{2,}")
#: a line of nothing but one mark, however short (a dot per epoch: "." or ".." where the run stopped)
_MARKS_LINE = re.compile(r"([.*=>~+|_-])\1*")
#: a run of numbers, separated by blanks or commas (``# # #``, ``#, #``), after :func:`mask`
_NUMBERS = re.compile(r"#(?:[ ,]+#)+")
#: a line that is a printed array's row (numbers, brackets, separators, numpy's ``...``), after mask
_ARRAY_ROW = re.compile(r"[\[\](){},;:.…+\- ]*#[#\[\](){},;:.…+\- ]*")
#: a printed array's last row followed by text (``#]], shape=(#), dtype=float#)``): the row is dropped
_ARRAY_END = re.compile(r"^[#\[\],.…+\- ]*\]")


def mask(line: str) -> str:
    """The line with durations as ``<time>``, every other number as ``#``, a run of numbers as one
    ``#``, a run of one mark (``.......``) as three (a line of one mark, ``.`` or ``..``, too) and blanks as one space: how a value is printed (its
    width, its sign, how many numbers fit on a line before numpy wraps) is not what the line says. A printed array's last row followed by text
    (``tf.Tensor([...]], shape=(5, 64), dtype=float32)``) keeps the text only."""
    m = _NUMBERS.sub("#", re.sub(r"\s+", " ", _NUM.sub("#", _DURATION.sub("<time>", line)))).strip()
    m = _DOTS.sub(r"\1\1\1", m)
    if _MARKS_LINE.fullmatch(m):
        m = m[0] * 3
    end = _ARRAY_END.match(m)
    if end and "#" in end.group(0) and m[end.end() :].strip():
        m = m[end.end() :].lstrip(" ,")
    return m


def is_array_row(line: str, masked: str | None = None) -> bool:
    """A line of nothing but numbers and brackets, a bracket or two numbers at least: a printed array's
    row. How many rows a print takes depends on the numbers' widths (numpy wraps at 75 characters, a
    minus sign widens every column), so they are not counted one by one. A bare number (``0.523``, a
    loss printed each step) is not one: it counts as any line does. ``masked``: :func:`mask` of the line,
    when the caller has it already."""
    m = mask(line) if masked is None else masked
    return bool(_ARRAY_ROW.fullmatch(m)) and ("[" in m or "]" in m or len(_NUM.findall(line)) >= 2)


def is_timing(masked: str) -> bool:
    """A (masked) line that reports time or speed: printed at moments that depend on the speed."""
    return bool(_TIMING.search(masked))


@dataclass(frozen=True)
class Output:
    """What a run printed, as kinds of lines: ``lines`` counted, ``timing`` (kinds only)."""

    lines: Counter[str]
    timing: frozenset[str]
    progress: int  # progress bar redraws dropped
    array_rows: int = 0  # printed arrays' rows (is_array_row): whether there are any is compared


def normalized_output(stdout: str) -> Output:
    lines: Counter[str] = Counter()
    timing: set[str] = set()
    progress = rows = 0
    for ln in terminal_lines(stdout):
        if ln.startswith(_LOG_PREFIX):
            continue
        if is_progress(ln):
            progress += 1
            continue
        m = mask(ln)
        if is_array_row(ln, m):
            rows += 1
        elif is_timing(m):
            timing.add(m)
        else:
            lines[m] += 1
    return Output(lines, frozenset(timing), progress, rows)


#: a new kind of line that means trouble even when the fixed run went further through the data
_TROUBLE = re.compile(r"error|exception|traceback|warning|retrac|\bnan\b|\binf\b", re.I)


def output_spread(runs: list[str]) -> Counter[str]:
    """How much each kind of line's count varies between runs of the same script (the reference run
    again: a script with unseeded randomness prints its event lines, an episode's end, a varying number
    of times in the same steps): the largest count less the smallest, per kind, 0 where they agree."""
    outs = [normalized_output(r).lines for r in runs]
    kinds = set().union(*outs) if outs else set()
    return Counter({k: n for k in kinds if (n := max(o[k] for o in outs) - min(o[k] for o in outs)) > 0})


def output_change(
    before: str,
    after: str,
    *,
    further: bool = False,
    length: float | None = None,
    spread: Counter[str] | None = None,
) -> str | None:
    """Lines the reference printed that the fixed script no longer prints (or new kinds of lines), or
    None when it says the same things.

    ``further``: the fixed run went further through the data than the reference (more steps after a
    longer warm-up, or bigger batches): more lines of a kind the reference printed, and new kinds of
    ordinary lines (an epoch's end the shorter reference never reached), are then expected; fewer lines
    of a kind, and new lines that look like trouble (errors, warnings, retracing, NaN), still count.
    Progress bars are ignored; timing lines count by kind (a kind that vanished, or new trouble).

    ``length``: how long the fixed run was relative to the reference (the smaller of its steps and
    examples ratios; None: the same). A line the reference printed periodically (twice or more) is
    then expected in proportion, less one line for where each run happened to stop: a script printing
    every 50 steps prints it 3 times in 130 steps and 2 times in 90 (a bigger batch, a shorter
    adaptive warm-up), which is not a change; a print that runs only while tracing (12 lines down to
    1 in as many steps) still is. A line the reference printed once may be missing from a shorter run
    (a print every 50 steps: once in a 55-step reference, not in a 30-step trial whose bigger batch
    filled its timed second sooner); from a run as long or longer it may not.

    ``spread``: the reference's own run-to-run variation (:func:`output_spread`): a kind's count may
    differ by as much, and a kind the reference printed in one of its runs is not new.
    """
    b, a = normalized_output(before), normalized_output(after)
    if length is None:
        missing = b.lines - a.lines
    else:
        scale = min(1.0, max(0.0, length))
        missing = Counter()
        for line, n in b.lines.items():
            # where each run happened to stop: one line less of a periodic kind; and a line the reference
            # printed once may be a periodic print a shorter run never reached (every 50 steps: once in
            # 55 steps, not in 30), so in a shorter run it may be missing too
            shorter = length < 0.99
            slack = 1 if (n >= 2 and abs(length - 1.0) > 0.01) or (n == 1 and shorter) else 0
            short = math.ceil(n * scale - 1e-9) - a.lines[line] - slack
            if short > 0:
                missing[line] = short
    extra = a.lines - b.lines
    if spread:
        missing = Counter({ln: n - spread[ln] for ln, n in missing.items() if n > spread[ln]})
        extra = Counter({ln: n - spread[ln] for ln, n in extra.items() if n > spread[ln]})
    if further:
        extra = Counter({ln: n for ln, n in extra.items() if ln not in b.lines and _TROUBLE.search(ln)})
    gone_timing = sorted(b.timing - a.timing)
    new_timing = sorted(t for t in a.timing - b.timing if _TROUBLE.search(t))
    # a timing kind may vanish only because the run stopped earlier in an epoch: not when it went further
    if not further:
        gone_timing = []
    bits = []
    if missing:
        line, n = missing.most_common(1)[0]
        bits.append(f"{n}× fewer '{line[:60]}'")
    if extra:
        line, n = extra.most_common(1)[0]
        bits.append(f"{n}× new '{line[:60]}'")
    if b.array_rows and not a.array_rows and (length is None or length >= 0.99):
        bits.append(f"no more printed arrays ({b.array_rows} rows before)")
    if gone_timing:
        bits.append(f"no more '{gone_timing[0][:60]}'")
    if new_timing:
        bits.append(f"new '{new_timing[0][:60]}'")
    if not bits:
        return None
    return "the script's output changed: " + "; ".join(bits)


# -- loss ----------------------------------------------------------------------------------------------
#: the tolerance is this many times the reference's own noise (run-to-run, or step-to-step)
LOSS_K = 3.0
#: the least tolerance, relative to the loss (a deterministic script has no noise at all)
LOSS_FLOOR = 0.02
#: compared over stretches of examples, the trial may lag the reference by this many stretches of its fall
LOSS_STRETCHES = 2.0
#: fewest common steps with a loss on both sides to compare at all
LOSS_MIN_STEPS = 3

LossStatus = Literal["ok", "higher", "not finite", "unreadable"]


@dataclass(frozen=True)
class LossCheck:
    status: LossStatus
    text: str
    # how the losses were compared when not as read (a loss summed over the batch: the trial's divided)
    note: str = ""
    # unreadable because the loss's value depends on the batch size (:func:`batch_dependent`)
    batch_dependent: bool = False

    @property
    def bad(self) -> bool:
        return self.status in ("higher", "not finite")


def losses(steps: Sequence[StepTiming]) -> dict[int, float]:
    """Losses by step index, warm-up included: an adaptive warm-up makes the runs' windows start at
    different steps, and a warm-up step's loss is as real as any other."""
    return {s.index: s.loss for s in steps if s.loss is not None}


def loss_noise(refs: Sequence[Sequence[StepTiming]]) -> tuple[float, str]:
    """The reference's own loss noise, and where it was learned: the median absolute difference between
    two runs over their common steps when there are two or more runs; the median absolute step-to-step
    change of the trajectory otherwise (the larger of the two when both are known)."""
    runs = [losses(r) for r in refs if r]
    runs = [r for r in runs if r]
    if not runs:
        return 0.0, "no loss"
    traj = []
    for r in runs:
        vals = [v for _, v in sorted(r.items()) if math.isfinite(v)]
        traj += [abs(b - a) for a, b in itertools.pairwise(vals)]
    step_noise = statistics.median(traj) if traj else 0.0
    between = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            common = set(runs[i]) & set(runs[j])
            between += [abs(runs[i][k] - runs[j][k]) for k in common]
    if between:
        run_noise = statistics.median(between)
        if run_noise >= step_noise:
            return run_noise, f"{len(runs)} reference runs"
    return step_noise, "the reference's step-to-step noise"


def _progress(steps: Sequence[StepTiming]) -> dict[int, int] | None:
    """Examples seen by the end of each step, by step index; None when a step's examples are unknown."""
    out: dict[int, int] = {}
    total = 0
    for s in sorted(steps, key=lambda s: s.index):
        if not s.examples:
            return None
        total += s.examples
        out[s.index] = total
    return out


class Alignment(NamedTuple):
    """The losses of two runs paired at the same point of the training (:func:`aligned_losses`)."""

    pairs: list[tuple[float, float]]  # (reference loss, trial loss)
    span: str  # what they cover, for the decision's text
    by_examples: bool  # steps of other sizes, matched by the examples seen (over stretches, or nearest)


def aligned_losses(
    ref: Sequence[StepTiming], new: Sequence[StepTiming], *, by: str = "examples"
) -> Alignment:
    """The reference's and the trial's losses at the same point of the training, and how they were
    matched. Steps of the same size are matched by index; steps of other sizes (steps_per_execution runs
    8 batches per step, a bigger batch more examples) by the examples seen, so the trial's loss after
    512 examples is compared with the reference's after 512, not after 64: over the same stretch of
    examples on both sides (:func:`_blocks`), each side's loss the mean over its steps in it, weighted
    by their examples. A step's loss is over its own examples (a ``steps_per_execution=8`` step's is
    the mean of its 8 batches'), so one 64-example reference step against it would compare the end of
    the stretch with its middle: early in a training, a falling loss then reads higher for the trial
    although both ran the same numbers. Where the two sides share too few step ends, the nearest
    reference step to each trial step (within half a step). ``by="steps"``: by index whatever the
    steps' sizes (the same number of optimizer updates, for a bigger batch)."""
    lb, lt = losses(ref), losses(new)
    pb, pt = _progress(ref), _progress(new)
    if by == "examples" and pb and pt and any(pb[i] != pt[i] for i in set(pb) & set(pt)):
        size_b = {s.index: s.examples or 0 for s in ref}
        size_t = {s.index: s.examples or 0 for s in new}
        blocks = _blocks(lb, pb, size_b, lt, pt, size_t)
        if len(blocks) >= LOSS_MIN_STEPS:
            return Alignment(
                [(b, t) for _, b, t in blocks],
                f"the first {blocks[-1][0]} examples ({len(blocks)} stretches of the same examples)",
                by_examples=True,
            )
        at = {pb[i]: i for i in lb if i in pb}
        keys = sorted(at)
        pairs: list[tuple[float, float]] = []
        last = 0
        for i, v in sorted(lt.items()):
            e = pt.get(i)
            if e is None or not keys:
                continue
            k = bisect.bisect_left(keys, e)
            near = min(keys[max(k - 1, 0) : k + 1], key=lambda x: abs(x - e))
            j = at[near]
            if abs(near - e) <= 0.5 * min(size_b[j], size_t[i]):
                pairs.append((lb[j], v))
                last = e
        return Alignment(
            pairs,
            f"the first {last} examples ({len(pairs)} points matched by examples seen)",
            by_examples=True,
        )
    common = sorted(set(lb) & set(lt))
    span = f"steps {common[0]}-{common[-1]}" if common else "no common step"
    return Alignment([(lb[i], lt[i]) for i in common], span, by_examples=False)


def _blocks(
    lb: dict[int, float],
    pb: dict[int, int],
    size_b: dict[int, int],
    lt: dict[int, float],
    pt: dict[int, int],
    size_t: dict[int, int],
) -> list[tuple[int, float, float]]:
    """``(examples seen at its end, reference loss, trial loss)`` per stretch of examples between two
    step ends both sides share, each side's loss the examples-weighted mean of its steps in the stretch;
    a stretch with a step of unknown loss on either side is left out."""

    cuts = sorted(set(pb.values()) & set(pt.values()))  # the step ends both sides share, in order

    def means(loss: dict[int, float], progress: dict[int, int], size: dict[int, int]) -> dict[int, float]:
        out: dict[int, float] = {}
        at = 0
        total = weight = 0.0
        complete = True
        for i in sorted(progress):
            e = progress[i]
            if i in loss and size[i] > 0:
                total += loss[i] * size[i]
                weight += size[i]
            else:
                complete = False
            if at < len(cuts) and e == cuts[at]:
                if complete and weight > 0:
                    out[e] = total / weight
                total = weight = 0.0
                complete = True
                at += 1
        return out

    mb, mt = means(lb, pb, size_b), means(lt, pt, size_t)
    return [(e, mb[e], mt[e]) for e in sorted(set(mb) & set(mt))]


def loss_check(
    refs: Sequence[Sequence[StepTiming]],
    new: Sequence[StepTiming],
    *,
    per_update: bool = False,
    same_training: bool = False,
) -> LossCheck:
    """:func:`function_loss_check` of each step function's steps on their own, where the steps came from
    more than one (:attr:`tfdoctor.model.StepTiming.fn`): keras-io's PPO steps ``train_policy`` (its KL,
    0.0001-0.015) until the KL stops it, then ``train_value_function`` (a squared return, ~50-500), and
    where the KL stopped moves from run to run, so step *i* of the trial and of the reference were losses
    of two kinds ("median 153.7 vs 0.006351": host-calls, 1.80x, rejected). A function whose loss is above
    its reference's fails the trial; else one whose loss was compared passes it.

    ``same_training``: the fix changes neither the numerics' precision nor a hyperparameter (not one of
    :data:`CHANGES_TRAINING`): a first loss off the reference's where the script's start is not seeded is
    the data's draw (:func:`unseeded_start`)."""
    names = sorted({s.fn for r in [*refs, new] for s in r if s.fn is not None})
    if not names:
        return function_loss_check(refs, new, per_update=per_update, same_training=same_training)
    checks = []
    for name in [None, *names]:
        label = f"{name}()" if name else "the first step function"
        check = function_loss_check(
            [of_function(r, name) for r in refs],
            of_function(new, name),
            per_update=per_update,
            same_training=same_training,
        )
        checks.append(replace(check, text=f"{label}: {check.text}"))
    bad = [c for c in checks if c.bad]
    if bad:
        return bad[0]
    if any(c.status == "ok" for c in checks):
        return LossCheck("ok", "; ".join(c.text for c in checks), "; ".join(c.note for c in checks if c.note))
    return checks[0]


def of_function(steps: Sequence[StepTiming], fn: str | None) -> list[StepTiming]:
    """The steps of the step function ``fn`` (None: the run's first), numbered from 0 in their order."""
    mine = sorted((s for s in steps if s.fn == fn), key=lambda s: s.index)
    return [s if s.index == i else s.model_copy(update={"index": i}) for i, s in enumerate(mine)]


def function_loss_check(
    refs: Sequence[Sequence[StepTiming]],
    new: Sequence[StepTiming],
    *,
    per_update: bool = False,
    same_training: bool = False,
) -> LossCheck:
    """The trial's losses: finite, and not higher than the reference's at the same point of the training
    (:func:`aligned_losses`) beyond the reference's own noise (``refs``: every run of the reference state
    so far). Lower is fine (a bigger batch or another precision may learn faster).

    ``per_update``: the fix changes the batch size (``batch-scale``), so the same point of the training
    is ambiguous: a bigger batch learns less per example early on and more per update. The trial passes
    when its loss is not above the reference's at the same examples seen *or* after the same number of
    steps (updates); a training the change broke (diverging, a learning rate too high) fails both."""
    note = ""
    if per_update and refs:
        summed = batch_summed(refs, new)
        if summed is not None:  # compared per example: the trial's losses over its bigger batches
            factor, ratio = summed
            new = [s if s.loss is None else s.model_copy(update={"loss": s.loss / factor}) for s in new]
            note = (
                f"the loss is a sum over the batch (the first step's {ratio:.2f}× the reference's, at "
                f"{factor:g}× the examples a step): the trial's divided by {factor:g}"
            )
        elif (apart := batch_dependent(refs, new)) is not None:
            return LossCheck("unreadable", apart, batch_dependent=True)
    said = f"{note}; " if note else ""
    first = _loss_check(refs, new, "examples")
    if same_training and not per_update and first.status == "higher":
        start = unseeded_start(refs, new)
        if start is not None:
            offset, why = start
            moved = [s if s.loss is None else s.model_copy(update={"loss": s.loss - offset}) for s in new]
            again = _loss_check(refs, moved, "examples")
            if again.status == "ok":
                return LossCheck("ok", f"{why}: less that offset, {again.text}; as recorded, {first.text}")
    if not per_update or first.status != "higher":
        return LossCheck(first.status, said + first.text, note)
    second = _loss_check(refs, new, "steps")
    if second.status == "ok":
        return LossCheck(
            "ok", f"{said}{second.text} after as many steps (updates); by examples seen, {first.text}", note
        )
    return LossCheck(first.status, said + first.text, note)


#: the reference's own runs must agree on their first step's loss within this ratio (max / min) for a
#: trial's first loss to say whether the loss is a sum over the batch
SUM_START_SPREAD = 1.25


def batch_summed(
    refs: Sequence[Sequence[StepTiming]], new: Sequence[StepTiming]
) -> tuple[float, float] | None:
    """``(factor, ratio)`` when the script's loss is a sum over the batch, not a mean (keras-io's OCR
    captcha: ``self.add_loss(ctc_batch_cost(...))`` of one loss per example, which Keras sums; a loss
    with ``reduction="sum"``). Told from the first step, the loss of the model as it starts, before any
    update: the trial's steps hold ``factor`` times the reference's examples and its first loss is
    ``ratio`` times the reference runs' (median), nearer that factor than 1 and within 25 % of it, while
    the reference's runs agree on theirs (within ``SUM_START_SPREAD``: an unseeded start that moves the
    first loss from run to run tells nothing). A mean loss starts where the reference's did whatever
    the batch. Measured on the OCR example at batch ×2: first losses 3936 and 3968 against 1888-2077
    in 13 reference runs, and the bigger batch had been rejected as "loss above the reference's" (596
    against 284, a median over the first 480 examples)."""
    starts = [v for r in refs if (v := losses(r).get(0)) is not None and math.isfinite(v) and v > 0]
    sizes = [s.examples for r in refs for s in r if s.index == 0 and s.examples]
    trial = next((s for s in new if s.index == 0), None)
    if len(starts) < 2 or not sizes or trial is None or not trial.loss or not trial.examples:
        return None
    if max(starts) > SUM_START_SPREAD * min(starts) or not math.isfinite(trial.loss) or trial.loss <= 0:
        return None
    factor = trial.examples / statistics.median(sizes)
    if factor < 1.5:
        return None
    ratio = trial.loss / statistics.median(starts)
    near = abs(math.log(ratio / factor))
    if near < math.log(1.25) and near < abs(math.log(ratio)):
        return factor, ratio
    return None


def unseeded_start(
    refs: Sequence[Sequence[StepTiming]], new: Sequence[StepTiming]
) -> tuple[float, str] | None:
    """``(offset, why)`` when the trial's losses start above the reference's by ``offset`` at its first
    step, before any update, where the reference's own runs do not agree on their first loss (their
    highest over their lowest above :data:`SUM_START_SPREAD`: a start that is not seeded). For a fix
    that changes no numerics and no hyperparameter, such a first loss is the draw of the data, not the
    fix's doing. keras-io's PPO: its value function's loss is the squared return of the episodes just
    collected, which no seed fixes here; its first loss read 107 and 81 in two runs of the unchanged
    script and 234 in host-calls' trial (the same critic, called through a graph), whose burst then
    read a median of 189 against 53 and was rejected as "loss above the reference's" at 2.09x. None when
    the reference's runs agree on their start, when fewer than two are known, or when the trial started
    no higher."""
    starts = [v for r in refs if (v := losses(r).get(0)) is not None and math.isfinite(v) and v > 0]
    trial = losses(new).get(0)
    if len(starts) < 2 or trial is None or not math.isfinite(trial):
        return None
    lo, hi = min(starts), max(starts)
    mid = statistics.median(starts)
    if hi <= SUM_START_SPREAD * lo or trial <= mid:
        return None
    return trial - mid, (
        f"its first loss, before any update, stood at {trial:.4g} against {lo:.4g}-{hi:.4g} in the "
        f"reference's {len(starts)} runs (a start no seed fixes: the data's draw)"
    )


#: reference runs whose first losses :func:`batch_dependent` needs: an unseeded start moves the first
#: loss run to run (a regression's MSE), and two runs can agree by chance
BATCH_DEPENDENT_RUNS = 3
#: the reference's first steps whose losses a bigger batch's first may fall among (a draw of other examples)
BATCH_DEPENDENT_EARLY = 5


def batch_dependent(refs: Sequence[Sequence[StepTiming]], new: Sequence[StepTiming]) -> str | None:
    """Why the losses of a bigger batch cannot be compared with the reference's, or None: the loss of the
    model as it starts (the first step, before any update) is off every reference run's by more than
    three times their spread and 5 %, and it and the trial's next steps are outside the losses of their
    first :data:`BATCH_DEPENDENT_EARLY` steps, so its value depends on the batch (keras-io's SimCLR: a
    contrastive loss over the batch's pairs grows with the log of the batch; 6.88-7.06 in 13 reference runs at 80
    images a step, 7.64-7.75 at 166, and batch ×2 was rejected as "loss above the reference's"). A mean
    loss starts where the reference's did whatever the batch; a sum is :func:`batch_summed`'s."""
    runs = [losses(r) for r in refs]
    starts = [v for r in runs if (v := r.get(0)) is not None and math.isfinite(v)]
    trial = next((s for s in new if s.index == 0), None)
    if len(starts) < BATCH_DEPENDENT_RUNS or trial is None or trial.loss is None:
        return None
    if not all(math.isfinite(v) for v in losses(new).values()):
        return None  # a loss gone to inf or NaN is said as such
    lo, hi = min(starts), max(starts)
    mid = statistics.median(starts)
    off = abs(trial.loss - mid)
    if lo <= trial.loss <= hi or off <= max(3 * (hi - lo), 0.05 * abs(mid)):
        return None
    # a seeded script's reference runs start at one value (no spread), and another batch is other examples:
    # its first loss is another draw of the early steps' (a corpus CNN: 4.254 in 19 runs at 32 a step, 2.35-
    # 4.25 over their first 5 steps, 3.59 at 64), not a loss of another kind
    early = [v for r in runs for i, v in r.items() if i < BATCH_DEPENDENT_EARLY and math.isfinite(v)]
    if early and min(early) <= trial.loss <= max(early):
        return None
    # and so are the trial's own early steps: a loss of another kind moves them all (SimCLR's four, 7.62-7.66
    # against 6.91-7.02), while a mean loss's draw lands among the reference's again within a few steps.
    # An unseeded start moves each run's losses as a whole, and three reference runs can start close by
    # chance (a gradient-accumulation loop, measured: 0.168-0.170 in the reference's runs, 0.168-0.205 over
    # all twelve runs of the script at batch 32; batch ×2 began 0.1853, 0.1811, 0.1852, 0.1802, against
    # early steps up to 0.1812)
    own = [v for i, v in losses(new).items() if i < BATCH_DEPENDENT_EARLY]
    if early and any(min(early) <= v <= max(early) for v in own):
        return None
    sizes = [s.examples for r in refs for s in r if s.index == 0 and s.examples]
    at = f" at {trial.examples} examples a step" if trial.examples else ""
    ref_at = f" at {statistics.median(sizes):g}" if sizes else ""
    return (
        f"the loss depends on the batch size (its first step, before any update: {trial.loss:.4g}{at} against "
        f"{lo:.4g}-{hi:.4g} in the reference's {len(starts)} runs{ref_at}, as a contrastive loss over the "
        "batch's pairs does): no loss to compare at two batch sizes"
    )


def reference_medians(
    refs: Sequence[Sequence[StepTiming]], new: Sequence[StepTiming], by: str
) -> list[float]:
    """Each reference run's median loss over what it shares with the trial (:func:`aligned_losses`):
    the figure the check compares, once per run of the reference state."""
    out = []
    for r in refs:
        pairs = aligned_losses(r, new, by=by).pairs if losses(r) else []
        if len(pairs) >= LOSS_MIN_STEPS:
            out.append(statistics.median(b for b, _ in pairs))
    return out


def _loss_check(refs: Sequence[Sequence[StepTiming]], new: Sequence[StepTiming], by: str) -> LossCheck:
    lt = losses(new)
    bad = [i for i, v in sorted(lt.items()) if not math.isfinite(v)]
    if bad:
        return LossCheck("not finite", f"loss is not finite from step {bad[0]} on ({lt[bad[0]]})")
    pairs, span, by_examples = aligned_losses(refs[-1], new, by=by) if refs else Alignment([], "", False)
    if len(pairs) < LOSS_MIN_STEPS:
        if not refs or not losses(refs[-1]) or not lt:
            side = "the trial" if refs and losses(refs[-1]) else "the reference"
            return LossCheck("unreadable", f"no loss could be read ({side} recorded none per step)")
        return LossCheck(
            "unreadable", f"no loss could be read at the same point of the training on both sides ({span})"
        )
    mb = statistics.median(b for b, _ in pairs)
    mt = statistics.median(t for _, t in pairs)
    noise, learned = loss_noise(refs)
    tol = max(LOSS_K * noise, LOSS_FLOOR * abs(mb), 1e-6)
    how = f"{LOSS_K:g}× the noise of {learned}"
    medians = reference_medians(refs, new, by)
    if len(medians) >= 2:
        # the figure compared is a median over the span: its own run-to-run spread bounds what the
        # reference can tell. On a steep, unseeded fall (a trainer whose loss drops from 2.3 to 0.01 in 40
        # steps), the step-by-step differences of two runs are mostly tail (0.03 here) while the runs'
        # medians over steps 0-47 ranged 0.23-0.83, and a background prefetcher (the same batches in the
        # same order) was rejected as "loss above the reference's" at 0.39 vs 0.23. The same training is
        # not above the highest of those medians by more than their typical spread
        spread = statistics.median(abs(a - b) for a, b in itertools.combinations(medians, 2))
        if max(medians) - mb + spread > tol:
            tol = max(medians) - mb + spread
            how = (
                f"the highest median of {len(medians)} reference runs over it, {max(medians):.4g}, plus their "
                f"spread, {spread:.3g}"
            )
    if by_examples:
        # compared over stretches of several reference steps (a trial's steps of 8 batches, or twice the
        # examples): the trial may stand where the reference stood up to LOSS_STRETCHES stretches earlier,
        # by the reference's median change from one compared stretch to the next. Learned over a whole run, most
        # of whose steps a fast-learning model spends near zero, the step-to-step noise was 0.002 against
        # a loss falling from 1.6 to 0.0 within the stretches compared, and steps_per_execution (the same
        # batches, the same updates) was "above the reference's" on TensorFlow's image-classification
        # tutorial, whose unseeded shuffle and dropout move an early stretch's loss 0.2-0.6 run to run
        move = statistics.median(abs(b1 - b0) for (b0, _), (b1, _) in itertools.pairwise(pairs))
        if LOSS_STRETCHES * move > tol:
            tol = LOSS_STRETCHES * move
            how = f"{LOSS_STRETCHES:g}× the reference's change from one stretch to the next"
    if mt > mb + tol:
        return LossCheck(
            "higher",
            f"loss above the reference's: median {mt:.4g} vs {mb:.4g} over {span} "
            f"(tolerance +{tol:.3g}, {how})",
        )
    return LossCheck("ok", f"loss median {mt:.4g} vs {mb:.4g} over {span} (tolerance +{tol:.3g})")


# -- training changes --------------------------------------------------------------------------------
#: fixes that change the numerics or the hyperparameters of the training: never kept without a loss
#: to check them by, unless the user says so (--allow-unchecked). What each changes.
CHANGES_TRAINING: dict[str, str] = {
    "mixed-precision": "precision",
    "batch-scale": "batch size and learning rate",
}


_SCHEDULE_RE = re.compile(r"^(\w+)\((.*)\)$")


def _schedule_change(before: str | None, after: str | None) -> str | None:
    """Two schedules as the facts describe them (``CosineDecay(warmup_target=0.001, ...)``): the numbers
    that changed (``CosineDecay warmup_target 0.001 → 0.002``), or both whole when their kinds differ."""
    if before is None or after is None or before == after:
        return None
    a, b = _SCHEDULE_RE.match(before), _SCHEDULE_RE.match(after)
    if a is None or b is None or a[1] != b[1]:
        return f"{before} → {after}"

    def numbers(body: str) -> dict[str, str]:
        return dict(kv.split("=", 1) for kv in body.split(", ") if "=" in kv)

    x, y = numbers(a[2]), numbers(b[2])
    moved = [
        f"{k} {x.get(k, '–')} → {y.get(k, '–')}" for k in dict.fromkeys([*x, *y]) if x.get(k) != y.get(k)
    ]
    return f"{a[1]} {', '.join(moved)}" if moved else None


def training_changes(before: Facts | None, after: Facts | None, *, rate: bool = True) -> dict[str, str]:
    """What the training itself changed between two runs' facts: ``{"batch size": "32 → 64", ...}``
    (batch size, learning rate, precision, the learning-rate schedule's numbers); empty when the facts
    agree or are unknown. ``rate`` False: the change made cannot have touched the learning rate (no
    batch-scale in it), so the rate is not compared: a script with two optimizers (keras-io's PPO: 3e-4
    for the policy, 1e-3 for the value function) has its facts read the rate of whichever was noted
    first, and an XLA trial read "learning rate 0.0003 → 0.001"."""
    if before is None or after is None:
        return {}
    out: dict[str, str] = {}
    pairs: list[tuple[str, object, object]] = [
        ("batch size", before.batch_size, after.batch_size),
        *([("learning rate", before.learning_rate, after.learning_rate)] if rate else []),
        ("precision", before.dtype_policy, after.dtype_policy),
    ]
    for name, x, y in pairs:
        if x is None or y is None or x == y:
            continue
        if isinstance(x, float) and isinstance(y, float) and math.isclose(x, y, rel_tol=1e-6):
            continue
        out[name] = f"{x:g} → {y:g}" if isinstance(x, float) and isinstance(y, float) else f"{x} → {y}"
    sched = _schedule_change(before.learning_rate_schedule, after.learning_rate_schedule) if rate else None
    if sched:  # a warm-up starts at 0.0 in both runs: the schedule's numbers show the change
        out["learning rate schedule"] = sched
    return out


# -- did the change take effect? -----------------------------------------------------------------------
def timing_phases(steps: list[StepTiming]) -> frozenset[int] | None:
    """The phases of training (``StepTiming.phase``) a run's timing window ran in; None where that is not
    known (a custom loop)."""
    phases = {s.phase for s in steps if s.window == "timing"}
    if not phases or None in phases:
        return None
    return frozenset(p for p in phases if p is not None)


def other_phase(
    ref_runs: Sequence[list[StepTiming]], trial_runs: Sequence[list[StepTiming]], *, disjoint: bool = False
) -> str | None:
    """Why the trial's runs cannot be compared with the reference's, or None: their timing windows ran
    in different phases of the training, each begun by a ``fit()`` of another model, of a model
    compiled again or from another line of the script (TensorFlow's transfer-learning tutorial fits a frozen base, then compiles again and
    fine-tunes it, several times slower a step; a ``fit()`` per epoch of one model is one phase). A
    trial whose steps hold more examples (``steps_per_execution``, a bigger batch) reaches further into
    the training in as many steps, and can pass the end of the first phase; a speed-up measured there is another phase's,
    not the fix's.

    With ``disjoint``, only windows with no phase in common (the first trial run against the
    profiled baseline, whose window does not grow to the time floor: a partial overlap is left to the
    paired rounds, measured alike); else no trial run whose window ran in the same phases as a
    reference run's."""
    a = {p for r in ref_runs if (p := timing_phases(r)) is not None}
    b = {p for r in trial_runs if (p := timing_phases(r)) is not None}
    if not a or not b:
        return None
    ua, ub = frozenset().union(*a), frozenset().union(*b)
    if (ua & ub) if disjoint else (a & b):
        return None

    def listed(p: frozenset[int]) -> str:
        return " and ".join(str(x) for x in sorted(p))

    return (
        f"its timing window ran in training phase {listed(ub)}, the reference's in phase {listed(ua)} (a "
        "phase begins with each fit() of another model, of a model compiled again or from another line): "
        "different parts of "
        "the training, not compared (its steps hold more examples, so it reached a later phase in as many "
        "steps: a longer first fit(), more epochs of it, lets it be measured)"
    )


def not_in_effect(fix_id: str, before: Facts | None, after: Facts | None) -> str | None:
    """Why the trial's facts do not show its change in effect, or None (shown, or nothing to show it
    by: the input-pipeline fixes have no fact of their own)."""
    if after is None:
        return None
    b = before or Facts()
    if fix_id == "xla-jit":
        if after.jit_compile or after.auto_jit:
            return None
        return f"its facts show no XLA (jit_compile: {after.jit_compile}, auto_jit: {after.auto_jit})"
    if fix_id == "tf-function":
        if after.step_kind == "tf.function":
            return None
        return f"its facts show the step still {after.step_kind}"
    if fix_id == "steps-per-execution":
        spe = after.steps_per_execution
        if spe is not None and spe > (b.steps_per_execution or 1):
            return None
        return f"its facts show steps_per_execution {spe} (was {b.steps_per_execution})"
    if fix_id == "mixed-precision":
        # a 16-bit policy set, or a float16 one on a CPU replaced (by bf16 or float32: TFD404)
        was_fp16 = b.dtype_policy in FP16_POLICIES
        if after.dtype_policy != b.dtype_policy and (
            (after.dtype_policy or "").startswith("mixed") or (was_fp16 and after.dtype_policy is not None)
        ):
            return None
        return f"its facts show the dtype policy {after.dtype_policy} (was {b.dtype_policy})"
    if fix_id == "tfdata-cache" and after.extra.get(f"switch_{CACHE_FILL_SWITCH}") == "1":
        # the trial is measured with its caches filled first (steady state): unfilled, it would time
        # the epoch that fills them, which says nothing of the cache
        fill = after.tfdata_cache_fill
        if fill is not None and 0 < fill.filled == fill.caches:
            return None
        if fill is None:
            return "its facts show no tf.data cache filled before the first step"
        why = fill.note or f"{fill.caches} in-memory cache stage(s) found, none filled"
        return f"the tf.data cache was not filled before the timed steps ({why})"
    if fix_id == "debug-switches":
        left = [s for s in after.debug_switches if s in b.debug_switches]
        return f"its facts still show {', '.join(left)}" if left else None
    if fix_id == "keras-on-batch":
        seen = {(c.api, c.code) for c in b.keras_batch_calls}
        left = [f"{c.api}() at {c.site}" for c in after.keras_batch_calls if (c.api, c.code) in seen]
        return f"its facts still show {', '.join(left)}" if left else None
    if fix_id == "host-calls":
        copies = {(c.api, c.code) for c in b.host_calls if c.calls and c.api != "call"}
        left = [f"{c.api}() at {c.site}" for c in after.host_calls if c.calls and (c.api, c.code) in copies]
        return f"its facts still show {', '.join(left)}" if left else None
    if fix_id == "batch-scale":
        if after.batch_size is None or b.batch_size is None or after.batch_size > b.batch_size:
            return None
        return f"its facts show the batch size {after.batch_size} (was {b.batch_size})"
    return None


__all__ = [
    "CHANGES_TRAINING",
    "LOSS_FLOOR",
    "LOSS_K",
    "LossCheck",
    "Output",
    "aligned_losses",
    "is_progress",
    "is_timing",
    "loss_check",
    "loss_noise",
    "losses",
    "mask",
    "normalized_output",
    "not_in_effect",
    "other_phase",
    "output_change",
    "output_spread",
    "terminal_lines",
    "timing_phases",
    "training_changes",
]
