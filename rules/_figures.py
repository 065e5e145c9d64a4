"""Figures a few rules read straight from the trace (beyond ``Analysis.details``), computed once per
evaluation and cached on the :class:`~tfdoctor.rules._base.Context`. Pure numpy; no TensorFlow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tfdoctor.analysis import intervals as iv
from tfdoctor.analysis.breakdown import active_device_planes, is_collective, is_host_op
from tfdoctor.analysis.ops import is_matmul_or_conv, op_type
from tfdoctor.model import Evidence
from tfdoctor.rules._base import Context, pct

GRAPH_BUILDING = "tf.function-graph_building"
_COMPILE_RE = re.compile(
    r"^(JitCompiler::Compile|CpuCompiler::RunBackend|GpuCompiler::RunBackend|NVPTXCompiler::CompileTargetBinary|"
    r"AMDGPUCompiler::CompileTargetBinary|XlaCompilationCache::Compile|DeviceCompiler::CompileImpl|"
    r"XlaCompileOnDemandOp::Compile|BuildExecutable|XlaCompile)\b"
)
_XLA_RUN_RE = re.compile(
    r"^(ThunkExecutor::Execute|XlaLaunch|_XlaRun|XlaRun|XlaLocalLaunchBase)|cluster_\d+", re.I
)
_MATMUL_KERNEL_RE = re.compile(
    r"gemm|conv|cudnn|winograd|implicit_convolve|wgrad|dgrad|fprop|matmul|cutlass|xmma|hmma|s884|s1688|h884|h1688",
    re.I,
)


def _steps(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    st = ctx.analysis.steps  # type: ignore[union-attr]
    return st.starts, st.ends  # type: ignore[union-attr]


def _span(ctx: Context) -> float:
    lo, hi = _steps(ctx)
    return float((hi - lo).sum()) or 1.0


def _host_events(
    ctx: Context, pred, main_only: bool = False, skip_tfdata: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, names) of host events matching ``pred`` that start inside a step.

    ``skip_tfdata`` leaves out tf.data's own threads (input preprocessing is not the step's work).
    """
    lo, hi = _steps(ctx)
    main = ctx.analysis.steps.main_line  # type: ignore[union-attr]
    s_all, e_all, n_all = [], [], []
    for plane in ctx.analysis.trace.host_planes():  # type: ignore[union-attr]
        ids = plane.name_ids(pred)
        if not ids.size:
            continue
        for ln in plane.lines:
            if not len(ln) or (main_only and ln is not main):
                continue
            if skip_tfdata and ln.name.startswith("tf_data"):
                continue
            sel = np.isin(ln.name_idx, ids)
            if not sel.any():
                continue
            st = ln.start_ps[sel]
            k = np.searchsorted(lo, st, side="right") - 1
            inside = (k >= 0) & (st < hi[np.clip(k, 0, None)])
            s_all.append(st[inside])
            e_all.append(ln.end_ps[sel][inside])
            n_all.append(plane.names_of(ln)[sel][inside])
    if not s_all:
        z = np.empty(0, dtype=np.int64)
        return z, z, np.empty(0, dtype=object)
    return np.concatenate(s_all), np.concatenate(e_all), np.concatenate(n_all)


def _measure_in_steps(ctx: Context, starts: np.ndarray, ends: np.ndarray) -> float:
    lo, hi = _steps(ctx)
    return float(iv.per_window(iv.union(starts, ends), lo, hi).sum())


@dataclass
class Timed:
    """Events of one kind inside the steps: how many, how much of step time, where."""

    count: int
    share: float  # of step time (union of the events)
    total_ms: float
    steps_with: int  # steps in which at least one started
    starts: np.ndarray
    ends: np.ndarray


def _timed(ctx: Context, starts: np.ndarray, ends: np.ndarray) -> Timed:
    lo, _ = _steps(ctx)
    covered = _measure_in_steps(ctx, starts, ends)
    k = np.searchsorted(lo, starts, side="right") - 1 if starts.size else np.empty(0, dtype=np.int64)
    return Timed(
        count=int(starts.size),
        share=covered / _span(ctx),
        total_ms=covered / 1e9,
        steps_with=int(np.unique(k).size),
        starts=starts,
        ends=ends,
    )


def graph_building(ctx: Context) -> Timed:
    """tf.function tracing (graph building) inside the profiled steps."""
    if "graph_building" not in ctx.cache:
        s, e, _ = _host_events(ctx, lambda n: n == GRAPH_BUILDING)
        ctx.cache["graph_building"] = _timed(ctx, s, e)
    return ctx.cache["graph_building"]


def xla_compiles(ctx: Context) -> Timed:
    """XLA compilations (outermost compiler events) inside the profiled steps."""
    if "xla_compiles" not in ctx.cache:
        s, e, _ = _host_events(ctx, lambda n: bool(_COMPILE_RE.match(n)))
        # count one compilation per outermost event: nested compiler passes share its interval
        if s.size:
            u = iv.union(s, e)
            s, e = u
        ctx.cache["xla_compiles"] = _timed(ctx, s, e)
    return ctx.cache["xla_compiles"]


