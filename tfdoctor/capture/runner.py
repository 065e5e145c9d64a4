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
import os
import re
import resource
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfdoctor.capture.child import procs
from tfdoctor.capture.child.clock import Windows
from tfdoctor.capture.workers import WorkerIdentity, from_tf_config
from tfdoctor.errors import NO_SPACE, TensorFlowMissing, UsageError
from tfdoctor.model import Facts, RunStatus, StepTiming
from tfdoctor.rundir import (
    BETWEEN_FITS,
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

#: how long ``tfdoctor profile`` watches the script's work between two fit() calls of a loop
BETWEEN_FITS_S = 30.0


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
    # a fix trial's write guard (capture/child/guard.py): {"root": the copy's folder, "since_ns": the
    # fix loop's start}; None: the script writes where it likes (a profile of the user's own script)
    guard: dict[str, str] | None = None
    # the timing window goes on past its planned steps until it has lasted this long (at most 20 times
    # its steps: capture/child/clock.py, StepClock); 0: exactly the planned steps
    min_timing_s: float = 0.0
    # ``--fit N``: time phase N of the script's fit() training (a fit() of another model, of a model
    # compiled again, or from another line begins one); the earlier phases run as they are, uncounted
    fit: int | None = None
    # ``-m MODULE``: the script is run as ``python -m MODULE`` would run it, from ``cwd`` (its package's
    # relative imports work); ``script`` is then the module's file (:func:`resolve_module`)
    module: str | None = None
    # the profile run's watch of the work between fit() calls when the planned steps end inside a fit()
    # of a fit-per-epoch loop (capture/child/gap.py): at most this long (0: off, as in the fix trials)
    between_fits_s: float = 0.0
    # the pause before a step that makes it the first of a burst (None: the clock's BURST_PAUSE_NS); a fix
    # trial judged on the whole loop sets it from the baseline's gap (its fix may shorten the gap)
    burst_pause_s: float | None = None

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
        try:
            return self.worker() is None
        except UsageError:  # a broken TF_CONFIG: the script fails on it anyway
            return True

    def worker(self) -> WorkerIdentity | None:
        """This run's task when ``TF_CONFIG`` (the environment's, or the one the run sets) names a
        cluster of two or more training tasks; None for an ordinary one-process run."""
        return from_tf_config({**os.environ, **self.env})


@dataclass(frozen=True)
class CaptureProgress:
    """One progress report: ``phase`` is starting | running | between_fits | stopping | done
    (between_fits: the steps are done and the profile run times the script's work between fit() calls)."""

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
    # the share of the machine's CPUs (0-1) other processes kept busy while the run ran (outside_load);
    # None where it cannot be read (no /proc/stat)
    outside_load: float | None = None
    #: processes the script left running that were stopped when the run ended ("name (pid N)")
    stopped_leftovers: list[str] = field(default_factory=list)

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
    if path.suffix == ".ipynb":
        raise UsageError(
            f"{script}: a notebook, not a Python script",
            hint="profile it inside Jupyter with %load_ext tfdoctor and %%tfdoctor on the training cell "
            "(docs/notebook.md), or export it first: jupyter nbconvert --to script " + path.name,
        )
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


_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def resolve_module(name: str, root: str | Path) -> Path:
    """The file ``python -m name`` runs when started in ``root``: ``root/a/b.py`` for ``a.b``, or a
    package's ``__main__.py``; each folder above it a package (``__init__.py``) or a namespace
    package, as Python finds them from ``sys.path[0]`` = the working directory. Found without
    importing anything; UsageError when there is none (a module installed elsewhere is not the user's
    project: tfdoctor's fixes edit a copy of the folder that holds it)."""
    if not _MODULE_NAME.fullmatch(name or ""):
        raise UsageError(f"-m {name!r}: not a module name (expected dotted names, as for python -m)")
    root = Path(root).resolve()
    parts = name.split(".")
    folder = root.joinpath(*parts[:-1])
    for candidate in (folder / f"{parts[-1]}.py", folder / parts[-1] / "__main__.py"):
        if candidate.is_file():
            path = check_script(candidate)
            if root not in path.parents:  # a link out of the folder: a fix trial's copy would not hold it
                raise UsageError(f"-m {name}: {candidate} leads out of {root} (to {path})")
            return path
    if folder.joinpath(parts[-1]).is_dir():
        raise UsageError(f"-m {name}: {folder / parts[-1]} is a package without __main__.py")
    raise UsageError(
        f"-m {name}: no {'/'.join(parts)}.py under {root}",
        hint="python -m finds a module from the working directory: run tfdoctor from the folder that "
        "holds the package (or give it with --cwd)",
    )


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


#: stdout.log / stderr.log keep at most the first LOG_HEAD and the last LOG_TAIL bytes of the output
LOG_HEAD = 2 * 1024 * 1024
LOG_TAIL = 2 * 1024 * 1024
#: how often the kept tail is rewritten into the log while the script prints past the head
LOG_TAIL_FLUSH_S = 2.0


class CappedLog:
    """A log file that keeps the head and the tail of a stream: the first ``head`` bytes as they
    come, then a line saying how much was cut, then the last ``tail`` bytes (rewritten every
    ``LOG_TAIL_FLUSH_S`` and at close, so the file is readable while the run goes on). A script
    printing 100 MB stores about ``head + tail``. Write errors (a full disk) stop the writing, never
    the draining: the child never blocks on a pipe nobody reads."""

    def __init__(self, path: Path, head: int = LOG_HEAD, tail: int = LOG_TAIL):
        self.f = open(path, "wb")  # noqa: SIM115 (closed by close(), after the pump thread ends)
        self.head, self.tail = head, tail
        self.written = 0  # bytes of the head written
        self.total = 0  # bytes received
        self.ring = bytearray()
        self.dirty = False
        self.last_flush = time.monotonic()
        self.error: OSError | None = None

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.written < self.head:
            part = data[: self.head - self.written]
            data = data[len(part) :]
            self._write(part)
            self.written += len(part)
        if data:
            self.ring += data
            if len(self.ring) > self.tail:
                del self.ring[: len(self.ring) - self.tail]
            self.dirty = True
            if time.monotonic() - self.last_flush >= LOG_TAIL_FLUSH_S:
                self.flush_tail()

    def _write(self, data: bytes) -> None:
        if self.error is None and data:
            try:
                self.f.write(data)
                self.f.flush()
            except OSError as e:
                self.error = e

    def flush_tail(self) -> None:
        self.last_flush = time.monotonic()
        if not self.dirty or self.error is not None:
            return
        cut = self.total - self.written - len(self.ring)
        try:
            self.f.seek(self.written)
            if cut > 0:
                self.f.write(
                    f"\n[tfdoctor: {cut} bytes of output cut here; the first {self.written} and the last "
                    f"{len(self.ring)} bytes are kept]\n".encode()
                )
            self.f.write(self.ring)
            self.f.truncate()
            self.f.flush()
            self.dirty = False
        except OSError as e:
            self.error = e

    def close(self) -> None:
        self.flush_tail()
        try:
            self.f.close()
        except OSError:
            pass


class _Pump:
    """Drains a child's pipe into a :class:`CappedLog` on a thread until end of file or ``stop()``."""

    def __init__(self, fd: int, log: CappedLog):
        self.fd, self.log = fd, log
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tfdoctor-log-pump", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.fd], [], [], 0.5)
                if not ready:
                    if self.stopping.is_set():
                        return
                    continue
                data = os.read(self.fd, 1 << 16)
                if not data:
                    return
                self.log.feed(data)
        except (OSError, ValueError):
            return

    def stop(self, wait_s: float) -> None:
        """Wait up to ``wait_s`` for end of file (a process we could not stop may hold the pipe)."""
        self.thread.join(wait_s)
        self.stopping.set()
        self.thread.join(5)
        self.log.close()
        try:
            os.close(self.fd)
        except OSError:
            pass


def actual_windows(
    planned: Windows, steps: list[StepTiming], harness: dict[str, Any] | None = None
) -> Windows:
    """``planned`` with the warm-up as long as it became (harness.json's, else the warm-up steps seen)
    and the timing window as long as the timing steps seen (grown to its floor on time:
    ``CaptureConfig.min_timing_s``; a script that ended within that growth ended after its plan)."""
    seen = sum(1 for s in steps if s.window == "warmup")
    said = ((harness or {}).get("warmup") or {}).get("steps")
    warmup = max(planned.warmup, seen, said if isinstance(said, int) else 0)
    timing = max(planned.timing, sum(1 for s in steps if s.window == "timing"))
    return dataclasses.replace(planned, warmup=warmup, timing=timing)


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


#: the files autograph writes a converted tf.function to: never where the user's code is
_AUTOGRAPH = "__autograph_generated_file"


def _users(path: str) -> bool:
    """A frame in the user's code: not TensorFlow's, not tfdoctor's, not autograph's generated file."""
    from tfdoctor.capture.child.hooks import is_user_file

    return is_user_file(path) and not os.path.basename(path).startswith(_AUTOGRAPH)


def _frame(m: re.Match[str], lines: list[str], i: int, indent: str = "") -> tuple[str, str, str | None]:
    """A traceback's ``File "...", line N, in fn`` (matched at ``lines[i]``) as (``file.py:N``, fn, the
    source line after it, when one follows with ``indent``)."""
    after = lines[i + 1] if i + 1 < len(lines) else None
    code = after.strip() if after is not None and after.startswith(indent) else None
    return f"{os.path.basename(m[1])}:{m[2]}", m[3], code


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
        if m and _users(m[1]):
            frame = _frame(m, lines, i, indent="    ")
        i += 1
    exc = lines[i].strip() if i < len(lines) else _last_line(text)
    if exc.endswith("in user code:"):  # an error raised while a tf.function was traced: its user frames
        for j in range(i + 1, len(lines)):  # and its own exception follow, indented, in the message
            m = re.match(r'\s+File "(.+)", line (\d+), in (\S+)', lines[j])
            if m and is_user_file(m[1]):
                frame = _frame(m, lines, j)
            elif re.match(r"\s+[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b:", lines[j]):
                exc = lines[j].strip()
    if exc.endswith("Graph execution error:"):  # TensorFlow's: the cause and the op's place follow
        cause, made = _graph_error_cause(lines[i + 1 :])
        exc = f"{exc} {cause}" if cause else exc
        frame = made or frame
    if frame is None:
        return FailureSummary(exc[:300])
    return FailureSummary(exc[:300], f"{frame[0]} in {frame[1]}", frame[2])


#: lines of a graph execution error's message that are not its cause
_NOT_CAUSE = (
    "Detected at node",
    "<stack traces unavailable>",
    "[[",
    "The op is created at",
    "During handling",
)


def _graph_error_cause(lines: list[str]) -> tuple[str | None, tuple[str, str, str | None] | None]:
    """What follows TensorFlow's ``...Error: Graph execution error:``: the node stacks ("Detected at
    node X defined at", or "<stack traces unavailable>"), the cause itself (keras-io's OCR under XLA:
    "Detected unsupported operations when trying to compile graph ... on XLA_CPU_JIT: CTCLoss (No
    registered 'CTCLoss' OpKernel ..."), then where the op was made ("The op is created at:", frames
    without their source lines). The cause, its ``{{node ...}}`` references left out, and the last
    frame in the user's code among those stacks (the line making the op, not the ``fit`` call)."""
    cause = None
    frame = None
    code_at = -1  # the source line under an indented frame
    for j, ln in enumerate(lines):
        s = ln.strip()
        m = re.match(r'File "(.+)", line (\d+), in (.+)', s)
        if m:
            pad = ln[: len(ln) - len(ln.lstrip())]
            if pad and j + 1 < len(lines) and lines[j + 1].startswith(pad + "  "):
                code_at = j + 1
            if _users(m[1]):
                frame = _frame(m, lines, j, indent=pad + "  " if pad else "    ")
            continue
        if j == code_at:
            continue
        if cause is None and s and not ln.startswith("\t") and not s.startswith(_NOT_CAUSE):
            cause = re.sub(r"\s*\{\{node [^}]*\}\}", "", s).strip()
    return cause, frame


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
    for name in (STEPS, HARNESS, FACTS, BETWEEN_FITS):
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
        "guard": dict(cfg.guard) if cfg.guard else None,
        "min_timing_s": cfg.min_timing_s,
        "fit": cfg.fit,
        "module": cfg.module,
        "between_fits_s": cfg.between_fits_s,
        "burst_pause_s": cfg.burst_pause_s,
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
    load_before = _cpu_usage()
    stopped_for: str | None = None
    term_installed, previous_term = _term_as_interrupt()
    token = secrets.token_hex(8)
    env = _child_env(cfg)
    env[procs.TOKEN_ENV] = token  # marks every process of this run (see stop_leftovers)
    watch_r, watch_w = os.pipe()  # the harness stops the run when this pipe's write end closes
    env[procs.WATCHDOG_ENV] = str(watch_r)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pumps = [_Pump(out_r, CappedLog(run.file(STDOUT))), _Pump(err_r, CappedLog(run.file(STDERR)))]
    seen: dict[int, procs.Proc] = {}
    try:
        proc = subprocess.Popen(
            [cfg.python, "-m", "tfdoctor.capture.child.harness", str(run.file(CAPTURE))],
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            cwd=str(cwd),
            env=env,
            pass_fds=(watch_r,),
            start_new_session=True,  # ^C reaches us; we decide how the child stops
        )
    except BaseException:
        os.close(watch_w)
        for pump in pumps:
            pump.stopping.set()
            pump.stop(0)
        raise
    finally:
        for fd in (watch_r, out_w, err_w):
            os.close(fd)
    try:
        report("starting")
        last_scan = 0.0
        watching = False
        try:
            while proc.poll() is None:
                if tail.poll():
                    report("running")
                if cfg.between_fits_s and not watching and run.file(BETWEEN_FITS).exists():
                    watching = True
                    report("between_fits")
                if time.monotonic() - last_scan > SCAN_EVERY_S:  # setsid'd descendants, while we can
                    last_scan = time.monotonic()
                    seen.update(procs.descendants(proc.pid, procs.table()))
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
            seen.update(procs.descendants(proc.pid, procs.table()))
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
        load_after = _cpu_usage()
    finally:
        seen.update(_left_by_harness(run))
        leftovers = stop_leftovers(proc, token, seen.values())
        os.close(watch_w)
        for pump in pumps:
            pump.stop(LOG_DRAIN_S)
    if term_installed:
        signal.signal(signal.SIGTERM, previous_term if previous_term is not None else signal.SIG_DFL)
    tail.poll()
    wall = time.monotonic() - t0
    report("done")
    result = _collect(run, windows, tail.steps, rc, stopped_for, cfg, wall)
    result.outside_load = outside_load(load_before, load_after)
    if leftovers:
        note = (
            f"stopped {len(leftovers)} process{'es' if len(leftovers) != 1 else ''} the script left running "
            f"when the run ended: {procs.describe(leftovers)}"
        )
        result.stopped_leftovers = [procs.describe([p]) for p in leftovers]
        result.message = f"{result.message}; {note}" if result.message else note
        result.error = f"{result.error}\n{note}" if result.error else result.error
    return result


@dataclass(frozen=True)
class CpuUsage:
    """CPU seconds at one moment: the whole machine's busy time since boot and this process's own and
    its waited-for children's (the run's harness, once waited for)."""

    wall: float
    machine_busy: float
    own: float


def _cpu_usage() -> CpuUsage | None:
    """Now's :class:`CpuUsage`; None where the machine's time cannot be read (no ``/proc/stat``)."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
        tick = float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None
    if len(fields) < 9 or fields[0] != b"cpu":
        return None
    v = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    # busy: user, nice, system, irq, softirq, and steal (a hypervisor running other guests on our CPUs)
    busy = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tick
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return CpuUsage(time.monotonic(), busy, own)


def outside_load(before: CpuUsage | None, after: CpuUsage | None) -> float | None:
    """The share of the machine's CPUs (0-1) that processes other than this one and the run it waited
    for kept busy between ``before`` and ``after``: a measurement taken meanwhile describes a loaded
    machine (a unit suite running beside a ``--fix`` run kept a prefetch at 1.62x that measured 1.02x
    quiet). A leftover process of the script that was stopped, not waited for, counts as outside."""
    if before is None or after is None or after.wall <= before.wall:
        return None
    cpus = os.cpu_count() or 1
    other = (after.machine_busy - before.machine_busy) - (after.own - before.own)
    return round(min(1.0, max(0.0, other / ((after.wall - before.wall) * cpus))), 4)


#: how often the child's process tree is scanned for descendants (setsid'd ones leave its group)
SCAN_EVERY_S = 2.0  # a scan of /proc costs ~8 ms here: 0.4 % of a core in the parent
#: after the child exited and its leftovers were stopped, how long its output may take to drain
LOG_DRAIN_S = 10.0


def _left_by_harness(run: RunDir) -> dict[int, procs.Proc]:
    """The descendants the harness saw alive as it left (harness.json); matched by pid and start
    time when stopped, so a pid reused since is never signalled."""
    try:
        record = run.harness()
    except Exception:  # a half-written or hostile harness.json: the scans still stand
        return {}
    if record is None:
        return {}
    return {
        pid: procs.Proc(pid=pid, ppid=0, pgid=0, start=start, name=name)
        for pid, start, name in record.processes
        if isinstance(pid, int) and pid > 1
    }


def stop_leftovers(proc: subprocess.Popen[bytes], token: str, seen: Any = ()) -> list[procs.Proc]:
    """SIGKILL what the run started and left running: the child's process group (its session: the
    script's subprocess / fork / multiprocessing children), every process carrying the run's token,
    and the descendants seen while it ran (setsid'd ones). Returns what was stopped."""
    found = procs.run_processes(proc.pid, token, seen, root=proc.pid if proc.poll() is None else None)
    found = [p for p in found if p.pid != proc.pid]
    killed = procs.kill(found)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # anything of the group the scan could not see
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(procs._stat(p.pid) is not None for p in killed):
        time.sleep(0.05)
    return killed


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
                message = windows.ended_early("the script", n, bool(trace_files), grown if longer else "")
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
