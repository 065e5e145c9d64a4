"""Fixes measured in a live kernel: :func:`kernel_fix` applies one fix as a *reversible* change
(global TF switches, attributes of the user's objects, a name rebound to a wrapped copy), undone when
the ``with`` block ends. The notebook's ``%%tfdoctor --fix`` measures these.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tfdoctor.capture.inproc import namespace_objects
from tfdoctor.fixes.steps_per_execution import DEFAULT_N as SPE_DEFAULT_N
from tfdoctor.model import TENSOR_CORE_CC

#: fixes that can run inside the kernel as reversible switches (everything else needs the script)
KERNEL_FIXES = ("xla-jit", "tf-function", "mixed-precision", "steps-per-execution")


SPE_TRIAL = SPE_DEFAULT_N  # steps_per_execution tried by the steps-per-execution fix


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
    for _, v in namespace_objects(ns):
        if isinstance(v, keras.Model) and getattr(v, "optimizer", None) is not None:
            models.setdefault(id(v), v)
    return list(models.values())


def _bindings(ns: MutableMapping[str, Any], obj: Any) -> list[str]:
    return [name for name, v in namespace_objects(ns) if v is obj]


def eager_step_function(ns: MutableMapping[str, Any]) -> tuple[str, Any] | None:
    """A plain Python function of the namespace that computes gradients and applies them."""
    import types

    for name, v in namespace_objects(ns):
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
                if float(cc) < TENSOR_CORE_CC:
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
