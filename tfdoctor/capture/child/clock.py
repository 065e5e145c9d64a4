"""The harness's step clock: step boundaries, windows, steps.jsonl, step markers, the clean stop.

TensorFlow-free: the hooks (:mod:`tfdoctor.capture.child.hooks`) tell the clock *when* things happen
(``touch`` = the loop did something, ``compute_start`` = the step's math began, ``end_step``), and
the clock turns that into :class:`~tfdoctor.model.StepTiming` lines, window changes and marker
calls on a :class:`Markers` implementation (the harness's profiler control).

Step boundaries: a step starts where the previous one ended (the first at the first hook event);
its *compute start* is the first compute event inside it. Its input wait is the time spent getting the
batch: the tf.data iterator's ``next`` calls before the compute start (``note_fetch``); the rest of
``compute_start - start`` is host work between steps (``between_ns``: metric updates, logging). Where
no fetch is seen (a Python generator, numpy slicing), the whole of ``compute_start - start`` is input
wait, as before.

The warm-up is *adaptive* unless the user fixed it (``--warmup N``): :class:`Warmup` decides, step by
step, whether it goes on past the planned length (see its docstring for the rules and limits); the
timing and profile windows keep their planned lengths and start later. The hooks feed it
(``note_trace``: a tf.function was traced), and :class:`MemoScanner` reads the caches that tfdoctor's
generator-cache fix puts into the script (functions carrying a ``tfdoctor_memo`` dict).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

Window = Literal["warmup", "timing", "profile"]


#: a pause before a step's compute that makes the step the first of a burst (see StepClock.burst_start)
BURST_PAUSE_NS = 500_000_000


class StopCapture(BaseException):
    """Raised from a hook once the planned steps are done: ends the user's script cleanly.

    A ``BaseException`` so that a user's ``except Exception`` cannot swallow it.
    """


@dataclass(frozen=True)
class Windows:
    """Step counts of the three windows, in order: warm-up, timing (no profiler), profile."""

    warmup: int
    timing: int
    profile: int

    @property
    def total(self) -> int:
        return self.warmup + self.timing + self.profile

    def of(self, index: int) -> Window:
        if index < self.warmup:
            return "warmup"
        if index < self.warmup + self.timing:
            return "timing"
        return "profile"

    def ended_early(self, what: str, n: int, traced: bool, grown: str = "") -> str:
        """Why a run of ``what`` ("the script", "the cell") that ended by itself after ``n`` of the
        windows' steps is short (``grown``: how the adaptive warm-up grew, when it did): nothing timed
        when it ended within the warm-up; no trace when a profile window was planned and none came."""
        message = f"{what} ended by itself after {n} of {self.total} steps" + (f" ({grown})" if grown else "")
        if n <= self.warmup:  # nothing timed: the warm-up took every step
            return message + (
                f", within its {self.warmup}-step warm-up: nothing was timed ({what} needs more steps "
                "than that: more epochs or data)"
            )
        if self.profile and not traced:
            return message + f", before the profile window (no trace); try --steps {n}"
        return message

    @classmethod
    def split(
        cls, steps: int, warmup: int | None = None, profile_steps: int | None = None, profile: bool = True
    ) -> Windows:
        """The default split of ``steps``: warm-up ≈ 15 % (at least 3), profile ≤ 10, the rest timing.

        Raises ValueError (with a message fit for the user) when the numbers cannot work.
        """
        if steps < 1:
            raise ValueError(f"--steps must be positive (got {steps})")
        w = warmup if warmup is not None else max(3, round(0.15 * steps))
        if w < 1:
            raise ValueError("--warmup must be at least 1 (the first step traces and compiles)")
        if not profile:
            p = 0
        elif profile_steps is not None:
            if profile_steps < 1:
                raise ValueError("--profile-steps must be at least 1")
            p = profile_steps
        else:
            p = min(10, max(1, (steps - w) // 3))
        t = steps - w - p
        if t < 1:
            raise ValueError(
                f"--steps {steps} leaves no timing window after {w} warm-up and {p} profiled steps; "
                f"use --steps {w + p + 1} or more"
            )
        return cls(w, t, p)


# -- the adaptive warm-up -----------------------------------------------------------------------------
#: a step time "settled" test compares step durations within this factor (see :func:`settled`)
SETTLE_RATIO = 1.5
#: while steps still trace or their time has not settled, the warm-up goes on for at most
#: ``max(planned, SETTLE_EXTRA_MIN)`` steps past the planned length
SETTLE_EXTRA_MIN = 10
#: a tfdoctor memo cache serves once at least this share of its lookups in the last step were hits
MEMO_WARM_HIT_RATE = 0.9
#: a cold memo cache keeps the warm-up going until the warm-up has lasted this many steps ...
MEMO_WARMUP_MAX_STEPS = 2000
#: ... or this many seconds (from the first step's start), whichever comes first
MEMO_WARMUP_MAX_S = 150.0
#: no extension of any kind once this share of the run's timeout (from the harness's start) is spent:
#: the rest is left for the planned timing and profile windows
WARMUP_TIMEOUT_SHARE = 0.5


def settled(durations: Sequence[int], ratio: float = SETTLE_RATIO) -> bool:
    """Has the step time settled, judging from the warm-up's step durations so far (oldest first)?

    Settled when the newest step is no spike (at most ``ratio`` × the median of the last 3 steps) and
    either the last 3 steps agree within ``ratio`` (the step before them excluded when it is the
    first: it traces and compiles, warm-up by definition), or, with 6 steps or more, the level stopped
    dropping: the median of the last 3 is at least 1/``ratio`` of the median of the 3 before them.

    Why this rule: warm-up costs (tracing, XLA compilation, tf.data autotuning, first-execution kernel
    setup) make steps *slower* for a while, then the level drops; three agreeing steps say the drop is
    over. A median of 3 ignores one odd step in three, so the odd slow step of a noisy machine, a log
    line every k steps (k ≥ 3) or an alternating fast/slow step (k = 2), which never give three
    agreeing steps, still pass within a step or two instead of extending the warm-up to its limit.
    """
    d = list(durations)
    if len(d) < 2:
        return True
    if d[-1] > ratio * statistics.median(d[-3:]):
        return False
    rest = d[1:][-3:]
    if max(rest) <= ratio * min(rest):
        return True
    return len(d) >= 6 and ratio * statistics.median(d[-3:]) >= statistics.median(d[-6:-3])


@dataclass(frozen=True)
class MemoStats:
    """tfdoctor memo caches found in the script, summed (cumulative counters, as the caches keep them)."""

    caches: int
    hits: int
    misses: int
    bypass: int
    bytes: int
    full: bool  # at least one cache is full (it will not learn more)

    def __sub__(self, before: MemoStats) -> tuple[int, int]:
        """(hits, misses) since ``before``."""
        return self.hits - before.hits, self.misses - before.misses


def _count(memo: Mapping[str, Any], key: str) -> int:
    try:
        return int(memo.get(key) or 0)
    except (TypeError, ValueError):
        return 0


class MemoScanner:
    """Finds the script's memo caches and sums their counters; a :class:`Warmup` memo provider.

    A memo cache is a callable in the script's globals (``namespace()``: the harness passes the
    ``__main__`` module's dict, which ``runpy.run_path(run_name="__main__")`` makes the script's
    globals while it runs) with an attribute ``tfdoctor_memo``: a dict with int ``hits``, ``misses``,
    ``bypass``, ``bytes`` and bool ``full``, updated on every call. The first call scans the globals
    once and remembers the callables found; later calls only re-read those (None when none were found).
    Never raises: an odd value is skipped.
    """

    def __init__(self, namespace: Callable[[], Mapping[str, Any] | None]):
        self.namespace = namespace
        self.found: list[Any] | None = None  # None until the first scan

    def _scan(self) -> list[Any]:
        try:
            ns = self.namespace()
            values = list(ns.values()) if ns is not None else []
        except Exception:
            return []
        found: list[Any] = []
        for v in values:
            if isinstance(v, type) or not callable(v) or any(v is f for f in found):
                continue
            if isinstance(self._memo(v), dict):
                found.append(v)
        return found

    @staticmethod
    def _memo(fn: Any) -> Any:
        try:  # the instance dict only: no __getattr__ of the user's objects (lazy modules, proxies) runs
            attrs = object.__getattribute__(fn, "__dict__")
        except Exception:
            return None
        return attrs.get("tfdoctor_memo") if type(attrs) is dict else None

    def __call__(self) -> MemoStats | None:
        if self.found is None:
            self.found = self._scan()
        memos = [m for m in (self._memo(f) for f in self.found) if isinstance(m, dict)]
        if not memos:
            return None
        return MemoStats(
            caches=len(memos),
            hits=sum(_count(m, "hits") for m in memos),
            misses=sum(_count(m, "misses") for m in memos),
            bypass=sum(_count(m, "bypass") for m in memos),
            bytes=sum(_count(m, "bytes") for m in memos),
            full=any(m.get("full") is True for m in memos),
        )


def _steps(n: int) -> str:
    return f"{n} step{'s' if n != 1 else ''}"


def _pct(rate: float) -> str:
    return f"{rate * 100:.0f} %"


class Warmup:
    """Decides, after each warm-up step, whether the warm-up goes on (TensorFlow-free; fed by the clock).

    ``planned`` warm-up steps always run. After them, when ``adaptive``, the warm-up goes on while

    (a) the step just ended traced a tf.function (``traced``; Keras's train function included), or
    (b) the step time has not :func:`settled`,

    for at most ``max(planned, SETTLE_EXTRA_MIN)`` extra steps; and, separately, while

    (c) a tfdoctor memo cache (``memo()`` → :class:`MemoStats`, None when the script has none) is still
        cold: fewer than :data:`MEMO_WARM_HIT_RATE` of its lookups in the last step were hits and no cache
        is full, until the warm-up has lasted :data:`MEMO_WARMUP_MAX_STEPS` steps or
        :data:`MEMO_WARMUP_MAX_S` seconds.

    Nothing extends it past ``deadline_ns`` (the harness: half of the run's timeout). The caches are
    first read at the end of step ``planned - 2`` (0-based: the one before the planned last, so the
    planned last step's hit rate is known when the planned warm-up ends), then once per step while the
    warm-up goes on, only when that first read found caches. A step without lookups keeps the previous step's verdict. Not ``adaptive`` (the user's
    ``--warmup N``): exactly ``planned`` steps; the caches are still read, to say whether they were warm.

    After the warm-up: ``steps`` (its length), ``note`` (why it was longer than planned, or why it
    stopped waiting), ``memo`` (the caches' counters at its end) and ``memo_warm``.
    """

    def __init__(
        self,
        planned: int,
        *,
        adaptive: bool = True,
        memo: Callable[[], MemoStats | None] | None = None,
        deadline_ns: int | None = None,
        max_extra: int | None = None,
        memo_max_steps: int = MEMO_WARMUP_MAX_STEPS,
        memo_max_s: float = MEMO_WARMUP_MAX_S,
    ):
        self.planned = planned
        self.adaptive = adaptive
        self.memo_provider = memo
        self.deadline_ns = deadline_ns
        self.max_extra = max(planned, SETTLE_EXTRA_MIN) if max_extra is None else max_extra
        self.memo_max_steps = memo_max_steps
        self.memo_max_s = memo_max_s
        self.durations: list[int] = []
        self.steps: int | None = None
        self.note: str | None = None
        self.memo: MemoStats | None = None
        self.memo_warm: bool | None = None
        self._memo_prev: MemoStats | None = None
        self._memo_rate: float | None = None  # hit rate of the last step with lookups
        self._memo_scanned = False
        self._traced: list[int] = []  # steps past the plan that traced
        self._unsettled: list[int] = []  # steps past the plan whose time had not settled
        self._extended_for_ab = 0

    @property
    def done(self) -> bool:
        return self.steps is not None

    def after_step(self, index: int, duration_ns: int, *, traced: bool, elapsed_ns: int, now_ns: int) -> bool:
        """Warm-up step ``index`` ended; True when the warm-up must go on after it.

        ``elapsed_ns``: since the first step began; ``now_ns``: the clock's reading (for the deadline).
        Before the planned end the answer is always True (the planned steps always run).
        """
        if self.done:
            return False
        self.durations.append(duration_ns)
        n = index + 1  # warm-up steps done
        if n < self.planned - 1:
            return True
        self._read_memo()
        if n < self.planned:
            return True
        warm = self._memo_verdict()
        if not self.adaptive:
            return self._finish(n, warm, elapsed_ns, "fixed", None)
        ab = "trace" if traced else "unsettled" if not settled(self.durations) else None
        if self.deadline_ns is not None and now_ns >= self.deadline_ns:
            return self._finish(n, warm, elapsed_ns, "deadline", ab)
        ab_goes_on = ab is not None and n - self.planned < self.max_extra
        memo_goes_on = warm is False and n < self.memo_max_steps and elapsed_ns < self.memo_max_s * 1e9
        if not (ab_goes_on or memo_goes_on):
            return self._finish(n, warm, elapsed_ns, "limit" if ab or warm is False else "done", ab)
        if ab == "trace":
            self._traced.append(index)
        elif ab == "unsettled":
            self._unsettled.append(index)
        if ab_goes_on:
            self._extended_for_ab += 1
        return True

    # -- memo caches ---------------------------------------------------------------------------
    def _read_memo(self) -> None:
        if self.memo_provider is None or (self._memo_scanned and self.memo is None):
            return  # no provider, or the first read found no cache: never read again
        self._memo_scanned = True
        try:
            stats = self.memo_provider()
        except Exception:
            stats = None
        self._memo_prev, self.memo = self.memo, stats
        if stats is not None and self._memo_prev is not None:
            hits, misses = stats - self._memo_prev
            if hits + misses > 0:
                self._memo_rate = hits / (hits + misses)

    def _memo_verdict(self) -> bool | None:
        """True: the caches serve (or one is full); False: still cold; None: no cache or never used."""
        m = self.memo
        if m is None:
            self.memo_warm = None
            return None
        if m.full:
            self.memo_warm = True
            return True
        rate = self._memo_rate
        if rate is None:  # no lookups between two reads yet: the counters so far
            rate = m.hits / (m.hits + m.misses) if m.hits + m.misses else None
        if rate is None:  # never looked up (or bypassed every time): nothing to wait for
            self.memo_warm = False
            return None
        self._memo_rate = rate
        self.memo_warm = rate >= MEMO_WARM_HIT_RATE
        return self.memo_warm

    # -- the end -------------------------------------------------------------------------------
    def _finish(self, n: int, warm: bool | None, elapsed_ns: int, why: str, ab: str | None) -> bool:
        """The warm-up ends after ``n`` steps; ``why``: done | limit | deadline | fixed; ``ab``: what (a)/(b)
        still wanted at the end (trace | unsettled | None)."""
        self.steps = n
        parts: list[str] = []
        if self._extended_for_ab or ab is not None:
            parts.append(self._ab_note(n, ab, deadline=why == "deadline"))
        memo = self._memo_note(n, warm, elapsed_ns, why)
        if memo:
            parts.append(memo)
        if why == "deadline":
            parts.append(f"stopped after {_steps(n)}: half of the run's timeout was spent")
        self.note = "; ".join(parts) or None
        return False

    def _ab_note(self, n: int, ab: str | None, *, deadline: bool) -> str:
        """What (a)/(b) did; ``ab``: what they still wanted when the warm-up ended after ``n`` steps."""
        k = self._extended_for_ab
        head = f"extended {_steps(k)}" if k else "not extended"
        limit = ab is not None and not deadline
        if limit:
            head += " (limit)"
        bits = []
        traced = self._traced + ([n - 1] if ab == "trace" else [])
        if len(traced) == 1:
            bits.append(f"a tf.function traced in step {traced[0]}")
        elif traced:
            bits.append(f"tf.functions traced in {len(traced)} steps (last: {traced[-1]})")
        if ab == "unsettled":
            last = "/".join(f"{d / 1e6:.0f}" for d in self.durations[-3:])
            bits.append(f"step time still not settled at step {n - 1} (last steps {last} ms)")
        elif self._unsettled:
            bits.append(f"step time unsettled until step {self._unsettled[-1] + 1}")
        if limit:
            bits.append("the timing window may include warm-up costs")
        return head + (": " + "; ".join(bits) if bits else "")

    def _memo_note(self, n: int, warm: bool | None, elapsed_ns: int, why: str) -> str | None:
        m = self.memo
        if m is None:
            return None
        if m.full:
            return f"memo cache full after {_steps(n)} ({m.hits} hits, {m.misses} misses)"
        if warm is None:
            return f"memo cache not used during the warm-up ({m.bypass} calls bypassed it)"
        rate = _pct(self._memo_rate or 0.0)
        if warm:
            return f"memo cache warm after {_steps(n)} (hit rate {rate})"
        cold = "the timing window measures a cold cache"
        if why == "fixed":
            return f"memo cache still cold at the end of the fixed warm-up ({_steps(n)}, hit rate {rate}): {cold}"
        if why == "deadline":
            return f"memo cache still cold after {_steps(n)} (hit rate {rate}): {cold}"
        if n >= self.memo_max_steps:
            return f"memo cache still cold after {_steps(n)} (limit): {cold}"
        return f"memo cache still cold after {elapsed_ns / 1e9:.0f} s of warm-up ({_steps(n)}, limit): {cold}"


class Markers(Protocol):
    """What the clock needs from the profiler (the harness implements it with tf.profiler)."""

    def start_profiler(self) -> None: ...

    def stop_profiler(self) -> None: ...

    def open_step(self, index: int) -> None: ...

    def open_input(self, index: int) -> None: ...

    def close_input(self) -> None: ...

    def close_step(self) -> None: ...


def _num(x: float | int | None) -> str:
    if x is None:
        return "null"
    if isinstance(x, int) or math.isfinite(x):
        return repr(x)
    return json.dumps(x)  # NaN, Infinity: as Python's json writes them, and pydantic reads them back


def step_line(
    index: int,
    window: str,
    start_ns: int,
    end_ns: int,
    input_wait_ns: int,
    between_ns: int,
    loss: float | None,
    examples: int | None,
    phase: int | None = None,
    epoch_start: bool = False,
    fn: str | None = None,
) -> str:
    """One line of ``steps.jsonl``: a :class:`~tfdoctor.model.StepTiming` as JSON, formatted without
    building the model (see :meth:`StepClock.end_step`). A loss that is NaN or infinite is kept as such
    (``NaN``), where the model's own JSON would write ``null`` and the loss check could no longer tell
    a diverged step from a step without a loss."""
    tail = (
        "" if phase is None else f',"phase":{phase}'
    ) + f',"epoch_start":{"true" if epoch_start else "false"}'
    if fn is not None:
        tail += f',"fn":{json.dumps(fn)}'
    return (
        f'{{"index":{index},"window":"{window}","start_ns":{start_ns},"end_ns":{end_ns},'
        f'"input_wait_ns":{input_wait_ns},"between_ns":{between_ns},"loss":{_num(loss)},'
        f'"examples":{_num(examples)}{tail}}}\n'
    )


#: a timing window with a floor on its length grows to at most this many times its planned steps
TIMING_GROWTH_MAX = 20


def collect_before_window() -> None:
    """A full collection of Python's garbage before a timing or profile window, charged to no step.

    CPython collects its oldest generation when the objects that survived the younger ones since the
    last full collection reach a quarter of those that survived it. Building a model and tracing its
    step leave tens of thousands of such objects, so the first full collection after them falls a few
    dozen steps into training, wherever the set-up left the count: progbar_loop (a 5 ms step) waited
    250-370 ms for it at step 71 of every run at batch 64 and 128 and not at 256 or 512 (the epoch's
    end came first), one stall in a 1 s window that read as the trial's speed. Run on its own the script
    paid it elsewhere or not at all: its loop leaves almost nothing behind a step, so that collection
    is the set-up's, not the training's. Collected here, a window holds only the collections its own
    steps cause. A script that turned the collector off (``gc.disable()``) is left as it runs.

    One worker of a multi-worker job collects after its first step instead (:attr:`StepClock.collect`
    ``"first_step"``, most of the set-up's garbage being that step's trace): its peers wait for it in their
    next all-reduce, and a wait inside the profile window's first step had the straggler test name the
    worker that was not slowed (worker-0 against worker-1's 15 ms a step); a warm-up step may wait."""
    gc.collect()


class StepClock:
    """Turns hook events into steps; writes ``steps.jsonl``; drives windows and markers.

    ``windows`` are the planned windows; with a ``warmup`` (:class:`Warmup`) the warm-up may grow past
    the plan, and ``self.windows`` is then the windows as they happen (the warm-up as long as it has
    become so far, the timing and profile windows as planned, after it). Without one, the warm-up is
    exactly ``windows.warmup`` steps.

    ``min_timing_ns``: the timing window goes on past its planned steps, a step at a time, until it has
    lasted this long (at most :data:`TIMING_GROWTH_MAX` times its planned steps); the profile window
    follows it. A fast step's planned window is otherwise a few tens of milliseconds, which one thread
    wake-up or a shuffle buffer's refill moves by 10-20 % (docs/fixes.md, "How long a run is timed").
    0: the planned steps exactly.
    """

    def __init__(
        self,
        windows: Windows,
        steps_path: Path,
        markers: Markers | None = None,
        *,
        clock: Callable[[], int] = time.time_ns,
        on_window: Callable[[Window], None] | None = None,
        warmup: Warmup | None = None,
        min_timing_ns: int = 0,
        collect: Literal["windows", "first_step"] = "windows",
    ):
        self.planned = windows
        #: where Python's garbage is collected, charged to no step (:func:`collect_before_window`): before
        #: the timing and profile windows, or after the first step (one worker of a multi-worker job)
        self.collect = collect
        self.windows = windows
        self.warmup = warmup
        self.min_timing_ns = min_timing_ns
        self.timing_ns = 0  # the timing window's steps so far, their durations summed
        self.timing_durs: list[int] = []  # and each of their durations
        self.traces = 0  # tf.function traces seen during the step in progress
        self.first_start_ns: int | None = None
        self.markers = markers
        self.clock = clock
        self.on_window = on_window
        self.index = 0  # the step in progress (or the next one)
        self.start_ns: int | None = None  # start of the step in progress; None before the first event
        self.compute_ns: list[int] = []  # compute-start candidates seen in the step in progress
        self.fetch_ns: list[tuple[int, int]] = []  # (start, end) of the batch fetches seen
        self.phase: int | None = None  # the phase of training running (hooks set it): with each step
        self.stopped = False
        self.profiling = False
        self._input_open = False
        self._step_open = False
        self._loop_work = False  # see loop_work
        # the step in progress is the first of a Keras epoch (see epoch_begin): its iterator is new
        self._epoch_start = False
        #: the first step of the latest burst: the last step that waited BURST_PAUSE_NS or more before its
        #: compute (the script's own work between bursts of steps; see at_end)
        self.burst_start = 0
        #: that pause: BURST_PAUSE_NS, or shorter in a fix trial judged on the whole loop, whose fix may have
        #: shortened the work between bursts (see tfdoctor.session.fix_loop.burst_pause_s)
        self.burst_pause_ns = BURST_PAUSE_NS
        #: called when the planned windows end at ``t``: True when the run goes on (the profile run's watch of
        #: a custom loop's work between bursts of steps, tfdoctor.capture.child.gap); None or False: it ends
        self.at_end: Callable[[int], bool] | None = None
        # unbuffered: one write() a step, nothing left in a buffer when the process dies
        self._steps_file = open(steps_path, "ab", buffering=0)  # noqa: SIM115 - lives with the clock

    # -- events --------------------------------------------------------------------------------
    def note_trace(self) -> None:
        """A tf.function was traced (or retraced) during the step in progress."""
        self.traces += 1

    def touch(self, t: int | None = None) -> None:
        """The training loop did something: begins step 0 if nothing has begun yet."""
        if self.start_ns is None and not self.stopped:
            self._begin(self.clock() if t is None else t)

    def compute_start(self, t: int | None = None) -> None:
        """The step's compute (tape, step function, Keras batch) began at ``t``."""
        if self.stopped:
            return
        t = self.clock() if t is None else t
        self.touch(t)
        self.compute_ns.append(t)
        if self._input_open:
            self._input_open = False
            if self.markers is not None:
                self.markers.close_input()

    def discard_compute(self, t: int) -> None:
        """The compute marked at ``t`` did not happen (a fit batch begun that ran out of data)."""
        self.compute_ns = [c for c in self.compute_ns if c != t]

    def epoch_begin(self, t: int | None = None) -> None:
        """Keras began an epoch of ``fit``: the step in progress, which has not begun computing, begins
        here. What ran since the last batch of the epoch before (validation, epoch-end callbacks such as
        ``ModelCheckpoint``, the logs) is not a training step's time, as Keras's own ms/step leaves it out:
        a short epoch's first validation traces its test function (about a second), which made one step
        in fifteen last 25 times the others and a trial's figure depend on where the epochs fell. In the
        profile window too: the step's marker in the trace was opened when the step began, and the
        analysis starts the step where its steps.jsonl line says (:func:`tfdoctor.analysis.steps.find_steps`):
        keras-io's segmentation example (12 batches an epoch) had its validation and ModelCheckpoint in
        one of 8 profiled steps, 5 s of 8.5, and its breakdown read "Dispatch-bound: 49 %"."""
        if self.stopped or self.start_ns is None or self.compute_ns:
            return
        t = self.clock() if t is None else t
        self.start_ns = max(self.start_ns, t)
        self.fetch_ns = [f for f in self.fetch_ns if f[1] > self.start_ns]
        self._epoch_start = True

    def loop_work(self) -> None:
        """What the step in progress waited for before its compute is the loop's own work, not input:
        the script calls ``fit()`` once per batch, and between two calls it acts, predicts, steps an
        environment; then Keras builds the call's data adapter and iterator (a hundred milliseconds for
        one row of numpy, in Keras 3), which no fetch of ours sees."""
        self._loop_work = True

    def note_fetch(self, t0: int, t1: int) -> None:
        """The loop fetched a batch (a tf.data iterator's ``next``) from ``t0`` to ``t1``."""
        if not self.stopped and t1 >= t0:
            self.fetch_ns.append((t0, t1))

    def end_step(
        self,
        t: int | None = None,
        *,
        loss: float | None = None,
        examples: int | None = None,
        fn: str | None = None,
    ) -> None:
        """The step in progress ended at ``t`` (a step of ``fn``, the step function it ran, where that is
        not the run's first: see :attr:`tfdoctor.model.StepTiming.fn`). Writes it, moves windows; raises
        StopCapture at the end.

        This runs once per step of the user's loop, right after TensorFlow's kernels have evicted Python's
        code and data from the caches: every line here costs several times what it costs in a warm
        benchmark (measured in place, 2026-11-26: a pydantic ``StepTiming`` built, dumped, written and
        flushed through a text file took ~28 µs a step). So the step is one JSON line formatted here
        (:func:`step_line`), written through an unbuffered file: one ``write`` call, and every finished
        step is on disk even if the process dies next, a native crash in the timing window included
        (keeping a quarter second of steps to write them together lost those:
        tests/integration/test_run_faults.py)."""
        if self.stopped:
            raise StopCapture()
        t = self.clock() if t is None else t
        self.touch(t)
        assert self.start_ns is not None
        start = self.start_ns
        compute, found, later = start, False, []
        for c in self.compute_ns:  # plain loops: a step has one or two of each
            if c > t:
                later.append(c)
            elif c >= start and not found:
                compute, found = c, True
        gap = max(0, compute - start)
        # the fetches before the compute began: the input wait; the rest of the gap is host work (when
        # the step fetched its batch at all: a loop without a visible fetch keeps the whole gap as wait)
        fetched, seen, kept = 0, False, []
        for f in self.fetch_ns:
            a, b = f
            if a < compute:
                fetched += max(0, min(b, compute) - max(a, start))
            if a < t and b > start:
                seen = True
            if b > t:
                kept.append(f)
        wait = 0 if self._loop_work else min(fetched, gap) if seen else gap
        if gap >= self.burst_pause_ns:
            self.burst_start = self.index
        window = self.windows.of(self.index)
        index, end = self.index, max(t, start)
        self.fetch_ns = kept
        self._write(
            step_line(
                index, window, start, end, wait, gap - wait, loss, examples, self.phase, self._epoch_start, fn
            )
        )
        if self._input_open and self.markers is not None:
            self.markers.close_input()
        self._input_open = False
        if self._step_open and self.markers is not None:
            self.markers.close_step()
        self._step_open = False
        self.index += 1
        self.compute_ns = later
        if window == "warmup" and self.warmup is not None and not self.warmup.done:
            t = self._decide_warmup(index, end - start, start, t)
        if window == "timing":
            self._decide_timing(start, end)
        self.traces = 0
        if self.index >= self.windows.total:
            self._stop_profiler()
            self.stopped = True
            if self.at_end is not None and self.at_end(t):
                return
            raise StopCapture()
        nxt = self.windows.of(self.index)
        if nxt != window:
            if nxt != "warmup" and self.collect == "windows" and gc.isenabled():
                collect_before_window()
            if nxt == "profile" and self.markers is not None:
                self.markers.start_profiler()
                self.profiling = True
            if self.on_window is not None:
                self.on_window(nxt)
            t = max(t, self.clock())  # the window change's own cost belongs to no step
        if index == 0 and self.collect == "first_step" and gc.isenabled():
            collect_before_window()
            t = max(t, self.clock())
        self._begin(t)

    def warmup_facts(self) -> dict[str, Any]:
        """The warm-up as it happened, for :class:`~tfdoctor.model.Facts` (``warmup_steps``, ``memo_*``...)."""
        out: dict[str, Any] = {"warmup_steps": min(self.index, self.windows.warmup) or None}
        w = self.warmup
        if w is not None:
            out["warmup_note"] = w.note
            if w.memo is not None:
                out.update(
                    memo_hits=w.memo.hits,
                    memo_misses=w.memo.misses,
                    memo_full=w.memo.full,
                    memo_warm=w.memo_warm,
                )
        return out

    def close(self) -> None:
        """The script ended (or failed): stop the profiler if it runs, close steps.jsonl."""
        self._stop_profiler()
        self.stopped = True
        if not self._steps_file.closed:
            self._steps_file.close()

    # -- internals -----------------------------------------------------------------------------
    def _decide_warmup(self, index: int, duration_ns: int, start_ns: int, t: int) -> int:
        """Feed the warm-up step that just ended (``index``, its duration) to the :class:`Warmup`; grow
        the warm-up when it goes on past the windows' current warm-up. Returns where the next step begins."""
        assert self.warmup is not None
        first = self.first_start_ns if self.first_start_ns is not None else start_ns
        deciding = self.index >= self.warmup.planned - 1  # the memo caches may be read: not a step's cost
        goes_on = self.warmup.after_step(
            index, duration_ns, traced=self.traces > 0, elapsed_ns=t - first, now_ns=t
        )
        if goes_on and self.index >= self.windows.warmup:
            self.windows = dataclasses.replace(self.windows, warmup=self.index + 1)
        return max(t, self.clock()) if deciding else t

    def new_phase(self, phase: int) -> None:
        """A ``fit()`` of the script begins phase ``phase`` of its training (hooks: a new phase with each
        fit of another model, of a model compiled again or from another line). A timing window that grew
        past its plan to reach the time floor ends where a new phase begins: its first step traces a train
        function, and its training (a fine-tuning fit after a frozen one, keras-io's distiller after its
        teacher) runs at another speed. Only where nothing is profiled after it (a timing-only run)."""
        changed = self.phase is not None and phase != self.phase
        self.phase = phase
        w = self.windows
        if (
            not changed
            or self.stopped
            or w.profile
            or w.of(self.index) != "timing"
            or self.index < w.warmup + self.planned.timing
        ):
            return
        self.windows = dataclasses.replace(w, timing=self.index - w.warmup)
        self._stop_profiler()
        self.stopped = True
        raise StopCapture()

    def _decide_timing(self, start: int, end: int) -> None:
        """After a timing step (``start``-``end``): when it was the window's last and its steps still last
        less than ``min_timing_ns`` together, one step more (within :data:`TIMING_GROWTH_MAX`). The steps'
        time, not the wall's: what ran between a fit's epochs (validation, ModelCheckpoint) is no step's
        (:meth:`epoch_begin`), and a window of 3 steps of 30 ms with a validation between them had
        counted as its floor of 1 s."""
        self.timing_ns += max(0, end - start)
        self.timing_durs.append(max(0, end - start))
        w = self.windows
        last = self.index == w.warmup + w.timing
        if (
            last
            and self.min_timing_ns > 0
            and self.timing_ns < self.min_timing_ns
            and w.timing < TIMING_GROWTH_MAX * self.planned.timing
        ):
            self.windows = dataclasses.replace(w, timing=w.timing + 1)

    def _begin(self, t: int) -> None:
        self.start_ns = t
        self._loop_work = False
        self._epoch_start = False
        if self.first_start_ns is None:
            self.first_start_ns = t
        if self.profiling and self.markers is not None:
            self.markers.open_step(self.index)
            self.markers.open_input(self.index)
            self._step_open = self._input_open = True

    def _stop_profiler(self) -> None:
        if self.profiling and self.markers is not None:
            # a step still open here never finished: its markers are dropped with the session
            self.profiling = False
            self.markers.stop_profiler()

    def _write(self, line: str) -> None:
        if self._steps_file.closed:
            return
        self._steps_file.write(line.encode("utf-8"))
