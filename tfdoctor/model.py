"""The typed data that flows through tfdoctor: facts, steps, breakdown, findings, fixes, report.

Everything a renderer (terminal, HTML, web, notebook) shows comes from a :class:`Report`;
``report.json`` in a run directory is ``Report.model_dump_json()``. Durations in the report are
milliseconds (``*_ms``); raw harness clock readings are nanoseconds since the epoch (``*_ns``,
``time.time_ns()``: the same clock the TensorFlow profiler stamps host events with).
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import statistics
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 1

#: Step-time categories, in the order they are shown. XProf's names where it has one.
CATEGORIES: tuple[str, ...] = (
    "input_wait",  # waiting for the next batch (tf.data GetNext, Python generator, host-side batch prep)
    "host_compute",  # Python / host work inside the step that is neither input nor op dispatch
    "dispatch",  # eager op-by-op dispatch on the host; kernel-launch gaps on a GPU
    "device_compute",  # kernels / op kernels doing the math (on CPU-only runs: TF op kernels on the CPU)
    "device_idle",  # device waiting on the host with nothing else explaining it
    "h2d",  # host-to-device copies
    "d2h",  # device-to-host copies
    "collective",  # all-reduce and other cross-replica communication
    "other",  # the rest of the step's wall time
)

CATEGORY_LABELS: dict[str, str] = {
    "input_wait": "Input wait",
    "host_compute": "Host compute",
    "dispatch": "Launch / dispatch",
    "device_compute": "Device compute",
    "device_idle": "Device idle",
    "h2d": "Host→device copy",
    "d2h": "Device→host copy",
    "collective": "Collectives",
    "other": "Other",
}

Severity = Literal["high", "medium", "low", "info"]
RunStatus = Literal["running", "complete", "failed", "interrupted", "timeout", "no_steps"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Device(_Frozen):
    name: str  # "/physical_device:GPU:0"
    kind: str  # "CPU" | "GPU" | "TPU"
    model: str | None = None  # "NVIDIA H200", "Intel(R) Xeon(R) ..."
    compute_capability: str | None = None  # "9.0"


class DatasetStage(_Frozen):
    """One transformation of the tf.data pipeline feeding the step, as the harness saw it."""

    op: str  # "map", "batch", "prefetch", "from_generator", "cache", ...
    parallel: bool | None = None  # num_parallel_calls set (map/interleave/batch)
    autotune: bool | None = None
    batch_size: int | None = None  # batch / padded_batch: the static batch size, when known
    detail: str = ""  # for people: "batch_size=32, drop_remainder", "buffer_size=AUTOTUNE", ...


#: the run-time switch of the tfdata-cache trial: the harness fills each in-memory tf.data cache before
#: the first step, so the timed steps see the cache's steady state (as from the second epoch on)
CACHE_FILL_SWITCH = "tfdata_cache_fill"
#: traces of a step that is a tf.function already, beyond the first (Facts.retraces), from which the
#: tf-function fix adds reduce_retracing=True to it (TFD204 names that fix): the last partial batch alone
#: traces once more
RETRACES_RELAXED = 3


class CacheFill(_Frozen):
    """The in-memory tf.data caches the harness filled before the first step (the ``tfdata-cache``
    trial's run-time switch ``tfdata_cache_fill``), so the timed steps read a full cache as from the
    second epoch on."""

    caches: int = 0  # in-memory cache stages found in the pipelines iterated before the first step
    filled: int = 0  # of those, read to their end (full)
    elements: int = 0  # elements read into the filled caches
    seconds: float = 0.0  # time the filling took
    note: str = ""  # why a cache was not filled (none found, over the time or memory limit, ...)


#: the step marker tfdoctor's harness writes (``tf.profiler.experimental.Trace(STEP_MARKER, step_num=i, _r=1)``,
#: the name TensorBoard's own tools understand) and the marker around each step's input fetch
STEP_MARKER = "train"
INPUT_MARKER = "tfdoctor_input"
#: the step markers Keras writes: TF 2.3's TraceContext, Keras 3's TensorBoard(profile_batch=...) "Profiled batch"
KERAS_STEP_MARKERS = ("TraceContext", "Profiled batch")
#: every step marker, in the order of trust
STEP_MARKERS = (STEP_MARKER, *KERAS_STEP_MARKERS)


#: TensorFlow's debugging switches that slow every step while on: (the API the script calls, the one that
#: turns it off or None, what it costs). A script left with one on after a debugging session trains
#: several times slower (check_numerics: 4.6x on a small tf.function loop here)
DEBUG_SWITCHES = (
    (
        "tf.debugging.enable_check_numerics",
        "tf.debugging.disable_check_numerics",
        "every op's float output is checked for NaN and Inf",
    ),
    (
        "tf.debugging.experimental.enable_dump_debug_info",
        "tf.debugging.experimental.disable_dump_debug_info",
        "every op's tensors are summarised and written to disk",
    ),
    (
        "tf.data.experimental.enable_debug_mode",
        None,
        "tf.data runs its functions eagerly and in order, with no parallelism",
    ),
    (
        "tf.debugging.set_log_device_placement",
        None,
        "every op's placement is logged",
    ),
)


class KerasBatchCall(_Frozen):
    """A Keras ``predict()`` the script called in its training loop, or a ``fit()`` it called once per
    batch (an agent's replay), as the harness saw it after the first step. Each call builds a data
    adapter, a tf.data pipeline and an iterator for its arrays (about 120 ms here for one row, Keras
    3.15), where ``predict_on_batch`` / ``train_on_batch`` run the one batch (about 1 and 3 ms)."""

    api: Literal["predict", "fit"]
    site: str  # "dqn.py:80": the script's line that called it
    code: str  # that line's text, stripped (the keras-on-batch fix finds the call by it)
    calls: int  # calls in the timing window (0: seen in the other windows only)
    rows: int | None = None  # the most rows one call was given (None: not known)
    batch_size: int = 32  # the call's batch_size (Keras's default)
    seconds: float = 0.0  # time inside the calls, in the timing window
    timed_steps: int = 0  # the timing window's steps (calls / timed_steps: calls a step)


class HostCall(_Frozen):
    """A Keras call the script made between its training steps that works on the host, as the harness
    timed it after the first step: ``get_weights()`` / ``set_weights()`` (every weight copied to or from
    numpy: keras-io's DDPG soft-updates its target networks that way each step in its Keras 3 version),
    or ``call``, a model called eagerly outside every tf.function and GradientTape (op by op: an agent
    acting with ``actor(state)``)."""

    api: Literal["get_weights", "set_weights", "call"]
    site: str  # "ddpg.py:196": the script's line that called it
    code: str  # that line's text, stripped
    calls: int  # calls in the timing window (0: seen in the other windows only)
    seconds: float = 0.0  # time inside the calls, in the timing window
    timed_steps: int = 0  # the timing window's steps (calls / timed_steps: calls a step)


class FitCallback(_Frozen):
    """A callback given to ``fit()`` whose per-batch hooks (``on_train_batch_begin`` / ``on_train_batch_end``
    or Keras 2's ``on_batch_*``, overridden in its class or set on it as ``LambdaCallback`` does) the
    harness timed in the timing window: they run between the training batches, on the
    host, before the next batch starts (Keras 3 runs a callback's batch hooks in a thread only when none
    of the callbacks overrides them). ``name`` is its class; ``site`` and ``code`` where the script's own
    class defines its batch hook (empty for Keras's callbacks); ``settings`` what makes a Keras callback
    work each batch (``save_freq=10``, ``update_freq=1``)."""

    name: str  # "ModelCheckpoint", "LossHistory"
    site: str = ""  # "train.py:27": the script's own on_train_batch_end (empty: a Keras callback)
    code: str = ""  # that line's text, stripped
    settings: str = ""  # "save_freq=10": what makes it work each batch
    calls: int = 0  # batch-hook calls in the timing window
    seconds: float = 0.0  # time inside them, in the timing window
    slowest_s: float = 0.0  # the longest call
    timed_steps: int = 0  # the timing window's steps
    timing_s: float = 0.0  # the timing window's steps' time, summed


class GapPredict(_Frozen):
    """``predict()`` calls the script made at one line between two ``fit()`` calls, or Keras host calls
    (``api``: a model called eagerly, get_weights / set_weights) between two bursts of a custom loop's
    steps (see BetweenFits)."""

    site: str  # "char_lstm.py:112"
    code: str  # that line's text, stripped
    calls: int
    seconds: float  # inside those calls
    rows: int | None = None  # the most rows one call was given
    api: Literal["predict", "call", "get_weights", "set_weights"] = "predict"


class BetweenFits(_Frozen):
    """The script's own work between two ``fit()`` calls of a fit-per-epoch loop, as the profile run
    timed it: the planned steps ended inside a ``fit()`` called from a loop, that fit() was ended there
    (``model.stop_training``) and the script went on until ``ended_by``: "next_fit" (the loop's next
    ``fit()`` began: ``seconds`` is the whole gap), "limit" (still going after ``limit_s``: at least that
    long), "write" (it opened ``write_path`` for writing: the run stopped before that), "script_end".
    After "next_fit" the watch went on to the end of that fit()'s first batch: ``next_fit_first_batch_s``
    from its call (its setup, and the tracing of its train function where ``next_fit_model`` is "new", a
    model built in the loop, or "recompiled", the same model compiled again; "same": neither).

    ``loop`` "steps": the same watch in a custom loop whose steps come in bursts (keras-io's
    PPO: 80 policy and 80 value updates after each 4,000 environment steps): the planned steps ended
    inside a burst, the run went on unprofiled to the burst's end and timed the script's work until the
    next step ("next_step"); ``fit_steps`` is then the burst's steps, ``fit_site`` the step function's
    line, and ``model_calls`` the Keras host calls in the gap (a model called eagerly, get_weights /
    set_weights)."""

    seconds: float
    ended_by: Literal["next_fit", "next_step", "limit", "write", "script_end"]
    limit_s: float
    write_path: str | None = None
    fit_site: str = ""  # "char_lstm.py:95": the fit() of the loop
    fit_steps: int | None = None  # the batches one such fit() runs (batches an epoch × its epochs)
    predict_calls: list[GapPredict] = Field(default_factory=list)  # the most time first
    next_fit_model: Literal["same", "new", "recompiled"] | None = None
    next_fit_first_batch_s: float | None = None
    loop: Literal["fit", "steps"] = "fit"
    model_calls: list[GapPredict] = Field(default_factory=list)  # the most time first ("steps" only)

    def loop_time(self, step_ms: float, steps_per_execution: int = 1) -> tuple[float, float, float]:
        """(seconds outside the training steps, seconds of them, setup) for one pass of the loop at
        ``step_ms`` a step: the gap and the next fit()'s first batch beyond a step (``setup``: its set-up and
        tracing) against the steps one fit() runs (a step of ``steps_per_execution`` batches)."""
        spe = max(1, steps_per_execution)
        fit_s = -(-(self.fit_steps or 0) // spe) * step_ms / 1000
        first = self.next_fit_first_batch_s
        setup = max(0.0, first - step_ms / 1000) if first is not None else 0.0
        return self.seconds + setup, fit_s, setup


#: a custom loop whose steps come in bursts and that spends at least this share of its time between them
#: (TFD207) has its --fix runs judged on the whole loop's rate (tfdoctor.session.fix_loop.loop_throughput):
#: its steps' rate is not what its user waits for (keras-io's PPO: 96 % of the loop between bursts)
WHOLE_LOOP_SHARE = 0.5


#: compute capability from which an NVIDIA GPU has tensor cores (Volta and newer)
TENSOR_CORE_CC = 7.0


#: float16 dtype policies: fast on tensor-core GPUs, slow on every CPU (TFD404 replaces them there)
FP16_POLICIES = ("mixed_float16", "float16")

#: what no fix does for a Python data source, said by generator-prefetch's advice and TFD101's evidence
#: (``who``: the generator, or "the Python source"): its per-example work runs under the GIL
#: (pydataset_fit's expert twin, 2026-12-02: the same numpy work as tf.data ops ran 1.16x the baseline where
#: prefetch and the generator cache measured no decided gain)
PYTHON_WORK_ADVICE = (
    "{who} still does its per-example work in Python under the GIL; moving it into tf.data ops "
    "(tf.data.Dataset.from_tensor_slices(...).map(<the same steps as tf ops>, num_parallel_calls=tf.data.AUTOTUNE)"
    ".batch(...).prefetch(tf.data.AUTOTUNE)) runs it in parallel threads outside Python: see docs/fixes.md "
    "(generator-prefetch) for the patch pattern"
)


class Facts(_Frozen):
    """What the harness recorded about the run, independent of the trace."""

    tf_version: str | None = None
    keras_version: str | None = None
    python_version: str | None = None
    platform: str | None = None
    hostname: str | None = None
    devices: list[Device] = Field(default_factory=list)
    cpu_count: int | None = None  # usable cores (the process's affinity)
    cpu_flags: list[str] = Field(default_factory=list)  # the ones that matter: avx2, avx512_bf16, amx_bf16...
    loop_kind: Literal["keras_fit", "custom", "unknown"] = "unknown"
    step_kind: Literal["eager", "tf.function", "unknown"] = "unknown"
    step_counter: str | None = None  # which hook counted steps: "keras_callback", "apply_gradients", ...
    input_kind: Literal["tf.data", "python_generator", "numpy", "unknown"] = "unknown"
    batch_size: int | None = None  # first dimension of the step's input
    # an eager step's model input changed shape (after the batch dimension) from step to step: a batch
    # padded to its own longest sequence; None when not seen (a tf.function or fit step)
    input_shapes_vary: bool | None = None
    dtype_policy: str | None = None  # "float32", "mixed_float16", "mixed_bfloat16"
    # XLA on the step: model.compile(jit_compile=...) or tf.function(jit_compile=...)
    jit_compile: bool | None = None
    auto_jit: bool | None = None  # tf.config.optimizer.get_jit()
    # why Keras would run the fitted model without XLA whatever compile() asks (its model_supports_jit):
    # the layer classes that do not support it (RandomRotation, StringLookup...), "op determinism"
    xla_unsupported: list[str] | None = None
    # tf.config.run_functions_eagerly(True) was on: every tf.function (the step too) ran op by op
    functions_run_eagerly: bool | None = None
    # debugging switches the script turned on and left on while it trained, each with where:
    # "tf.debugging.enable_check_numerics() at train.py:12" (see DEBUG_SWITCHES)
    debug_switches: list[str] = Field(default_factory=list)
    # Keras predict() calls in the training loop and fit() calls of one batch each (see KerasBatchCall)
    keras_batch_calls: list[KerasBatchCall] = Field(default_factory=list)
    host_calls: list[HostCall] = Field(default_factory=list)  # Keras host work between the steps
    # fit()'s callbacks whose batch hooks take time between the batches (see FitCallback)
    fit_callbacks: list[FitCallback] = Field(default_factory=list)
    #: the work between the fit() calls of a fit-per-epoch loop (None: not watched; see BetweenFits)
    between_fits: BetweenFits | None = None
    strategy: str | None = None  # class name of the active tf.distribute strategy
    num_replicas: int = 1
    steps_per_execution: int | None = None
    optimizer: str | None = None
    learning_rate: float | None = None
    # the optimizer's learning-rate schedule and its numbers: "CosineDecay(initial_learning_rate=0, ...)"
    learning_rate_schedule: str | None = None
    retraces: int | None = None  # tf.function traces of the step function beyond the first
    # warm-up as it happened: adaptive unless --warmup was given (see capture/clock.py)
    warmup_steps: int | None = None  # steps the warm-up actually took
    warmup_note: str | None = None  # why it was longer than planned, or why it stopped waiting
    # caches added by tfdoctor's generator-cache fix (functions carrying a ``tfdoctor_memo`` dict),
    # summed at the end of the warm-up; None when the script has none
    memo_hits: int | None = None
    memo_misses: int | None = None
    memo_full: bool | None = None
    memo_warm: bool | None = None  # the caches served the warm-up's last step (hit rate >= 90 %) or were full
    tfdata_cache_fill: CacheFill | None = None  # None unless the run had the switch on
    dataset: list[DatasetStage] = Field(default_factory=list)
    source: dict[str, str] = Field(default_factory=dict)  # role -> "file.py:LINE" (e.g. "step_fn")
    # the lines of the script's own ``.fit(`` calls, read from its source (a Keras fit run): where it has
    # several, the report names the one whose steps were timed (source "fit_phase_N")
    script_fit_lines: list[int] = Field(default_factory=list)
    # a remote capture (`tfdoctor capture grpc://...`): from where, which hosts gave a trace, which did not
    # and which of those no longer accepted connections afterwards (their process probably died)
    captured_from: str | None = None
    hosts: list[str] = Field(default_factory=list)
    hosts_without_trace: list[str] = Field(default_factory=list)
    hosts_not_answering: list[str] = Field(default_factory=list)
    extra: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _cpu_from_extra(cls, data: Any) -> Any:
        """Runs recorded before cpu_count/cpu_flags were fields kept them as strings in ``extra``."""
        if not isinstance(data, dict) or not isinstance(data.get("extra"), dict):
            return data
        extra = dict(data["extra"])
        count, flags = extra.pop("cpu_count", None), extra.pop("cpu_flags", None)
        if count is None and flags is None:
            return data
        out = {**data, "extra": extra}
        if data.get("cpu_count") is None and count:
            try:
                out["cpu_count"] = int(count)
            except ValueError:
                pass
        if not data.get("cpu_flags") and flags:
            out["cpu_flags"] = str(flags).split()
        return out

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.kind == "GPU"]


class StepTiming(_Frozen):
    """One training step as the harness clocked it (wall time, no profiler needed)."""

    index: int
    window: Literal["warmup", "timing", "profile"]
    start_ns: int
    end_ns: int
    input_wait_ns: int = 0  # getting the batch: tf.data next() calls; else step start until compute began
    between_ns: int = 0  # the rest of step start -> compute start: host work between steps (metrics, logs)
    loss: float | None = None
    examples: int | None = None
    # the phase of training the step ran in (fit only): 1, then one more at each fit() of another model
    # of a model compiled again, or from another line (a frozen base, then fine-tuned, runs its phases at
    # other speeds; a fit on another pipeline first traces and fills its cache)
    phase: int | None = None
    # the first step of a Keras epoch (fit): its iterator is made anew, and the step waits for what the
    # pipeline does once an epoch (a shuffle buffer filled; the old iterator's delete, which can wait
    # for its autotuning thread)
    epoch_start: bool = False
    # the step function the step ran, where it is not the run's first (None: the first, or not known): a
    # loop with two training steps, keras-io's PPO (``train_policy`` returning its KL, then
    # ``train_value_function`` whose loss is a squared return), records two losses of other kinds, and
    # the loss check compares each function's steps with its own (tfdoctor.fixes.sanity.loss_check)
    fn: str | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


class Throughput(_Frozen):
    """Throughput over the timing window: median of sub-windows with their spread."""

    examples_per_s: float | None = None
    steps_per_s: float
    step_ms_median: float
    windows: list[float] = Field(default_factory=list)  # steps/s of each sub-window
    spread: float = 0.0  # (max - min) / median of the sub-windows: the noise band
    n_steps: int = 0
    # batches one measured step holds: Keras compile(steps_per_execution=N) runs N batches a call, and a
    # step here is one call (steps/s and ms/step are per call); None: one batch a step
    batches_per_step: int | None = None

    @classmethod
    def from_steps(
        cls,
        steps: list[StepTiming],
        batch_size: int | None,
        n_windows: int = 5,
        *,
        steps_per_execution: int | None = None,
    ) -> Throughput | None:
        """Median throughput of ``steps`` (the timing window) split into ``n_windows`` parts; each step
        holds ``steps_per_execution`` batches (Keras's, the run's facts) where that is more than one.

        Each epoch's first step is held to the others' median (:func:`epoch_starts_capped`), and the median
        leaves out a sub-window that one long step held, so the rate is the steady one. A
        window too short for that (under two steps a sub-window) leaves out such a step itself
        (:func:`lone_stalls`): otherwise a trial of a few long steps (``steps_per_execution``, a bigger
        batch) whose window crossed an epoch start would be measured with the stall its reference's
        median dropped. keras-io's multi-input functional-API example (40 batches an epoch): a 3-step
        steps-per-execution window held the 1.1 s start of epoch 2 (0.26 s steps) and read 0.44x."""
        steps = sorted(steps, key=lambda s: s.index)
        if not steps:
            return None
        timed = lone_stalls(steps) if len(steps) < 2 * n_windows else epoch_starts_capped(steps)
        n_windows = max(1, min(n_windows, len(timed) // 2 or 1))
        size = len(timed) // n_windows
        rates = []
        for w in range(n_windows):
            part = timed[w * size : (w + 1) * size if w < n_windows - 1 else len(timed)]
            span = sum(s.duration_ns for s in part)
            rates.append(len(part) / (span / 1e9) if span > 0 else 0.0)
        med = statistics.median(rates)
        spread = (max(rates) - min(rates)) / med if med > 0 else 0.0
        durs = [s.duration_ns / 1e6 for s in steps]
        ex = None
        # examples per step as the harness counted them (batches may vary), else the batch size fact
        counted = [s.examples for s in timed if s.examples]
        per_step = statistics.fmean(counted) if len(counted) == len(timed) else batch_size
        if per_step:
            ex = med * per_step
        return cls(
            examples_per_s=ex,
            steps_per_s=med,
            step_ms_median=statistics.median(durs),
            windows=rates,
            spread=spread,
            n_steps=len(steps),
            batches_per_step=steps_per_execution if steps_per_execution and steps_per_execution > 1 else None,
        )


#: a timed step this many times the median of its window's steps is a stall (the breakdown's outlier rule,
#: tfdoctor.analysis.OUTLIER_STEP, is this factor)
STALL_STEP = 4.0


def lone_stalls(steps: list[StepTiming]) -> list[StepTiming]:
    """``steps`` without those that took :data:`STALL_STEP` times their median or longer, where they are
    few (at most a quarter of the steps, or one); all of them where fewer than three were timed or such
    steps recur (more than that: then they are the state's own rhythm). A step that alternates with
    others at 2-3x (a prefetcher's fill, an epoch's small last step) is not one."""
    if len(steps) < 3:
        return steps
    med = statistics.median(s.duration_ns for s in steps)
    stalls = {s.index for s in steps if med > 0 and s.duration_ns >= STALL_STEP * med}
    if not stalls or len(stalls) > max(1, len(steps) // 4):
        return steps
    return [s for s in steps if s.index not in stalls]


def epoch_starts_capped(steps: list[StepTiming]) -> list[StepTiming]:
    """``steps`` with each epoch's first step held to the median of the others' time: what it spent over
    that is the pipeline's once an epoch (its iterator made anew: a shuffle buffer refilled, the old
    iterator's delete waiting for its autotuning thread), not a step's. The DeepLearning.AI course's
    ``windowed_dataset`` (31 batches an epoch, ``shuffle(1000)``), measured: 9 ms steps, each epoch's first
    60-80 ms, one in three 340-390 ms; a 1 s window held two or three epoch starts, more than the
    sub-windows' median can leave out, and its sub-window rates spread 0.4-1.5 of their median (0.04-0.5
    held). Held, not dropped: a state of longer steps (steps_per_execution, a bigger batch) pays the same
    once an epoch on fewer steps, and keeps nothing of it either. A stall inside an epoch (a generator
    loading a file every tenth batch) is the step's own and stays."""
    rest = [s.duration_ns for s in steps if not s.epoch_start]
    if len(rest) < 2 or len(rest) == len(steps):
        return steps
    cap = int(statistics.median(rest))
    return [
        s.model_copy(update={"end_ns": s.start_ns + cap}) if s.epoch_start and s.duration_ns > cap else s
        for s in steps
    ]


class StepBreakdown(_Frozen):
    """Where one step's wall time went, per category, in milliseconds (they add up to ``total_ms``)."""

    step: int
    start_ms: float  # relative to the first profiled step's start
    total_ms: float
    ms: dict[str, float]


class ComputePrecision(_Frozen):
    """The precision the profiled steps computed in, as measured from the trace (not the dtype policy)."""

    label: str  # "float32", "16-bit (98 %)", "mixed (40 % 16-bit)", "not measurable"
    sixteen_bit_share: float | None = None  # of device kernel time in fp16/bf16 kernels; None: unknown
    source: str = ""  # how it was measured ("GPU kernel names") or why it could not be


class Breakdown(_Frozen):
    """Per-step breakdown of the profiled steps plus the average share per category."""

    source: str  # how steps were found: "tfdoctor markers", "keras markers", "xprof step line", "inferred"
    device_kind: Literal["CPU", "GPU", "TPU"] = "CPU"
    steps: list[StepBreakdown] = Field(default_factory=list)
    share: dict[str, float] = Field(default_factory=dict)  # category -> fraction of step time (sums to 1)
    avg_step_ms: float = 0.0
    notes: list[str] = Field(default_factory=list)  # caveats ("device plane present but empty", ...)
    precision: ComputePrecision | None = None  # measured compute precision (tfdoctor.analysis)
    # the profiler's cost: median profiled step / median unprofiled step (harness clock); None: not measured
    tracer_cost: float | None = None
    # where that cost was significant (>= 1.10x): the shares and step time of the unprofiled step, the
    # tracer's cost taken out (tfdoctor.analysis.tracer); the rules read these. ``share``, ``steps`` and
    # ``avg_step_ms`` stay the profiled step's, as the trace shows it
    unprofiled_share: dict[str, float] | None = None
    unprofiled_step_ms: float | None = None


class Evidence(_Frozen):
    label: str
    value: str  # already formatted ("38 %", "12.3 ms", "map(num_parallel_calls=None)")
    time_ranges_ms: list[tuple[float, float]] = Field(default_factory=list)  # into the profiled window
    source: str | None = None  # "train.py:42"


#: a rule's family, from its ID's hundreds digit (TFD1xx input, 2xx dispatch/launch, 3xx host<->device copies,
#: 4xx precision and batch, 5xx compilation, 6xx distribution; 0xx: what the diagnosis could not cover)
RuleFamily = Literal["meta", "input", "dispatch", "copy", "precision", "compilation", "distribution"]
_FAMILY_BY_DIGIT: dict[str, RuleFamily] = {
    "0": "meta",
    "1": "input",
    "2": "dispatch",
    "3": "copy",
    "4": "precision",
    "5": "compilation",
    "6": "distribution",
}


def rule_family(rule_id: str) -> RuleFamily:
    """The family of a rule ID ("TFD101" -> "input"); the one place the ID's digits are read."""
    digit = rule_id.removeprefix("TFD")[:1]
    if digit not in _FAMILY_BY_DIGIT:
        raise ValueError(f"{rule_id!r} is not a rule ID of the form TFDnxx")
    return _FAMILY_BY_DIGIT[digit]


class Finding(_Frozen):
    rule_id: str  # "TFD101"
    name: str  # "input-stall"
    family: RuleFamily = "meta"  # set from rule_id when not given (reports stored before it existed)
    severity: Severity
    claim: str  # one line, with numbers
    evidence: list[Evidence] = Field(default_factory=list)
    est_saving: float = 0.0  # estimated fraction of step time the fix could save
    fix_ids: list[str] = Field(default_factory=list)
    decided: bool = True  # False: the rule could not decide; ``why_not`` says why
    why_not: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _family_from_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and "family" not in data and isinstance(data.get("rule_id"), str):
            try:
                return {**data, "family": rule_family(data["rule_id"])}
            except ValueError:
                return data
        return data


class FixTrial(_Frozen):
    fix_id: str
    # the variant tried, where a fix has several ("batch-scale ×4"); empty: the fix itself
    label: str = ""
    description: str
    # "superseded": measured faster and kept, then replaced by a bigger variant of the same fix kept over
    # it (batch ×2 then ×4): the final state holds the bigger one, whose ratio is over this one's
    status: Literal["kept", "superseded", "rejected", "failed", "skipped"]
    reason: str  # why kept / superseded / rejected / failed / skipped, with figures
    # the trial's median run (the first run and those of its paired rounds), and the median run of the
    # state it was tried on in those rounds (its reference): the two rates that read as ``speedup`` does.
    # reference None: judged without paired runs (or a report written before it was recorded)
    throughput: Throughput | None = None
    reference: Throughput | None = None
    # the trial's OWN ratio over the state it was tried on (the baseline plus the fixes kept before it),
    # examples/s where known else steps/s; ``speedup_ci`` its confidence interval [low, high] from the
    # judge (tfdoctor.fixes.judge); None: not measured
    speedup: float | None = None
    speedup_ci: list[float] | None = None
    # the judge's verdict on the speed ("undecided": the interval still straddled the bar when the round
    # budget was spent); None: not judged on speed (failed, skipped, or rejected by a sanity check)
    verdict: Literal["faster", "not faster", "undecided"] | None = None
    # the loss could not be checked (why); a fix that changes the training is then not kept unless the
    # user passed --allow-unchecked
    unchecked: str | None = None
    # what the fix changed of the training itself, from the runs' facts: {"batch size": "32 → 64"}
    training_changes: dict[str, str] = Field(default_factory=dict)
    error: str | None = None
    patch: str = ""  # the unified diff of this fix alone
    runtime_switch: dict[str, str] = Field(default_factory=dict)  # harness options this fix sets
    run_id: str | None = None
    # back-to-back confirmation of a single run that was not decisive (tfdoctor.session.fix_loop): per round,
    # the trial's rate over the reference state's, both measured in that round; and the extra runs'
    # ids in the order they ran (reference and trial alternate first). Empty: decided on one run.
    paired_ratios: list[float] = Field(default_factory=list)
    paired_run_ids: list[str] = Field(default_factory=list)
    # a pooled trial (fix_id "pooled"): the undecided fixes it tried together, by name, in the order
    # they were applied; empty for a trial of one fix. Its members, when it is kept, are kept too (their
    # reason cites the pooled ratio; their own speedup, interval and verdict stay as measured alone)
    members: list[str] = Field(default_factory=list)

    @property
    def name(self) -> str:
        """What to call the trial in a table: its variant's label, else the fix's id."""
        return self.label or self.fix_id


class FixSummary(_Frozen):
    baseline: Throughput | None  # the profiled run's timing window
    # the baseline as the trials are measured: the median (by rate) of the timing-only re-runs of the
    # unchanged script (paired rounds' and the combined check's references, timing windows of at least
    # ``min_timing_s``), and how many there were; None: never re-run. Each trial's absolute rate compares
    # with this one; the profiled window can differ (a fast step's few steps inside one epoch)
    baseline_timed: Throughput | None = None
    baseline_timed_runs: int = 0
    trials: list[FixTrial] = Field(default_factory=list)
    combined: Throughput | None = None  # the final state's median run in the combined check
    combined_reference: Throughput | None = None  # the baseline's median run in that check
    combined_speedup: float | None = None
    # the share of the script's fit() loop outside the training steps, as the profile timed it (TFD207:
    # the work between the calls, a model built for every call): the figures here time the steps only
    loop_outside_share: float | None = None
    # the rates here are the whole loop's, not the steps': a custom loop whose steps come in bursts and
    # that spends most of its time between them (TFD207, keras-io's PPO) has every run time a burst's
    # steps and the work until the next burst (examples/s = the burst's examples over both)
    whole_loop: bool = False
    patch: str = ""  # the combined unified diff (also runs/<id>/fix.patch)
    kept: list[str] = Field(default_factory=list)
    combined_run_id: str | None = None  # the final run with every kept fix applied
    wall_s: float = 0.0  # the whole --fix run
    confirm_rounds: int = 0  # most paired rounds per trial that was not decisive (0: one run each)
    # the combined result measured interleaved against the baseline: the ratio's interval [low, high]
    combined_ci: list[float] | None = None
    combined_verdict: Literal["faster", "not faster", "undecided"] | None = None
    # how the combined result was verified (rounds, and against which intermediate state)
    combined_note: str = ""
    # the one-off seconds the kept fixes add at the start of the script (tracing, XLA compiling: the
    # first steps, which the timed windows leave out): the final state's warm-up steps beyond its
    # steady step against the baseline's, medians over the combined check's runs; None: not measured
    combined_startup_s: float | None = None
    # kept fixes dropped because the final state measured below an intermediate state without them
    dropped: list[str] = Field(default_factory=list)
    # what the kept fixes change of the training (baseline facts → combined run facts); empty: the
    # same training, faster
    training_changes: dict[str, str] = Field(default_factory=dict)
    allow_unchecked: bool = False  # fixes that change the training were allowed without a loss check
    # the kept trials' own figures chained (the product of each one's ratio to the state before it,
    # superseded batch rungs included), [ratio, low, high], and whether the combined check reproduced
    # it (their intervals overlap); None: not computed (nothing kept, no combined measurement)
    trials_chained: list[float] | None = None
    reproduced: bool | None = None
    # the share of the machine's CPUs (0-1) other processes kept busy during the loop's busiest run
    # (None: not read), how many of its measured runs saw BUSY_SHARE or more, and how many runs it made
    outside_load: float | None = None
    busy_runs: int = 0
    measured_runs: int = 0


class ReplicaTiming(_Frozen):
    """One replica (a GPU, a logical CPU device) or one worker (a host) of a distributed run."""

    name: str  # "/device:GPU:4", "replica 1", "worker-1"
    kind: Literal["device", "replica", "worker"]
    host: str = ""
    active: bool = True  # False: no kernels / ops at all in the profiled steps
    steps: int = 0
    step_ms: float = 0.0  # median step time (its own steps where it has them)
    busy_ms: float = 0.0  # compute per step (kernels; ops on a CPU replica; op work on a worker)
    input_wait_ms: float = 0.0  # per step (workers)
    collective_ms: float = 0.0  # all-reduce and other collectives per step
    collective_overlap: float = 0.0  # share of collective time overlapped with compute
    busy_share: float = 0.0  # busy_ms / step_ms


class DistributedSummary(_Frozen):
    """Replica and worker balance of a multi-device or multi-host run (tfdoctor.analysis.distributed)."""

    strategy: str | None = None
    num_replicas: int = 1
    hosts: list[str] = Field(default_factory=list)
    replicas: list[ReplicaTiming] = Field(default_factory=list)  # devices, or logical CPU replicas
    workers: list[ReplicaTiming] = Field(default_factory=list)  # one per host / worker process
    idle_devices: list[str] = Field(default_factory=list)  # accelerator planes with no kernel in the steps
    straggler: str | None = None  # the replica or worker whose own work is longest
    straggler_ratio: float = 1.0  # its own work / the fastest one's (1.0: balanced)
    collective_share: float = 0.0  # collective time / step time
    collective_overlap: float = 0.0  # share of collective time overlapped with compute
    input_imbalance: float = 0.0  # (max - min) input wait over workers / mean step time
    notes: list[str] = Field(default_factory=list)


class Report(_Frozen):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    script: str
    args: list[str] = Field(default_factory=list)
    module: str | None = None  # profile -m MODULE: run as python -m MODULE (``script`` is its file)
    created: str  # ISO-8601
    status: RunStatus
    error: str | None = None
    facts: Facts = Field(default_factory=Facts)
    throughput: Throughput | None = None
    steps: list[StepTiming] = Field(default_factory=list)
    breakdown: Breakdown | None = None
    findings: list[Finding] = Field(default_factory=list)
    verdict: str = ""  # one sentence: what bounds this run
    fix: FixSummary | None = None
    trace_files: list[str] = Field(default_factory=list)  # relative to the run directory
    logdir: str | None = None  # the TensorBoard logdir, relative to the run directory
    distributed: DistributedSummary | None = None  # several replicas / workers: their balance

    @property
    def target(self) -> str:
        """What follows ``tfdoctor profile`` to run this script again: ``-m MODULE`` or the script."""
        return f"-m {self.module}" if self.module else self.script