def xla_in_use(ctx: Context) -> bool:
    """The trace shows XLA executables running or being compiled (jit on, whatever the facts say)."""
    if "xla_in_use" not in ctx.cache:
        found = False
        for plane in ctx.analysis.trace.planes:  # type: ignore[union-attr]
            if plane.name_ids(lambda n: bool(_XLA_RUN_RE.search(n))).size:
                found = True
                break
            if any(ln.name == "XLA Modules" and len(ln) for ln in plane.lines):
                found = True
                break
        ctx.cache["xla_in_use"] = found or xla_compiles(ctx).count > 0
    return ctx.cache["xla_in_use"]


def function_share(ctx: Context) -> float:
    """Share of step time spent inside traced-function calls on the training thread."""
    if "function_share" not in ctx.cache:
        res = ctx.analysis.result  # type: ignore[union-attr]
        fn = res.sets.get("function", iv.EMPTY) if res is not None else iv.EMPTY
        lo, hi = _steps(ctx)
        ctx.cache["function_share"] = float(iv.per_window(fn, lo, hi).sum()) / _span(ctx)
    return ctx.cache["function_share"]


@dataclass
class CpuOps:
    """TF op kernels of the step executed on host threads (CPU-only runs); tf.data threads excluded."""

    per_step: float
    median_us: float
    small_share_count: float  # ops under SMALL_US, share of op count
    small_share_time: float  # union of small ops, share of step time
    op_time_share: float  # union of all ops, share of step time
    matmul_share: float  # MatMul/Conv families (tfdoctor.analysis.ops), share of op time (sum of durations)
    top_types: list[tuple[str, int]]


SMALL_US = 20.0


def cpu_ops(ctx: Context) -> CpuOps:
    if "cpu_ops" not in ctx.cache:
        # op kernels of the step: executor threads and eager kernels on the main thread, not tf.data's
        s, e, n = _host_events(ctx, is_host_op, skip_tfdata=True)
        d_us = (e - s) / 1e6
        types = np.array([op_type(str(x)) for x in n], dtype=object)
        small = d_us < SMALL_US
        mm = np.array([is_matmul_or_conv(t) for t in types.tolist()], dtype=bool)
        total = float(d_us.sum()) or 1.0
        uniq, counts = np.unique(types, return_counts=True) if types.size else (np.array([]), np.array([]))
        top = sorted(zip(uniq.tolist(), counts.tolist(), strict=True), key=lambda kv: -kv[1])[:5]
        ctx.cache["cpu_ops"] = CpuOps(
            per_step=s.size / max(ctx.n_steps, 1),
            median_us=float(np.median(d_us)) if d_us.size else 0.0,
            small_share_count=float(small.mean()) if small.size else 0.0,
            small_share_time=_measure_in_steps(ctx, s[small], e[small]) / _span(ctx) if s.size else 0.0,
            op_time_share=_measure_in_steps(ctx, s, e) / _span(ctx) if s.size else 0.0,
            matmul_share=float(d_us[mm].sum()) / total if s.size else 0.0,
            top_types=[(str(t), int(c)) for t, c in top],
        )
    return ctx.cache["cpu_ops"]


#: op kernels' share of step time and MatMul/Conv's share of op time from which a CPU step is
#: matmul-bound (TFD403, TFD404)
MATMUL_BOUND = 0.4


def matmul_bound(ctx: Context) -> CpuOps | None:
    """The CPU ops of a step that is mostly MatMul/Conv kernels, else None."""
    ops = cpu_ops(ctx)
    return ops if ops.op_time_share >= MATMUL_BOUND and ops.matmul_share >= MATMUL_BOUND else None


def matmul_evidence(ctx: Context, ops: CpuOps) -> list[Evidence]:
    """The op-kernel share of step time (with the steps where it is largest) and MatMul/Conv's share of
    op time."""
    return [
        Evidence(
            label="op kernels",
            value=f"{pct(ops.op_time_share)} of step time",
            time_ranges_ms=ctx.worst_steps("device_compute"),
        ),
        Evidence(label="MatMul / Conv", value=f"{pct(ops.matmul_share)} of op time"),
    ]


@dataclass
class DeviceGaps:
    """Idle time of the busiest device inside the steps, split by what the host was doing meanwhile."""

    device: str
    busy_share: float
    idle_share: float
    idle_while_launching: float  # share of step time: device idle while the host dispatches/launches
    idle_other: float  # share of step time: device idle while the host does something else
    gaps_per_step: float
    median_gap_us: float
    matmul_kernel_share: float  # GEMM/conv kernels, share of kernel time


