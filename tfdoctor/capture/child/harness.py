"""The child process: ``python -m tfdoctor.capture.child.harness <run_dir>/capture.json``.

Installs the step hooks (as post-import hooks, so TensorFlow is imported by the script, not by us),
runs the user's script with ``runpy.run_path(script, run_name="__main__")`` (``sys.argv`` swapped,
``sys.path[0]`` = the script's folder, the configured working directory), drives the windows
(warm-up → timing → profile) and stops the script cleanly once the planned steps are done.

The warm-up is adaptive when ``capture.json`` says ``warmup_adaptive`` (no ``--warmup`` given): a
:class:`~tfdoctor.capture.child.clock.Warmup` fed with the hooks' tracing events and a
:class:`~tfdoctor.capture.child.clock.MemoScanner` over the script's globals (``sys.modules["__main__"]``
while ``runpy`` runs it), never extended past half of the run's ``timeout_s``.

Writes into the run directory: ``steps.jsonl`` (as it goes), ``facts.json``, ``harness.json``
(status: complete | finished | error | tf_missing | interrupted, the error's traceback, what the
hooks saw) and the TensorBoard logdir. Prints nothing of its own: stdout/stderr are the script's.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import runpy
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from tfdoctor.capture.child import gap, guard, procs
from tfdoctor.capture.child.clock import (
    WARMUP_TIMEOUT_SHARE,
    MemoScanner,
    StepClock,
    StopCapture,
    Warmup,
    Window,
    Windows,
)
from tfdoctor.capture.child.hooks import PostImportHooks, Tracker, install, profiler_original
from tfdoctor.model import INPUT_MARKER, STEP_MARKER, Device, Facts
from tfdoctor.rundir import BETWEEN_FITS, FACTS, HARNESS, STEPS, atomic_write_json


class ProfilerMarkers:
    """tf.profiler session plus the step markers: ``train`` (step_num, _r=1) and ``tfdoctor_input``."""

    def __init__(self, logdir: Path, options: dict[str, int] | None = None):
        self.logdir = logdir
        self.options = options or {}
        self._step: Any = None
        self._input: Any = None
        self.started_ns: int | None = None
        self.stopped_ns: int | None = None
        self.error: str | None = None
        self.active = False  # a session we started is running

    @staticmethod
    def _tf() -> Any:
        import tensorflow as tf

        return tf

    def start_profiler(self) -> None:
        tf = self._tf()
        self.logdir.mkdir(parents=True, exist_ok=True)
        opts = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=int(self.options.get("host_tracer_level", 2)),
            python_tracer_level=int(self.options.get("python_tracer_level", 0)),
            device_tracer_level=int(self.options.get("device_tracer_level", 1)),
        )
        try:
            profiler_original(tf, "start")(str(self.logdir), options=opts)
        except Exception as e:
            # another session is running (the script's own profiler, a TensorBoard callback) or the
            # build has no profiler: the run goes on without a trace, and harness.json says why
            self.error = f"tf.profiler.experimental.start failed: {e}"
            return
        self.active = True
        self.started_ns = time.time_ns()

    def stop_profiler(self) -> None:
        if not self.active:
            return
        self.active = False
        # A marker still open belongs to a step that never finished (the script failed, hung or was
        # interrupted): keep it alive until the session is stopped, so it is dropped, not recorded.
        unfinished = (self._input, self._step)
        try:
            profiler_original(self._tf(), "stop")()
        except Exception as e:
            self.error = f"tf.profiler.experimental.stop failed: {e}"
        self.stopped_ns = time.time_ns()
        self._input = self._step = None
        del unfinished

    def open_step(self, index: int) -> None:
        if not self.active:
            return
        self._step = self._tf().profiler.experimental.Trace(STEP_MARKER, step_num=index, _r=1)

    def open_input(self, index: int) -> None:
        if not self.active:
            return
        self._input = self._tf().profiler.experimental.Trace(INPUT_MARKER, step_num=index)

    def close_input(self) -> None:
        if self._input is not None:
            self._input.__exit__(None, None, None)
            self._input = None

    def close_step(self) -> None:
        if self._step is not None:
            self._step.__exit__(None, None, None)
            self._step = None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


#: CPU flags the rules care about (bf16 / AMX support decides the mixed-precision advice on CPUs)
_CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "amx_fp16")


def _cpu_facts() -> dict[str, Any]:
    """The usable core count and the relevant CPU flags (Linux /proc/cpuinfo; no flags elsewhere)."""
    out: dict[str, Any] = {}
    try:
        out["cpu_count"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        out["cpu_count"] = os.cpu_count()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                out["cpu_flags"] = [f for f in _CPU_FLAGS if f in have]
                break
    except OSError:
        pass
    return out


def collect_facts(tracker: Tracker) -> Facts:
    """Everything known about the run: the environment, TensorFlow's devices, what the hooks saw."""
    data: dict[str, Any] = {
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
    }
    tf = tracker.modules.get("tf")
    if tf is not None:
        data["tf_version"] = tf.__version__
        devices = []
        try:
            for d in tf.config.list_physical_devices():
                model = cc = None
                if d.device_type == "GPU":
                    try:
                        det = tf.config.experimental.get_device_details(d)
                        model = det.get("device_name")
                        if det.get("compute_capability"):
                            cc = ".".join(str(x) for x in det["compute_capability"])
                    except Exception:
                        pass
                elif d.device_type == "CPU":
                    model = _cpu_model()
                devices.append(Device(name=d.name, kind=d.device_type, model=model, compute_capability=cc))
        except Exception as e:  # said in the report: without devices every rule reads the run as CPU-only
            tracker.errors.append(
                f"listing devices (tf.config.list_physical_devices): {type(e).__name__}: {e}"
            )
        data["devices"] = devices
        try:
            data["auto_jit"] = bool(tf.config.optimizer.get_jit())
        except Exception:
            pass
    keras = tracker.modules.get("keras")
    if keras is not None:
        data["keras_version"] = getattr(keras, "__version__", None)
        try:
            data["dtype_policy"] = keras.mixed_precision.global_policy().name
        except Exception:
            pass
    learnt = tracker.summary()
    counts = learnt.pop("counts", {})
    for key in ("strategy", "num_replicas"):
        if key in learnt and learnt[key] is None:
            learnt.pop(key)
    data.update({k: v for k, v in learnt.items() if v is not None})
    data.update({k: v for k, v in tracker.clock.warmup_facts().items() if v is not None})
    extra = {f"seen_{k}": str(v) for k, v in counts.items()}
    if learnt.get("loss_source"):  # where the steps' losses were read when the step returned none
        extra["loss_source"] = str(data.pop("loss_source"))
    data.update(_cpu_facts())
    for k, v in tracker.switches.items():
        extra[f"switch_{k}"] = v
    data["extra"] = extra
    return Facts.model_validate(data)


