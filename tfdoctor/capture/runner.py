"""The parent side of a capture: start the harness in a child process, watch it, stop it, collect.

``run_capture(cfg, run)`` is the API the ``profile`` command, the fix loop, the benchmarks, the web
UI and the notebook call. It prints nothing: progress goes to the optional callback. Errors in the
*user's script* are results (``CaptureResult.status``), not exceptions; only problems with the request
itself (a script that is not a Python file, TensorFlow missing, impossible step counts) raise
:class:`~tfdoctor.errors.TfdoctorError` subclasses, before anything runs.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfdoctor.capture.child.clock import Windows
from tfdoctor.errors import NO_SPACE, TensorFlowMissing, UsageError
from tfdoctor.model import Facts, RunStatus, StepTiming
from tfdoctor.rundir import (
    CAPTURE,
    FACTS,
    HARNESS,
    STDERR,
    STDOUT,
    STEPS,
    RunDir,
    StepTail,
    atomic_write_json,
)

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class CaptureConfig:
    """What to run and how to measure it."""

    script: str | Path
    args: list[str] = field(default_factory=list)
    steps: int = 40  # planned total: warm-up + timing + profile (longer by an adaptive warm-up's extension)
    # None: adaptive, at least ~15 % of steps (min 3), longer while steps trace, their time has not
    # settled or a tfdoctor memo cache is cold (capture/clock.py: Warmup); N: exactly N steps
    warmup: int | None = None
    profile_steps: int | None = None  # default: min(10, a third of the rest)
    profile: bool = True  # False: no profiler at all (the fix loop's timing-only runs)
    timeout_s: float = 600.0
    env: dict[str, str] = field(default_factory=dict)  # overrides for the child's environment
    # run-time switches the fix loop sets: jit ("1"/"0"), dtype_policy ("mixed_bfloat16", ...)
    switches: dict[str, str] = field(default_factory=dict)
    cwd: str | Path | None = None  # default: the current directory, as `python script.py` would
    python: str = sys.executable
    stop_grace_s: float = 15.0  # after SIGINT, how long the child may take to write its trace
    profiler_options: dict[str, int] = field(default_factory=dict)  # host/python/device tracer levels

    def windows(self) -> Windows:
        """The planned windows (an adaptive warm-up may grow past ``warmup``)."""
        try:
            return Windows.split(self.steps, self.warmup, self.profile_steps, self.profile)
        except ValueError as e:
            raise UsageError(str(e)) from None

    def adaptive_warmup(self) -> bool:
        """No ``--warmup``, and not one worker of a multi-worker job: workers train in lockstep, so each
        must stop after the same steps (a warm-up decided per worker could leave one waiting forever
        in a collective for another that already stopped)."""
        if self.warmup is not None:
            return False
        from tfdoctor.capture.workers import from_tf_config

        try:
            return from_tf_config({**os.environ, **self.env}) is None
        except UsageError:  # a broken TF_CONFIG: the script fails on it anyway
            return True


@dataclass(frozen=True)
class CaptureProgress:
    """One progress report: ``phase`` is starting | running | stopping | done."""

    phase: str
    steps_done: int
    total: int
    window: str | None
    steps_per_s: float | None
    elapsed_s: float


@dataclass
class CaptureResult:
    status: RunStatus  # complete | failed | interrupted | timeout | no_steps
    returncode: int | None
    windows: Windows  # as they happened: the warm-up as long as it became, timing and profile as planned
    steps: list[StepTiming] = field(default_factory=list)
    facts: Facts | None = None
    trace_files: list[Path] = field(default_factory=list)
    error: str | None = None  # full text (the script's traceback, or why it was stopped)
    message: str | None = None  # one line for the user
    why_no_steps: str | None = None
    stderr_tail: str = ""
    stdout_tail: str = ""
    wall_s: float = 0.0
    harness: dict[str, Any] = field(default_factory=dict)
    tf_missing: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "complete"


def check_script(script: str | Path) -> Path:
    """The script must exist, be a ``.py`` file and parse; raises UsageError otherwise."""
    path = Path(script)
    if not path.exists():
        raise UsageError(f"{script}: no such file")
    if path.is_dir():
        raise UsageError(f"{script}: is a directory, not a Python script")
    if path.suffix != ".py":
        raise UsageError(f"{script}: not a Python script (expected a .py file)")
    try:
        source = path.read_bytes()
    except OSError as e:
        raise UsageError(f"{script}: cannot be read ({e.strerror})") from None
    try:
        ast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise UsageError(f"{script}:{e.lineno}: syntax error: {e.msg}") from None
    except ValueError as e:  # null bytes
        raise UsageError(f"{script}: not a Python script ({e})") from None
    return path.resolve()


def check_tensorflow() -> None:
    """TensorFlow must be importable in this environment (checked without importing it)."""
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError) as e:
        raise TensorFlowMissing(str(e)) from None
    if spec is None:
        raise TensorFlowMissing()


def _child_env(cfg: CaptureConfig) -> dict[str, str]:
    env = dict(os.environ)
    env.update(cfg.env)
    env["PYTHONUNBUFFERED"] = "1"
    try:
        importlib.metadata.version("tfdoctor")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree: make it importable
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
    return env


def actual_windows(
    planned: Windows, steps: list[StepTiming], harness: dict[str, Any] | None = None
) -> Windows:
    """``planned`` with the warm-up as long as it became: harness.json's, else the warm-up steps seen."""
    seen = sum(1 for s in steps if s.window == "warmup")
    said = ((harness or {}).get("warmup") or {}).get("steps")
    warmup = max(planned.warmup, seen, said if isinstance(said, int) else 0)
    return dataclasses.replace(planned, warmup=warmup)


