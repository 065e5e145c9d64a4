"""In-process capture: profile a piece of code (a notebook cell) in *this* interpreter.

The child-process harness (:mod:`tfdoctor.capture.child.harness`) owns a whole interpreter; a Jupyter
kernel does not belong to us, so here everything is scoped to one call of :func:`capture_in_process`:

* the step hooks (:mod:`tfdoctor.capture.child.hooks`) are installed before the code runs and
  *uninstalled* afterwards (``hooks.uninstall()`` puts every patched attribute back);
* the same :class:`~tfdoctor.capture.child.clock.StepClock` drives the warm-up, timing and profile
  windows, writes ``steps.jsonl`` and stops the code with ``StopCapture`` after the planned steps;
* the TF profiler session is always stopped, whatever the code did;
* the run directory gets what a child run writes (``capture.json``, ``steps.jsonl``, ``facts.json``,
  ``harness.json``, ``logdir/``, and ``stdout.log``: what the code printed, still shown as it prints), so :func:`tfdoctor.session.build.finish_run` builds the report.

:class:`StateSnapshot` saves the values of the variables reachable from a namespace (Keras models,
optimizers, ``tf.Module`` and ``tf.Variable`` objects) and restores them, so profiling a training
cell does not leave the user's model trained by the profiler's steps. :func:`kernel_fix` applies one
fix as a *reversible* change (global TF switches, attributes of the user's objects, a name rebound
to a wrapped copy), undone when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from tfdoctor.capture.child.clock import StepClock, StopCapture, Windows
from tfdoctor.capture.runner import CappedLog, CaptureResult, check_tensorflow
from tfdoctor.errors import TfdoctorError
from tfdoctor.model import RunStatus
from tfdoctor.rundir import CAPTURE, FACTS, HARNESS, STDOUT, STEPS, RunDir, atomic_write_json

_active = False  # one in-process capture at a time (hooks and the profiler are process-global)


class CaptureBusy(TfdoctorError):
    """Another in-process capture is running in this interpreter (a nested ``%%tfdoctor``)."""


def busy() -> bool:
    """True while an in-process capture runs (hooks and the profiler are process-global)."""
    return _active


@dataclass
class InProcessResult:
    """What :func:`capture_in_process` saw: the capture result plus the code's own exception."""

    capture: CaptureResult
    exception: BaseException | None = None  # the code's error (re-raised by the caller if it wants)
    step_fn: Any = None  # the tf.function the hooks identified as the training step, if any
    models: list[Any] = field(default_factory=list)  # Keras models whose fit() ran


def _user_tb(exc: BaseException, skip: int) -> str:
    tb = exc.__traceback__
    for _ in range(skip):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