def device_gaps(ctx: Context) -> DeviceGaps | None:
    if "device_gaps" in ctx.cache:
        return ctx.cache["device_gaps"]
    planes = active_device_planes(ctx.analysis.trace)  # type: ignore[union-attr]
    busiest = None
    if planes:
        per = ctx.details.per_device_busy
        busiest = max(planes, key=lambda p: per.get(p.name, 0.0))
    if busiest is None:
        ctx.cache["device_gaps"] = None
        return None
    lo, hi = _steps(ctx)
    sets, k_time, mm_time = [], 0, 0
    mm_ids = busiest.name_ids(lambda n: bool(_MATMUL_KERNEL_RE.search(n)))
    for ln in busiest.lines:
        if ln.is_derived or not len(ln):
            continue
        sets.append(iv.union(ln.start_ps, ln.end_ps))
        names = busiest.names_of(ln)
        kern = np.array(
            [not str(x).startswith(("Memcpy", "Memset")) and not is_collective(str(x)) for x in names],
            dtype=bool,
        )
        inside = (ln.start_ps >= lo.min()) & (ln.start_ps < hi.max()) & kern
        k_time += int(ln.dur_ps[inside].sum())
        if mm_ids.size:
            mm_time += int(ln.dur_ps[inside & np.isin(ln.name_idx, mm_ids)].sum())
    busy = iv.union_sets(*sets)
    steps_set = iv.union(lo, hi)
    idle = iv.subtract(steps_set, busy)
    res = ctx.analysis.result  # type: ignore[union-attr]
    disp = res.sets.get("dispatch", iv.EMPTY) if res is not None else iv.EMPTY
    span = _span(ctx)
    idle_ps = iv.measure(idle)
    launching = iv.measure(iv.intersect(idle, disp))
    gaps = (idle[1] - idle[0]) / 1e6
    out = DeviceGaps(
        device=busiest.name,
        busy_share=1.0 - idle_ps / span,
        idle_share=idle_ps / span,
        idle_while_launching=launching / span,
        idle_other=(idle_ps - launching) / span,
        gaps_per_step=gaps.size / max(ctx.n_steps, 1),
        median_gap_us=float(np.median(gaps)) if gaps.size else 0.0,
        matmul_kernel_share=mm_time / k_time if k_time else 0.0,
    )
    ctx.cache["device_gaps"] = out
    return out


def tfdata_self_times(ctx: Context) -> list[tuple[str, str, float]]:
    """(stage name, path, self time ms per step) of the tf.data stages, slowest first.

    Stage events are nested (a parent's time includes its children's); the self time is what is left
    after the direct children. Pass-through stages (Root, Model, Prefetch, Repeat, ...) are left out:
    their time is waiting for the producer below them.
    """
    stages = ctx.details.tfdata_stages
    total = {s.path: s.total_ms for s in stages}
    child_sum: dict[str, float] = {}
    for s in stages:
        parent = re.sub(r"(\[\d+\])?::[^:]+$", "", s.path)
        if parent != s.path and parent in total:
            child_sum[parent] = child_sum.get(parent, 0.0) + s.total_ms
    passthrough = (
        "Root",
        "Model",
        "Prefetch",
        "ForeverRepeat",
        "Repeat",
        "FiniteRepeat",
        "MaxIntraOpParallelism",
        "PrivateThreadPool",
        "Options",
        "Take",
        "FiniteTake",
        "Skip",
    )
    n = max(ctx.n_steps, 1)
    out = [
        (s.name, s.path, max(0.0, s.total_ms - child_sum.get(s.path, 0.0)) / n)
        for s in stages
        if s.name not in passthrough
    ]
    return sorted(out, key=lambda t: -t[2])


#: what tf.data runs a ``map``/``interleave`` function (or a fused map-and-batch) under, on its own
#: threads: the function's executor and its run; the stage events around them (``Iterator::...``,
#: ``*Produce``) also time waits for the stage below, so they are not counted as work
_TFDATA_FN_EVENTS = ("ExecutorState::Process", "FunctionRun")


def tfdata_function_ms(ctx: Context) -> float:
    """Host core time per step (ms, summed over threads) that tf.data's threads spent running the
    pipeline's functions (map / interleave / filter bodies) during the profiled steps.

    Each ``tf_data*`` thread's function events are merged (a function run nests its executor) and the
    threads added up: 7 ms on a 35 ms step is 7 core-ms of preprocessing, whichever threads ran it."""
    if "tfdata_function_ms" in ctx.cache:
        return ctx.cache["tfdata_function_ms"]
    lo, hi = _steps(ctx)
    total = 0.0
    for plane in ctx.analysis.trace.host_planes():  # type: ignore[union-attr]
        ids = plane.name_ids(lambda n: n in _TFDATA_FN_EVENTS)
        if not ids.size:
            continue
        for ln in plane.lines:
            if not len(ln) or not ln.name.startswith("tf_data"):
                continue
            sel = np.isin(ln.name_idx, ids)
            if sel.any():
                total += float(iv.per_window(iv.union(ln.start_ps[sel], ln.end_ps[sel]), lo, hi).sum())
    out = total / 1e9 / max(len(lo), 1)
    ctx.cache["tfdata_function_ms"] = out
    return out


def profiled_step_ms(ctx: Context) -> float:
    """The mean step time of the profiled steps (ms), the profiler's own cost included (what figures
    measured in the trace, like :func:`tfdata_function_ms`, are shares of)."""
    lo, _ = _steps(ctx)
    return _span(ctx) / 1e9 / max(len(lo), 1)