def _rate(steps: list[StepTiming]) -> float | None:
    recent = [s for s in steps[-10:] if s.window != "warmup"] or steps[-5:]
    span = sum(s.duration_ns for s in recent)
    return len(recent) / (span / 1e9) if recent and span > 0 else None


def _tail(path: Path, lines: int = 25) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _last_line(text: str | None) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


@dataclass(frozen=True)
class FailureSummary:
    """A formatted traceback in two lines: the exception and where the user's code raised it."""

    exception: str  # "TypeError: first line of the message"
    where: str | None = None  # "train.py:42 in train_step"
    code: str | None = None  # the source line there


def failure_summary(text: str | None) -> FailureSummary:
    """The last exception of a formatted traceback: ``Type: first line`` (not the last line of a
    multi-line message) and its last frame in the user's code (not TF's, not tfdoctor's)."""
    from tfdoctor.capture.child.hooks import is_user_file

    lines = (text or "").rstrip().splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last):")]
    if not starts:
        return FailureSummary(_last_line(text)[:300])
    frame: tuple[str, str, str | None] | None = None
    i = starts[-1] + 1
    while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
        m = re.match(r'\s*File "(.+)", line (\d+), in (.+)', lines[i])
        if m and is_user_file(m[1]):
            code = lines[i + 1].strip() if i + 1 < len(lines) and lines[i + 1].startswith("    ") else None
            frame = (f"{os.path.basename(m[1])}:{m[2]}", m[3], code)
        i += 1
    exc = lines[i].strip() if i < len(lines) else _last_line(text)
    if frame is None:
        return FailureSummary(exc[:300])
    return FailureSummary(exc[:300], f"{frame[0]} in {frame[1]}", frame[2])


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _term_as_interrupt() -> tuple[bool, Any]:
    """While we wait on the child, SIGTERM stops it like ^C does (never orphan a running child)."""
    if threading.current_thread() is not threading.main_thread():
        return False, None
    try:
        return True, signal.signal(signal.SIGTERM, _raise_interrupt)
    except (ValueError, OSError):
        return False, None