class InProcessCapture:
    """One in-process capture, opened and closed around code the caller runs itself.

    :meth:`start` installs the hooks and the clock; the caller runs its code (a cell, the body of a
    ``with tfdoctor.profile():`` block, a Keras ``fit``); :meth:`stop` with the exception that code
    raised (or None) uninstalls everything and writes the run files. ``stop`` never raises for the
    code's own failures: they are in the result. :func:`capture_in_process` is the callable form.
    """

    def __init__(
        self,
        run: RunDir,
        windows: Windows,
        *,
        label: str = "<cell>",
        profiler_options: dict[str, int] | None = None,
        soft_stop: bool = False,
        min_timing_s: float = 0.0,
    ):
        self.run = run
        #: the timing window grows past its planned steps until it has lasted this long (the fix loops'
        #: timing floor, :class:`~tfdoctor.capture.child.clock.StepClock`'s ``min_timing_ns``)
        self.min_timing_s = min_timing_s
        self.windows = windows
        self.label = label
        self.profiler_options = profiler_options
        #: Keras fit is ended with ``model.stop_training`` at the planned step (fit returns normally
        #: with the remaining steps skipped) instead of StopCapture raised through it
        self.soft_stop = soft_stop
        self.models: list[Any] = []
        self.clock: StepClock | None = None
        self.tracker: Any = None
        self.markers: Any = None
        self._import_hooks: Any = None
        self._t0 = 0.0

    def start(self) -> InProcessCapture:
        """Install the hooks. Raises TensorFlowMissing, CaptureBusy (nothing installed then)."""
        global _active
        if _active:
            raise CaptureBusy(
                "a tfdoctor capture is already running in this interpreter (nested %%tfdoctor?)"
            )
        check_tensorflow()
        from tfdoctor.capture.child import hooks
        from tfdoctor.capture.child.harness import ProfilerMarkers

        run, windows = self.run, self.windows
        run.path.mkdir(parents=True, exist_ok=True)
        for name in (STEPS, HARNESS, FACTS):
            run.file(name).unlink(missing_ok=True)
        atomic_write_json(
            run.file(CAPTURE),
            {
                "mode": "in-process",
                "script": self.label,
                "pid": os.getpid(),
                "run_dir": str(run.path),
                "logdir": str(run.logdir),
                "windows": {"warmup": windows.warmup, "timing": windows.timing, "profile": windows.profile},
            },
        )
        self.markers = ProfilerMarkers(run.logdir, self.profiler_options) if windows.profile else None
        self.clock = StepClock(
            windows, run.file(STEPS), self.markers, min_timing_ns=int(self.min_timing_s * 1e9)
        )
        tracker = hooks.Tracker(self.clock, {})
        if self.soft_stop:
            tracker.soft_stop_fit = True
        self.tracker = tracker
        self._import_hooks = hooks.PostImportHooks()
        models = self.models
        fit_begin = tracker.fit_begin

        def note_fit(model: Any, x: Any, batch_size: Any, validation_split: Any = 0.0) -> None:
            if all(m is not model for m in models):
                models.append(model)
            fit_begin(model, x, batch_size, validation_split)

        tracker.fit_begin = note_fit  # type: ignore[method-assign]
        self._t0 = time.monotonic()
        _active = True
        try:
            hooks.install(tracker, self._import_hooks)
        except BaseException:
            self._uninstall()
            raise
        return self

    def _uninstall(self) -> None:
        global _active
        from tfdoctor.capture.child import hooks

        assert self.clock is not None
        try:
            self.clock.close()
        except Exception as e:  # the profiler could not stop: said in harness.json, not hidden
            self.tracker.errors.append(f"stopping the profiler: {e}")
        hooks.uninstall()
        self._import_hooks.callbacks.clear()
        if self._import_hooks in sys.meta_path:
            sys.meta_path.remove(self._import_hooks)
        _active = False

    def stop(self, exc: BaseException | None, *, skip_frames: int = 0) -> InProcessResult:
        """Uninstall everything and write the run files; ``exc`` is what the code raised (or None).
        ``skip_frames``: frames of the traceback that are the caller's, not the code's."""
        from tfdoctor.capture.child.harness import collect_facts

        assert self.clock is not None
        clock, tracker, markers, windows, run = self.clock, self.tracker, self.markers, self.windows, self.run
        error: str | None = None
        if exc is None:
            outcome = "finished"
        elif isinstance(exc, StopCapture):
            outcome, exc = "complete", None
        elif isinstance(exc, KeyboardInterrupt):
            outcome = "interrupted"
        else:  # the code's own error, SystemExit included: a result, not ours
            outcome = "error"
            error = _user_tb(exc, skip=skip_frames)
        planned_done = clock.index >= clock.windows.total  # the timing window as it grew to its floor
        self._uninstall()
        if planned_done and outcome != "interrupted":
            outcome, error, exc = "complete", None, None  # a failure caused by our stop is not the user's
        wall = time.monotonic() - self._t0

        facts = None
        try:
            facts = collect_facts(tracker)
            atomic_write_json(run.file(FACTS), facts.model_dump(mode="json"))
        except Exception:
            tracker.errors.append(traceback.format_exc(limit=5))
        n = clock.index
        why = None if n else tracker.why_no_steps()
        atomic_write_json(
            run.file(HARNESS),
            {
                "status": outcome,
                "error": error,
                "steps": n,
                "why_no_steps": why,
                "hook_errors": tracker.errors,
                "profiler_error": markers.error if markers is not None else None,
                "own_profiler": tracker.own_profiler,
                "profile_started_ns": markers.started_ns if markers is not None else None,
                "profile_stopped_ns": markers.stopped_ns if markers is not None else None,
            },
        )
        from tfdoctor.capture.runner import actual_windows
        from tfdoctor.rundir import load_steps

        steps = load_steps(run)
        status: RunStatus
        message = None
        what = "the cell" if self.label.startswith("cell") else "the code"
        if outcome == "complete":
            status = "complete"
        elif outcome == "interrupted":
            status = "interrupted"
            message = f"interrupted after {n} step{'s' if n != 1 else ''}"
            error = message
        elif outcome == "error":
            status = "failed"
            message = f"{what} raised after {n} step{'s' if n != 1 else ''}: {exception_line(exc)}"
        elif n:
            status = "complete"
            if n < windows.total:
                message = windows.ended_early(what, n, bool(run.trace_files()))
        else:
            status = "no_steps"
            message = f"no training steps seen: {why or what + ' ended without training'}"
            error = message
        result = CaptureResult(
            status=status,
            returncode=None,
            windows=actual_windows(windows, steps),  # the timing window as long as it became
            steps=steps,
            facts=facts,
            trace_files=run.trace_files(),
            error=error,
            message=message,
            why_no_steps=why,
            wall_s=wall,
            harness=run.read_json(HARNESS, {}) or {},
        )
        return InProcessResult(capture=result, exception=exc, step_fn=tracker.step_fn, models=self.models)


