"""The harness's step clock: step boundaries, windows, steps.jsonl, step markers, the clean stop.

TensorFlow-free: the hooks (:mod:`tfdoctor.capture.hooks`) tell the clock *when* things happen
(``touch`` = the loop did something, ``compute_start`` = the step's math began, ``end_step``), and
the clock turns that into :class:`~tfdoctor.model.StepTiming` lines, window changes and marker
calls on a :class:`Markers` implementation (the harness's profiler control).

Step boundaries: a step starts where the previous one ended (the first at the first hook event);
its *compute start* is the first compute event inside it; ``input_wait_ns = compute_start - start``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from tfdoctor.model import StepTiming

Window = Literal["warmup", "timing", "profile"]


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


class Markers(Protocol):
    """What the clock needs from the profiler (the harness implements it with tf.profiler)."""

    def start_profiler(self) -> None: ...

    def stop_profiler(self) -> None: ...

    def open_step(self, index: int) -> None: ...

    def open_input(self, index: int) -> None: ...

    def close_input(self) -> None: ...

    def close_step(self) -> None: ...


class StepClock:
    """Turns hook events into steps; writes ``steps.jsonl``; drives windows and markers."""

    def __init__(
        self,
        windows: Windows,
        steps_path: Path,
        markers: Markers | None = None,
        *,
        clock: Callable[[], int] = time.time_ns,
        on_window: Callable[[Window], None] | None = None,
    ):
        self.windows = windows
        self.markers = markers
        self.clock = clock
        self.on_window = on_window
        self.index = 0  # the step in progress (or the next one)
        self.start_ns: int | None = None  # start of the step in progress; None before the first event
        self.compute_ns: list[int] = []  # compute-start candidates seen in the step in progress
        self.stopped = False
        self.profiling = False
        self._input_open = False
        self._step_open = False
        self._steps_file = open(steps_path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the clock

    # -- events --------------------------------------------------------------------------------
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

    def end_step(
        self,
        t: int | None = None,
        *,
        loss: float | None = None,
        examples: int | None = None,
    ) -> StepTiming | None:
        """The step in progress ended at ``t``. Writes it, moves windows; raises StopCapture at the end."""
        if self.stopped:
            raise StopCapture()
        t = self.clock() if t is None else t
        self.touch(t)
        assert self.start_ns is not None
        start = self.start_ns
        inside = [c for c in self.compute_ns if start <= c <= t]
        later = [c for c in self.compute_ns if c > t]
        compute = inside[0] if inside else start
        window = self.windows.of(self.index)
        step = StepTiming(
            index=self.index,
            window=window,
            start_ns=start,
            end_ns=max(t, start),
            input_wait_ns=max(0, compute - start),
            loss=loss,
            examples=examples,
        )
        self._write(step)
        if self._input_open and self.markers is not None:
            self.markers.close_input()
        self._input_open = False
        if self._step_open and self.markers is not None:
            self.markers.close_step()
        self._step_open = False
        self.index += 1
        self.compute_ns = later
        if self.index >= self.windows.total:
            self._stop_profiler()
            self.stopped = True
            raise StopCapture()
        nxt = self.windows.of(self.index)
        if nxt != window:
            if nxt == "profile" and self.markers is not None:
                self.markers.start_profiler()
                self.profiling = True
            if self.on_window is not None:
                self.on_window(nxt)
            t = max(t, self.clock())  # the window change's own cost belongs to no step
        self._begin(t)
        return step

    def close(self) -> None:
        """The script ended (or failed): stop the profiler if it runs, close steps.jsonl."""
        self._stop_profiler()
        self.stopped = True
        if not self._steps_file.closed:
            self._steps_file.close()

    # -- internals -----------------------------------------------------------------------------
    def _begin(self, t: int) -> None:
        self.start_ns = t
        if self.profiling and self.markers is not None:
            self.markers.open_step(self.index)
            self.markers.open_input(self.index)
            self._step_open = self._input_open = True

    def _stop_profiler(self) -> None:
        if self.profiling and self.markers is not None:
            # a step still open here never finished: its markers are dropped with the session
            self.profiling = False
            self.markers.stop_profiler()

    def _write(self, step: StepTiming) -> None:
        if self._steps_file.closed:
            return
        self._steps_file.write(step.model_dump_json() + "\n")
        self._steps_file.flush()