def _user_traceback(exc: BaseException) -> str:
    """The exception's traceback without the harness's and runpy's own frames."""
    te = traceback.TracebackException.from_exception(exc)
    stack = te.stack
    keep = 0
    for i, fs in enumerate(stack):
        if not fs.filename.endswith(("runpy.py", "<frozen runpy>", os.path.join("capture", "harness.py"))):
            keep = i
            break
    te.stack = traceback.StackSummary.from_list(stack[keep:])
    return "".join(te.format())


def _is_tf_missing(exc: BaseException) -> bool:
    if not isinstance(exc, ImportError):
        return False
    name = (exc.name or "").split(".")[0]
    if name in ("tensorflow", "keras", "tensorflow_core"):
        return True
    text = str(exc).lower()
    if "tensorflow" in text:
        return True
    tb = exc.__traceback__
    while tb is not None:
        if f"{os.sep}tensorflow{os.sep}" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def run_script(
    script: str, args: list[str], cwd: str | None, module: str | None = None
) -> tuple[str, str | None]:
    """Run the user's script as ``__main__``; returns (outcome, error text). ``module``: as
    ``python -m module`` runs it (``sys.path[0]`` the working directory, its package imported first,
    so its relative imports work; ``script`` is the module's file)."""
    sys.argv = [script, *args]
    script_dir = os.path.dirname(os.path.abspath(script))  # before the chdir: a relative path reads from here
    if cwd:
        os.chdir(cwd)
    sys.path[0] = os.getcwd() if module else script_dir
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(script, run_name="__main__")
        return "finished", None
    except StopCapture:
        return "complete", None
    except SystemExit as e:
        if e.code in (None, 0):
            return "finished", None
        return "error", f"the script exited with code {e.code!r} (sys.exit)"
    except KeyboardInterrupt:
        return "interrupted", None
    except BaseException as e:
        return ("tf_missing" if _is_tf_missing(e) else "error"), _user_traceback(e)


