"""The script's own work between two ``fit()`` calls of a fit-per-epoch loop (or between two bursts of
a custom loop's steps).

keras-io's "Character-level text generation with LSTM" (copied into countless repositories) trains with
``model.fit(x, y, epochs=1)`` once per iteration of a Python loop and then generates 4 × 400 characters,
one ``model.predict`` of one row per character: ~1,600 calls of ~100 ms, minutes per epoch against
seconds of training. A bounded run ends inside the first ``fit()`` and never sees that work.

When the planned steps end inside a ``fit()`` called from inside a ``for`` / ``while`` loop of the
script, the profile run (only it: a fix trial's steps are what it measures) ends that ``fit()`` with
``model.stop_training`` instead and times what the script does next, until the next ``fit()`` begins
(whose first batch it times too: a loop that builds and compiles a new model for each ``fit()``, as
federated-averaging scripts do per client, has its train function traced anew in every call), the
watch's time limit, the script's end, or the script opening a file for writing (a checkpoint or a
model saved after the shortened training must not replace the user's: the run stops before the open).
:class:`GapWatch` keeps the figures; the harness writes them as ``Facts.between_fits``.

A custom loop's tf.function steps may come in bursts too: keras-io's PPO collects 4,000 environment
steps (an eager ``critic(observation)`` call each) and then runs 80 policy and 80 value updates. The
planned steps end inside a burst; the profile run then goes on unprofiled, counting the burst's steps,
until a step begins after a pause of 0.5 s or more (and 20 steps' time): the gap, with the Keras host
calls made in it (``GapWatch(loop="steps")``, :meth:`GapWatch.next_step`).
"""

from __future__ import annotations

import ast
import ctypes
import functools
import os
import sys
import tempfile
import threading
import time
import types
from typing import Any

from tfdoctor.capture.child import sites
from tfdoctor.capture.child.clock import StopCapture
from tfdoctor.capture.child.guard import scratch_place, writes


