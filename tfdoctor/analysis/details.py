"""Figures the rules read beyond the breakdown: eager dispatch counts, traced functions, GetNext
latency, tf.data stages, kernels (size, precision, tensor cores), copies and their overlap, host load.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from tfdoctor.analysis import intervals as iv
from tfdoctor.analysis.breakdown import active_device_planes, is_collective, is_function_run
from tfdoctor.analysis.steps import Steps
from tfdoctor.trace.model import Trace

_FN_ID_RE = re.compile(r"^EagerLocalExecute: (?:__inference_|__forward_)?(.+?)_(\d+)$")
#: 16-bit (or 8-bit) kernels by name. cuBLAS 12.8+ names Hopper GEMMs ``nvjet_sm90_<a><c><d>_...`` with one
#: letter per input, compute and output type: ``t`` bfloat16, ``h`` float16, ``s`` float32 (``tst``/``tss``
#: bf16 in, ``hsh``/``hss`` fp16 in, read off an H100 trace: sample_traces/gpu-jax/kernel_dtypes.py); its
#: tf32 and fp32 kernels keep ``f32`` in their names (``sm90_xmma_gemm_f32f32_tf32f32_f32``)
_FP16_RE = re.compile(
    r"half|fp16|f16|h884|h1688|h16816|hmma|bf16|bfloat16|__nv_bfloat16|e4m3|e5m2|nvjet(?:_sm\d+a?)?_[th][a-z]{2}_",
    re.I,
)


def is_16bit_kernel(name: str) -> bool:
    """Whether a GPU kernel's name says it computes in 16-bit (or 8-bit) floats."""
    return bool(_FP16_RE.search(name))


_TENSOR_CORE_RE = re.compile(
    r"h884|h1688|h16816|s884|s1688|s16816|i8816|hmma|imma|tensorop|xmma|wgmma|gmma|sm80_|sm90_|nvjet|cutlass.*tensor",
    re.I,
)


def is_tensor_core_kernel(name: str) -> bool:
    """Whether a GPU kernel's name says it runs on tensor cores (cuBLAS's full-fp32 ``..._ffma_...`` GEMMs,
    ``sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma``, run on the CUDA cores)."""
    return bool(_TENSOR_CORE_RE.search(name)) and "_ffma" not in name.lower()


_GETNEXT = ("IteratorGetNextOp::DoCompute", "IteratorGetNextAsOptionalOp::DoCompute")


@dataclass
class TfDataStage:
    name: str  # last component, e.g. "ParallelMapV2", "MapAndBatch", "Prefetch", "Map", "Generator"
    path: str  # "Iterator::Root::Prefetch::ForeverRepeat[0]::MapAndBatch"
    count: int
    total_ms: float
    mean_us: float


@dataclass
class Details:
    n_steps: int = 0
    avg_step_ms: float = 0.0
    # host dispatch
    eager_ops_per_step: float = 0.0  # EagerLocalExecute of single ops on the main thread
    function_calls_per_step: float = 0.0  # traced-function executions per step
    functions: dict[str, int] = field(default_factory=dict)  # traced function base name -> distinct ids seen
    retraced_functions: list[str] = field(default_factory=list)  # base names seen with >1 concrete id
    # input
    getnext_count: int = 0
    getnext_mean_us: float = 0.0
    getnext_p90_us: float = 0.0
    tfdata_stages: list[TfDataStage] = field(default_factory=list)
    has_prefetch: bool = False
    sequential_map: bool = False  # a Map stage (not ParallelMap/MapAndBatch) in the pipeline
    python_generator: bool = False  # from_generator / py_function in the pipeline
    host_threads_busy: float = 0.0  # mean number of host threads busy during the steps
    # device
    device_kind: str = "CPU"
    n_devices: int = 0
    device_names: list[str] = field(default_factory=list)
    compute_capability: float | None = None
    kernels_per_step: float = 0.0
    kernel_mean_us: float = 0.0
    small_kernel_share: float = 0.0  # kernels under 10 us, share of kernel count
    fp16_kernel_share: float = 0.0  # share of kernel time in half/bf16 kernels
    tensor_core_share: float = 0.0  # share of kernel time in tensor-core kernels
    device_busy_share: float = 0.0  # share of step time with any device activity
    h2d_ms_per_step: float = 0.0
    d2h_ms_per_step: float = 0.0
    h2d_overlap: float = 0.0  # share of H2D time that overlaps device compute
    collective_ms_per_step: float = 0.0
    collective_overlap: float = 0.0
    per_device_busy: dict[str, float] = field(default_factory=dict)  # device -> busy share of step time


