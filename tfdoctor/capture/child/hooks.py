"""Step detection inside the child: patches on Keras and TensorFlow that tell the step clock what the
user's training loop is doing. Installed as *post-import hooks*, so a script that sets environment
variables before ``import tensorflow`` (``TF_CPP_MIN_LOG_LEVEL``, ``CUDA_VISIBLE_DEVICES``) still works.

Who counts steps (first one seen wins, never two at once):

* ``keras_callback`` -- ``Model.fit`` gets a callback appended to the user's callbacks; one step per
  ``on_train_batch_end`` (one *execution* with ``steps_per_execution`` > 1). While ``fit`` runs every
  other hook is off (no double counting). Like any callback with a batch-end method, ours makes Keras
  dispatch batch-end callbacks synchronously, so a step's end is the batch's real completion.
* ``apply_gradients`` -- eager custom loop: each eager ``optimizer.apply`` / ``apply_gradients`` of the
  first optimizer seen ends a step (a GAN's second optimizer does not).
* ``tf.function`` -- the step is a ``tf.function``: Python only runs while it traces, so the function
  being traced when ``apply_gradients`` (or ``GradientTape.gradient``) runs is marked as the step
  function, and each outermost call of it is a step. A call that loops over batches in its graph
  (``for x in dataset:`` or ``for _ in tf.range(n)`` inside the function) is a step of as many batches
  as its optimizer's ``iterations`` grew by, as a Keras step of ``steps_per_execution`` batches.
* ``gradient_tape`` -- the fallback without an optimizer: each eager ``GradientTape.gradient``.

The compute start of a step is ``GradientTape.__enter__`` (eager), the step function's call, or
``on_train_batch_begin``; everything before it in the step is input wait.

Tracing: every new concrete function TensorFlow builds (a ``tf.function`` traced or retraced, Keras's
train function included: ``tracing_compilation._create_concrete_function``) is reported to the clock
(``note_trace``), whose adaptive warm-up goes on while steps still trace.

The tfdata-cache trial's switch (``tfdata_cache_fill``): before the first step, a tf.data dataset's
``__iter__`` (a tf.distribute dataset's too) first reads each in-memory ``cache()`` stage under it once to
its end (:func:`fill_caches`, bounded), so the timed steps see the cache full, as from the second epoch.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import inspect
import math
import os
import statistics
import sys
import threading
import time
import traceback
import types
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from tfdoctor.capture.child import sites
from tfdoctor.capture.child.clock import StepClock, StopCapture
from tfdoctor.capture.child.gap import GapWatch, in_loop
from tfdoctor.capture.child.procs import WATCHDOG_THREAD
from tfdoctor.model import CACHE_FILL_SWITCH, CacheFill, DatasetStage

_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIB_MARKERS = (
    f"{os.sep}site-packages{os.sep}",
    f"{os.sep}dist-packages{os.sep}",
    f"{os.sep}lib{os.sep}python",
    "<frozen ",
    "<string>",
)


def is_user_file(filename: str) -> bool:
    """True for the user's own code: not the standard library, not installed packages, not tfdoctor."""
    if not filename or filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    if path.startswith(_OURS + os.sep):
        return False
    return not any(m in path for m in _LIB_MARKERS)


def _train_samples(x: Any, validation_split: Any) -> int | None:
    """The examples ``fit(x, validation_split=...)`` trains on each epoch, for arrays (or a list / dict of
    them): Keras keeps the first ``floor(n * (1 - split))``; None when ``x`` has no length."""
    first = x
    if isinstance(x, dict):
        first = next(iter(x.values()), None)
    elif isinstance(x, (list, tuple)):
        first = x[0] if x else None
    shape = getattr(first, "shape", None)
    n = shape[0] if shape else None
    if not isinstance(n, int) or n <= 0:
        return None
    split = float(validation_split) if isinstance(validation_split, (int, float)) else 0.0
    return math.floor(n * (1.0 - split)) if 0.0 < split < 1.0 else n


def _keras_train_step(model: Any) -> bool:
    """Does ``model`` train with Keras's own ``train_step`` (not an override)? Its logs' ``loss`` is
    then the loss tracker's running mean."""
    try:
        from keras.src.trainers.trainer import Trainer
    except Exception:
        return False
    own = getattr(type(model), "train_step", None)
    for base in type(model).__mro__:
        if base.__module__.startswith("keras.") and "train_step" in base.__dict__:
            return own is base.__dict__["train_step"] and issubclass(type(model), Trainer)
    return False


def user_frame(skip: int = 1) -> types.FrameType | None:
    """The innermost frame of the user's code on the current stack."""
    return first_user_frame(sys._getframe(skip))


def first_user_frame(frame: types.FrameType | None) -> types.FrameType | None:
    """``frame`` or the nearest frame of the user's code it was called from."""
    while frame is not None and not is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def short_site(frame: types.FrameType | None) -> str:
    """ " at train.py:12" for a frame (the report's way of naming a script's line), "" for None."""
    return f" at {sites.site(frame.f_code.co_filename, frame.f_lineno)}" if frame is not None else ""


def where(frame: types.FrameType | None, *, definition: bool = False) -> str | None:
    if frame is None:
        return None
    line = frame.f_code.co_firstlineno if definition else frame.f_lineno
    return f"{frame.f_code.co_filename}:{line}"


def _leaves(value: Any) -> Iterator[Any]:
    """The leaves of ``value`` (dicts and lists walked, breadth first), among its first 32 items."""
    stack = [value]
    seen = 0
    while stack and seen < 32:
        v = stack.pop(0)
        seen += 1
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        else:
            yield v


def first_dim(value: Any) -> int | None:
    """The first dimension of the first array-like leaf of ``value`` (a batch), if static.

    Read once a step: a batch ``(x, y)`` or a lone array, whose first leaf is its first item, is read
    without walking the structure (:func:`_leaves`)."""
    v = value[0] if type(value) in (tuple, list) and value else value
    if type(v) not in (dict, list, tuple) and type(v).__name__ != "PerReplica":
        shape = getattr(v, "shape", None)
        if shape is not None:
            try:
                if len(shape) > 0 and shape[0] is not None:
                    return int(shape[0])
            except (TypeError, ValueError, IndexError):
                pass
    for v in _leaves(value):
        if type(v).__name__ == "PerReplica":  # tf.distribute: this worker's batch is all replicas' parts
            dims = [first_dim(part) for part in getattr(v, "values", ())]
            if dims and all(d is not None for d in dims):
                return sum(d for d in dims if d is not None)
            continue
        shape = getattr(v, "shape", None)
        if shape is None:
            continue
        try:
            shape_dims = tuple(shape)
            if shape_dims and shape_dims[0] is not None:
                return int(shape_dims[0])
        except (TypeError, ValueError):
            continue
    return None


def inner_shape(value: Any) -> tuple[int | None, ...] | None:
    """The dimensions after the first (the batch) of the first array-like leaf of ``value``, if it has
    a shape: what tells a step's inputs of another length apart (a batch padded to its longest sequence)."""
    for v in _leaves(value):
        shape = getattr(v, "shape", None)
        if shape is None:
            continue
        try:
            dims = tuple(None if d is None else int(d) for d in tuple(shape))
        except (TypeError, ValueError):
            continue
        return dims[1:]
    return None


#: distinct input shapes a run notes at most (enough to tell "varies" from "fixed")
INPUT_SHAPES_KEPT = 16
#: calls of a tf.function step whose optimizer updates are counted before one update a call is taken as
#: the step's (Tracker._updates_in_call)
UPDATES_LEARNED = 3


def loss_parts(value: Any) -> tuple[Any, ...] | None:
    """What a step's loss is read from, unread: from what the step returned, a scalar, ``{"loss": ...}``,
    or the first scalar; None when there is none.

    Logs without a ``loss`` but with named losses (a GAN's ``d_loss`` and ``g_loss``, a VAE's
    ``reconstruction_loss`` and ``kl_loss``) give each of those: their sum is one trajectory to check a
    run by (a NaN or a blow-up in either shows in the sum)."""
    cand = value
    if isinstance(value, dict):
        cand = value.get("loss")
        if cand is None:
            named = [loss_parts(v) for k, v in value.items() if str(k).endswith("loss")]
            if not named or any(v is None for v in named):
                return None
            return tuple(p for parts in named if parts is not None for p in parts)
    elif isinstance(value, (list, tuple)):
        cand = next((v for v in value if getattr(v, "shape", None) is not None and _is_scalar(v)), None)
    if cand is None or not _is_scalar(cand):
        return None
    return (cand,)


def scalar_loss(value: Any) -> float | None:
    """A step's loss from what the step returned (:func:`loss_parts`), read: their sum (a tensor's
    value read with ``float()``); None when there is none or a value is not a number."""
    if type(value) is float:  # read already (a metric's, a gradient target's)
        return value
    return read_parts(loss_parts(value))


def read_parts(parts: tuple[Any, ...] | None) -> float | None:
    """The loss :func:`loss_parts` found, read (see :func:`scalar_loss`)."""
    if parts is None:
        return None
    try:
        return float(parts[0]) if len(parts) == 1 else float(sum(float(p) for p in parts))
    except (TypeError, ValueError):
        return None


def learning_rate(opt: Any) -> float:
    """An optimizer's learning rate now. Under a ``MirroredStrategy`` it is a ``MirroredVariable``, which
    ``float()`` refuses (TensorFlow's distributed Keras tutorial: the facts had no learning rate, so a
    batch-scale trial's rate change did not show); its ``numpy()`` reads it. Raises while a tf.function
    traces."""
    rate = opt.learning_rate
    try:
        return float(rate)
    except TypeError:
        return float(rate.numpy())


def share_of_mean(seen: float, before: float, n: float, mean: float) -> float:
    """One step's own value out of a running mean: the mean after it (``mean``, over ``seen + n``
    weight) less the mean before it (``before``, over ``seen``), over the step's weight ``n``."""
    return ((seen + n) * mean - seen * before) / n


def read_scalar(var: Any) -> float:
    """A scalar TensorFlow or Keras variable's value, read with the one op it needs (``ReadVariableOp``
    on its handle: ~35 µs here right after a step, where ``var.numpy()``'s layers take ~75 µs)."""
    handle = getattr(var, "handle", None)
    if handle is None:
        return float(var.numpy())
    from tensorflow.python.ops import gen_resource_variable_ops

    return float(gen_resource_variable_ops.read_variable_op(handle, var.dtype))