@functools.lru_cache(maxsize=32)
def _loop_lines(filename: str) -> tuple[tuple[int, int], ...]:
    """The (first, last) lines of each ``for`` / ``while`` body in ``filename`` (none when unreadable)."""
    try:
        with open(filename, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return ()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and node.body:
            out.append((node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno))
    return tuple(out)


def in_loop(frame: types.FrameType | None) -> bool:
    """Is ``frame``'s current line inside a ``for`` / ``while`` body of its own file?"""
    if frame is None:
        return False
    line = frame.f_lineno
    return any(a <= line <= b for a, b in _loop_lines(frame.f_code.co_filename))


def _in_script(thread: int, script: str | None) -> bool:
    """Is ``thread`` running the script (its module's frame on the stack)? The harness itself runs under
    runpy too (``python -m``), so the script's own file is what tells."""
    if not script:
        return False
    frame = sys._current_frames().get(thread)
    while frame is not None:
        if os.path.realpath(frame.f_code.co_filename) == script:
            return True
        frame = frame.f_back
    return False


#: the files autograph writes its converted functions to, in the temporary folder (a step function traced
#: for the first time between two bursts of steps: keras-io's PPO's value update)
_AUTOGRAPH_PREFIX = "__autograph_generated_file"


def _anonymous(real: str, flags: object) -> bool:
    """A write no user file can be: an unnamed temporary file (a folder opened for writing: Python's
    tempfile opens the temporary folder itself with ``O_TMPFILE``, autograph's ``NamedTemporaryFile``
    included, and the audit event names the folder) or autograph's converted source in the temporary
    folder."""
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if (isinstance(flags, int) and tmpfile and flags & tmpfile == tmpfile) or os.path.isdir(real):
        return True
    name = os.path.basename(real)
    return name.startswith(_AUTOGRAPH_PREFIX) and os.path.dirname(real) == os.path.realpath(
        tempfile.gettempdir()
    )


class GapWatch:
    """Times the script's work from the end of a ``fit()`` to the next one (see the module's doc)."""

    def __init__(
        self,
        limit_s: float,
        fit_site: str,
        fit_steps: int | None,
        allow: list[str],
        marker: str | None = None,
        script: str | None = None,
        loop: str = "fit",
    ) -> None:
        self.loop = loop  # "fit": between fit() calls; "steps": between bursts of a custom loop's steps
        self.script = os.path.realpath(script) if script else None  # the time limit stops only its code
        self.marker = marker  # a file made when the gap begins (the parent's progress display reads it)
        self.limit_s = limit_s
        self.fit_site = fit_site
        self.fit_steps = fit_steps
        self.t0 = time.perf_counter()
        self.begun = False  # the fit() returned: the gap's time runs (until then its epoch's end runs)
        self.active = True
        self.ended_by: str | None = None
        self.write_path: str | None = None
        self.seconds = 0.0
        #: the next fit(): its model against the ended fit()'s ("same", "new", "recompiled": the same
        #: model compiled again), and the time from its call to its first batch's end (setup, tracing)
        self.model: Any = None  # a weak reference to the ended fit()'s model (set by the tracker)
        self.next_fit_model: str | None = None
        self.next_fit_first_batch_s: float | None = None
        self._next_t0: float | None = None
        #: predict() calls in the gap: site -> {"code", "calls", "seconds", "rows"}
        self.predicts: dict[str, dict[str, Any]] = {}
        #: Keras host calls in the gap of a custom loop: (api, site) -> {"code", "calls", "seconds"}
        self.host: dict[tuple[str, str], dict[str, Any]] = {}
        home = os.path.realpath(os.path.expanduser("~"))
        self.home = home if home not in ("", "/") else ""
        # not the temporary folder: a script's own folder may lie there (anything it writes there stops the
        # watch, a conservative end)
        self.allow = [os.path.realpath(p) for p in (*allow, "/dev", "/proc", "/sys") if p]
        self._cancel = threading.Event()
        self._lock = threading.Lock()

    # -- starting and ending ---------------------------------------------------------------------------
    def start(self) -> None:
        """Arm the time limit, counted from the fit()'s early end (its epoch's end, then the gap): a timer
        thread raises StopCapture in the script's thread when it is up, between two of its bytecodes as
        ^C would (a signal such as SIGALRM also interrupts TensorFlow's threads in their system calls,
        which aborted the process here), and only while the script runs."""
        main = threading.get_ident()

        def expire() -> None:
            if self._cancel.wait(self.limit_s):
                return
            with self._lock:  # once end() has returned, nothing is raised in the script's thread
                if not self.active or not _in_script(main, self.script):
                    return  # the script ended (the harness ends the watch): not raised in the harness's code
                self._end("limit")
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(main), ctypes.py_object(StopCapture)
                )

        threading.Thread(target=expire, name="tfdoctor-between-fits", daemon=True).start()

    @property
    def running(self) -> bool:
        """The gap is being timed: the fit() ended early has returned, the next has not been called and
        nothing has ended the watch."""
        return self.active and self.begun and self._next_t0 is None

    def begin(self) -> None:
        """The fit() ended early returned to the script: the gap begins."""
        self.t0 = time.perf_counter()
        self.begun = True
        if self.marker:
            try:
                with open(self.marker, "w", encoding="utf-8") as f:
                    f.write(f"{self.limit_s:g}\n")
            except OSError:
                pass

    def next_fit(self, model: Any) -> None:
        """The loop's next fit() is called on ``model``: the gap is over; the watch goes on until that
        fit()'s first batch ends (``first_batch``), so that what every call costs before training (a
        train function traced for a model built in the loop) is timed."""
        now = time.perf_counter()
        self.seconds = now - self.t0
        self._next_t0 = now
        ended = self.model() if self.model is not None else None
        if ended is not None and ended is not model:
            self.next_fit_model = "new"
        else:
            # Keras sets train_function at a fit()'s first batch and back to None in compile()
            fresh = getattr(model, "train_function", None) is None
            self.next_fit_model = (
                "recompiled" if ended is model and fresh else "same" if ended is model else None
            )

    @property
    def in_next_fit(self) -> bool:
        return self.active and self._next_t0 is not None

    def first_batch(self) -> None:
        """The next fit()'s first batch ended: the watch and the run end."""
        if self._next_t0 is not None:
            self.next_fit_first_batch_s = time.perf_counter() - self._next_t0
        self.stop("next_fit")

    def next_step(self, seconds: float, burst: int) -> None:
        """A custom loop's next burst of steps began after ``seconds`` of the script's own work, the burst
        before it ``burst`` steps long: the watch and the run end."""
        with self._lock:
            if not self.active:
                return
            self.fit_steps = burst
            self.seconds = seconds
            self.active = False
            self.ended_by = "next_step"
            self._cancel.set()
        raise StopCapture("between bursts of steps: next_step")

    def end(self, why: str) -> None:
        with self._lock:
            self._end(why)

    def _end(self, why: str) -> None:
        if not self.active:
            return
        self.active = False
        if self._next_t0 is not None:  # inside the next fit(): the gap itself ended with its call
            self.ended_by = "next_fit"
        else:
            self.ended_by = why
            self.seconds = time.perf_counter() - self.t0 if self.begun else 0.0
        self._cancel.set()

    def stop(self, why: str) -> None:
        """End the watch and the run (the harness catches StopCapture: the run is complete)."""
        self.end(why)
        raise StopCapture(f"between fit() calls: {why}")

    # -- what the script does in the gap ------------------------------------------------------------
    def predicted(self, frame: types.FrameType | None, rows: int | None, seconds: float) -> None:
        """A ``predict()`` of ``rows`` rows that took ``seconds``, called from the script's ``frame``."""
        if not self.running or frame is None:
            return
        site = sites.site(frame.f_code.co_filename, frame.f_lineno)
        rec = self.predicts.get(site)
        if rec is None:
            code = sites.code(frame.f_code.co_filename, frame.f_lineno)
            rec = self.predicts[site] = {"code": code, "calls": 0, "seconds": 0.0, "rows": None}
        rec["calls"] += 1
        rec["seconds"] += seconds
        if rows is not None:
            rec["rows"] = max(rows, rec["rows"] or 0)
        if time.perf_counter() - self.t0 >= self.limit_s:
            self.stop("limit")

    def host_call(self, api: str, frame: types.FrameType | None, seconds: float) -> None:
        """A Keras host call (a model called eagerly, get_weights / set_weights) between two bursts of a
        custom loop's steps, from the script's ``frame``."""
        if not self.running or frame is None:
            return
        site = sites.site(frame.f_code.co_filename, frame.f_lineno)
        rec = self.host.get((api, site))
        if rec is None:
            code = sites.code(frame.f_code.co_filename, frame.f_lineno)
            rec = self.host[(api, site)] = {"code": code, "calls": 0, "seconds": 0.0}
        rec["calls"] += 1
        rec["seconds"] += seconds

    def opened(self, path: object, mode: object, flags: object) -> None:
        """An ``open`` audit event: a write outside the scratch places ends the run before it happens."""
        if not self.active or isinstance(path, int):
            return
        if not writes(mode, flags):
            return
        try:
            real = os.path.realpath(os.path.abspath(os.fsdecode(path)))  # type: ignore[arg-type]
        except TypeError:
            return
        if scratch_place(real, self.allow, self.home) or _anonymous(real, flags):
            return
        self.write_path = real
        self.stop("write")

    def facts(self) -> dict[str, Any]:
        """``Facts.between_fits``'s fields."""
        calls = [{"site": site, **rec} for site, rec in self.predicts.items()]
        calls.sort(key=lambda c: -c["seconds"])
        host = [{"api": api, "site": site, **rec} for (api, site), rec in self.host.items()]
        host.sort(key=lambda c: -c["seconds"])
        for c in host:
            c["seconds"] = round(c["seconds"], 4)
        return {
            "loop": self.loop,
            "model_calls": host,
            "seconds": round(self.seconds, 3),
            "ended_by": self.ended_by or "script_end",
            "limit_s": self.limit_s,
            "write_path": self.write_path,
            "fit_site": self.fit_site,
            "fit_steps": self.fit_steps,
            "predict_calls": calls,
            "next_fit_model": self.next_fit_model,
            "next_fit_first_batch_s": (
                round(self.next_fit_first_batch_s, 4) if self.next_fit_first_batch_s is not None else None
            ),
        }


def install_audit(get_watch: Any) -> None:
    """One audit hook for the process (they cannot be removed): asks the active watch, if any."""

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event == "open" and len(args) >= 3:
            watch = get_watch()
            if watch is not None and watch.active:
                watch.opened(args[0], args[1], args[2])

    sys.addaudithook(hook)


__all__ = ["GapWatch", "in_loop", "install_audit"]
