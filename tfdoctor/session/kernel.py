"""Fixes measured in a live kernel: :func:`kernel_fix` applies one fix as a *reversible* change
(global TF switches, attributes of the user's objects, a name rebound to a wrapped copy), undone when
the ``with`` block ends; :func:`kernel_fix_loop` is the notebook's ``%%tfdoctor --fix`` loop, with the
sanity checks (:mod:`tfdoctor.fixes.sanity`) and the paired-round judge
(:func:`tfdoctor.session.fix_loop.judge_rounds`) of the script loop.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfdoctor.capture.inproc import namespace_objects
from tfdoctor.fixes.steps_per_execution import DEFAULT_N as SPE_DEFAULT_N
from tfdoctor.model import TENSOR_CORE_CC, Throughput

if TYPE_CHECKING:
    from tfdoctor.session.fix_loop import Measured

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


def _functions(ns: MutableMapping[str, Any], called: frozenset[str]) -> list[tuple[str, Any, set[str]]]:
    """The namespace's plain Python functions (name, function, the names its code uses), those the
    profiled cell calls first: the cell runs them, another cell's function may never run here."""
    import types

    out = []
    for name, v in namespace_objects(ns):
        code = getattr(v, "__code__", None)
        if isinstance(v, types.FunctionType) and code is not None:
            out.append((name, v, set(code.co_names)))
    return sorted(out, key=lambda f: f[0] not in called)


def eager_step_function(
    ns: MutableMapping[str, Any], called: frozenset[str] = frozenset()
) -> tuple[str, Any] | None:
    """A plain Python function of the namespace that computes gradients and applies them."""
    for name, v, names in _functions(ns, called):
        if "gradient" in names and ({"apply_gradients", "apply"} & names):
            return name, v
    return None


def gradient_function(
    ns: MutableMapping[str, Any], called: frozenset[str] = frozenset()
) -> tuple[str, Any] | None:
    """A plain Python function of the namespace that records a GradientTape and returns gradients,
    the optimizer update left to the cell (the TensorFlow custom-training walkthrough's ``grad()``)."""
    for name, v, names in _functions(ns, called):
        if "gradient" in names and "GradientTape" in names:
            return name, v
    return None


#: what the notebook user can run for the fixes that rewrite source: the notebook as a script
SCRIPT_ADVICE = (
    "export the notebook as a script (jupyter nbconvert --to script NOTEBOOK.ipynb) and run "
    "`tfdoctor profile NOTEBOOK.py --fix` on it"
)


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
    called: frozenset[str] = frozenset(),
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
            forced = bool(tf.config.functions_run_eagerly())
            if forced:  # tf.config.run_functions_eagerly(True) left on: every tf.function runs op by op
                undo.append(lambda: tf.config.run_functions_eagerly(True))
                tf.config.run_functions_eagerly(False)
                fix.changes.append("tf.config.run_functions_eagerly(False)")
                # the cell's tf.functions as new ones: traced in this run, where the hooks see the step
                for name in sorted(called):
                    compiled = ns.get(name)
                    py = getattr(compiled, "python_function", None)
                    if py is not None and hasattr(compiled, "get_concrete_function"):
                        sig = getattr(compiled, "input_signature", None)
                        jit = getattr(compiled, "_jit_compile", None)
                        rebind(name, tf.function(py, input_signature=sig, jit_compile=jit))
            eager_models = [m for m in fit_models if getattr(m, "_run_eagerly", False)]
            for m in eager_models:
                set_attrs(m, _run_eagerly=False, train_function=None)
                fix.changes.append(f"{type(m).__name__}.run_eagerly = False")
            if not eager_models and not forced:
                # the cell's step: a step function of the namespace whose update and gradients it holds
                # (one the cell calls first), else the function computing the gradients for an update
                # written in the cell; one the cell calls and another it does not: the one it calls
                found = eager_step_function(ns, called)
                grads = gradient_function(ns, called)
                if grads is not None and grads[0] in called and (found is None or found[0] not in called):
                    found = None
                if found is not None:
                    name, fn = found
                    rebind(name, tf.function(fn))
                    fix.changes.append(f"{name} = tf.function({name})")
                else:  # the update written in the cell: compile the function that computes the gradients
                    found = grads
                    if found is None:
                        raise NotInKernel(
                            "the eager step is not a function of the notebook (written inline in the cell, "
                            f"with no function computing its gradients); to compile it, {SCRIPT_ADVICE}"
                        )
                    name, fn = found
                    rebind(name, tf.function(fn))
                    fix.changes.append(
                        f"{name} = tf.function({name})  # the gradients; the optimizer update stays in the cell"
                    )
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