def _main_globals() -> dict[str, Any] | None:
    """The script's globals while ``runpy.run_path(run_name="__main__")`` (or ``run_module(...,
    alter_sys=True)``, which puts its module in ``sys.modules["__main__"]`` too) runs it."""
    main = sys.modules.get("__main__")
    return getattr(main, "__dict__", None)


def _one_of_workers() -> bool:
    """Is this run one worker of a multi-worker job (``TF_CONFIG`` of two training tasks or more)?"""
    from tfdoctor.capture.workers import from_tf_config

    try:
        return from_tf_config() is not None
    except Exception:  # an invalid TF_CONFIG: TensorFlow says so when the script reads it
        return False


def make_warmup(windows: Windows, cfg: dict[str, Any], started_ns: int) -> Warmup:
    """The warm-up policy of ``capture.json``: adaptive when ``warmup_adaptive``, else exactly planned."""
    timeout = cfg.get("timeout_s")
    deadline = None
    if isinstance(timeout, (int, float)) and timeout > 0:
        deadline = started_ns + int(WARMUP_TIMEOUT_SHARE * timeout * 1e9)
    return Warmup(
        windows.warmup,
        adaptive=bool(cfg.get("warmup_adaptive", False)),
        memo=MemoScanner(_main_globals),
        deadline_ns=deadline,
    )


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _live_descendants() -> list[tuple[int, int, str]]:
    """What the script started and left running, as this process leaves: the parent stops them (a
    setsid'd child with an empty environment is found by nothing else once this process is gone)."""
    try:
        found = procs.descendants(os.getpid(), procs.table()).values()
    except Exception:
        return []
    return [(p.pid, p.start, p.name) for p in found]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m tfdoctor.capture.child.harness CAPTURE.json", file=sys.stderr)
        return 2
    cfg = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    run_dir = Path(cfg["run_dir"])
    windows = Windows(**cfg["windows"])
    procs.start_watchdog()  # the parent dies (SIGKILL): this run's processes stop with it
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    harness: dict[str, Any] = {
        "status": "running",
        "pid": os.getpid(),
        "started_ns": time.time_ns(),
        "windows": cfg["windows"],
    }
    atomic_write_json(run_dir / HARNESS, harness)
    markers = ProfilerMarkers(Path(cfg["logdir"]), cfg.get("profiler_options")) if windows.profile else None
    tracker: Tracker | None = None

    def on_window(window: Window) -> None:
        harness["windows_entered_ns"] = {**harness.get("windows_entered_ns", {}), window: time.time_ns()}
        if window == "timing" and tracker is not None:  # an early facts.json, in case the run dies
            try:
                atomic_write_json(run_dir / FACTS, collect_facts(tracker).model_dump(mode="json"))
            except Exception:
                pass

    warmup = make_warmup(windows, cfg, harness["started_ns"])
    clock = StepClock(
        windows,
        run_dir / STEPS,
        markers,
        on_window=on_window,
        warmup=warmup,
        min_timing_ns=int(float(cfg.get("min_timing_s") or 0.0) * 1e9),
        collect="first_step" if _one_of_workers() else "windows",
    )
    tracker = Tracker(clock, cfg.get("switches") or {}, fit_phase=cfg.get("fit"))
    hooks = PostImportHooks()
    install(tracker, hooks)
    gap_s = cfg.get("between_fits_s")
    # the profile run, and a fix trial judged on the whole loop (its writes land in its copy: the guard)
    if isinstance(gap_s, (int, float)) and gap_s > 0:
        tracker.gap_factory = functools.partial(
            gap.GapWatch,
            float(gap_s),
            # the run's own folders: writes there go on (a fix trial's copy of the script's folder too)
            allow=[str(run_dir), str(cfg["logdir"]), *([cfg["guard"]["root"]] if cfg.get("guard") else [])],
            marker=str(run_dir / BETWEEN_FITS),
            script=str(cfg["script"]),
        )
        gap.install_audit(lambda: tracker.gap if tracker is not None else None)
        clock.at_end = tracker.at_windows_end  # a custom loop's steps in bursts: the work between them
        pause = cfg.get("burst_pause_s")
        if isinstance(pause, (int, float)) and pause > 0:
            clock.burst_pause_ns = int(pause * 1e9)
    if cfg.get("guard"):  # a fix trial in a copy of the script's folder: the user's files stay as they are
        g = guard.install(cfg["guard"]["root"], int(cfg["guard"]["since_ns"]), [str(run_dir), cfg["logdir"]])
        hooks.register("h5py", lambda m: guard.guard_h5py(g, m))

    outcome, error = run_script(cfg["script"], list(cfg.get("args") or []), cfg.get("cwd"), cfg.get("module"))
    if tracker.gap is not None:  # the script ended during the watch of the work between fit() calls
        try:
            tracker.gap.end("script_end")
        except StopCapture:  # the watch's time limit, raised as the script ended
            pass
    planned_done = clock.stopped
    try:
        clock.close()
    except Exception as e:
        tracker.errors.append(f"stopping the profiler: {e}")
    if planned_done and outcome != "interrupted":
        outcome = "complete"  # the script may have caught StopCapture and failed afterwards
        error = None

    facts_error = None
    try:
        atomic_write_json(run_dir / FACTS, collect_facts(tracker).model_dump(mode="json"))
    except Exception:
        facts_error = traceback.format_exc(limit=5)
    harness.update(
        status=outcome,
        error=error,
        steps=clock.index,
        warmup={
            "planned": windows.warmup,
            "adaptive": warmup.adaptive,
            "steps": warmup.steps,
            "note": warmup.note,
        },
        windows_actual={
            "warmup": clock.windows.warmup,
            "timing": clock.windows.timing,
            "profile": windows.profile,
        },
        ended_ns=time.time_ns(),
        why_no_steps=None if clock.index else tracker.why_no_steps(),
        hook_errors=tracker.errors + ([facts_error] if facts_error else []),
        profiler_error=markers.error if markers is not None else None,
        own_profiler=tracker.own_profiler,
        profile_started_ns=markers.started_ns if markers is not None else None,
        profile_stopped_ns=markers.stopped_ns if markers is not None else None,
        processes=_live_descendants(),
    )
    try:
        atomic_write_json(run_dir / HARNESS, harness)
    except OSError as e:  # a full disk: one line for the parent (it reads stderr), not a traceback
        print(f"tfdoctor harness: cannot write {run_dir / 'harness.json'}: {e}", file=sys.stderr)
    code = {"complete": 0, "finished": 0, "interrupted": 130}.get(outcome, 1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    # Leave now: the script was stopped on purpose, and a non-daemon thread it started (a data
    # loader, a summary writer) must not keep the process alive until the parent's timeout.
    os._exit(code)


if __name__ == "__main__":
    main()