def run_capture(
    cfg: CaptureConfig,
    run: RunDir,
    *,
    progress: Callable[[CaptureProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> CaptureResult:
    """Run ``cfg.script`` under the harness into ``run``; returns what happened (never raises for
    the script's own failures). ^C while waiting, SIGTERM, or ``cancel.set()`` from another thread
    (a web UI's stop button) stop the child like ^C: status "interrupted", partial results kept."""
    script = check_script(cfg.script)
    check_tensorflow()
    windows = cfg.windows()
    run.path.mkdir(parents=True, exist_ok=True)
    for name in (STEPS, HARNESS, FACTS):
        run.file(name).unlink(missing_ok=True)
    cwd = Path(cfg.cwd).resolve() if cfg.cwd is not None else Path.cwd()
    capture = {
        "script": str(script),
        "args": [str(a) for a in cfg.args],
        "cwd": str(cwd),
        "run_dir": str(run.path),
        "logdir": str(run.logdir),
        "windows": {"warmup": windows.warmup, "timing": windows.timing, "profile": windows.profile},
        "warmup_adaptive": cfg.adaptive_warmup(),
        "switches": dict(cfg.switches),
        "profiler_options": dict(cfg.profiler_options),
        "timeout_s": cfg.timeout_s,
        "env": dict(cfg.env),
    }
    atomic_write_json(run.file(CAPTURE), capture)
    tail = StepTail(run)

    def report(phase: str) -> None:
        if progress is None:
            return
        done = len(tail.steps)
        now = actual_windows(windows, tail.steps)  # the total grows with an adaptive warm-up
        window = now.of(min(done, now.total - 1))
        if done > windows.warmup and tail.steps[-1].window == "warmup":
            window = "warmup"  # an extended warm-up: most likely still going on
        progress(
            CaptureProgress(
                phase=phase,
                steps_done=done,
                total=now.total,
                window=window,
                steps_per_s=_rate(tail.steps),
                elapsed_s=time.monotonic() - t0,
            )
        )

    t0 = time.monotonic()
    stopped_for: str | None = None
    term_installed, previous_term = _term_as_interrupt()
    with open(run.file(STDOUT), "wb") as out, open(run.file(STDERR), "wb") as err:
        proc = subprocess.Popen(
            [cfg.python, "-m", "tfdoctor.capture.child.harness", str(run.file(CAPTURE))],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=str(cwd),
            env=_child_env(cfg),
            start_new_session=True,  # ^C reaches us; we decide how the child stops
        )
        report("starting")
        try:
            while proc.poll() is None:
                if tail.poll():
                    report("running")
                if time.monotonic() - t0 > cfg.timeout_s:
                    stopped_for = "timeout"
                    break
                if cancel is not None and cancel.is_set():
                    stopped_for = "interrupted"
                    break
                time.sleep(0.2)
        except KeyboardInterrupt:
            stopped_for = "interrupted"
        if stopped_for is not None and proc.poll() is None:
            report("stopping")
            _signal_group(proc, signal.SIGINT)
            try:
                deadline = time.monotonic() + cfg.stop_grace_s
                while proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
            except KeyboardInterrupt:  # a second ^C: no more waiting
                pass
            if proc.poll() is None:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        rc = proc.wait()
    if term_installed:
        signal.signal(signal.SIGTERM, previous_term if previous_term is not None else signal.SIG_DFL)
    tail.poll()
    wall = time.monotonic() - t0
    report("done")
    return _collect(run, windows, tail.steps, rc, stopped_for, cfg, wall)


def _collect(
    run: RunDir,
    windows: Windows,
    steps: list[StepTiming],
    rc: int,
    stopped_for: str | None,
    cfg: CaptureConfig,
    wall: float,
) -> CaptureResult:
    harness = run.read_json(HARNESS, {}) or {}
    planned, windows = windows, actual_windows(windows, steps, harness)
    longer = windows.warmup - planned.warmup
    grown = f"the warm-up grew by {longer} step{'s' if longer != 1 else ''} past the planned {planned.warmup}"
    facts_data = run.read_json(FACTS)
    facts = Facts.model_validate(facts_data) if facts_data else None
    trace_files = run.trace_files()
    stderr_tail = _tail(run.file(STDERR))
    h_status = harness.get("status")
    error: str | None = harness.get("error")
    message: str | None = None
    why = harness.get("why_no_steps")
    tf_missing = False
    status: RunStatus
    n = len(steps)
    if stopped_for == "timeout":
        status = "timeout"
        message = (
            f"the script did not finish its {planned.total} steps within --timeout {cfg.timeout_s:g} s "
            f"({n} step{'s' if n != 1 else ''} seen{'; ' + grown if longer else ''})"
        )
        error = message
    elif stopped_for == "interrupted":
        status = "interrupted"
        message = f"interrupted after {n} step{'s' if n != 1 else ''}"
        error = message
    elif h_status == "complete":
        status = "complete"
    elif h_status == "finished":
        if n:
            status = "complete"
            if n < windows.total:
                message = (
                    f"the script ended by itself after {n} of {windows.total} steps"
                    + (f" ({grown})" if longer else "")
                    + ("" if trace_files else f", before the profile window (no trace); try --steps {n}")
                )
        else:
            status = "no_steps"
            message = f"no training steps seen: {why or 'the script ended without training'}"
            error = message
    elif h_status == "tf_missing":
        status = "failed"
        tf_missing = True
        message = f"the script could not import TensorFlow: {_last_line(error)}"
    elif h_status == "error":
        status = "failed"
        fs = failure_summary(error)
        at = f" (at {fs.where})" if fs.where else ""
        message = f"the script failed after {n} step{'s' if n != 1 else ''}: {fs.exception}{at}"
    elif h_status == "interrupted":
        status = "interrupted"
        message = f"the script was interrupted (KeyboardInterrupt) after {n} steps"
        error = error or message
    else:  # no harness.json: the child died (signal, OOM killer, crash in native code)
        status = "failed"
        how = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
        try:
            if rc < 0:
                how = f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            pass
        message = f"the script's process died ({how}) after {n} steps"
        if NO_SPACE in stderr_tail:  # the harness could not write its files: the disk filled up
            message = f"the disk filled up while the run was being written ({NO_SPACE}) after {n} steps"
        error = message + ("\n" + stderr_tail if stderr_tail else "")
    if harness.get("profiler_error") and status == "complete" and not message:
        message = f"no trace: {harness['profiler_error']} (the timing window was measured)"
    if status in ("complete", "failed") and n == 0 and not tf_missing and h_status != "error":
        status = "no_steps"
        message = f"no training steps seen: {why or 'no hook fired'}"
        error = message
    return CaptureResult(
        status=status,
        returncode=rc,
        windows=windows,
        steps=steps,
        facts=facts,
        trace_files=trace_files,
        error=error,
        message=message,
        why_no_steps=why if n == 0 else None,
        stderr_tail=stderr_tail,
        stdout_tail=_tail(run.file(STDOUT)),
        wall_s=wall,
        harness=harness,
        tf_missing=tf_missing,
    )


def load_capture_config(run: RunDir) -> dict[str, Any]:
    """The capture.json written for a run (what was run, with which windows and switches)."""
    return json.loads(run.file(CAPTURE).read_text(encoding="utf-8"))