# -- the kernel's fix loop: the same sanity checks and the same judge as the script loop ----------------
@dataclass
class KernelCell:
    """The profiled cell and what a fix trial needs to re-run it in the kernel."""

    ns: MutableMapping[str, Any]
    execute: Callable[[], None]
    windows: Any  # tfdoctor.capture.child.clock.Windows
    snapshot: Any  # tfdoctor.capture.inproc.StateSnapshot: restored before every run
    step_fn: Any = None
    models: list[Any] = field(default_factory=list)
    facts: Any = None  # the baseline's Facts
    label: str = "cell"
    called: frozenset[str] = frozenset()  # the names the cell's code uses (which functions it calls)


@dataclass
class _KState:
    fixes: tuple[str, ...]
    throughput: Any  # Throughput: its latest measurement
    facts: Any
    loss_runs: list[list[Any]]
    run_id: str | None = None
    stdout: str | None = None  # what its latest run printed (None: not recorded)


def kernel_fix_loop(
    store: Any,
    base_run: Any,
    base: Any,
    cell: KernelCell,
    candidates: list[str],
    *,
    rounds: int | None = None,
    allow_unchecked: bool = False,
    notes: list[str] | None = None,
    describe: Callable[[str], str] = str,
    runner: Callable[[tuple[str, ...], str], tuple[Measured, list[str], str | None]] | None = None,
) -> Any:
    """``%%tfdoctor --fix``: each candidate fix applied in the kernel on top of the fixes kept so far,
    checked (it ran, its facts show it in effect, the loss is finite and not above the reference's
    beyond its own noise; a fix changing the training needs a loss unless ``allow_unchecked``) and
    judged in paired rounds against the state it must beat by :func:`tfdoctor.session.fix_loop.judge_rounds`
    (the judge of the script loop); two or more fixes left undecided alone (above 1.0x, none that changes
    the training) are then tried together as one trial, as the script loop's ``FixLoop.pool`` does; then
    the final state measured side by side against the baseline. ``runner`` (tests of the loop's
    decisions): measures a state (its fix ids, a label) instead of the kernel.
    Fixes that need the script's source are listed as skipped. Returns the baseline's report with its
    :class:`~tfdoctor.model.FixSummary` (also written to the run)."""
    import time

    from tfdoctor.capture.inproc import capture_in_process
    from tfdoctor.errors import TfdoctorError
    from tfdoctor.fixes.sanity import (
        CHANGES_TRAINING,
        loss_check,
        not_in_effect,
        output_change,
        training_changes,
    )
    from tfdoctor.model import FixSummary, FixTrial
    from tfdoctor.report.format import estimate_text, ratio_ci, training
    from tfdoctor.rundir import STDOUT
    from tfdoctor.session.build import finish_run
    from tfdoctor.session.fix_loop import (
        DEFAULT_ROUNDS,
        MIN_TIMING_S,
        Measured,
        Side,
        examples_per_step,
        examples_seen,
        judge_rounds,
        keep_bar,
        kept_together,
        poolable,
        reproduction,
        run_length,
        startup_added,
        unchecked_block,
    )

    t0 = time.monotonic()
    notes = notes if notes is not None else []
    budget = DEFAULT_ROUNDS if rounds is None else max(0, rounds)
    last: list[tuple[str, ...] | None] = [None]
    paired_logs: list[list[float]] = []  # every judged trial's round log ratios: the judge's paired floor

    def in_kernel(fix_ids: tuple[str, ...], what: str) -> tuple[Measured, list[str], str | None]:
        cell.snapshot.restore()
        last[0] = fix_ids
        with contextlib.ExitStack() as stack:
            applied = [
                stack.enter_context(
                    kernel_fix(
                        fid,
                        cell.ns,
                        step_fn=cell.step_fn,
                        models=cell.models,
                        facts=cell.facts,
                        called=cell.called,
                    )
                )
                for fid in fix_ids
            ]
            run = store.new_run(f"{cell.label} + {what}", [], kind="notebook-fix", parent=base_run.id)
            # timed for at least MIN_TIMING_S, as the script loop's timing-only runs are
            res = capture_in_process(
                cell.execute,
                run,
                cell.windows,
                label=f"{cell.label} + {what}",
                min_timing_s=MIN_TIMING_S,
            )
            why_not = None
            for kf in applied:
                if kf.check is not None:
                    why_not = why_not or kf.check([*res.models, *_keras_models(cell.ns, [])])
        report = finish_run(store, run, res.capture)
        cap = res.capture
        m = Measured(
            run_id=run.id,
            status=cap.status,
            throughput=report.throughput,
            steps=list(report.steps),
            facts=report.facts,
            message=cap.message or "",
            error=cap.error,
        )
        return m, [c for kf in applied for c in kf.changes], why_not

    measure: Callable[[tuple[str, ...], str], tuple[Measured, list[str], str | None]] = runner or in_kernel

    def printed(run_id: str | None) -> str | None:
        """What a run printed (stdout.log), None when it was not recorded."""
        try:
            return (
                store.get(run_id).file(STDOUT).read_text(encoding="utf-8", errors="replace")
                if run_id
                else None
            )
        except (OSError, TfdoctorError):
            return None

    baseline = _KState((), base.throughput, base.facts, [list(base.steps)], base_run.id, printed(base_run.id))
    state = baseline
    trials: list[Any] = []
    history: list[_KState] = []
    subprocess_only: list[str] = []

    def attempt(
        ref: _KState, add: tuple[str, ...], label: str, info0: dict[str, Any]
    ) -> tuple[Any, _KState | None]:
        """``add`` applied in the kernel on top of ``ref``, checked and judged against it: its trial, and
        the state to go on from when kept (else None). Raises NotInKernel."""
        ref_fresh = last[0] == ref.fixes
        fixes = (*ref.fixes, *add)
        same = not any(
            f in CHANGES_TRAINING for f in add
        )  # a first loss off the reference's may be the data's
        m, changes, why_not = measure(fixes, label)
        how = "; ".join(changes)
        info: dict[str, Any] = {
            **info0,
            "run_id": m.run_id,
            "runtime_switch": {"kernel": how} if how else {},
            "throughput": m.throughput,
            "training_changes": training_changes(ref.facts, m.facts),
        }
        if m.status != "complete" or m.throughput is None:
            reason = m.message or m.status or "no throughput"
            return FixTrial(**info, status="failed", reason=reason, error=m.error), None
        absent = why_not or next((a for a in (not_in_effect(f, ref.facts, m.facts) for f in add) if a), None)
        if absent:
            return FixTrial(**info, status="skipped", reason=f"not applied: {absent}; not measured"), None
        out = printed(m.run_id)
        if ref.stdout is not None and out is not None:  # the script loop's output check, on the cell's output
            ref_steps = ref.loss_runs[0]
            further = examples_seen(m.steps, None) > examples_seen(ref_steps, None)
            length = run_length(m.steps, ref_steps, examples_per_step(ref_steps, ref.facts))
            changed = output_change(ref.stdout, out, further=further, length=length)
            if changed:
                return FixTrial(**info, status="rejected", reason=changed), None
        loss = loss_check(ref.loss_runs, m.steps, same_training=same)
        if loss.status == "not finite":
            return FixTrial(**info, status="rejected", reason=loss.text), None
        unchecked = loss.text if loss.status == "unreadable" else None
        info["unchecked"] = unchecked
        blocked = next((b for b in (unchecked_block(f, unchecked, allow_unchecked) for f in add) if b), None)
        if blocked:
            return FixTrial(**info, status="rejected", reason=blocked), None

        def side(which: Side, i: int) -> Measured:
            if which == "reference":
                got, _, _ = measure(ref.fixes, f"reference, paired round {i}")
            else:
                got, _, _ = measure(fixes, f"{label}, paired round {i}")
            return got

        r = judge_rounds(
            side,
            first_trial=m.throughput,
            ref_prev=ref.throughput,
            ref_fresh=ref_fresh,
            max_rounds=budget,
            pool=paired_logs,
            keep_above=keep_bar(add),
        )
        ref.throughput = r.ref or ref.throughput
        ref.loss_runs += r.ref_steps
        info["paired_run_ids"] = r.run_ids
        info["paired_ratios"] = r.ratios
        info["throughput"] = r.trial_median or m.throughput  # the trial's median run, as the script loop's
        info["reference"] = r.ref_median
        if r.failed:
            return FixTrial(**info, status="failed", reason=r.failed[0], error=r.failed[1]), None
        assert r.decision is not None
        d = r.decision
        info.update(
            speedup=d.estimate.ratio,
            speedup_ci=[d.estimate.low, d.estimate.high],
            verdict=d.verdict,
        )
        loss = loss_check(ref.loss_runs, m.steps, same_training=same)
        if loss.bad:
            reason = f"{loss.text}; measured {estimate_text(d.estimate)}"
            return FixTrial(**info, status="rejected", reason=reason), None
        if not d.keep:
            return FixTrial(
                **info, status="rejected", reason=d.reason + (f"; {r.note}" if r.note else "")
            ), None
        extra = f"; {training(info['training_changes'])}" if info["training_changes"] else ""
        kept = _KState(
            fixes, r.trial or m.throughput, m.facts, [list(m.steps), *r.trial_steps], m.run_id, out
        )
        return FixTrial(**info, status="kept", reason=d.reason + extra), kept

    for fid in candidates:
        desc = describe(fid)
        if fid not in KERNEL_FIXES:
            subprocess_only.append(fid)
            trials.append(
                FixTrial(
                    fix_id=fid,
                    description=desc,
                    status="skipped",
                    reason=f"rewrites the script's source, which a notebook cell is not: {SCRIPT_ADVICE}",
                )
            )
            continue
        try:
            trial, after = attempt(state, (fid,), fid, {"fix_id": fid, "description": desc})
        except NotInKernel as e:
            trials.append(
                FixTrial(fix_id=fid, description=desc, status="skipped", reason=f"not in the kernel: {e}")
            )
            subprocess_only.append(fid)
            continue
        trials.append(trial)
        if after is not None:
            state = after
            history.append(state)

    # the fixes not decided alone (above 1.0x, none that changes the training), tried together: the
    # script loop's FixLoop.pool, in the kernel
    undecided = [j for j, t in enumerate(trials) if poolable(t)]
    if len(undecided) >= 2:
        names = [trials[j].fix_id for j in undecided]
        label = "pooled: " + " + ".join(names)
        try:
            pooled, after = attempt(
                state,
                tuple(names),
                label,
                {
                    "fix_id": "pooled",
                    "description": "the fixes not decided alone, tried together",
                    "members": names,
                },
            )
        except NotInKernel:
            pooled, after = None, None
        if pooled is not None:
            trials.append(pooled)
        if pooled is not None and after is not None:
            for j in undecided:
                trials[j] = kept_together(trials[j], names, pooled)
            state = after
            history.append(state)

    combined = speedup = ci = verdict = None
    chain: list[float] | None = None
    reproduced: bool | None = None
    run_id = None
    combined_ref: Throughput | None = None
    startup: float | None = None
    note = ""
    if state.fixes:

        def final_side(which: Side, i: int) -> Measured:
            fixes = baseline.fixes if which == "reference" else state.fixes
            got, _, _ = measure(
                fixes, f"{'baseline' if which == 'reference' else 'combined'}, paired round {i}"
            )
            return got

        r = judge_rounds(
            final_side,
            first_trial=state.throughput,
            ref_prev=baseline.throughput,
            ref_fresh=last[0] == baseline.fixes,
            max_rounds=budget,
            pool=paired_logs,
            states=True,  # the headline's interval: never below each state's own spread (judge.floor)
        )
        if r.decision is not None:
            est = r.decision.estimate
            speedup, ci, verdict = est.ratio, [est.low, est.high], r.decision.verdict
            note = r.decision.reason
            chain, reproduced = reproduction(trials, est)
        combined, run_id = r.trial_median or state.throughput, state.run_id
        combined_ref = r.ref_median
        # the one-off seconds the kept fixes add to the cell's first steps (a compile() the cell runs
        # again traces and compiles anew), as the script loop reads them from its combined check
        startup = startup_added(r.trial_steps, r.ref_steps)
    if subprocess_only:
        notes.append(
            "measured only in a subprocess (they change the script or how the model is built): "
            f"{', '.join(subprocess_only)} — {SCRIPT_ADVICE}"
        )
    if not candidates:
        notes.append("no finding proposed a fix to try (pick some with --fixes)")
    changes_all = training_changes(baseline.facts, state.facts) if state.fixes else {}
    if speedup is not None:
        notes.append(
            f"combined {ratio_ci(speedup, ci)} vs the baseline side by side; {training(changes_all, verdict)}"
        )
    summary = FixSummary(
        baseline=base.throughput,
        trials=trials,
        combined=combined,
        combined_reference=combined_ref,
        combined_speedup=speedup,
        combined_ci=ci,
        combined_verdict=verdict,
        combined_note=note,
        training_changes=changes_all,
        allow_unchecked=allow_unchecked,
        trials_chained=chain,
        reproduced=reproduced,
        kept=list(state.fixes),
        combined_run_id=run_id,
        combined_startup_s=startup,
        wall_s=time.monotonic() - t0,
        confirm_rounds=budget,
    )
    report = base.model_copy(update={"fix": summary})
    base_run.write_report(report)
    store.update(base_run, speedup=speedup)
    return report
