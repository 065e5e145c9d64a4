"""In-process capture: profile a piece of code (a notebook cell) in *this* interpreter.

The child-process harness (:mod:`tfdoctor.capture.harness`) owns a whole interpreter; a Jupyter
kernel does not belong to us, so here everything is scoped to one call of :func:`capture_in_process`:

* the step hooks (:mod:`tfdoctor.capture.hooks`) are installed before the code runs and
  *uninstalled* afterwards (``hooks.uninstall()`` puts every patched attribute back);
* the same :class:`~tfdoctor.capture.clock.StepClock` drives the warm-up, timing and profile
  windows, writes ``steps.jsonl`` and stops the code with ``StopCapture`` after the planned steps;
* the TF profiler session is always stopped, whatever the code did;
* the run directory gets what a child run writes (``capture.json``, ``steps.jsonl``, ``facts.json``,
  ``harness.json``, ``logdir/``), so :func:`tfdoctor.capture.runner.finish_run` builds the report.

:class:`StateSnapshot` saves the values of the variables reachable from a namespace (Keras models,
optimizers, ``tf.Module`` and ``tf.Variable`` objects) and restores them, so profiling a training
cell does not leave the user's model trained by the profiler's steps. :func:`kernel_fix` applies one
fix as a *reversible* change (global TF switches, attributes of the user's objects, a name rebound
to a wrapped copy), undone when the ``with`` block ends.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tfdoctor.capture.clock import StepClock, StopCapture, Windows
from tfdoctor.capture.runner import CaptureResult, check_tensorflow
from tfdoctor.errors import TfdoctorError
from tfdoctor.model import RunStatus
from tfdoctor.store import RunDir, atomic_write_json

#: fixes that can run inside the kernel as reversible switches (everything else needs the script)
KERNEL_FIXES = ("xla-jit", "tf-function", "mixed-precision", "steps-per-execution")
SPE_TRIAL = 8  # steps_per_execution tried by the steps-per-execution fix

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


def capture_in_process(
    execute: Callable[[], Any],
    run: RunDir,
    windows: Windows,
    *,
    label: str = "<cell>",
    profiler_options: dict[str, int] | None = None,
) -> InProcessResult:
    """Run ``execute()`` with the step hooks installed, for at most ``windows.total`` steps.

    Never raises for the code's own failures: they are in the result (``exception``, ``capture.error``).
    Raises :class:`TensorFlowMissing` when TensorFlow cannot be imported, :class:`CaptureBusy` when
    called from inside another in-process capture.
    """
    global _active
    if _active:
        raise CaptureBusy("a tfdoctor capture is already running in this interpreter (nested %%tfdoctor?)")
    check_tensorflow()
    from tfdoctor.capture import hooks
    from tfdoctor.capture.harness import ProfilerMarkers, collect_facts

    run.path.mkdir(parents=True, exist_ok=True)
    for name in ("steps.jsonl", "harness.json", "facts.json"):
        run.file(name).unlink(missing_ok=True)
    atomic_write_json(
        run.file("capture.json"),
        {
            "mode": "in-process",
            "script": label,
            "pid": os.getpid(),
            "run_dir": str(run.path),
            "logdir": str(run.logdir),
            "windows": {"warmup": windows.warmup, "timing": windows.timing, "profile": windows.profile},
        },
    )
    markers = ProfilerMarkers(run.logdir, profiler_options) if windows.profile else None
    clock = StepClock(windows, run.file("steps.jsonl"), markers)
    tracker = hooks.Tracker(clock, {})
    import_hooks = hooks.PostImportHooks()
    models: list[Any] = []
    exc: BaseException | None = None
    error: str | None = None
    outcome = "finished"
    t0 = time.monotonic()
    _active = True
    try:
        fit_begin = tracker.fit_begin

        def note_fit(model: Any, x: Any, batch_size: Any) -> None:
            if all(m is not model for m in models):
                models.append(model)
            fit_begin(model, x, batch_size)

        tracker.fit_begin = note_fit  # type: ignore[method-assign]
        hooks.install(tracker, import_hooks)
        try:
            execute()
        except StopCapture:
            outcome = "complete"
        except KeyboardInterrupt as e:
            outcome, exc = "interrupted", e
        except BaseException as e:  # the code's own error, SystemExit included: a result, not ours
            outcome, exc = "error", e
            error = _user_tb(e, skip=1)
        planned_done = clock.index >= windows.total
    finally:
        try:
            clock.close()
        except Exception as e:  # the profiler could not stop: said in harness.json, not hidden
            tracker.errors.append(f"stopping the profiler: {e}")
        hooks.uninstall()
        import_hooks.callbacks.clear()
        if import_hooks in sys.meta_path:
            sys.meta_path.remove(import_hooks)
        _active = False
    if planned_done and outcome != "interrupted":
        outcome, error, exc = "complete", None, None  # a failure caused by our stop is not the user's
    wall = time.monotonic() - t0

    facts = None
    try:
        facts = collect_facts(tracker)
        atomic_write_json(run.file("facts.json"), facts.model_dump(mode="json"))
    except Exception:
        tracker.errors.append(traceback.format_exc(limit=5))
    n = clock.index
    why = None if n else tracker.why_no_steps()
    atomic_write_json(
        run.file("harness.json"),
        {
            "status": outcome,
            "error": error,
            "steps": n,
            "why_no_steps": why,
            "hook_errors": tracker.errors,
            "profiler_error": markers.error if markers is not None else None,
            "profile_started_ns": markers.started_ns if markers is not None else None,
            "profile_stopped_ns": markers.stopped_ns if markers is not None else None,
        },
    )
    from tfdoctor.pipeline import load_steps

    steps = load_steps(run)
    status: RunStatus
    message = None
    if outcome == "complete":
        status = "complete"
    elif outcome == "interrupted":
        status = "interrupted"
        message = f"interrupted after {n} step{'s' if n != 1 else ''}"
        error = message
    elif outcome == "error":
        status = "failed"
        last = (traceback.format_exception_only(type(exc), exc)[-1].strip()) if exc is not None else ""
        message = f"the cell raised after {n} step{'s' if n != 1 else ''}: {last}"
    elif n:
        status = "complete"
        if n < windows.total:
            message = f"the cell ended by itself after {n} of {windows.total} steps" + (
                "" if run.trace_files() else f", before the profile window (no trace); try --steps {n}"
            )
    else:
        status = "no_steps"
        message = f"no training steps seen: {why or 'the cell ended without training'}"
        error = message
    result = CaptureResult(
        status=status,
        returncode=None,
        windows=windows,
        steps=steps,
        facts=facts,
        trace_files=run.trace_files(),
        error=error,
        message=message,
        why_no_steps=why,
        wall_s=wall,
        harness=run.read_json("harness.json", {}) or {},
    )
    return InProcessResult(capture=result, exception=exc, step_fn=tracker.step_fn, models=models)


# -- the user's variables ------------------------------------------------------------------------
def _namespace_objects(ns: MutableMapping[str, Any]) -> Iterator[tuple[str, Any]]:
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

    for _, value in _namespace_objects(ns):
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


# -- reversible fixes ---------------------------------------------------------------------------
class NotInKernel(Exception):
    """This fix cannot be measured as a reversible change here; ``str()`` says why."""


@dataclass
class KernelFix:
    """What applying a fix in the kernel did (for the trial's description)."""

    fix_id: str
    changes: list[str] = field(default_factory=list)  # human-readable, one per change
    edit: str = ""  # the one-line edit to make in the code for real
    # after the trial, given the Keras models in play: why the change did not take effect, or None
    check: Callable[[list[Any]], str | None] | None = None


def _keras_models(ns: MutableMapping[str, Any], used: list[Any]) -> list[Any]:
    keras = sys.modules.get("keras")
    if keras is None:
        return []
    models = {id(m): m for m in used}
    for _, v in _namespace_objects(ns):
        if isinstance(v, keras.Model) and getattr(v, "optimizer", None) is not None:
            models.setdefault(id(v), v)
    return list(models.values())


def _bindings(ns: MutableMapping[str, Any], obj: Any) -> list[str]:
    return [name for name, v in _namespace_objects(ns) if v is obj]


def eager_step_function(ns: MutableMapping[str, Any]) -> tuple[str, Any] | None:
    """A plain Python function of the namespace that computes gradients and applies them."""
    import types

    for name, v in _namespace_objects(ns):
        code = getattr(v, "__code__", None)
        if not isinstance(v, types.FunctionType) or code is None:
            continue
        names = set(code.co_names)
        if "gradient" in names and ({"apply_gradients", "apply"} & names):
            return name, v
    return None


def cpu_has_bf16() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = f.read()
    except OSError:
        return False
    return any(flag in flags for flag in ("avx512_bf16", "amx_bf16"))


@contextmanager
def kernel_fix(
    fix_id: str,
    ns: MutableMapping[str, Any],
    *,
    step_fn: Any = None,
    models: list[Any] | None = None,
    facts: Any = None,
) -> Iterator[KernelFix]:
    """Apply ``fix_id`` as reversible changes for the ``with`` block; everything is undone after it.

    Raises :class:`NotInKernel` (before changing anything) when the fix needs the script's source.
    """
    import tensorflow as tf

    keras = sys.modules.get("keras")
    undo: list[Callable[[], None]] = []
    fix = KernelFix(fix_id)

    def set_attrs(obj: Any, **values: Any) -> None:
        old = {k: obj.__dict__[k] for k in values if k in obj.__dict__}

        def back() -> None:
            for k in values:
                if k in old:
                    obj.__dict__[k] = old[k]
                else:
                    obj.__dict__.pop(k, None)

        undo.append(back)
        for k, v in values.items():
            obj.__dict__[k] = v

    def rebind(name: str, value: Any) -> None:
        old = ns[name]

        def back() -> None:
            ns[name] = old

        undo.append(back)
        ns[name] = value

    fit_models = _keras_models(ns, models or [])
    try:
        if fix_id == "xla-jit":
            prev = tf.config.optimizer.get_jit()
            undo.append(lambda: tf.config.optimizer.set_jit(bool(prev)))
            tf.config.optimizer.set_jit(True)
            fix.changes.append("tf.config.optimizer.set_jit(True)")
            for m in fit_models:
                if getattr(m, "_run_eagerly", False):
                    continue
                set_attrs(m, _jit_compile=True, train_function=None)
                fix.changes.append(f"{type(m).__name__}.jit_compile = True")
            fix.edit = "model.compile(..., jit_compile=True) / @tf.function(jit_compile=True)"
            if step_fn is not None and getattr(step_fn, "python_function", None) is not None:
                names = _bindings(ns, step_fn)
                if names:
                    jitted = tf.function(
                        step_fn.python_function,
                        input_signature=getattr(step_fn, "input_signature", None),
                        jit_compile=True,
                    )
                    for name in names:
                        rebind(name, jitted)
                    fix.changes.append(
                        f"{names[0]} = tf.function({names[0]}.python_function, jit_compile=True)"
                    )
        elif fix_id == "tf-function":
            eager_models = [m for m in fit_models if getattr(m, "_run_eagerly", False)]
            for m in eager_models:
                set_attrs(m, _run_eagerly=False, train_function=None)
                fix.changes.append(f"{type(m).__name__}.run_eagerly = False")
            if not eager_models:
                found = eager_step_function(ns)
                if found is None:
                    raise NotInKernel(
                        "the eager step is not a function of the notebook (written inline in the cell?)"
                    )
                name, fn = found
                rebind(name, tf.function(fn))
                fix.changes.append(f"{name} = tf.function({name})")
            fix.edit = "@tf.function on the step function / model.compile(run_eagerly=False)"
        elif fix_id == "mixed-precision":
            if keras is None:
                raise NotInKernel("Keras is not imported: no dtype policy to set")
            gpus = [d for d in (getattr(facts, "devices", None) or []) if d.kind == "GPU"]
            if gpus:
                cc = gpus[0].compute_capability or "0"
                if float(cc) < 7.0:
                    raise NotInKernel(f"the GPU (compute capability {cc}) has no fast float16")
                policy = "mixed_float16"
            elif cpu_has_bf16():
                policy = "mixed_bfloat16"
            else:
                raise NotInKernel(
                    "this CPU has no bfloat16 instructions (avx512_bf16/amx): no gain to expect"
                )
            prev_policy = keras.mixed_precision.global_policy()
            undo.append(lambda: keras.mixed_precision.set_global_policy(prev_policy))
            keras.mixed_precision.set_global_policy(policy)
            fix.changes.append(f"keras.mixed_precision.set_global_policy({policy!r})")
            fix.edit = f"keras.mixed_precision.set_global_policy({policy!r}) before the model is built"

            def policy_applied(in_play: list[Any]) -> str | None:
                names = {getattr(getattr(m, "dtype_policy", None), "name", None) for m in in_play}
                if policy in names:
                    return None
                return (
                    "no model computed under the policy: a model built before the policy is set keeps "
                    "float32 (it was built in an earlier cell); the script flow rebuilds the model"
                )

            fix.check = policy_applied
        elif fix_id == "steps-per-execution":
            graph_models = [m for m in fit_models if not getattr(m, "_run_eagerly", False)]
            if not graph_models:
                raise NotInKernel("steps_per_execution applies to Keras Model.fit only")
            for m in graph_models:
                set_attrs(m, steps_per_execution=SPE_TRIAL, train_function=None)
                fix.changes.append(f"{type(m).__name__}.steps_per_execution = {SPE_TRIAL}")
            fix.edit = f"model.compile(..., steps_per_execution={SPE_TRIAL})"
        else:
            raise NotInKernel("it rewrites the script's source")
        yield fix
    finally:
        for back in reversed(undo):
            back()