def _within(lo: int, hi: int, start: np.ndarray) -> np.ndarray:
    return (start >= lo) & (start < hi)


def compute_details(trace: Trace, steps: Steps) -> Details:
    d = Details(n_steps=len(steps))
    if not len(steps):
        return d
    lo, hi = int(steps.starts.min()), int(steps.ends.max())
    span = float((steps.ends - steps.starts).sum()) or 1.0
    d.avg_step_ms = span / len(steps) / 1e9
    main = steps.main_line
    plane = steps.host_plane
    # -- main-thread dispatch ----------------------------------------------------------------------
    if main is not None and plane is not None and len(main):
        inside = _within(lo, hi, main.start_ps)
        ops = 0
        fcalls = 0
        fn_ids: dict[str, set[str]] = defaultdict(set)
        counts = np.bincount(main.name_idx[inside], minlength=len(plane.event_names))
        for i in np.flatnonzero(counts).tolist():  # each distinct name once, weighted by its count
            n = str(plane.event_names[i])
            if n.startswith("EagerLocalExecute: "):
                if is_function_run(n):
                    fcalls += int(counts[i])
                elif "IteratorGetNext" not in n:
                    ops += int(counts[i])
        for n in {str(plane.event_names[i]) for i in np.unique(main.name_idx).tolist()}:
            if is_function_run(n):
                m = _FN_ID_RE.match(n)
                if m:
                    fn_ids[m.group(1)].add(m.group(2))
        d.eager_ops_per_step = ops / len(steps)
        d.function_calls_per_step = fcalls / len(steps)
        d.functions = {k: len(v) for k, v in fn_ids.items()}
        d.retraced_functions = sorted(k for k, v in fn_ids.items() if len(v) > 1)
    # -- input -------------------------------------------------------------------------------------
    gn: list[np.ndarray] = []
    stages: dict[str, list] = defaultdict(lambda: [0, 0, ""])
    busy_sum = 0
    for hp in trace.host_planes():
        gn_ids = hp.name_ids(lambda n: n in _GETNEXT)
        it_ids = hp.name_ids(lambda n: n.startswith("Iterator::"))
        it_names = np.asarray(hp.event_names, dtype=object)
        for ln in hp.lines:
            if not len(ln):
                continue
            inside = _within(lo, hi, ln.start_ps)
            if gn_ids.size:
                sel = inside & np.isin(ln.name_idx, gn_ids)
                gn.append(ln.dur_ps[sel])
            if it_ids.size:
                sel = inside & np.isin(ln.name_idx, it_ids)
                ids = ln.name_idx[sel]
                if ids.size:  # per distinct iterator name: count and total time, in order of first use
                    uniq, first, inv = np.unique(ids, return_index=True, return_inverse=True)
                    inv = inv.reshape(-1)
                    sums = np.zeros(uniq.size, dtype=np.int64)
                    np.add.at(sums, inv, ln.dur_ps[sel])
                    cnts = np.bincount(inv, minlength=uniq.size)
                    for k in np.argsort(first, kind="stable").tolist():
                        path = str(it_names[uniq[k]])
                        st = stages[path]
                        st[0] += int(cnts[k])
                        st[1] += int(sums[k])
                        st[2] = re.sub(r"\[\d+\]$", "", path.rsplit("::", 1)[-1])
            if ln is not main:
                top = iv.union(ln.start_ps, ln.end_ps)
                busy_sum += iv.measure(iv.clip(top, lo, hi))
    if gn:
        g = np.concatenate(gn) / 1e6  # us
        if g.size:
            d.getnext_count = int(g.size)
            d.getnext_mean_us = float(g.mean())
            d.getnext_p90_us = float(np.percentile(g, 90))
    d.tfdata_stages = sorted(
        (
            TfDataStage(name=v[2], path=k, count=v[0], total_ms=v[1] / 1e9, mean_us=v[1] / max(v[0], 1) / 1e6)
            for k, v in stages.items()
        ),
        key=lambda s: -s.total_ms,
    )
    kinds = {s.name for s in d.tfdata_stages}
    d.has_prefetch = any(k.startswith("Prefetch") for k in kinds)
    d.sequential_map = any(k in ("Map", "MapDataset") for k in kinds)
    d.python_generator = any(k in ("Generator", "FromGenerator") or "PyFunc" in k for k in kinds) or any(
        "PyFunc" in n for hp in trace.host_planes() for n in hp.event_names
    )
    d.host_threads_busy = busy_sum / (hi - lo) if hi > lo else 0.0
    # -- device ------------------------------------------------------------------------------------
    devices = active_device_planes(trace)
    d.n_devices = len(devices)
    d.device_names = [p.name for p in devices]
    if devices:
        d.device_kind = devices[0].device_kind or "GPU"
        caps = devices[0].stats
        if "compute_cap_major" in caps:
            try:
                d.compute_capability = (
                    float(caps["compute_cap_major"]) + float(caps.get("compute_cap_minor") or 0) / 10
                )
            except (TypeError, ValueError):
                d.compute_capability = None
        k_count = 0
        k_time = 0
        small = 0
        fp16_t = 0
        tc_t = 0
        h2d = d2h = coll = 0
        h2d_ov = coll_ov = 0
        for p in devices:
            comp_sets, h2d_sets, coll_sets, d2h_sets, busy_sets = [], [], [], [], []
            fp16_ids = set(p.name_ids(is_16bit_kernel).tolist())
            tc_ids = set(p.name_ids(is_tensor_core_kernel).tolist())
            for ln in p.lines:
                if ln.is_derived or not len(ln):
                    continue
                sel = _within(lo, hi, ln.start_ps)
                names = np.asarray(p.event_names, dtype=object)[ln.name_idx[sel]]
                starts, ends, durs = ln.start_ps[sel], ln.end_ps[sel], ln.dur_ps[sel]
                is_copy = np.array([str(n).startswith(("Memcpy", "Memset")) for n in names], dtype=bool)
                is_coll = np.array([is_collective(str(n)) for n in names], dtype=bool)
                is_h2d = np.array([str(n).startswith("MemcpyH2D") for n in names], dtype=bool)
                is_d2h = np.array([str(n).startswith("MemcpyD2H") for n in names], dtype=bool)
                kern = ~is_copy & ~is_coll
                k_count += int(kern.sum())
                k_time += int(durs[kern].sum())
                small += int((durs[kern] < 10_000_000).sum())
                idx = ln.name_idx[sel]
                fp16_t += int(durs[kern & np.isin(idx, list(fp16_ids))].sum()) if fp16_ids else 0
                tc_t += int(durs[kern & np.isin(idx, list(tc_ids))].sum()) if tc_ids else 0
                comp_sets.append(iv.union(starts[kern], ends[kern]))
                h2d_sets.append(iv.union(starts[is_h2d], ends[is_h2d]))
                d2h_sets.append(iv.union(starts[is_d2h], ends[is_d2h]))
                coll_sets.append(iv.union(starts[is_coll], ends[is_coll]))
                busy_sets.append(iv.union(starts, ends))
            comp = iv.union_sets(*comp_sets)
            h2d_s, d2h_s, coll_s = (
                iv.union_sets(*h2d_sets),
                iv.union_sets(*d2h_sets),
                iv.union_sets(*coll_sets),
            )
            h2d += iv.measure(h2d_s)
            d2h += iv.measure(d2h_s)
            coll += iv.measure(coll_s)
            h2d_ov += iv.measure(iv.intersect(h2d_s, comp))
            coll_ov += iv.measure(iv.intersect(coll_s, comp))
            busy = iv.measure(iv.clip(iv.union_sets(*busy_sets), lo, hi))
            d.per_device_busy[p.name] = busy / span
        n_dev = len(devices)
        d.kernels_per_step = k_count / n_dev / len(steps)
        d.kernel_mean_us = k_time / k_count / 1e6 if k_count else 0.0
        d.small_kernel_share = small / k_count if k_count else 0.0
        d.fp16_kernel_share = fp16_t / k_time if k_time else 0.0
        d.tensor_core_share = tc_t / k_time if k_time else 0.0
        d.device_busy_share = float(np.mean(list(d.per_device_busy.values())))
        d.h2d_ms_per_step = h2d / n_dev / len(steps) / 1e9
        d.d2h_ms_per_step = d2h / n_dev / len(steps) / 1e9
        d.h2d_overlap = h2d_ov / h2d if h2d else 0.0
        d.collective_ms_per_step = coll / n_dev / len(steps) / 1e9
        d.collective_overlap = coll_ov / coll if coll else 0.0
    return d


def function_names(trace: Trace) -> Counter:
    """Traced functions executed on any host thread, with their call counts."""
    c: Counter = Counter()
    for hp in trace.host_planes():
        ids = hp.name_ids(is_function_run)
        for ln in hp.lines:
            for i in ln.name_idx[np.isin(ln.name_idx, ids)].tolist():
                c[hp.event_names[i]] += 1
    return c