def returns_nothing(py: Any) -> bool:
    """Does the Python function ``py`` return nothing on every path (no ``return <value>`` in its own
    body, nested functions aside)? False when its source cannot be read: the only functions whose graph
    the capture adds to (:meth:`Tracker._keep_target`) are those whose loss it could not read otherwise,
    never one that returns a value (a ``tf.Module``'s exported ``train`` signature stays as written)."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(py)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return False
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(defs) != 1:
        return False
    todo: list[ast.AST] = list(defs[0].body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        value = node.value if isinstance(node, ast.Return) else None
        if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
            return False
        todo.extend(ast.iter_child_nodes(node))
    return True


def describe_schedule(sched: Any) -> str | None:
    """A Keras learning-rate schedule as ``Name(key=number, ...)``: its numbers (rates and step counts, from
    ``get_config()``, else its public attributes); None when ``sched`` is no schedule. The rate a schedule
    starts at says little (a warm-up starts at 0.0): these numbers show what a change of batch did to it."""
    if sched is None or not any(c.__name__ == "LearningRateSchedule" for c in type(sched).__mro__):
        return None
    try:
        config = dict(sched.get_config())
    except Exception:  # a schedule of the script's own without get_config
        config = {k: v for k, v in vars(sched).items() if not k.startswith("_")}

    def number(v: Any) -> float | None:
        if isinstance(v, (bool, str)) or v is None:
            return None
        try:
            return float(v)  # a number, a tensor, a numpy number
        except (TypeError, ValueError):
            return None

    nums = []
    for k, v in config.items():
        if isinstance(v, (list, tuple)):  # PiecewiseConstantDecay's boundaries and values
            seq = [number(x) for x in v]
            if seq and all(x is not None for x in seq):
                nums.append(f"{k}=[{' '.join(f'{x:g}' for x in seq if x is not None)}]")
        elif (x := number(v)) is not None:
            nums.append(f"{k}={x:g}")
    return f"{type(sched).__name__}({', '.join(nums)})"


def _is_floating(v: Any) -> bool:
    """A floating-point tensor (a gradient target tfdoctor can read a loss from: a scalar, or
    per-example losses, whose mean it takes; not a list of targets)."""
    return (
        bool(getattr(getattr(v, "dtype", None), "is_floating", False))
        and getattr(v, "shape", None) is not None
    )


def _of_variables(sources: Any, nest: Any) -> bool:
    """Whether a ``tape.gradient`` call differentiates with respect to variables (the training gradient)
    rather than only tensors (a derivative of the model's output with respect to its inputs: a physics-
    informed loss's u_x, a gradient penalty, a saliency map), which is part of the step, not its end.
    A Keras 3 variable is not a ``tf.Variable``: anything with ``assign`` counts."""
    try:
        flat = nest.flatten(sources)
    except Exception:  # an odd structure: keep the old behaviour (a training gradient)
        return True
    return not flat or any(hasattr(s, "assign") for s in flat)


def _is_scalar(v: Any) -> bool:
    if isinstance(v, (int, float)):
        return True
    ndim = getattr(v, "ndim", None)  # a tensor's or array's rank, without building its shape's tuple
    if type(ndim) is int:
        return ndim == 0
    shape = getattr(v, "shape", None)
    try:
        return shape is not None and len(tuple(shape)) == 0
    except TypeError:
        return False


# -- post-import hooks ---------------------------------------------------------------------------


#: why no step is seen in a TF1-style script (tf.compat.v1.disable_eager_execution(), Session.run)
GRAPH_MODE = (
    "the script turned eager execution off (tf.compat.v1.disable_eager_execution()): it trains in graph "
    "mode through tf.compat.v1.Session.run, whose steps tfdoctor does not time (it times Model.fit and "
    "GradientTape / apply_gradients steps, eager or tf.function: README, 'What counts as a step')"
)


class PostImportHooks(importlib.abc.MetaPathFinder):
    """Run callbacks right after a module finishes importing (like wrapt's post-import hooks)."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[types.ModuleType], None]]] = {}
        self._busy: set[str] = set()

    def register(self, name: str, callback: Callable[[types.ModuleType], None]) -> None:
        mod = sys.modules.get(name)
        if mod is not None:  # already imported (a notebook kernel, a sitecustomize)
            callback(mod)
            return
        self.callbacks.setdefault(name, []).append(callback)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.callbacks or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        hooks = self

        def exec_and_hook(module: types.ModuleType) -> None:
            exec_module(module)
            for cb in hooks.callbacks.pop(fullname, []):
                cb(module)

        loader.exec_module = exec_and_hook  # type: ignore[method-assign]
        return spec


def suspended_user_generator() -> str | None:
    """``file:line`` of a suspended generator object of a user file, found with ``gc.get_objects()``: only
    safe while this thread is the only one running Python (see :func:`user_generator`)."""
    import gc

    found = None
    objs = gc.get_objects()
    try:
        for obj in objs:
            if (
                type(obj) is types.GeneratorType
                and obj.gi_frame is not None
                and not obj.gi_running
                and obj.gi_frame.f_lasti >= 0
                and is_user_file(obj.gi_code.co_filename)
            ):
                found = f"{obj.gi_code.co_filename}:{obj.gi_code.co_firstlineno}"
                break
    finally:
        del objs  # drop the references before anything else runs
    return found


def user_generator() -> str | None:
    """``file:line`` of a Python generator of the script that feeds the loop, or None.

    With this thread the only one running Python: a suspended generator object of a user file, found
    with ``gc.get_objects()``. With other threads running Python (a background prefetcher, a
    ``from_generator`` pipeline, the user's own threads) that scan is unsafe: the list it returns holds
    a reference to every tracked object, including a tuple another thread is still building, whose
    ``_PyTuple_Resize`` then fails with ``SystemError: Objects/tupleobject.c: bad argument to internal
    function`` in the user's thread (cpython gh-39117; it failed a generator-prefetch trial once in the
    fix_speedup benchmark). Then the other threads' stacks are read instead (``sys._current_frames()``,
    no object scan): a generator frame of a user file, else any frame of a user file in another thread
    (a thread running the script's code beside the training loop is taken as its producer).
    """

    me = threading.get_ident()
    quiet = {t.ident for t in threading.enumerate() if t.name == WATCHDOG_THREAD}  # blocked in a read
    frames = sys._current_frames()
    others = [f for tid, f in frames.items() if tid != me and tid not in quiet]
    if not others:
        return suspended_user_generator()
    user_frame_at = None
    for top in others:
        f: types.FrameType | None = top
        while f is not None:
            code = f.f_code
            if is_user_file(code.co_filename):
                if code.co_flags & inspect.CO_GENERATOR:
                    return f"{code.co_filename}:{code.co_firstlineno}"
                user_frame_at = user_frame_at or f"{code.co_filename}:{code.co_firstlineno}"
            f = f.f_back
    return user_frame_at


# -- the tracker ---------------------------------------------------------------------------------
#: this process's id, kept current across ``os.fork`` (a forked child sets it): ``os.getpid()`` is a
#: system call, ~0.35 µs warm here and several times that right after a step, asked several times a step
_PID = [os.getpid()]


def _note_fork() -> None:
    _PID[0] = os.getpid()


os.register_at_fork(after_in_child=_note_fork)

#: how long the watch between bursts of steps lets a custom loop's steps go on without a pause before it
#: ends the run (a loop whose steps do not come in bursts: nothing to time)
TAIL_STEPS_NS = 3_000_000_000


class Tracker:
    """Receives the patched calls, decides who counts steps, feeds the :class:`StepClock`."""

    def __init__(
        self, clock: StepClock, switches: dict[str, str] | None = None, fit_phase: int | None = None
    ):
        self.clock = clock
        self.switches = dict(switches or {})
        #: ``--fit N``: the phase of fit() training to time (tfdoctor.capture.runner.CaptureConfig.fit);
        #: the script runs its earlier phases as they are, and nothing is counted before the Nth begins
        self.fit_phase = fit_phase if fit_phase and fit_phase > 1 else None
        self.skipping_fit = False  # the outermost fit() running is of an earlier phase than fit_phase
        self.main_ident = threading.get_ident()
        self.pid = os.getpid()
        self.mode: str | None = None  # keras_callback | apply_gradients | tf.function | gradient_tape
        self.in_fit = 0
        self.fn_stack: list[Any] = []  # outermost-first Function calls on the main thread
        self.fn_call_ns = 0
        self.step_fns: dict[int, str] = {}  # id(Function) -> "apply_gradients" | "gradient_tape"
        self.step_fn: Any = None
        self.primary_optimizer: int | None = None
        self.schedules_read: set[int] = set()  # ids of the optimizers whose schedule was looked for
        self.lr_later: Any = None  # an optimizer whose learning rate could not be read yet (in a trace)
        self.lr_noted_from: int | None = None  # id() of the optimizer whose rate the facts hold
        # a fit with a LearningRateScheduler: its rate is read again at the first training batch
        self.lr_at_first_batch = False
        # id(the model's compiled optimizer) at fit's start; whether an apply inside fit was seen yet
        self.fit_optimizer: int | None = None
        self.fit_applied = False
        # fit with Keras's own train_step: logs["loss"] is the epoch's running mean (see _batch_loss)
        self.fit_running_mean = False
        self.fit_seen, self.fit_mean = 0, 0.0
        self.metrics_reset = False  # the tracked model's metrics were reset inside fit (sync_loss_tracker)
        # a train_step override's logs: which ``*loss`` keys are a Mean tracker's running mean, and each
        # one's weight per batch (None: not decided yet; decided at the second batch, see _tracker_losses)
        self.tracked_model: Any = None  # the model of the outermost fit() running
        self.tracked_keys: dict[str, float] | None = None
        self.tracker_first: tuple[dict[str, Any], int] | None = None
        self.tracked_prev: dict[str, tuple[float, float]] = {}  # key -> (weight seen this epoch, mean)
        self.apply_depth = 0
        self.pending: tuple[str, int, float | None] | None = None  # weak step end not yet decided
        self.step_loss: Any = None  # the tape target of the step in progress
        self.step_batch: int | None = None
        self.fit_samples: int | None = None  # the examples an epoch of fit on arrays trains on
        self.step_saw_tfdata = False
        self.in_predict = 0  # inside a predict() the script called (its own dataset of the arrays)
        self.step_saw_function = False
        self.iter_datasets: dict[int, Any] = {}
        #: id(iterator) -> replicas that each take one element of its dataset per step (a tf.distribute
        #: iterator over distribute_datasets_from_function: one per-replica batch per local replica)
        self.iter_batch_factor: dict[int, int] = {}
        self.next_depth = (
            0  # iterator __next__ calls in progress on the main thread (a nested one is not counted)
        )
        self.dataset: Any = None
        #: a custom loop's epochs: the dataset the last step fetched from, and the step index at which
        #: each dataset's iterator was last made (see dataset_iter)
        self.step_dataset: int | None = None
        self.iter_made_at: dict[int, int] = {}
        self.input_kind: str | None = None
        self.counts: Counter[str] = Counter()
        self.facts: dict[str, Any] = {}
        self.source: dict[str, str] = {}
        self.step_kind_votes: Counter[str] = Counter()
        self.loss_metric: Any = None  # the Keras metric holding the loss of a step returning none
        self.metric_prev = (0.0, 0.0)  # that metric's total and count after the last step
        #: id(outermost Function) -> a float64 variable of ours its traced graphs add each scalar
        #: ``GradientTape.gradient`` target to (a step returning nothing: its loss), and its last value
        self.tape_acc: dict[int, Any] = {}
        self.tape_prev: dict[int, float] = {}
        #: id(outermost Function) -> the (graph name, k) of the gradient calls adding to it (their count)
        self.tape_keys: dict[int, set[tuple[str, int]]] = {}
        #: id(graph) -> gradient calls its trace has made, in the current outermost call (a first call
        #: traces twice when it creates variables; a nested tf.function traces into its own graph)
        self.trace_targets: Counter[int] = Counter()
        #: LossScaleOptimizer.scale_loss's recent results: (scaled, loss), so a gradient target that is a
        #: scaled loss (mixed_float16 in a custom loop) reads as the loss (the scale is not the training's)
        self.scaled_losses: list[tuple[Any, Any]] = []
        self.fn_returns_nothing: dict[int, bool] = {}  # id(Function) -> returns_nothing(its function)
        self.eager_targets: list[Any] = []  # the targets of a tf.function run eagerly, this call
        self.batch_votes: Counter[int] = Counter()
        #: id(step Function) -> the optimizers its trace applied (id -> optimizer): their ``iterations``
        #: tell how many updates, batches, one call ran (an in-graph loop: ``for x in dataset`` or
        #: ``for _ in tf.range(n)`` inside the tf.function)
        self.fn_optimizers: dict[int, dict[int, Any]] = {}
        self.jit_inside: set[int] = set()  # id(outermost Function) calling a jit_compile=True one inside
        self.opt_iterations: dict[int, int] = {}  # id(optimizer) -> its iterations at the last read
        self.updates_learned = 0  # calls whose updates were counted while every one ran one update
        self.update_votes: Counter[int] = Counter()
        # the shapes (after the batch dimension) of an eager step's model input, up to INPUT_SHAPES_KEPT
        self.input_shapes: set[tuple[int | None, ...]] = set()
        self.modules: dict[str, Any] = {}
        self.errors: list[str] = []
        #: in-process captures (notebook, in-script API): at the planned step, Keras fit is ended with
        #: ``model.stop_training`` and returns normally (its History bound) instead of StopCapture
        #: raised through it; the harness keeps the hard stop (the rest of the script must not run)
        self.soft_stop_fit = False
        self.fit_model: int | None = None  # id() of the model the last fit() trained (see _note_phase)
        self.fit_call_batches = 0  # batches the script's fit() call in progress (or the last) ran
        self.fit_batch_open: int | None = None  # when the fit batch begun and not yet ended began
        #: (api, site) -> what Facts.host_calls says of it (see host_call)
        self.host_calls: dict[tuple[str, str], dict[str, Any]] = {}
        self.in_host_call = 0  # inside a timed get_weights / set_weights / model call (nested ones not)
        #: id(callback) -> what Facts.fit_callbacks says of it (see time_callbacks)
        self.fit_callbacks: dict[int, dict[str, Any]] = {}
        #: (api, site) -> what Facts.keras_batch_calls says of it (see keras_batch_call)
        self.batch_calls: dict[tuple[str, str], dict[str, Any]] = {}
        self.fit_per_batch = False  # the fit() call in progress is one of a fit() per batch
        self.fit_site = ""  # the script's line the last fit() was called from
        #: the profile run's watch of the work between fit() calls (see tfdoctor.capture.child.gap): what
        #: makes one from the fit()'s line and batches (None: off, as in fix trials), the fit() in progress
        #: called from inside a loop, the watch once made
        self.gap_factory: Callable[..., GapWatch] | None = None
        self.fit_in_loop = False
        self.gap: GapWatch | None = None
        #: the watch between bursts of a custom loop's steps: the last step's call, a timed step, the
        #: burst's steps so far (see steps_gap_ready)
        self.tail_last_ns: int | None = None
        self.tail_step_ns = 0
        self.tail_burst = 0
        self.tail_begun_ns = 0
        #: the tfdata-cache trial's switch: each in-memory tf.data cache is filled before the first step
        self.fill_switch = self.switches.get(CACHE_FILL_SWITCH) == "1"
        self.filling = False  # our own pass over a cache runs: no hook counts it
        self.cache_fill: CacheFill | None = None
        #: the script's own profiler starts, left off (``patch_profiler``), each caller once:
        #: "tf.profiler.experimental.start at train.py:24", "Keras's TensorBoard(profile_batch=...) at train.py:9"
        self.own_profiler: list[str] = []
        #: debugging switches on (``patch_debug_switches``): API -> "API() at train.py:12"
        self.debug_switches: dict[str, str] = {}

    # -- helpers -------------------------------------------------------------------------------
    def on_main(self) -> bool:
        # the script's main thread, in the harness process (not a forked worker: same thread id)
        return threading.get_ident() == self.main_ident and _PID[0] == self.pid

    def _active(self) -> bool:
        return not self.in_fit and not self.clock.stopped and self.on_main() and not self.waiting_for_phase()

    def waiting_for_phase(self) -> bool:
        """``--fit N`` and the script's fit() training has not reached its Nth phase yet."""
        return self.fit_phase is not None and (self.clock.phase or 0) < self.fit_phase

    def _guard(self, what: str, fn: Callable[[], None]) -> None:
        """Run our bookkeeping; our own bug must never break the user's training (StopCapture passes)."""
        try:
            fn()
        except StopCapture:
            raise
        except Exception:  # pragma: no cover - defensive: reported in harness.json, not swallowed
            self.note_error(what)

    def note_error(self, what: str) -> None:
        """Our bookkeeping ``what`` raised (called in its ``except``): kept for harness.json. The hooks run
        every step inline rather than through :meth:`_guard` (a closure and two calls more a step)."""
        if len(self.errors) < 20:
            self.errors.append(f"{what}: {traceback.format_exc(limit=4)}")

    def _end(
        self, mode: str, t: int | None = None, loss: Any = None, batches: int = 1, fn: str | None = None
    ) -> None:
        """A step ended (by the counter ``mode``); it ran ``batches`` batches (an in-graph loop's call),
        in the step function named ``fn`` where that is not the run's first."""
        if self.mode is None:
            self.mode = mode
        if self.mode != mode:
            return
        self.pending = None
        value = None
        if loss is not None:
            value = scalar_loss(loss)
        examples = self.step_batch
        if examples is not None:
            self.batch_votes[examples] += 1
            examples *= batches  # one call ran several batches: the examples of all of them
        self.step_kind_votes["tf.function" if self.step_saw_function else "eager"] += 1
        self._reset_step()
        if self.dataset is not None:
            self.step_dataset = id(self.dataset)
        self.clock.end_step(t, loss=value, examples=examples, fn=fn)

    def _reset_step(self) -> None:
        self.step_loss = None
        self.step_batch = None
        self.step_saw_tfdata = False
        self.step_saw_function = False

    def _decide_pending(self, source: str) -> None:
        """A weak step end (tape gradient, tape-only step function) repeats: it is the step counter."""
        if self.pending is not None and self.mode is None and self.pending[0] == source:
            _, t, loss = self.pending
            self.pending = None
            self.mode = source
            self.clock.end_step(t, loss=loss, examples=self.step_batch)

    def _note_input(self) -> None:
        """Work out what the loop iterates, once, early in the run."""
        if self.input_kind is not None or self.clock.index < 1:
            return
        if self.step_saw_tfdata:
            self.input_kind = "tf.data"
            return
        where = user_generator()
        if where is not None:
            self.input_kind = "python_generator"
            self.source.setdefault("input", where)
            return
        self.input_kind = "numpy"

    # -- tracing -------------------------------------------------------------------------------
    def traced(self) -> None:
        """TensorFlow built a new concrete function (a tf.function was traced), on any thread."""
        self.counts["traces"] += 1
        if not self.clock.stopped:
            self.clock.note_trace()

    # -- Keras fit -----------------------------------------------------------------------------
    def fit_begin(self, model: Any, x: Any, batch_size: Any, validation_split: Any = 0.0) -> None:
        """A ``fit()`` of the script began (not one inside it); ``validation_split`` the share of arrays
        ``x`` it keeps aside (0 where ``validation_data`` is given)."""
        self.counts["fit"] += 1
        self.in_fit += 1
        self.fit_samples = None
        frame = user_frame(3)
        site = where(frame) or ""
        if self.in_fit == 1:
            self.fit_in_loop = in_loop(frame)
            same = self._note_phase(model, site)
            # a fit() per batch (an agent's replay: ``model.fit(state, target, epochs=1, verbose=0)``
            # for each sample): what runs between two calls (acting, predicting, the environment) is the
            # loop's work for a step, not the time between epochs that epoch_begin leaves out
            self.fit_per_batch = same and self.fit_call_batches == 1
            self.fit_call_batches = 0
            self.skipping_fit = self.waiting_for_phase()
            if self.skipping_fit:  # an earlier phase than --fit asks for: runs as it is, nothing noted
                return
            # the fit() call each phase of training began with: the report names the one the timing
            # window ran in (a script fitting several models: keras-io's SimCLR fits three)
            self.source.setdefault(f"fit_phase_{self.clock.phase}", site)
        self.facts["loop_kind"] = "keras_fit"
        self.source.setdefault("fit", site)
        try:
            self.facts["jit_compile"] = bool(model.jit_compile)
        except Exception:
            pass
        self._guard("xla support", lambda: self._note_xla_support(model))
        spe = getattr(model, "steps_per_execution", None)
        if isinstance(spe, int):
            self.facts["steps_per_execution"] = spe
        self.facts["run_eagerly"] = bool(getattr(model, "run_eagerly", False))
        self.fit_running_mean = _keras_train_step(model)
        if self.in_fit == 1:
            self.tracked_model = model
        self.fit_epoch_begin()
        opt = getattr(model, "optimizer", None)
        if opt is not None:
            self._note_optimizer(opt)
            self.fit_optimizer = id(opt)
        strategy = getattr(model, "distribute_strategy", None)
        self._note_strategy(strategy)
        policy = getattr(getattr(model, "dtype_policy", None), "name", None)
        if policy:
            self.facts["dtype_policy"] = policy
        ds = self.modules.get("dataset_cls")
        if ds is not None and isinstance(x, ds):
            self.input_kind = "tf.data"
            self.dataset = x
            bs = self._dataset_batch(x)
        elif isinstance(x, types.GeneratorType) or (
            x is not None and hasattr(x, "__getitem__") and hasattr(x, "on_epoch_end")
        ):
            self.input_kind = "python_generator"
            bs = None
        else:
            self.input_kind = "numpy" if x is not None else None
            bs = batch_size if isinstance(batch_size, int) else 32
            if x is not None:
                self.fit_samples = _train_samples(x, validation_split)
                if self.fit_samples is not None and 0 < self.fit_samples < bs:
                    bs = self.fit_samples  # fewer rows than a batch (a fit() per sample): one batch of them
        self.facts["fit_batch_size"] = bs

    def _note_phase(self, model: Any, site: str) -> bool:
        """A new phase of training begins with a fit() of another model, of a model compiled again since
        its last fit (its train function rebuilt: a frozen base then fine-tuned), or from another line of
        the script (TensorFlow's "Load and preprocess images" fits its model again on another pipeline:
        the first step traces the train function for the new batches and fills the new pipeline's cache,
        2 s against 0.3 s); a fit() per epoch of the same compiled model, from one line, goes on with
        the same phase. Returns whether it goes on with the same phase."""
        same = (
            id(model) == self.fit_model
            and getattr(model, "train_function", None) is not None
            and site == self.fit_site
        )
        self.fit_model = id(model)
        self.fit_site = site
        phase = (self.clock.phase or 0) + (0 if same else 1)
        if self.soft_stop_fit:  # in-process: fit is never stopped from outside it
            self.clock.phase = phase
        else:
            self.clock.new_phase(phase)
        return same

    def _note_xla_support(self, model: Any) -> None:
        """What makes Keras run ``model`` without XLA whatever ``compile(jit_compile=True)`` asks
        (keras.src.trainers.trainer.model_supports_jit): layers that do not support it, op determinism."""
        layers = getattr(model, "_flatten_layers", None)
        if layers is None:
            return
        why = sorted({type(layer).__name__ for layer in layers() if not getattr(layer, "supports_jit", True)})
        if self.modules.get("tf") is not None:  # keras.utils / tf.config.experimental.enable_op_determinism
            from tensorflow.python.framework import config

            if config.is_op_determinism_enabled():
                why.append("op determinism")
        self.facts["xla_unsupported"] = why

    def fit_end(self, model: Any = None) -> None:
        self.in_fit = max(0, self.in_fit - 1)
        if not self.in_fit:
            self.skipping_fit = False
            self.tracked_model = None  # not kept alive past its fit()
        if model is not None:
            self._guard("fit retraces", lambda: self._note_fit_retraces(model))

    def _note_fit_retraces(self, model: Any) -> None:
        """Traces of the tf.functions behind Keras's train_function (kept in its closure) beyond one."""
        fn = getattr(model, "train_function", None)
        counts = [
            int(cell.cell_contents.experimental_get_tracing_count())
            for cell in (getattr(fn, "__closure__", None) or ())
            if hasattr(cell.cell_contents, "experimental_get_tracing_count")
        ]
        if counts:
            self.facts["retraces"] = max(0, max(counts) - 1)

    def fit_batch_begin(self) -> None:
        if self.in_fit != 1 or not self.on_main():
            return
        self.counts["fit_batches"] += 1
        self.fit_call_batches += 1
        now = self.clock.clock()
        self.fit_batch_open = now
        self.clock.compute_start(now)

    def keras_batch_call(
        self, api: str, frame: types.FrameType | None, x: Any, batch_size: Any, seconds: float
    ) -> None:
        """The script called Keras's ``predict()`` (``api`` "predict"), or a ``fit()`` of one batch in a
        fit() per batch ("fit"), from ``frame`` while the training ran: noted by the script's line, its
        calls and their time counted in the timing window (an agent acts with predict() on a random
        share of its steps: a line not called in the timing window is still one of the loop's)."""
        clock = self.clock
        if clock.stopped or clock.index < 1 or not self.on_main():
            return
        bs = batch_size if isinstance(batch_size, int) and batch_size > 0 else 32
        rec = self._count_call(self.batch_calls, api, frame, seconds, rows=None, batch_size=bs)
        if rec is None:
            return
        rows = first_dim(x)
        if rows is not None:
            rec["rows"] = max(rows, rec["rows"] or 0)

    def host_calls_wanted(self) -> bool:
        """A Keras host call now is the loop's, between its steps: the clock runs past the first step (or
        the watch between bursts of steps runs), on the main thread, outside fit() / predict() and every
        tf.function (its tracing)."""
        clock = self.clock
        between = self.gap is not None and self.gap.loop == "steps" and self.gap.running
        return not (
            (clock.stopped and not between)
            or clock.index < 1
            or self.in_fit
            or self.in_predict
            or self.fn_stack
            or self.in_host_call
            or not self.on_main()
        )

    def host_call(self, api: str, frame: types.FrameType | None, seconds: float) -> None:
        """The script called ``api`` (get_weights, set_weights, an eager model call) from ``frame``
        between its steps: noted by the script's line, its calls and time counted in the timing window
        (or, past the windows, in the watch between bursts of steps)."""
        if self.clock.stopped:
            if self.gap is not None:
                self.gap.host_call(api, first_user_frame(frame), seconds)
            return
        self._count_call(self.host_calls, api, frame, seconds)

    #: the batch hooks of a fit() callback that run between the training batches (``on_batch_*``: the
    #: Keras 2 names, which Keras 3's default ``on_train_batch_*`` still call: the callbacks guide's
    #: ``LossHistory.on_batch_end``; ``LambdaCallback(on_batch_end=...)``)
    CALLBACK_HOOKS = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")

    def time_callbacks(self, given: Any) -> Callable[[], None]:
        """Time the batch hooks of the callbacks the script gave the outermost ``fit()`` (those that
        override them, in the class or on the instance as ``LambdaCallback`` does: a hook left as Keras's
        no-op costs nothing, and Keras dispatches such callbacks in a thread): each hook is wrapped on its
        instance for this fit(). Returns what undoes that (an instance's own hook is put back)."""
        undo: list[tuple[Any, str, Any]] = []
        for cb in given if isinstance(given, (list, tuple)) else []:
            if type(cb).__module__ == __name__:
                continue  # tfdoctor's own step counter
            depth = [0]  # one callback's hooks calling each other (on_train_batch_end -> on_batch_end): once
            for name in self.CALLBACK_HOOKS:
                try:
                    fn = getattr(cb, name)
                    own = vars(cb).get(name, _MISSING)
                except Exception:
                    continue
                if (
                    not callable(fn)
                    or getattr(fn, "_is_default", False)
                    or getattr(fn, "__tfdoctor__", False)
                ):
                    continue  # Keras's no-op, or timed already
                rec = self.fit_callbacks.get(id(cb))
                if rec is None:
                    rec = self.fit_callbacks[id(cb)] = _callback_record(cb)
                hook = self._timed_hook(fn, rec, depth)
                try:
                    setattr(cb, name, hook)
                except Exception:
                    continue
                undo.append((cb, name, own))

        def restore() -> None:
            for cb, name, own in reversed(undo):
                try:
                    if own is _MISSING:
                        delattr(cb, name)
                    else:
                        setattr(cb, name, own)
                except Exception:
                    pass

        return restore

    def _timed_hook(
        self, fn: Callable[..., Any], rec: dict[str, Any], depth: list[int]
    ) -> Callable[..., Any]:
        def hook(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if not depth[0] and self.in_fit == 1 and not self.clock.stopped and self.in_timing():
                    dt = time.perf_counter() - t0
                    rec["calls"] += 1
                    rec["seconds"] += dt
                    rec["slowest_s"] = max(rec["slowest_s"], dt)

        hook.__tfdoctor__ = True  # type: ignore[attr-defined]
        return hook

    def at_windows_end(self, t: int) -> bool:
        """The clock's hook where the planned windows end (see :meth:`steps_gap_ready`); never raises."""
        try:
            return self.steps_gap_ready(t)
        except Exception:  # pragma: no cover - defensive: reported in harness.json, the run ends
            if len(self.errors) < 20:
                self.errors.append(f"between bursts: {traceback.format_exc(limit=4)}")
            return False

    def steps_gap_ready(self, t: int) -> bool:
        """The planned steps ended inside a custom loop's steps (the profile run only; tf.function steps seen
        as they are called, eager ones as they end): the run
        goes on unprofiled, counting the burst's steps, and times the script's own work until a step
        begins after a pause (:meth:`_tail_step`): keras-io's PPO runs 80 policy and 80 value updates
        after each 4,000 environment steps, and a run ending inside the updates saw none of that. True
        when the watch starts."""
        clock = self.clock
        timed = clock.windows.timing
        if (
            self.gap_factory is None
            or self.gap is not None
            or self.in_fit
            or self.fit_site
            or self.mode not in ("tf.function", "apply_gradients", "gradient_tape")
            or (self.mode == "tf.function" and self.step_fn is None)
            or not self.on_main()
            or timed < 1
            or clock.timing_ns <= 0
        ):
            return False
        site = self.source.get("step_fn") or self.source.get("apply_gradients") or self.source.get("gradient")
        path, _, line = (site or "").rpartition(":")
        self.gap = self.gap_factory(f"{os.path.basename(path)}:{line}" if path else "", None, loop="steps")
        # a tf.function step is seen as it is called, an eager one as it ends (its apply or gradient)
        self.tail_last_ns = self.fn_call_ns if self.mode == "tf.function" else t
        self.tail_begun_ns = t
        # a step's time: the median timed step (a window that held a burst's start holds its pause too)
        self.tail_step_ns = (
            int(statistics.median(clock.timing_durs)) if clock.timing_durs else clock.timing_ns // timed
        )
        self.tail_burst = clock.index - clock.burst_start
        self.gap.start()
        self.gap.begin()
        return True

    def _watching_bursts(self) -> bool:
        """The planned steps are done and the watch between bursts of a custom loop's steps runs."""
        return self.clock.stopped and self.gap is not None and self.gap.loop == "steps"

    def between_bursts(self, mode: str) -> bool:
        """The watch between bursts of steps runs and the step counter is ``mode``: an event of it now, on
        the main thread outside every tf.function, is one of the loop's steps."""
        return self._watching_bursts() and self.mode == mode and not self.fn_stack and self.on_main()

    def _watch_step_fn(self, kind: str) -> bool:
        """During the watch between bursts of tf.function steps: a function traced now that applies
        gradients (``kind``) is a step function (see function_enter). True when the watch runs."""
        if not self._watching_bursts():
            return False
        if self.fn_stack and self.mode == "tf.function":
            self.step_fns.setdefault(id(self.fn_stack[0]), kind)
        return True

    def _tail_step(self, traced: bool = False) -> None:
        """A step function called during the watch between bursts: one more step of the burst, or, after a
        pause of BURST_PAUSE_NS (the clock's ``burst_pause_ns``) and 20 steps' time, the next burst (the
        watch and the run end). ``traced``: a step function's first call (its tracing) just returned,
        one more step whose tracing is no pause (the burst goes on after it)."""
        gap = self.gap
        now = self.clock.clock()
        last, self.tail_last_ns = self.tail_last_ns, now
        if gap is None or not gap.running or (last is None and not traced):
            return
        pause = now - last if last is not None and not traced else 0
        if pause >= max(self.clock.burst_pause_ns, 20 * self.tail_step_ns):
            gap.next_step(round(max(0, pause - self.tail_step_ns) / 1e9, 3), self.tail_burst)  # raises
        self.tail_burst += 1
        gap.fit_steps = self.tail_burst  # the burst so far (the watch's time limit or the script's end)
        gap.t0 = time.perf_counter()  # the gap, if one comes, begins after this step
        if traced:
            return
        if now - self.tail_begun_ns >= TAIL_STEPS_NS:  # no bursts: the steps just go on; nothing to time
            gap.end("script_end")
            self.gap = None
            raise StopCapture("between bursts of steps: none")

    def _count_call(
        self,
        table: dict[tuple[str, str], dict[str, Any]],
        api: str,
        frame: types.FrameType | None,
        seconds: float,
        **first: Any,
    ) -> dict[str, Any] | None:
        """``table``'s record of ``api`` called from the script's line behind ``frame`` (made with its code
        and ``first``'s fields on the first call), its calls and time counted in the timing window."""
        frame = first_user_frame(frame)
        if frame is None:
            return None
        site = sites.site(frame.f_code.co_filename, frame.f_lineno)
        rec = table.get((api, site))
        if rec is None:
            code = sites.code(frame.f_code.co_filename, frame.f_lineno)
            rec = table[(api, site)] = {"code": code, "calls": 0, "seconds": 0.0, **first}
        if self.in_timing():
            rec["calls"] += 1
            rec["seconds"] += seconds
        return rec

    def in_timing(self) -> bool:
        """The step in progress is one of the timing window's."""
        return self.clock.windows.of(self.clock.index) == "timing"

    def timed_steps(self) -> int:
        """The timing window's steps so far."""
        w = self.clock.windows
        return max(0, min(self.clock.index - w.warmup, w.timing))

    def _timed_calls(self, table: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
        """``table``'s records as facts, each with the timing window's steps so far."""
        timed = self.timed_steps()
        return [{"api": api, "site": site, **rec, "timed_steps": timed} for (api, site), rec in table.items()]

    def gap_ready(self, params: Any) -> bool:
        """The planned steps ended inside a fit(): end that fit() instead of the run (``True``) when it
        was called from inside a loop of the script and this run watches the work between fit() calls;
        ``params`` its callbacks' (the steps it would have run: ``steps`` × ``epochs``). The watch
        starts now: the epoch's end (its callbacks: a ModelCheckpoint) must not write a user's file."""
        if self.gap_factory is None or not self.fit_in_loop or self.gap is not None or self.in_fit != 1:
            return False
        if self.fit_per_batch:  # a fit() per batch: the loop's work between calls is in its steps (TFD206)
            return False
        p = params if isinstance(params, dict) else {}
        steps, epochs = p.get("steps"), p.get("epochs")
        path, _, line = self.fit_site.rpartition(":")  # "/abs/train.py:90" -> "train.py:90"
        self.gap = self.gap_factory(
            f"{os.path.basename(path)}:{line}" if path else "",
            steps * epochs if isinstance(steps, int) and isinstance(epochs, int) else None,
        )
        if self.tracked_model is not None:
            try:
                self.gap.model = weakref.ref(self.tracked_model)  # not kept alive past its fit()
            except TypeError:
                pass
        self.gap.start()
        return True

    def fit_epoch_begin(self) -> None:
        self.fit_seen, self.fit_mean = 0, 0.0
        self.tracked_prev = {}
        if self.fit_batch_open is not None:
            # the epoch before ended in a batch begun and never ended: a dataset of unknown cardinality
            # (window/flat_map, filter, from_generator) ends when its iterator runs out, inside the batch
            # after the last; that batch computed nothing, and its start must not keep the next epoch's
            # first step from beginning with its epoch (and validation out of it)
            self.clock.discard_compute(self.fit_batch_open)
            self.fit_batch_open = None
        if self.in_fit == 1 and self.on_main():
            if self.fit_per_batch:  # the step goes on from the last call's batch (see fit_begin)
                self.clock.loop_work()
            else:
                self.clock.epoch_begin()

    def fit_batch_end(self, logs: Any, begin: Any = None, per_epoch: Any = None) -> None:
        """A step of ``fit`` ended: ``begin`` its first batch of the epoch, ``per_epoch`` the epoch's
        batches when Keras knows them (its callbacks' ``params["steps"]``)."""
        if self.in_fit != 1 or not self.on_main():
            return
        self.fit_batch_open = None
        loss = logs if isinstance(logs, dict) else None  # scalar_loss reads "loss", else the named losses
        bs = self.facts.get("fit_batch_size")
        spe = self.facts.get("steps_per_execution") or 1
        if spe > 1 and isinstance(begin, int) and isinstance(per_epoch, int) and 0 <= begin < per_epoch:
            # an epoch's last execution runs the batches left (Keras's loop ends with the iterator),
            # 7 of 8 in an epoch of 15: counted as 8, a short epoch's rate was 7 % too high
            spe = min(spe, per_epoch - begin)
        self.step_batch = bs * spe if isinstance(bs, int) else None
        n = self.fit_samples
        if (
            n
            and isinstance(bs, int)
            and isinstance(begin, int)
            and isinstance(per_epoch, int)
            and per_epoch == -(-n // bs)
            and begin + spe >= per_epoch
        ):
            # fit on arrays: the epoch's last batch holds the examples left (keras-io's anomaly detection,
            # 3370 at 128: 26 batches of 128, then 42); counted as 128, examples/s was 2.5 % high at
            # batch 128 and 6 % at 256, a bias for a bigger batch
            self.step_batch = n - bs * begin
        self.step_saw_function = not self.facts.get("run_eagerly", False)
        if loss is not None and self.fit_running_mean:
            loss = self._batch_loss(loss)
        elif loss is not None:
            loss = self._tracker_losses(loss, spe)
        self._end("keras_callback", loss=loss)

    def _tracker_losses(self, logs: dict[str, Any], batches: int) -> dict[str, Any]:
        """A ``train_step`` override's logs with each ``*loss`` that is a Mean tracker's running mean
        (keras-io's GANs and VAE return ``self.g_loss_tracker.result()``, the epoch's mean so far) replaced
        by this step's own value, as :meth:`_batch_loss` does for Keras's own step: a running mean's
        step-to-step changes understate the loss noise several-fold, and the loss check's tolerance with
        them. Which keys are means is decided once, at the second batch, against the model's Mean metrics
        (their ``total / count``; at the first batch a mean and a raw loss are the same number); the
        steps after read the logs only."""
        if self.tracked_keys is None:
            if self.tracker_first is None:
                self.tracker_first = (dict(logs), batches)
                return logs
            self.tracked_keys = self._find_trackers(logs, batches)
        if not self.tracked_keys:
            return logs
        out = dict(logs)
        for key, weight in self.tracked_keys.items():
            try:
                mean = float(logs[key])
            except (KeyError, TypeError, ValueError):
                continue
            seen, before = self.tracked_prev.get(key, (0.0, 0.0))
            n = batches * weight
            if not math.isfinite(mean) or n <= 0:
                continue
            out[key] = share_of_mean(seen, before, n, mean)
            self.tracked_prev[key] = (seen + n, mean)
        return out

    def _find_trackers(self, logs: dict[str, Any], batches: int) -> dict[str, float]:
        """The ``*loss`` keys of ``logs`` whose value is a Mean metric's ``total / count`` after two
        batches, and the metric's weight per batch (1 for ``update_state(loss)``); the first batch's
        values become their running state."""
        assert self.tracker_first is not None
        first, first_batches = self.tracker_first
        means: list[tuple[float, float]] = []
        for m in list(getattr(self.tracked_model, "metrics", None) or []):
            total, count = getattr(m, "total", None), getattr(m, "count", None)
            if total is None or count is None:
                continue
            try:
                t, n = read_scalar(total), read_scalar(count)
            except Exception:
                continue
            if n > 0:
                means.append((t / n, n))
        found: dict[str, float] = {}
        for key, value in logs.items():
            if not str(key).endswith("loss"):
                continue
            try:
                v, v0 = float(value), float(first[key])
            except (KeyError, TypeError, ValueError):
                continue
            for mean, n in means:
                if math.isclose(mean, v, rel_tol=1e-5, abs_tol=1e-8):
                    weight = n / (first_batches + batches)
                    found[key] = weight
                    self.tracked_prev.setdefault(key, (first_batches * weight, v0))
                    break
        if found:
            self.facts["loss_source"] = "the step's own share of " + ", ".join(sorted(found))
        return found

    def _batch_loss(self, logs: dict[str, Any]) -> dict[str, Any]:
        """This step's own loss from Keras's ``logs["loss"]``, the running mean since the epoch began
        (Keras's own train_step feeds its loss tracker, a Mean weighted by batch size): the mean's
        total after this step less its total before, over this step's examples. A running mean drifts
        by a step's loss / steps so far: its step-to-step changes would understate the loss's noise
        several-fold, and a reordering of the data (a cache, a parallel map) shift it all along."""
        try:
            mean = float(logs["loss"])
        except (KeyError, TypeError, ValueError):
            return logs
        n = self.step_batch
        if not n or not math.isfinite(mean):
            return logs
        own = share_of_mean(self.fit_seen, self.fit_mean, n, mean)
        self.fit_seen, self.fit_mean = self.fit_seen + n, mean
        if self.metrics_reset:  # after this step's logs were made (a callback's evaluate() at its end)
            self.sync_loss_tracker()
        return {**logs, "loss": own}

    def sync_loss_tracker(self) -> None:
        """The model's metrics were reset inside fit (:func:`install`'s ``reset_metrics``): the running
        mean goes on from what Keras's loss tracker holds now (an evaluate()'s own batches: keras-io's
        callbacks guide evaluates every N batches), not from the epoch's mean."""
        self.metrics_reset = False
        self.fit_seen, self.fit_mean = 0, 0.0
        tracker = getattr(self.tracked_model, "_loss_tracker", None)
        try:
            count = float(tracker.count.numpy())  # type: ignore[union-attr]
            total = float(tracker.total.numpy())  # type: ignore[union-attr]
        except Exception:
            return  # no Keras loss tracker: the mean restarts
        if count > 0 and math.isfinite(total):
            self.fit_seen, self.fit_mean = int(count), total / count

    # -- optimizers ----------------------------------------------------------------------------
    def _note_optimizer(self, opt: Any) -> None:
        inner = getattr(opt, "inner_optimizer", None)
        self.facts.setdefault("optimizer", type(opt).__name__)
        if inner is not None:
            self.facts["optimizer"] = f"{type(opt).__name__}({type(inner).__name__})"
            opt = inner
        if "learning_rate_schedule" not in self.facts and id(opt) not in self.schedules_read:
            self.schedules_read.add(id(opt))  # once per optimizer: this runs on every apply of an eager loop
            sched = describe_schedule(getattr(opt, "_learning_rate", None))
            if sched is not None:
                self.facts["learning_rate_schedule"] = sched
        if "learning_rate" not in self.facts:
            self.lr_noted_from = id(opt)
            try:
                self.facts["learning_rate"] = learning_rate(opt)
            except Exception:  # read while a tf.function traces (train_on_batch): read it at the end
                self.lr_later = opt

    def note_scheduled_rate(self, model: Any) -> None:
        """At the first training batch of a ``fit`` with a ``LearningRateScheduler`` or a callback of the
        script's own: the rate its ``on_epoch_begin`` (or ``on_batch_begin``) set, in place of the one read
        at ``fit``'s call (a 1cycle callback overwrites the optimizer's rate before each batch; machinelearningmastery's
        ``SGD(learning_rate=0.0)`` with a ``step_decay`` schedule read 0.0, and a batch-scale trial's
        0.1 → 0.8 did not show). Only for the optimizer the facts' rate came from, and not a 0.0 (a
        warm-up from zero: the same in every run, the rate given at fit's call shows a change)."""
        self.lr_at_first_batch = False
        opt = getattr(model, "optimizer", None)
        opt = getattr(opt, "inner_optimizer", None) or opt
        if opt is not None and id(opt) == self.lr_noted_from and self.lr_later is None:
            rate = learning_rate(opt)
            if rate or not self.facts.get("learning_rate"):
                self.facts["learning_rate"] = rate

    def _note_fit_apply(self, opt: Any) -> None:
        """The first optimizer applied inside ``fit`` (while its step traces): where it is not the model's
        compiled one, a ``train_step`` override steps optimizers of its own (keras-io's WGAN-GP:
        ``compile(d_optimizer, g_optimizer, ...)`` calling ``super().compile()``, which gives the model
        Keras's default RMSprop that never steps). The facts then name the optimizer that does step, and
        its learning rate, so a change to it shows."""
        self.fit_applied = True
        if self.fit_optimizer is None or id(opt) == self.fit_optimizer:
            return
        for k in ("optimizer", "learning_rate", "learning_rate_schedule"):
            self.facts.pop(k, None)
        self.lr_later = None
        self._note_optimizer(opt)

    def _note_strategy(self, strategy: Any) -> None:
        if strategy is None:
            return
        name = type(strategy).__name__
        if name.startswith("_Default"):
            return
        self.facts["strategy"] = name
        try:
            self.facts["num_replicas"] = int(strategy.num_replicas_in_sync)
        except Exception:
            pass

    def apply_enter(self, opt: Any) -> bool:
        """Returns True when this is the outermost apply (the exit must then be reported)."""
        self.apply_depth += 1
        return self.apply_depth == 1

    def apply_exit(self, opt: Any, t_enter: int) -> None:
        self.apply_depth -= 1
        if self.in_fit and not self.fit_applied and not self.skipping_fit:
            self._note_fit_apply(opt)
        if self.between_bursts("apply_gradients") and id(opt) == self.primary_optimizer:
            self._tail_step()  # an eager step ended during the watch between bursts (may end the run)
            return
        if self._watch_step_fn("apply_gradients"):
            return
        if self.in_fit or self.clock.stopped or self.waiting_for_phase():
            return
        self.counts["apply_gradients"] += 1
        self._note_optimizer(opt)
        tf = self.modules.get("tf")
        if tf is not None and tf.distribute.has_strategy():
            self._note_strategy(tf.distribute.get_strategy())
        if self.fn_stack:  # traced (or run eagerly) inside a tf.function: that function is the step
            fn = self.fn_stack[0]
            self.step_fns[id(fn)] = "apply_gradients"
            self.fn_optimizers.setdefault(id(fn), {})[id(opt)] = opt
            self.source.setdefault("apply_gradients", where(user_frame(3)) or "")
            return
        if not self.on_main():
            return
        if self.primary_optimizer is None:
            self.primary_optimizer = id(opt)
            frame = user_frame(3)
            self.source.setdefault("apply_gradients", where(frame) or "")
            if frame is not None and frame.f_code.co_name != "<module>":
                self.source.setdefault("step_fn", where(frame, definition=True) or "")
        if id(opt) != self.primary_optimizer:
            return
        self._note_input()
        loss = self.step_loss
        self._end("apply_gradients", loss=loss)

    # -- GradientTape --------------------------------------------------------------------------
    def tape_enter(self) -> None:
        if not self._active() or self.fn_stack:
            return
        self.counts["tape_enter"] += 1
        self._decide_pending("gradient_tape")
        self.clock.compute_start()

    def note_scaled_loss(self, scaled: Any, loss: Any) -> None:
        self.scaled_losses = [*self.scaled_losses[-7:], (scaled, loss)]

    def _unscaled(self, target: Any) -> Any:
        """``target`` itself, or the loss it scales when LossScaleOptimizer.scale_loss made it."""
        return next((loss for scaled, loss in self.scaled_losses if scaled is target), target)

    def tape_gradient(self, target: Any, sources: Any) -> None:
        if self.between_bursts("gradient_tape") and _of_variables(sources, self.modules["tf"].nest):
            self._tail_step()  # an eager step ended during the watch between bursts (may end the run)
            return
        if _of_variables(sources, self.modules["tf"].nest) and self._watch_step_fn("gradient_tape"):
            return
        if self.in_fit or self.clock.stopped or self.waiting_for_phase():
            return
        if not _of_variables(sources, self.modules["tf"].nest):
            self.counts["input_gradient"] += 1  # a derivative inside the step: neither its end nor its loss
            return
        self.counts["tape_gradient"] += 1
        if self.scaled_losses:
            target = self._unscaled(target)
        if self.fn_stack:
            fn = self.fn_stack[0]
            self.step_fns.setdefault(id(fn), "gradient_tape")
            if _is_floating(target):
                self._keep_target(fn, target)
            return
        if not self.on_main():
            return
        if not _is_scalar(target) and _is_floating(target):  # per-example losses: their mean
            target = self.modules["tf"].reduce_mean(target)
        if _is_scalar(target):
            self.step_loss = target
        if self.mode == "gradient_tape":
            self._note_input()
            self._end("gradient_tape", loss=target)
        elif self.mode is None and self.primary_optimizer is None:
            if self.pending is not None:
                self._decide_pending("gradient_tape")
                self._note_input()
                self._end("gradient_tape", loss=target)
            else:
                frame = user_frame(4)
                self.source.setdefault("gradient", where(frame) or "")
                if frame is not None and frame.f_code.co_name != "<module>":
                    self.source.setdefault("step_fn", where(frame, definition=True) or "")
                self.pending = ("gradient_tape", self.clock.clock(), scalar_loss(target))

    # -- tf.function ---------------------------------------------------------------------------
    def function_enter(self, fn: Any, args: tuple[Any, ...]) -> bool:
        """Push a call on the main thread; returns True when pushed (the wrapper pops it)."""
        if self._watching_bursts():
            if self.fn_stack or not self.on_main():
                return False
            if id(fn) in self.step_fns:
                self._tail_step()  # may raise StopCapture: the next burst began
                return False
            # another function, perhaps a step first called (and traced) now: keras-io's PPO traces its
            # value update only after its policy updates; its apply_gradients then makes it one
            # (watch_traced), and its calls count in the burst from this one on
            self.fn_stack.append(fn)
            return True
        if self.in_fit or self.clock.stopped or not self.on_main() or self.waiting_for_phase():
            return False
        self.fn_stack.append(fn)
        if len(self.fn_stack) > 1 and getattr(fn, "_jit_compile", False):
            # a function compiled with XLA called inside another (the step an in-graph loop runs each
            # batch, @tf.function(jit_compile=True) on it): the outermost one's graph holds an XLA cluster
            self.jit_inside.add(id(self.fn_stack[0]))
        if len(self.fn_stack) == 1:
            try:
                self._outermost_call(fn, args)
            except StopCapture:
                self.fn_stack.pop()
                raise
            except Exception:  # pragma: no cover - defensive: reported in harness.json
                self.note_error("function enter")
        return True

    def _outermost_call(self, fn: Any, args: tuple[Any, ...]) -> None:
        self.counts["function_calls"] += 1
        self.trace_targets.clear()
        self.eager_targets.clear()
        now = self.clock.clock()
        self.fn_call_ns = now
        self.clock.touch(now)
        if id(fn) in self.step_fns:
            self._decide_pending("tf.function")
            self.clock.compute_start(now)
            self._note_call_args(args)

    def function_exit(self, fn: Any, result: Any, args: tuple[Any, ...]) -> None:
        """After an outermost-or-nested call returned (the wrapper already popped ``fn_stack``)."""
        if self.fn_stack:
            return
        if self.clock.stopped:  # the watch between bursts: a function that became a step in this call
            if id(fn) in self.step_fns:
                self._tail_step(traced=True)
            return
        kind = self.step_fns.get(id(fn))
        if kind is None:
            return
        self.step_saw_function = True
        if self.step_fn is None:
            self.step_fn = fn
            self.clock.compute_start(self.fn_call_ns)  # the tracing call: marked only inside it
            self._note_call_args(args)
            py = getattr(fn, "python_function", None)
            code = getattr(py, "__code__", None)
            if code is not None and is_user_file(code.co_filename):
                self.source["step_fn"] = f"{code.co_filename}:{code.co_firstlineno}"
            else:  # Keras's own compiled step (model.train_on_batch): where the user's code calls it
                self.source.setdefault("step_fn", where(user_frame(1)) or "")
            self.facts["jit_compile"] = bool(getattr(fn, "_jit_compile", False)) or id(fn) in self.jit_inside
        if fn is not self.step_fn and id(fn) not in self.step_fns:
            return
        if kind == "apply_gradients" or self.mode == "tf.function":
            self._note_input()
            batches = self._updates_in_call(fn)
            parts = loss_parts(result)
            if parts is None:  # a step returning nothing: the loss metric it updates,
                result = self._metric_loss(fn)  # else what it took gradients of
                if result is None:
                    result = self._tape_loss(fn)
            else:
                result = read_parts(parts)
            other = None  # a second step function (keras-io's PPO: train_policy, then train_value_function)
            if fn is not self.step_fn:
                other = (
                    getattr(getattr(fn, "python_function", None), "__name__", None)
                    or f"step function {id(fn)}"
                )
            self._end("tf.function", loss=result, batches=batches, fn=other)
        elif kind == "gradient_tape" and self.mode is None:
            # gradients computed in a tf.function: an eager apply_gradients may follow and count
            loss = scalar_loss(result)
            if loss is None and id(fn) in self.tape_acc:  # read each call: the accumulator stays in step
                loss = self._tape_loss(fn)
            self.pending = ("tf.function", self.clock.clock(), loss)

    def _updates_in_call(self, fn: Any) -> int:
        """The optimizer updates the call of the step function ``fn`` that just returned ran: one, unless
        the function loops over batches in its graph (TensorFlow's tf.function guide trains a whole epoch
        as ``for x, y in dataset:`` inside one; the distributed-training tutorial and Model Garden's Orbit
        run ``for _ in tf.range(steps): step(next(iterator))``). Read from the ``iterations`` of the
        optimizers its trace applied (what each grew by since the last call; the fewest of them: keras-io's
        WGAN-GP steps its critic 5 times a batch, its generator once). A read is one variable op
        (~35 µs): after :data:`UPDATES_LEARNED` calls that all ran one update it is not read again."""
        opts = self.fn_optimizers.get(id(fn))
        if not opts or self.updates_learned >= UPDATES_LEARNED:
            return 1
        deltas = []
        for key, opt in opts.items():
            try:
                now = int(read_scalar(opt.iterations))
            except Exception:
                return 1
            prev = self.opt_iterations.get(key)
            self.opt_iterations[key] = now
            if prev is not None:
                deltas.append(now - prev)
        if not deltas:  # the first call (it traced): nothing to compare with yet
            return 1
        k = min(deltas)
        if k <= 1:
            if not self.update_votes:
                self.updates_learned += 1
            return 1
        self.update_votes[k] += 1
        return k

    def _metric_loss(self, fn: Any) -> Any:
        """The result of the Keras metric a step returning nothing keeps its loss in: TensorFlow's
        "quickstart for experts" writes ``train_loss(loss)`` (a ``keras.metrics.Mean`` named so) inside the
        step. Found once among the step function's globals and closure: the one metric with ``loss`` in
        its name or its variable's. A ``Mean`` gives the step's own loss (what its total and count grew
        by in the step); another metric its result."""
        if self.loss_metric is None:
            self.loss_metric = False
            keras = self.modules.get("keras")
            metric_cls = getattr(getattr(keras, "metrics", None), "Metric", None)
            py = getattr(fn, "python_function", None)
            if metric_cls is None or py is None:
                return None
            scope = dict(getattr(py, "__globals__", {}) or {})
            code = getattr(py, "__code__", None)
            for name, cell in zip(
                getattr(code, "co_freevars", ()), getattr(py, "__closure__", None) or (), strict=False
            ):
                try:
                    scope[name] = cell.cell_contents
                except ValueError:
                    pass
            found = {
                id(v): v
                for k, v in scope.items()
                if isinstance(v, metric_cls) and ("loss" in str(k).lower() or "loss" in str(v.name).lower())
            }
            if len(found) == 1:
                self.loss_metric = next(iter(found.values()))
                self.facts["loss_source"] = f"metric {self.loss_metric.name}"
        if self.loss_metric is False:
            return None
        m = self.loss_metric
        try:
            total, count = getattr(m, "total", None), getattr(m, "count", None)
            if total is None or count is None:
                return m.result()
            # a Mean: its two variables (no op dispatched), and the step's own share of them, as for
            # fit's logs: a running mean's step-to-step changes understate the loss noise several-fold
            t, n = read_scalar(total), read_scalar(count)
            prev_t, prev_n = self.metric_prev
            self.metric_prev = (t, n)
            if n > prev_n:
                return (t - prev_t) / (n - prev_n)
            return t / n if n else None  # reset since (a new epoch): this step is all it holds
        except Exception:
            return None

    def _keep_target(self, fn: Any, target: Any) -> None:
        """A ``GradientTape.gradient`` target inside the tf.function ``fn`` (the outermost one), kept so a
        step returning nothing, with no loss metric (TensorFlow's DCGAN, pix2pix and style-transfer
        tutorials), still has a loss to check a fix by. While the step is traced, the target (the mean of
        per-example losses) is added to a float64 variable of ours (one per function, made outside the
        graph), which :meth:`_tape_loss` reads after each call: one ``assign_add`` per target in the
        step's graph, nothing else changed. Run eagerly (``tf.config.run_functions_eagerly(True)``),
        the value is kept as it is. Only for a function with no ``return <value>``
        (:func:`returns_nothing`), and not under a tf.distribute strategy (a per-replica target has no
        one value to assign)."""
        tf = self.modules.get("tf")
        if tf is None or tf.distribute.has_strategy() or not self.on_main():
            return
        if id(fn) not in self.fn_returns_nothing:
            self.fn_returns_nothing[id(fn)] = returns_nothing(getattr(fn, "python_function", None))
        if not self.fn_returns_nothing[id(fn)]:  # its loss is what it returns
            return
        if tf.executing_eagerly():
            self.eager_targets.append(target if _is_scalar(target) else tf.reduce_mean(target))
            return
        graph = tf.compat.v1.get_default_graph()  # retraces of one function share its name
        self.tape_keys.setdefault(id(fn), set()).add(
            (str(getattr(graph, "name", "")), self.trace_targets[id(graph)])
        )
        self.trace_targets[id(graph)] += 1
        if id(fn) not in self.tape_acc:
            with tf.init_scope():
                self.tape_acc[id(fn)] = tf.Variable(
                    0.0, trainable=False, dtype=tf.float64, name="tfdoctor_loss"
                )
        self.tape_acc[id(fn)].assign_add(tf.reduce_mean(tf.cast(target, tf.float64)))

    def _tape_loss(self, fn: Any) -> float | None:
        """The sum of the gradient targets the step ``fn`` computed in its last call (one for a
        classifier, the generator's and the discriminator's loss for a GAN: one trajectory to check the
        run by, as :func:`scalar_loss` sums a GAN's named losses): what its accumulator grew by (one
        variable read a step, ~35 µs here); None when it computed none. A NaN or infinite step is
        reported as such and the accumulator starts again from zero."""
        try:
            if self.eager_targets:
                n, value = len(self.eager_targets), float(sum(float(t) for t in self.eager_targets))
            else:
                acc = self.tape_acc.get(id(fn))
                if acc is None:
                    return None
                n = len(self.tape_keys.get(id(fn), ()))
                total = read_scalar(acc)
                value = total - self.tape_prev.get(id(fn), 0.0)
                self.tape_prev[id(fn)] = total
                if not math.isfinite(total):
                    acc.assign(0.0)
                    self.tape_prev[id(fn)] = 0.0
        except Exception:
            return None
        if "loss_source" not in self.facts:
            self.facts["loss_source"] = "gradient target" if n == 1 else f"{n} gradient targets"
        return value

    def _note_call_args(self, args: tuple[Any, ...]) -> None:
        """What a step function's call was handed: an iterator or a dataset it reads in its graph, else a
        batch (its size). Once a step, in place: no attribute a tensor lacks is looked up (each miss
        raises inside, ~2 µs here right after a step)."""
        iter_types = tuple(
            t for t in (self.modules.get("iterator_cls"), self.modules.get("dist_iterator_cls")) if t
        )
        plain = self.modules.get("tensor_cls")
        if plain is not None and all(type(a) is plain for a in args):  # tensors: a batch
            if self.step_batch is None:
                self.step_batch = first_dim(args)
            return
        for a in args:
            if iter_types and isinstance(a, iter_types):
                self.step_saw_tfdata = True
                ds = self.iter_datasets.get(id(a))
                if ds is not None:
                    self.dataset = ds
                    if self.step_batch is None:
                        bs = self._dataset_batch(ds)
                        self.step_batch = None if bs is None else bs * self.iter_batch_factor.get(id(a), 1)
                return
        dataset_cls: Any = getattr(getattr(self.modules.get("tf"), "data", None), "Dataset", None)
        for a in args if dataset_cls is not None else ():
            # a dataset handed to the step function: it loops over it in its graph (a whole epoch a call,
            # as TensorFlow's tf.function guide writes it); a tf.distribute dataset keeps the user's
            ds = a if isinstance(a, dataset_cls) else getattr(a, "_original_dataset", None)
            if isinstance(ds, dataset_cls):
                self.step_saw_tfdata = True
                self.dataset = ds
                if self.step_batch is None:
                    self.step_batch = self._dataset_batch(ds)
                return
        if self.step_batch is None:
            self.step_batch = first_dim(args)

    def fit_input_batch(self, batch: Any) -> None:
        """Model.fit's adapter produced a batch of a Python input (a PyDataset): its size is the batch."""
        n = first_dim(batch)
        if n is not None and n > 0:
            self.facts["fit_batch_size"] = n

    # -- tf.data -------------------------------------------------------------------------------
    def dataset_iter(self, dataset: Any, iterator: Any, factor: int = 1) -> None:
        if len(self.iter_datasets) > 256:
            self.iter_datasets.clear()
            self.iter_batch_factor.clear()
        self.iter_datasets[id(iterator)] = dataset
        if factor != 1:
            self.iter_batch_factor[id(iterator)] = factor
        self.custom_epoch_begin(dataset)

    def custom_epoch_begin(self, dataset: Any) -> None:
        """A custom loop made a new iterator over the dataset its steps fetch from, two steps or more after
        the last one: an epoch begins, as ``fit``'s do (:meth:`StepClock.epoch_begin`): what ran since the
        epoch's last step (a validation loop, a checkpoint save) is not the next step's time, and its
        first fetch (a shuffle buffer refilled) is held to the others' median. A user repository's loop
        (tests/data/shapes/progbar_loop.py: 256 steps of 1.85 ms, then validation and a save, 200-260 ms)
        had one such step in each 1 s window, and its trials' sub-windows spread ±22-64 %. An iterator made
        for every step (``next(iter(ds))``) is no epoch: its cost stays the step's."""
        if self.in_fit or self.fn_stack or not self._active():
            return
        key = id(dataset)
        if len(self.iter_made_at) > 256:
            self.iter_made_at.clear()
        before = self.iter_made_at.get(key)
        self.iter_made_at[key] = self.clock.index
        if key == self.step_dataset and before is not None and self.clock.index - before >= 2:
            self.clock.epoch_begin()

    def distributed_iter(self, dist_dataset: Any, iterator: Any) -> None:
        """``iter()`` of a tf.distribute dataset: remember the user's tf.data pipeline behind it.

        ``strategy.experimental_distribute_dataset(ds)`` keeps ``ds`` (batched by the global batch size,
        split across the replicas); ``distribute_datasets_from_function(fn)`` keeps one dataset per
        input worker, each batched by the per-replica size and read once per local replica a step."""
        ds = getattr(dist_dataset, "_original_dataset", None)
        factor = 1
        if ds is None:
            per_worker = getattr(dist_dataset, "_datasets", None)
            if per_worker:
                ds = per_worker[0]
                workers = getattr(dist_dataset, "_input_workers", None)
                try:
                    factor = max(1, len(workers.compute_devices_for_worker(0)))  # type: ignore[union-attr]
                except Exception:
                    factor = 1
            else:
                cloned = getattr(dist_dataset, "_cloned_datasets", None)
                ds = cloned[0] if cloned else None
        if ds is not None:
            self.dataset_iter(ds, iterator, factor)

    def iterator_next(
        self, iterator: Any, element: Any, t0: int | None = None, t1: int | None = None
    ) -> None:
        if not self._active():
            return
        self.counts["tfdata_next"] += 1
        self.clock.touch()
        if t0 is not None and t1 is not None and not self.fn_stack:
            self.clock.note_fetch(t0, t1)
        if self.in_predict:
            return
        self.step_saw_tfdata = True
        ds = self.iter_datasets.get(id(iterator))
        if ds is not None and not self.fn_stack:
            self.dataset = ds
        if self.step_batch is None:
            self.step_batch = first_dim(element)

    def fill_wanted(self) -> bool:
        """The switch is on and no step ran yet, on the main thread, eagerly (not while tracing)."""
        if not self.fill_switch or self.filling or self.clock.index > 0 or self.clock.stopped:
            return False
        if self.waiting_for_phase():  # --fit N: the pipelines of the phase timed are filled, not before
            return False
        if not self.on_main():  # Model.fit makes its iterator inside fit: in_fit is no obstacle
            return False
        tf = self.modules.get("tf")
        return tf is not None and bool(tf.executing_eagerly())

    def fill_caches(self, datasets: list[Any]) -> None:
        """Fill the in-memory caches of ``datasets`` before their iterator is made (the switch's work)."""
        deadline = getattr(self.clock.warmup, "deadline_ns", None)
        seconds = CACHE_FILL_SECONDS
        if deadline is not None:
            seconds = max(0.0, CACHE_FILL_SHARE * (deadline - time.time_ns()) / 1e9)
        self.filling = True
        try:
            got = fill_caches(datasets, seconds=seconds)
        except Exception as e:  # said in the facts: the trial is then not measured as filled
            got = CacheFill(note=f"filling failed: {type(e).__name__}: {e}"[:300])
        finally:
            self.filling = False
        if got is None:  # every cache stage there was filled or tried already
            return
        prev = self.cache_fill
        if prev is not None:  # several pipelines (or the ones tf.distribute builds over the user's)
            caches = prev.caches + got.caches
            notes = (*prev.note.split("; "), got.note)
            got = CacheFill(
                caches=caches,
                filled=prev.filled + got.filled,
                elements=prev.elements + got.elements,
                seconds=round(prev.seconds + got.seconds, 3),
                # "none found" only while none was found in any of them
                note="; ".join(dict.fromkeys(n for n in notes if n and not (caches and n == NO_CACHE))),
            )
        self.cache_fill = got

    # -- Keras layers (the batch of an eager step) ---------------------------------------------
    def layer_call(self, args: tuple[Any, ...]) -> None:
        if self.step_batch is not None or not self._active() or self.fn_stack or not args:
            return
        from tensorflow.python.eager import record

        self.clock.touch()
        if not record.could_possibly_record():
            # a call no tape records is no training forward pass (an agent acting with ``actor(state)`` on
            # one row before its tf.function update of 64, an eager validation call): not the batch
            return
        self.step_batch = first_dim(args[0])
        # a concrete batch only: building a model calls each layer on symbolic inputs (batch None)
        if (
            self.step_batch is not None
            and len(self.input_shapes) < INPUT_SHAPES_KEPT
            and (shape := inner_shape(args[0])) is not None
        ):
            self.input_shapes.add(shape)

    # -- facts ---------------------------------------------------------------------------------
    def _dataset_batch(self, ds: Any) -> int | None:
        """The batch size of the elements ``ds`` yields: its last batch stage's, unless an unbatch comes
        after it (TensorFlow's "Overfit and underfit" decodes CSV rows in batches of 10000, unbatches,
        and batches the training set by 500)."""
        for stage in reversed(walk_dataset(ds)):
            if stage.op in ("batch", "padded_batch"):
                return stage.batch_size
            if stage.op == "unbatch":
                return None
        return None

    def why_no_steps(self) -> str:
        if "tf" not in self.modules:
            return "TensorFlow was never imported"
        c = self.counts
        if self.waiting_for_phase():
            reached = self.clock.phase or 0
            return (
                f"--fit {self.fit_phase} asks for phase {self.fit_phase} of the script's fit() training, and its"
                f" fit() calls made {reached} (a new phase: a fit() of another model, of a model compiled"
                " again, or from another line)"
            )
        if c["fit"]:
            return "Model.fit was called but ran no training batch"
        try:
            graph_mode = not self.modules["tf"].compat.v1.executing_eagerly_outside_functions()
        except Exception:
            graph_mode = False
        if graph_mode:
            return GRAPH_MODE
        seen = [f"{n} {k}" for k, n in c.items() if n]
        base = "no Model.fit, optimizer.apply_gradients or GradientTape.gradient call happened"
        return base + (f" (seen: {', '.join(seen)})" if seen else "")

    def summary(self) -> dict[str, Any]:
        """Facts the tracker learnt (merged into tfdoctor.model.Facts by the harness)."""
        if "learning_rate" not in self.facts and self.lr_later is not None:
            try:
                self.facts["learning_rate"] = learning_rate(self.lr_later)
            except Exception:
                pass
        out: dict[str, Any] = {
            k: v for k, v in self.facts.items() if k not in ("fit_batch_size", "run_eagerly")
        }
        mode = self.mode
        out["step_counter"] = mode
        if mode == "keras_callback":
            out["loop_kind"] = "keras_fit"
            out["step_kind"] = "eager" if self.facts.get("run_eagerly") else "tf.function"
        elif mode is not None:
            out["loop_kind"] = "custom"
            if self.step_kind_votes:
                out["step_kind"] = self.step_kind_votes.most_common(1)[0][0]
        tf = self.modules.get("tf")
        try:
            forced = bool(tf.config.functions_run_eagerly()) if tf is not None else False
        except Exception:
            forced = False
        if self.debug_switches:
            out["debug_switches"] = list(self.debug_switches.values())
        if self.batch_calls:
            out["keras_batch_calls"] = self._timed_calls(self.batch_calls)
        if self.host_calls:
            out["host_calls"] = self._timed_calls(self.host_calls)
        timed_cbs = [r for r in self.fit_callbacks.values() if r["calls"]]
        if timed_cbs:
            timed = self.timed_steps()
            out["fit_callbacks"] = [
                {**r, "timed_steps": timed, "timing_s": self.clock.timing_ns / 1e9}
                for r in sorted(timed_cbs, key=lambda r: -r["seconds"])
            ]
        if self.gap is not None:
            self.gap.end("script_end")  # no-op when the next fit(), the limit or a write ended it
            out["between_fits"] = self.gap.facts()
        if forced:  # tf.config.run_functions_eagerly(True): the step's tf.function ran op by op
            out["functions_run_eagerly"] = True
            if "step_kind" in out:
                out["step_kind"] = "eager"
        if self.input_kind:
            out["input_kind"] = self.input_kind
        if self.input_shapes:
            out["input_shapes_vary"] = len(self.input_shapes) > 1
        if self.update_votes and mode != "keras_callback":
            # a custom loop's step function runs several batches a call (an in-graph loop): as Keras's
            # steps_per_execution, a step holds that many batches
            out["steps_per_execution"] = self.update_votes.most_common(1)[0][0]
        fit_batch = self.facts.get("fit_batch_size")
        if mode == "keras_callback" and isinstance(fit_batch, int):
            # one step of fit runs steps_per_execution batches: its examples are not the batch size
            out["batch_size"] = fit_batch
        elif self.batch_votes:
            out["batch_size"] = self.batch_votes.most_common(1)[0][0]
        elif isinstance(fit_batch, int):
            out["batch_size"] = fit_batch
        if self.dataset is not None:
            out["dataset"] = [s.model_dump() for s in walk_dataset(self.dataset)]
            if self.input_kind is None:
                out["input_kind"] = "tf.data"
        fn = self.step_fn
        if fn is not None:
            try:
                out["retraces"] = max(0, int(fn.experimental_get_tracing_count()) - 1)
            except Exception:
                pass
        if self.fill_switch:
            fill = self.cache_fill or CacheFill(note="no tf.data dataset was iterated before the first step")
            out["tfdata_cache_fill"] = fill.model_dump()
        out["source"] = {k: v for k, v in self.source.items() if v}
        out["counts"] = dict(self.counts)
        return out


# -- tf.data graph ---------------------------------------------------------------------------------
_OP_NAMES = {
    "TensorSliceDataset": "from_tensor_slices",
    "TensorDataset": "from_tensors",
    "ParallelMapDataset": "map",
    "MapDataset": "map",
    "ParallelBatchDataset": "batch",
    "BatchDataset": "batch",
    "PaddedBatchDataset": "padded_batch",
    "PrefetchDataset": "prefetch",
    "CacheDataset": "cache",
    "ShuffleDataset": "shuffle",
    "RepeatDataset": "repeat",
    "TakeDataset": "take",
    "SkipDataset": "skip",
    "FilterDataset": "filter",
    "FlatMapDataset": "flat_map",
    "InterleaveDataset": "interleave",
    "ParallelInterleaveDataset": "interleave",
    "RangeDataset": "range",
    "TFRecordDatasetV2": "tfrecord",
    "UnbatchDataset": "unbatch",
    "ZipDataset": "zip",
}
_SKIP = {"OptionsDataset", "_OptionsDataset", "DatasetV1Adapter"}


def _static(t: Any) -> Any:
    try:
        import tensorflow as tf

        v = tf.get_static_value(t)
        return None if v is None else v.item() if hasattr(v, "item") else v
    except Exception:
        return None


def _random_ops(ds: Any, limit: int = 3) -> list[str]:
    """Random op types in a map stage's function (and the functions it calls), sorted, at most
    ``limit``: such a map draws anew each epoch, so caching its output would freeze one draw."""
    fn = getattr(getattr(ds, "_map_func", None), "function", None)
    graph = getattr(fn, "graph", None)
    if graph is None:
        return []
    found: set[str] = set()
    graphs, seen = [graph], 0
    while graphs and seen < 32:
        g = graphs.pop()
        seen += 1
        try:
            found.update(o.type for o in g.get_operations() if "Random" in o.type or "Rng" in o.type)
            graphs.extend(getattr(f, "graph", None) for f in getattr(g, "_functions", {}).values())
            graphs = [x for x in graphs if x is not None]
        except Exception:
            continue
    return sorted(found)[:limit]


def walk_dataset(ds: Any, limit: int = 64) -> list[DatasetStage]:
    """The stages of a tf.data pipeline, source first, as far as the Python dataset objects tell."""
    stages: list[DatasetStage] = []
    cur = ds
    while cur is not None and len(stages) < limit:
        cls = type(cur).__name__.lstrip("_")
        src = getattr(cur, "_tfdoctor_source", None)
        if src:
            stages.append(DatasetStage(op=src))
            break
        if cls not in _SKIP and type(cur).__name__ not in _SKIP:
            op = _OP_NAMES.get(cls) or cls.removesuffix("V2").removesuffix("Dataset").lower() or cls
            parallel = autotune = None
            detail = ""
            npc = getattr(cur, "_num_parallel_calls", None)
            if op in ("map", "batch", "interleave"):
                n = _static(npc) if npc is not None else None
                parallel = n is not None and n != 1
                autotune = n == -1 if n is not None else False
                if op == "map" and n is not None:
                    detail = f"num_parallel_calls={'AUTOTUNE' if n == -1 else n}"
                if op == "map":
                    rnd = _random_ops(cur)
                    if rnd:
                        detail += (", " if detail else "") + f"random ops: {', '.join(rnd)}"
            batch_size = None
            if op in ("batch", "padded_batch"):
                bs = _static(getattr(cur, "_batch_size", None))
                batch_size = bs if isinstance(bs, int) and not isinstance(bs, bool) and bs > 0 else None
                detail = f"batch_size={bs}" + (f", {detail}" if detail else "")
                if npc is not None:
                    n = _static(npc)
                    detail += f", num_parallel_calls={'AUTOTUNE' if n == -1 else n}"
            if op == "prefetch":
                buf = _static(getattr(cur, "_buffer_size", None))
                autotune = buf == -1
                detail = f"buffer_size={'AUTOTUNE' if buf == -1 else buf}"
            if op == "cache":
                fn = _static(getattr(cur, "_filename", None))
                detail = "in memory" if not fn else f"file={fn!s}"
            if op == "shuffle":
                detail = f"buffer_size={_static(getattr(cur, '_buffer_size', None))}"
            stages.append(
                DatasetStage(
                    op=op, parallel=parallel, autotune=autotune, batch_size=batch_size, detail=detail
                )
            )
        inputs = []
        try:
            inputs = list(cur._inputs())
        except Exception:
            inputs = []
        cur = inputs[0] if inputs else None
    stages.reverse()
    return stages


# -- filling in-memory caches (the tfdata-cache trial) ---------------------------------------------
#: the filling may take this share of the time left to the warm-up's deadline (half the run's timeout)
CACHE_FILL_SHARE = 0.5
CACHE_FILL_SECONDS = 120.0  # without a deadline
CACHE_FILL_ELEMENTS = 10_000_000
#: the cache may hold this share of the memory available when the filling starts
CACHE_FILL_MEMORY_SHARE = 0.5
CACHE_FILL_BATCH = 1024  # elements read per Python-level step of the filling
NO_CACHE = "no in-memory cache() in the pipelines iterated before the first step"


def _is_memory_cache(ds: Any) -> bool:
    if not type(ds).__name__.lstrip("_").startswith("CacheDataset"):
        return False
    return not _static(getattr(ds, "_filename", None))


def cache_nodes(datasets: list[Any], limit: int = 256) -> list[Any]:
    """The in-memory cache stages (``cache()`` without a file name) under ``datasets``, each once, the
    outermost first (through every input: a ``zip``'s too)."""
    found: list[Any] = []
    seen: set[int] = set()
    todo = [d for d in datasets if d is not None]
    while todo and len(seen) < limit:
        cur = todo.pop(0)
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        if _is_memory_cache(cur):
            found.append(cur)
        try:
            todo.extend(cur._inputs())
        except Exception:
            continue
    return found


def _element_bytes(spec: Any) -> int | None:
    """Bytes of one element from its static spec, None when a shape is not fully known."""
    import tensorflow as tf

    total = 0
    for leaf in tf.nest.flatten(spec):
        shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
        if shape is None or dtype is None or not shape.is_fully_defined() or dtype == tf.string:
            return None
        n = 1
        for d in shape:
            n *= int(d)
        total += n * dtype.size
    return total


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def fill_caches(
    datasets: list[Any],
    *,
    seconds: float = CACHE_FILL_SECONDS,
    max_elements: int = CACHE_FILL_ELEMENTS,
    max_bytes: int | None = None,
) -> CacheFill | None:
    """Read each in-memory cache stage under ``datasets`` once to its end, so the pipelines over it
    read a full cache from their first element on; None when every one was tried before.

    The pass goes through the cache stage's own dataset object: TensorFlow keeps the in-memory cache
    in that object (its variant), shared by every iterator of every pipeline built on it, the
    distributed ones included. Only the stages' ``(elements, seconds)`` are read: a map that drops each
    element and a batch on top, run in TensorFlow. A cache is left unfilled (and a partly read one is
    discarded by TensorFlow, as a partial epoch's) when it is infinite (a ``repeat`` before it), would
    hold more than ``max_bytes`` (half the available memory) or ``max_elements``, or when ``seconds``
    run out; the :class:`CacheFill` says which."""
    import tensorflow as tf

    found = cache_nodes(datasets)
    if not found:
        return CacheFill(note=NO_CACHE)
    nodes = [n for n in found if not getattr(n, "_tfdoctor_fill_tried", False)]
    if not nodes:
        return None
    if max_bytes is None:
        avail = _available_bytes()
        max_bytes = int(CACHE_FILL_MEMORY_SHARE * avail) if avail else None
    t0 = time.monotonic()
    filled = elements = 0
    notes: list[str] = []
    for node in nodes:
        try:
            node._tfdoctor_fill_tried = True
        except Exception:
            pass
        card = int(node.cardinality())
        if card == tf.data.INFINITE_CARDINALITY:
            notes.append("a cache is infinite (a repeat before it): not filled")
            continue
        per = _element_bytes(node.element_spec)
        if card >= 0 and card > max_elements:
            notes.append(f"a cache of {card} elements is over the limit ({max_elements}): not filled")
            continue
        if card >= 0 and per is not None and max_bytes is not None and card * per > max_bytes:
            notes.append(
                f"a cache of {card} elements would hold {_gib(card * per)}, over the limit "
                f"({_gib(max_bytes)}, half the available memory): not filled"
            )
            continue
        read, why = 0, ""
        probe = node.map(lambda *_: tf.constant(0, tf.int8)).batch(CACHE_FILL_BATCH)
        for part in probe:
            read += int(part.shape[0])
            spent = time.monotonic() - t0
            if read > max_elements:
                why = f"over {max_elements} elements"
            elif per is not None and max_bytes is not None and read * per > max_bytes:
                why = f"over {_gib(max_bytes)} (half the available memory)"
            elif spent > seconds:
                why = f"over the time limit ({seconds:.0f} s)"
            if why:
                break
        del probe
        if why:
            notes.append(f"a cache was not filled: stopped after {read} elements, {why}")
            continue
        filled += 1
        elements += read
        try:
            node._tfdoctor_filled = True
        except Exception:
            pass
    return CacheFill(
        caches=len(nodes),
        filled=filled,
        elements=elements,
        seconds=round(time.monotonic() - t0, 3),
        note="; ".join(notes),
    )


def datasets_behind(dist_dataset: Any) -> list[Any]:
    """The tf.data datasets a tf.distribute dataset iterates (``experimental_distribute_dataset``'s
    original, ``distribute_datasets_from_function``'s per-worker ones)."""
    out: list[Any] = []
    for attr in ("_original_dataset", "_datasets", "_cloned_datasets"):
        v = getattr(dist_dataset, attr, None)
        if v is None:
            continue
        out.extend(v if isinstance(v, (list, tuple)) else [v])
    return out


# -- installing the patches ------------------------------------------------------------------------
#: every patch in place, oldest first: (owner: a class or module, attribute, original);
#: :func:`uninstall` undoes them
_PATCHES: list[tuple[Any, str, Any]] = []


def uninstall() -> None:
    """Put back every patched attribute, newest first (in-process capture: the notebook magic)."""
    while _PATCHES:
        owner, name, orig = _PATCHES.pop()
        if orig is None:  # defined on the class by tfdoctor, inherited before
            if name in owner.__dict__:
                delattr(owner, name)
        else:
            setattr(owner, name, orig)


def _wrap(owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    orig = owner.__dict__.get(name)
    if orig is None or getattr(orig, "__tfdoctor__", False):
        return
    new = make(orig)
    new.__tfdoctor__ = True  # type: ignore[attr-defined]
    new.__wrapped__ = orig  # type: ignore[attr-defined]
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(new, attr, getattr(orig, attr))
        except (AttributeError, TypeError):
            pass
    _PATCHES.append((owner, name, orig))
    setattr(owner, name, new)


def install(tracker: Tracker, hooks: PostImportHooks) -> None:
    """Register the TensorFlow and Keras patches to run as soon as those modules are imported."""
    hooks.register("tensorflow", lambda m: tracker._guard("patch tensorflow", lambda: patch_tf(tracker, m)))
    hooks.register("keras", lambda m: tracker._guard("patch keras", lambda: patch_keras(tracker, m)))


#: who starts the profiler, by the module calling ``start``: (module prefix, as the report names it)
OWN_PROFILER_CALLERS = (
    ("keras", "Keras's TensorBoard(profile_batch=...)"),
    ("tensorflow.python.ops.summary_ops_v2", "tf.summary.trace_on(profiler=True)"),
    ("tensorflow.python.profiler.profiler_v2", "tf.profiler.experimental.Profile(...)"),
)


def patch_profiler(tracker: Tracker, tf: Any) -> None:
    """Leave the script's own profiler off: TensorFlow runs one profiler session at a time, and a script
    that profiles itself (``tf.profiler.experimental.start``/``stop`` or ``Profile(logdir)``, as
    TensorFlow's profiler guide shows; ``tf.summary.trace_on(profiler=True)``; Keras's
    ``TensorBoard(profile_batch=...)``) would take it from tfdoctor's window ("Another profiler is
    running": no trace) and perturb the steps timed. Its ``start`` and ``stop`` do nothing under
    tfdoctor and each call is noted (``Tracker.own_profiler``, said in the report); its
    ``tf.profiler.experimental.Trace`` markers are kept (cheap, and read as step markers). tfdoctor's own
    session calls the originals (:func:`profiler_original`)."""
    from tensorflow.python.profiler import profiler_v2

    def make(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> None:
                if what == "start":  # a stop without effect needs no word of its own
                    caller = sys._getframe(1)
                    tracker._guard("profiler call", lambda: note(caller))

            return call

        return wrap

    def note(caller: types.FrameType) -> None:
        frame = first_user_frame(caller)
        at = short_site(frame)
        module = str(caller.f_globals.get("__name__", ""))
        who = next(
            (text for prefix, text in OWN_PROFILER_CALLERS if module.startswith(prefix)),
            "tf.profiler.experimental.start"
            if frame is caller
            else f"{module.split('.')[0]}'s profiler start",
        )
        if all(not t.startswith(who) for t in tracker.own_profiler) and len(tracker.own_profiler) < 8:
            tracker.own_profiler.append(who + at)  # the first call of each: Keras's is at the callback's line

    public = getattr(getattr(tf, "profiler", None), "experimental", None)
    for owner in (profiler_v2, public):
        if owner is None:
            continue
        _wrap(owner, "start", make("start"))
        _wrap(owner, "stop", make("stop"))


def patch_debug_switches(tracker: Tracker, tf: Any) -> None:
    """Note where the script turns on one of TensorFlow's debugging switches (:data:`DEBUG_SWITCHES`:
    ``tf.debugging.enable_check_numerics()``, ...) and forget it where it turns it off again: what is
    left is ``Facts.debug_switches`` (a report note; the ``debug-switches`` fix). The calls themselves run as
    the script wrote them."""
    from tfdoctor.model import DEBUG_SWITCHES

    def owner_of(path: str) -> tuple[Any, str] | None:
        obj = tf
        parts = path.split(".")[1:]
        for p in parts[:-1]:
            obj = getattr(obj, p, None)
            if obj is None:
                return None
        return (obj, parts[-1]) if hasattr(obj, parts[-1]) else None

    def make(api: str, on: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                out = orig(*args, **kwargs)
                turned_on = on and (api != "tf.debugging.set_log_device_placement" or bool(args and args[0]))
                caller = sys._getframe(1)
                tracker._guard("debug switch", lambda: note(api, turned_on, caller))
                return out

            return call

        return wrap

    def note(api: str, turned_on: bool, caller: types.FrameType) -> None:
        if not turned_on:
            tracker.debug_switches.pop(api, None)
            return
        tracker.debug_switches.setdefault(api, f"{api}(){short_site(first_user_frame(caller))}")

    for api, off, _ in DEBUG_SWITCHES:
        for path, on in ((api, True), (off, False)):
            found = owner_of(path) if path else None
            if found is not None:
                _wrap(found[0], found[1], make(api, on))


def profiler_original(tf: Any, name: str) -> Callable[..., Any]:
    """``tf.profiler.experimental.<name>`` as TensorFlow defines it, under :func:`patch_profiler`'s wrapper."""
    fn = getattr(tf.profiler.experimental, name)
    while getattr(fn, "__tfdoctor__", False):
        fn = fn.__wrapped__
    return fn  # type: ignore[no-any-return]


def patch_tf(tracker: Tracker, tf: Any) -> None:
    from tensorflow.python.data.ops import dataset_ops, iterator_ops
    from tensorflow.python.eager import backprop
    from tensorflow.python.eager.polymorphic_function import polymorphic_function
    from tensorflow.python.framework import ops

    tracker.modules.update(
        tf=tf,
        dataset_cls=dataset_ops.DatasetV2,
        iterator_cls=iterator_ops.OwnedIterator,
        tensor_cls=getattr(ops, "EagerTensor", None),
    )
    jit = tracker.switches.get("jit")
    if jit in ("1", "0"):
        tf.config.optimizer.set_jit(jit == "1")
    replicas = tracker.switches.get("logical_devices")  # tfdoctor scale --replicas: before any device use
    if replicas:
        from tfdoctor.capture.child.devices import configure_logical_devices

        tracker.switches["logical_devices_done"] = configure_logical_devices(tf, int(replicas))

    def make_fn_call(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __call__(self: Any, *args: Any, **kwds: Any) -> Any:
            outer = tracker.function_enter(self, args)
            if not outer:
                return orig(self, *args, **kwds)
            try:
                result = orig(self, *args, **kwds)
            finally:
                tracker.fn_stack.pop()
            try:
                tracker.function_exit(self, result, args)
            except StopCapture:
                raise
            except Exception:  # pragma: no cover - defensive: reported in harness.json
                tracker.note_error("function exit")
            return result

        return __call__

    def make_fn_init(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __init__(self: Any, python_function: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, python_function, *args, **kwargs)
            code = getattr(python_function, "__code__", None)
            if jit in ("1", "0") and code is not None and is_user_file(code.co_filename):
                self._jit_compile = jit == "1"

        return __init__

    _wrap(polymorphic_function.Function, "__call__", make_fn_call)
    _wrap(polymorphic_function.Function, "__init__", make_fn_init)

    try:  # where TF 2.x builds a traced function's graph; without it, the warm-up judges step times only
        from tensorflow.python.eager.polymorphic_function import tracing_compilation
    except ImportError:  # pragma: no cover - another TensorFlow layout
        tracing_compilation = None
    if tracing_compilation is not None:

        def make_trace(orig: Callable[..., Any]) -> Callable[..., Any]:
            def _create_concrete_function(*args: Any, **kwargs: Any) -> Any:
                out = orig(*args, **kwargs)
                tracker._guard("trace", tracker.traced)
                return out

            return _create_concrete_function

        _wrap(tracing_compilation, "_create_concrete_function", make_trace)

    def make_enter(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __enter__(self: Any) -> Any:
            tracker._guard("tape enter", tracker.tape_enter)
            return orig(self)

        return __enter__

    def make_gradient(orig: Callable[..., Any]) -> Callable[..., Any]:
        def gradient(self: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(self, target, *args, **kwargs)
            sources = args[0] if args else kwargs.get("sources")
            tracker._guard("tape gradient", lambda: tracker.tape_gradient(target, sources))
            return out

        return gradient

    _wrap(backprop.GradientTape, "__enter__", make_enter)
    _wrap(backprop.GradientTape, "gradient", make_gradient)
    patch_profiler(tracker, tf)
    patch_debug_switches(tracker, tf)

    def iter_hook(
        what: str, note: Callable[[Any, Any], None], behind: Callable[[Any], list[Any]]
    ) -> Callable[..., Any]:
        """A wrapper factory for a dataset's ``__iter__``: the caches of ``behind(dataset)`` filled
        first (the tfdata-cache switch), the iterator made, then ``note(dataset, it)``."""

        def make(orig: Callable[..., Any]) -> Callable[..., Any]:
            def __iter__(self: Any) -> Any:
                if tracker.filling:
                    return orig(self)
                if tracker.fill_wanted():
                    tracker._guard("tfdata cache fill", lambda: tracker.fill_caches(behind(self)))
                it = orig(self)
                tracker._guard(what, lambda: note(self, it))
                return it

            return __iter__

        return make

    def make_next(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __next__(self: Any) -> Any:
            main = tracker.on_main()
            if tracker.filling or (
                main and tracker.next_depth
            ):  # read by another iterator's __next__: the outer one counts
                return orig(self)
            t0 = tracker.clock.clock()  # the fetch itself is the input wait, not the time since the step
            tracker.next_depth += main
            try:
                element = orig(self)
            finally:
                tracker.next_depth -= main
            t1 = tracker.clock.clock()
            try:
                tracker.iterator_next(self, element, t0, t1)
            except StopCapture:
                raise
            except Exception:  # pragma: no cover - defensive: reported in harness.json
                tracker.note_error("iterator next")
            return element

        return __next__

    _wrap(dataset_ops.DatasetV2, "__iter__", iter_hook("dataset iter", tracker.dataset_iter, lambda d: [d]))
    _wrap(iterator_ops.OwnedIterator, "__next__", make_next)

    # tf.distribute: `for x in strategy.experimental_distribute_dataset(ds)` /
    # `distribute_datasets_from_function(fn)` iterate a DistributedIterator, whose per-worker iterators
    # are read with get_next (no OwnedIterator.__next__): the same bookkeeping, one level up
    try:
        from tensorflow.python.distribute import input_lib
    except ImportError:  # pragma: no cover - another TensorFlow layout
        input_lib = None
    if input_lib is not None:
        tracker.modules["dist_iterator_cls"] = input_lib.DistributedIteratorBase

        make_dist_iter = iter_hook("distributed dataset iter", tracker.distributed_iter, datasets_behind)
        for cls_name in ("DistributedDataset", "DistributedDatasetsFromFunction"):
            cls = getattr(input_lib, cls_name, None)
            if cls is not None:
                _wrap(cls, "__iter__", make_dist_iter)
        _wrap(input_lib.DistributedIteratorBase, "__next__", make_next)

    orig_from_gen = dataset_ops.DatasetV2.__dict__.get("from_generator")
    if isinstance(orig_from_gen, staticmethod) and not getattr(orig_from_gen.__func__, "__tfdoctor__", False):
        func = orig_from_gen.__func__

        def from_generator(*args: Any, **kwargs: Any) -> Any:
            ds = func(*args, **kwargs)
            try:
                ds._tfdoctor_source = "from_generator"
            except Exception:
                pass
            return ds

        from_generator.__tfdoctor__ = True  # type: ignore[attr-defined]
        from_generator.__doc__ = func.__doc__
        _PATCHES.append((dataset_ops.DatasetV2, "from_generator", orig_from_gen))
        dataset_ops.DatasetV2.from_generator = staticmethod(from_generator)


def patch_keras(tracker: Tracker, keras: Any) -> None:
    from keras.src.layers.layer import Layer
    from keras.src.optimizers.base_optimizer import BaseOptimizer

    tracker.modules["keras"] = keras
    policy = tracker.switches.get("dtype_policy")
    if policy:
        keras.mixed_precision.set_global_policy(policy)
    jit = tracker.switches.get("jit")

    class TfdoctorCallback(keras.callbacks.Callback):
        """Counts Model.fit's training batches for tfdoctor (added by the harness)."""

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            tracker._guard("fit epoch begin", tracker.fit_epoch_begin)

        begin: int | None = None

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self.begin = batch
            if (
                tracker.metrics_reset
            ):  # a callback's evaluate() before this batch: its loss goes on from there
                tracker._guard("fit metrics reset", tracker.sync_loss_tracker)
            if tracker.lr_at_first_batch:
                tracker._guard("fit scheduled rate", lambda: tracker.note_scheduled_rate(self.model))
            tracker._guard("fit batch begin", tracker.fit_batch_begin)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            per_epoch = (getattr(self, "params", None) or {}).get("steps")
            try:
                tracker._guard("fit batch end", lambda: tracker.fit_batch_end(logs, self.begin, per_epoch))
            except StopCapture:
                if getattr(self, "model", None) is None:
                    raise
                if not tracker.soft_stop_fit and not tracker.gap_ready(getattr(self, "params", None)):
                    raise
                self.model.stop_training = True

    class _FirstBatch(keras.callbacks.Callback):
        """Ends the watch of the work between fit() calls at the next fit()'s first batch's end."""

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            gap = tracker.gap
            if gap is not None and gap.in_next_fit:
                gap.first_batch()  # raises StopCapture: the run is complete

    fit_owner = next((c for c in keras.Model.__mro__ if "fit" in c.__dict__), None)
    if fit_owner is not None:

        def make_fit(orig: Callable[..., Any]) -> Callable[..., Any]:
            def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
                if tracker.gap is not None and tracker.gap.running and not tracker.in_fit:
                    # the loop's next fit(): the work between them is timed, and this fit() up to the end of
                    # its first batch (its setup; a train function traced for a model built in the loop)
                    gap = tracker.gap
                    gap.next_fit(self)
                    args_l = _fit_with_callback(args, kwargs, _FirstBatch())
                    tracker.in_fit = max(tracker.in_fit, 1)
                    try:
                        orig(self, *args_l, **kwargs)
                    finally:
                        tracker.in_fit = 0
                    gap.stop("next_fit")  # no batch (an empty dataset): the watch ends with the fit()
                if tracker.in_fit or tracker.clock.stopped:
                    return orig(self, *args, **kwargs)
                own_kwargs = dict(kwargs)
                args_l = _fit_with_callback(args, kwargs, TfdoctorCallback())
                x = args_l[0] if args_l else kwargs.get("x")
                bs = args_l[2] if len(args_l) > 2 else kwargs.get("batch_size")
                split = args_l[6] if len(args_l) > 6 else kwargs.get("validation_split", 0.0)
                if (args_l[7] if len(args_l) > 7 else kwargs.get("validation_data")) is not None:
                    split = 0.0  # Keras splits the arrays only without validation_data
                noted = "learning_rate" in tracker.facts
                tracker._guard("fit begin", lambda: tracker.fit_begin(self, x, bs, split))
                if tracker.skipping_fit:  # --fit N: an earlier phase, run as the script wrote it
                    tracker.in_fit = max(tracker.in_fit, 1)
                    try:
                        return orig(self, *args, **own_kwargs)
                    finally:
                        tracker.fit_end()
                given = args_l[5] if len(args_l) > 5 else kwargs.get("callbacks")
                given = getattr(given, "callbacks", given)  # a CallbackList's own list
                # the rate this fit's optimizer noted may be set by a LearningRateScheduler at each
                # epoch's begin, or by a callback of the script's own (ageron's 1cycle sets it before each
                # batch): read it again at the first batch (their callbacks run before ours)
                tracker.lr_at_first_batch = not noted and any(
                    type(c).__name__ == "LearningRateScheduler"
                    or not type(c).__module__.startswith(("keras", "tensorflow", "tf_keras"))
                    for c in (given if isinstance(given, (list, tuple)) else [])
                )
                tracker.in_fit = max(tracker.in_fit, 1)
                untime: list[Callable[[], None]] = []  # the script's callbacks' batch hooks, timed
                tracker._guard("fit callbacks", lambda: untime.append(tracker.time_callbacks(given)))
                t0 = time.perf_counter()
                try:
                    out = orig(self, *args_l, **kwargs)
                finally:
                    for undo in untime:
                        undo()
                    tracker.fit_end(self)
                if tracker.gap is not None and tracker.gap.active and not tracker.in_fit:
                    tracker.gap.begin()  # the fit() gap_ready ended early returned: the gap's time runs
                if tracker.fit_per_batch and not tracker.in_fit:
                    seconds = time.perf_counter() - t0
                    frame = sys._getframe(1)
                    tracker._guard(
                        "fit per batch", lambda: tracker.keras_batch_call("fit", frame, x, bs, seconds)
                    )
                return out

            return fit

        _wrap(fit_owner, "fit", make_fit)

    reset_owner = next((c for c in keras.Model.__mro__ if "reset_metrics" in c.__dict__), None)
    if reset_owner is not None:

        def make_reset(orig: Callable[..., Any]) -> Callable[..., Any]:
            def reset_metrics(self: Any, *args: Any, **kwargs: Any) -> Any:
                out = orig(self, *args, **kwargs)
                if tracker.in_fit == 1 and self is tracker.tracked_model:
                    # the loss tracker restarts: an evaluate() inside fit (a callback's check on held-out
                    # data every N batches) resets the model's metrics and fills the tracker with its own
                    # batches' loss (read as the epoch's running mean, the next step's loss came out -22)
                    tracker.metrics_reset = True  # read again where our callback runs next
                return out

            return reset_metrics

        _wrap(reset_owner, "reset_metrics", make_reset)

    predict_owner = next((c for c in keras.Model.__mro__ if "predict" in c.__dict__), None)
    if predict_owner is not None:

        def make_predict(orig: Callable[..., Any]) -> Callable[..., Any]:
            def predict(self: Any, *args: Any, **kwargs: Any) -> Any:
                gap = tracker.gap if tracker.gap is not None and tracker.gap.running else None
                if tracker.in_fit or (tracker.clock.stopped and gap is None):  # a callback's: fit's own time
                    return orig(self, *args, **kwargs)
                t0 = time.perf_counter()
                tracker.in_predict += 1  # the dataset predict() makes of its arrays is not the loop's input
                try:
                    out = orig(self, *args, **kwargs)
                finally:
                    tracker.in_predict -= 1
                seconds = time.perf_counter() - t0
                x = args[0] if args else kwargs.get("x")
                frame = sys._getframe(1)
                if gap is not None:  # between the fit() calls of a loop: may end the run (its time limit)
                    gap.predicted(first_user_frame(frame), first_dim(x), seconds)
                    return out
                bs = args[1] if len(args) > 1 else kwargs.get("batch_size")
                tracker._guard("predict", lambda: tracker.keras_batch_call("predict", frame, x, bs, seconds))
                return out

            return predict

        _wrap(predict_owner, "predict", make_predict)

    # Keras host work between the steps of a loop (Facts.host_calls): weights copied through numpy, and
    # models called eagerly outside every tf.function and GradientTape
    from tensorflow.python.eager import record

    def timed_host(api: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not tracker.host_calls_wanted() or (api == "call" and record.could_possibly_record()):
                return orig(self, *args, **kwargs)
            t0 = time.perf_counter()
            tracker.in_host_call += 1
            try:
                return orig(self, *args, **kwargs)
            finally:
                tracker.in_host_call -= 1
                seconds = time.perf_counter() - t0
                frame = sys._getframe(1)
                tracker._guard("host call", lambda: tracker.host_call(api, frame, seconds))

        return call

    for name in ("get_weights", "set_weights"):
        owner = next((c for c in keras.Model.__mro__ if name in c.__dict__), None)
        if owner is not None:
            _wrap(owner, name, functools.partial(timed_host, name))
    if "__call__" not in keras.Model.__dict__:  # Layer's: wrapped for models only (not every layer)
        _PATCHES.append((keras.Model, "__call__", None))
        keras.Model.__call__ = timed_host("call", keras.Model.__call__)

    compile_owner = next((c for c in keras.Model.__mro__ if "compile" in c.__dict__), None)
    if compile_owner is not None and jit in ("1", "0"):

        def make_compile(orig: Callable[..., Any]) -> Callable[..., Any]:
            def compile(self: Any, *args: Any, **kwargs: Any) -> Any:
                kwargs["jit_compile"] = jit == "1"
                return orig(self, *args, **kwargs)

            return compile

        _wrap(compile_owner, "compile", make_compile)

    def make_apply(orig: Callable[..., Any]) -> Callable[..., Any]:
        def apply(self: Any, *args: Any, **kwargs: Any) -> Any:
            t = time.time_ns()
            outer = tracker.apply_enter(self)
            try:
                out = orig(self, *args, **kwargs)
            except BaseException:
                tracker.apply_depth -= 1
                raise
            if outer:
                tracker._guard("apply", lambda: tracker.apply_exit(self, t))
            else:
                tracker.apply_depth -= 1
            return out

        return apply

    for cls in _subclasses(BaseOptimizer):
        if "apply" in cls.__dict__:
            _wrap(cls, "apply", make_apply)

    scaler = getattr(getattr(keras, "optimizers", None), "LossScaleOptimizer", None)
    if scaler is not None and "scale_loss" in scaler.__dict__:

        def make_scale_loss(orig: Callable[..., Any]) -> Callable[..., Any]:
            def scale_loss(self: Any, loss: Any) -> Any:
                out = orig(self, loss)
                if not tracker.in_fit:
                    tracker._guard("scale loss", lambda: tracker.note_scaled_loss(out, loss))
                return out

            return scale_loss

        _wrap(scaler, "scale_loss", make_scale_loss)

    def make_layer_call(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            if tracker.step_batch is None and not tracker.in_fit:
                tracker._guard("layer call", lambda: tracker.layer_call(args))
            return orig(self, *args, **kwargs)

        return __call__

    _wrap(Layer, "__call__", make_layer_call)

    # fit(generator): Keras peeks the first batch to learn its structure; that batch gives the size
    try:
        from keras.src.trainers.data_adapters.generator_data_adapter import GeneratorDataAdapter
    except ImportError:  # pragma: no cover - another Keras layout
        GeneratorDataAdapter = None
    if GeneratorDataAdapter is not None:

        def make_adapter_init(orig: Callable[..., Any]) -> Callable[..., Any]:
            def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
                orig(self, *args, **kwargs)
                if tracker.in_fit and tracker.facts.get("fit_batch_size") is None:
                    tracker._guard(
                        "generator adapter",
                        lambda: tracker.facts.__setitem__(
                            "fit_batch_size", first_dim(getattr(self, "_first_batches", None))
                        ),
                    )

            return __init__

        _wrap(GeneratorDataAdapter, "__init__", make_adapter_init)

    # fit(PyDataset) (keras.utils.Sequence is the same class): the adapter standardises every batch
    # __getitem__ returns, the first of them while it peeks for the output signature; its size is the
    # batch (PyDatasetAdapter.batch_size is None: Keras does not know it either)
    try:
        from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter
    except ImportError:  # pragma: no cover - another Keras layout
        PyDatasetAdapter = None
    if PyDatasetAdapter is not None:

        def make_standardize(orig: Callable[..., Any]) -> Callable[..., Any]:
            def _standardize_batch(self: Any, batch: Any) -> Any:
                out = orig(self, batch)
                if tracker.in_fit and tracker.facts.get("fit_batch_size") is None:
                    tracker._guard("py_dataset batch", lambda: tracker.fit_input_batch(out))
                return out

            return _standardize_batch

        _wrap(PyDatasetAdapter, "_standardize_batch", make_standardize)


def _subclasses(cls: type) -> list[type]:
    out, todo = [cls], [cls]
    while todo:
        sub: type
        for sub in todo.pop().__subclasses__():
            if sub not in out:
                out.append(sub)
                todo.append(sub)
    return out


#: "no such instance attribute" (see Tracker.time_callbacks)
_MISSING = object()

#: a Keras callback's attributes that make it work each batch, as the finding names them
_CALLBACK_SETTINGS = ("save_freq", "update_freq", "histogram_freq", "write_steps_per_second")


def _callback_record(cb: Any) -> dict[str, Any]:
    """What :class:`~tfdoctor.model.FitCallback` says of ``cb`` before it is timed: its class, where the
    script's own class defines its batch hook, the settings that make a Keras callback work each batch."""
    cls = type(cb)
    rec: dict[str, Any] = {"name": cls.__name__, "site": "", "code": "", "settings": ""}
    rec.update(calls=0, seconds=0.0, slowest_s=0.0)
    own = vars(cb) if hasattr(cb, "__dict__") else {}
    if not cls.__module__.startswith(("keras", "tensorflow", "tf_keras")) or any(
        n in own for n in Tracker.CALLBACK_HOOKS
    ):
        for name in ("on_train_batch_end", "on_batch_end", "on_train_batch_begin", "on_batch_begin"):
            fn = own.get(name) or getattr(cls, name, None)  # LambdaCallback(on_batch_end=...): the instance's
            code = getattr(fn, "__code__", None)
            if code is not None and is_user_file(code.co_filename):
                rec["site"] = sites.site(code.co_filename, code.co_firstlineno)
                rec["code"] = sites.code(code.co_filename, code.co_firstlineno)
                break
    else:
        parts = []
        for attr in _CALLBACK_SETTINGS:
            v = getattr(cb, attr, None)
            if v is None or v is False or isinstance(v, (dict, list)):
                continue
            parts.append(f"{attr}={v!r}")
        rec["settings"] = ", ".join(parts)
    return rec


def _fit_with_callback(args: tuple[Any, ...], kwargs: dict[str, Any], cb: Any) -> list[Any]:
    """``fit``'s positional arguments with ``cb`` added to its callbacks (the sixth positional, or
    ``callbacks=`` in ``kwargs``, updated in place)."""
    args_l = list(args)
    if len(args_l) > 5:
        args_l[5] = _with_callback(args_l[5], cb)
    else:
        kwargs["callbacks"] = _with_callback(kwargs.get("callbacks"), cb)
    return args_l


def _with_callback(callbacks: Any, cb: Any) -> Any:
    if callbacks is None:
        return [cb]
    inner = getattr(callbacks, "callbacks", None)
    if isinstance(inner, list) and hasattr(callbacks, "on_train_batch_end"):  # a CallbackList
        inner.append(cb)
        configure = getattr(callbacks, "_configure_async_dispatch", None)
        if configure is not None:
            configure(inner)
        return callbacks
    if isinstance(callbacks, (list, tuple)):
        return [*callbacks, cb]
    return [callbacks, cb]