def exception_line(exc: BaseException | None) -> str:
    """``Type: first line of the message`` (a multi-line message's first line, not its last)."""
    if exc is None:
        return ""
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class _Tee:
    """``sys.stdout`` while a capture runs: what is written still goes where it went (the cell's
    output), and into the run's ``stdout.log`` (capped like a child's), so a fix trial's output can be
    compared with its reference's. Everything else (``isatty``, ``encoding``...) is the stream's."""

    def __init__(self, stream: Any, log: CappedLog | None):
        self._stream, self._log, self._open = stream, log, True

    def write(self, text: str) -> int:
        if self._open and self._log is not None and isinstance(text, str):
            self._log.feed(text.encode("utf-8", "replace"))
        return self._stream.write(text)

    def isatty(self) -> bool:
        return bool(getattr(self._stream, "isatty", lambda: False)())

    def close_log(self) -> None:
        self._open = False
        if self._log is not None:
            self._log.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def capture_in_process(
    execute: Callable[[], Any],
    run: RunDir,
    windows: Windows,
    *,
    label: str = "<cell>",
    profiler_options: dict[str, int] | None = None,
    soft_stop: bool = False,
    min_timing_s: float = 0.0,
) -> InProcessResult:
    """Run ``execute()`` with the step hooks installed, for at most ``windows.total`` steps (more with
    ``min_timing_s``: the timing window grows, a step at a time, until it has lasted that long; code that
    ends within that growth ended after its plan).

    Never raises for the code's own failures: they are in the result (``exception``, ``capture.error``).
    Raises :class:`TensorFlowMissing` when TensorFlow cannot be imported, :class:`CaptureBusy` when
    called from inside another in-process capture.
    """
    cap = InProcessCapture(
        run,
        windows,
        label=label,
        profiler_options=profiler_options,
        soft_stop=soft_stop,
        min_timing_s=min_timing_s,
    )
    cap.start()  # creates the run directory
    try:
        log: CappedLog | None = CappedLog(run.file(STDOUT))
    except OSError:  # the output is then only shown, not kept: never a reason to leave hooks installed
        log = None
    tee = _Tee(sys.stdout, log)
    try:
        with contextlib.redirect_stdout(tee):  # type: ignore[type-var]
            execute()
    except BaseException as e:
        return cap.stop(e, skip_frames=1)
    finally:
        tee.close_log()
    return cap.stop(None)


# -- the user's variables ------------------------------------------------------------------------
def namespace_objects(ns: MutableMapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for name, value in list(ns.items()):
        if name.startswith("_") or name in ("In", "Out", "exit", "quit", "get_ipython"):
            continue
        yield name, value


def trackable_variables(ns: MutableMapping[str, Any]) -> list[Any]:
    """Variables reachable from a namespace: Keras layers/models (and their optimizer), Keras
    optimizers, ``tf.Module`` objects, Keras and TF variables. Without TF/Keras imported: none."""
    tf = sys.modules.get("tensorflow")
    keras = sys.modules.get("keras")
    found: dict[int, Any] = {}

    def add_all(vs: Any) -> None:
        try:
            for v in list(vs or []):
                found.setdefault(id(v), v)
        except Exception:
            pass

    for _, value in namespace_objects(ns):
        if isinstance(value, type):
            continue
        if keras is not None:
            if isinstance(value, keras.layers.Layer):
                add_all(getattr(value, "variables", None))
                opt = getattr(value, "optimizer", None)
                if isinstance(opt, keras.optimizers.Optimizer):
                    add_all(opt.variables)
                continue
            if isinstance(value, keras.optimizers.Optimizer):
                add_all(value.variables)
                continue
            if isinstance(value, keras.Variable):
                found.setdefault(id(value), value)
                continue
        if tf is not None:
            if isinstance(value, tf.Variable):
                found.setdefault(id(value), value)
            elif isinstance(value, tf.Module):
                add_all(value.variables)
    return list(found.values())


class StateSnapshot:
    """The values of the variables reachable from ``ns`` now; :meth:`restore` assigns them back."""

    def __init__(self, ns: MutableMapping[str, Any]):
        import numpy as np

        self.saved: list[tuple[Any, Any]] = []
        for v in trackable_variables(ns):
            try:
                self.saved.append((v, np.array(v.numpy(), copy=True)))
            except Exception:
                continue  # an uninitialised or unreadable variable: nothing to restore

    def __len__(self) -> int:
        return len(self.saved)

    def restore(self) -> int:
        """Assign the saved values back; returns how many variables were restored."""
        n = 0
        for v, value in self.saved:
            try:
                v.assign(value)
                n += 1
            except Exception:
                continue
        return n
