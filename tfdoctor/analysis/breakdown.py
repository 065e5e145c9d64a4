"""Per-step breakdown of wall time into the categories of :data:`tfdoctor.model.CATEGORIES`.

Each instant of a step is given to exactly one category, by priority (XProf's idea of classifying
overlapping activity). On a GPU/TPU trace, device activity comes first::

    collective > device_compute > h2d > d2h            (what the device is doing)
    then, while the device is idle: input_wait > dispatch > device_idle (host waits on the device)
    > host_compute (the rest: Python and host ops)

On a CPU-only trace the "device" is the CPU itself, so op kernels are device compute::

    input_wait > collective > device_compute > dispatch > host_compute (the rest of the main thread)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tfdoctor.analysis import intervals as iv
from tfdoctor.analysis.steps import INPUT_MARKER, Steps
from tfdoctor.model import CATEGORIES, Breakdown, StepBreakdown
from tfdoctor.trace.model import Line, Plane, Trace

#: the breakdown note of a CPU trace without op events (the verdict reads it)
NO_OPS_NOTE = "no op events in the trace"
_OP_RE = re.compile(r"^[^\s:]+:[A-Za-z_][A-Za-z0-9_]*$")  # "scope/name:OpType"
FUNC_PREFIXES = ("EagerLocalExecute: __inference_", "EagerLocalExecute: __forward_")

INPUT_NAMES = {
    INPUT_MARKER,
    "IteratorGetNextOp::DoCompute",
    "IteratorGetNextAsOptionalOp::DoCompute",
    "EagerLocalExecute: IteratorGetNext",
    "EagerLocalExecute: IteratorGetNextSync",
    "EagerLocalExecute: IteratorGetNextAsOptional",
    "MultiDeviceIteratorGetNextFromShard",
}
#: the eager GetNext op itself: the Python C-API call that runs it (``TFE_Py_FastPathExecute_C``) is the loop's
#: ``next()`` on a tf.data iterator
EAGER_GETNEXT_NAMES = frozenset(
    {
        "EagerLocalExecute: IteratorGetNext",
        "EagerLocalExecute: IteratorGetNextSync",
        "EagerLocalExecute: IteratorGetNextAsOptional",
    }
)
DISPATCH_NAMES = {
    "EagerExecute",
    "EagerKernelExecute",
    "EagerCopyToDevice",
    "ValidateInputTypeAndPlacement",
    "TFE_DeleteTensorHandle",
    "convert_to_tensor",
    "tf.constant",
    "ExecutorState::Process",
    "ExecutorPropagateOutputs",
}
LAUNCH_NAMES = {
    "cuLaunchKernel",
    "cudaLaunchKernel",
    "LaunchKernel",
    "cuLaunchKernelEx",
    "cudaLaunchKernelExC",
}


_INPUT_SEND_RE = re.compile(
    r"^(?:[^:]*/)?(?:IteratorGetNext|MultiDeviceIteratorGetNext)[^:]*:_(?:Host)?Send$"
)


def is_input_send(name: str) -> bool:
    """The batch sent to the device on the input path: ``IteratorGetNext/_1:_Send`` (Keras ``fit`` on a
    GPU copies each input tensor of ``IteratorGetNext`` with a ``_Send`` op). Input transfer, not launch."""
    return bool(_INPUT_SEND_RE.match(name))


def is_collective(name: str) -> bool:
    low = name.lower()
    return "collective" in low or "allreduce" in low or "all_reduce" in low or "nccl" in low


def is_wait(name: str) -> bool:
    return (
        "WaitReady" in name or "Synchronize" in name or name in ("cuEventSynchronize", "cudaEventSynchronize")
    )


def is_function_run(name: str) -> bool:
    return (
        name.startswith(FUNC_PREFIXES)
        or bool(re.match(r"^EagerLocalExecute: .*_function_\d+$", name))
        or (name.startswith("EagerLocalExecute: ") and "multi_step_on_iterator" in name)
    )


def is_host_op(name: str) -> bool:
    return bool(_OP_RE.match(name)) and not is_collective(name)


_OVERHEAD_PREFIXES = (
    "ThreadpoolListener::",
    "Executor",
    "Memory",
    "FunctionRun",
    "InstantiatedCapturedFunction",
)


def is_cpu_work(name: str) -> bool:
    """On a CPU-only run, work on a worker thread: op kernels ("scope:OpType") and XLA thunks/fusions."""
    if is_host_op(name):
        return True
    return (
        not name.startswith(_OVERHEAD_PREFIXES)
        and not name.startswith(("Iterator::", "tfdoctor"))
        and not (is_collective(name) or name in INPUT_NAMES)
    )


def is_dispatch(name: str) -> bool:
    return (
        name in DISPATCH_NAMES
        or name.startswith("TFE_")
        or (name.startswith("EagerLocalExecute: ") and not is_function_run(name) and name not in INPUT_NAMES)
        or name in LAUNCH_NAMES
    )


def _set(plane: Plane, line: Line, pred, cache: dict) -> iv.IntervalSet:
    key = (id(plane), pred)
    ids = cache.get(key)
    if ids is None:
        ids = cache[key] = plane.name_ids(pred)
    if ids.size == 0 or not len(line):
        return iv.EMPTY
    sel = np.isin(line.name_idx, ids)
    return iv.union(line.start_ps[sel], line.end_ps[sel])


def _calls_around(plane: Plane, line: Line, inner: iv.IntervalSet, cache: dict) -> iv.IntervalSet:
    """The Python C-API calls (``TFE_Py_*``) of ``line`` that hold one of ``inner``'s intervals: the whole call,
    from Python's entering it to its return. A call returns only once its thread holds the GIL again: after an
    eager GetNext, a ``from_generator`` source (a ``PyFunc`` on a tf.data thread) can hold it for
    milliseconds (on a loaded machine ~all of the loop's wait is there, after the op ended)."""
    starts = inner[0]
    if not starts.size:
        return iv.EMPTY
    calls = _set(plane, line, _is_py_call, cache)
    cs, ce = calls
    if not cs.size:
        return iv.EMPTY
    j = np.searchsorted(starts, cs, side="left")
    holds = (j < starts.size) & (starts[np.clip(j, 0, starts.size - 1)] < ce)
    return cs[holds], ce[holds]


def _is_eager_getnext(name: str) -> bool:
    return name in EAGER_GETNEXT_NAMES


def _is_py_call(name: str) -> bool:
    return name.startswith("TFE_Py_")


def input_wait_set(
    getnext: iv.IntervalSet, markers: iv.IntervalSet, eager: iv.IntervalSet = iv.EMPTY
) -> tuple[iv.IntervalSet, iv.IntervalSet]:
    """(input wait, host work between steps that is not getting the batch).

    tfdoctor's ``tfdoctor_input`` marker spans from the end of one step to the start of the next one's
    compute: in a custom loop that holds whatever the loop does between steps (metric updates with a
    second forward pass, logging), not only the batch. Where the trace shows the batch being fetched
    inside a marker (tf.data's GetNext), the input wait is that fetch and the rest of the marker is host
    work between steps. A marker with no fetch inside (a Python generator, numpy slicing) is input wait
    from the end of the last TensorFlow op the loop runs eagerly in it (``eager``: their dispatch and
    kernels) on: the next batch is what the loop gets last before the step, and the ops before it are
    the loop's own work after the step. A full-batch loop (TensorFlow's "Basic training loops",
    physics-informed networks) fetches nothing: its ``w.assign_sub(lr * dw)`` after the tape and its
    ``loss(y, model(x))``, ``w.numpy()`` each epoch are not a wait for data. (A generator that makes
    tensors itself, ``yield tf.constant(batch)``, has its work up to that op read as the loop's.)"""
    ms, me = markers
    if not ms.size:
        return getnext, iv.EMPTY
    gs = getnext[0]
    # markers holding at least one GetNext start: the fetch is visible, the marker is not the input wait
    if gs.size:
        k = np.searchsorted(ms, gs, side="right") - 1
        inside = (k >= 0) & (gs < me[np.clip(k, 0, None)])
        has_fetch = np.zeros(ms.size, dtype=bool)
        has_fetch[k[inside]] = True
    else:
        has_fetch = np.zeros(ms.size, dtype=bool)
    kept = (ms[~has_fetch], me[~has_fetch])
    between = iv.subtract((ms[has_fetch], me[has_fetch]), getnext)
    es, ee = eager
    if es.size and kept[0].size:
        ks, ke = kept
        j = np.searchsorted(es, ke, side="left") - 1  # the last eager op starting before the marker ends
        jc = np.clip(j, 0, None)
        ops_in = (j >= 0) & (ee[jc] > ks)
        cut = np.where(ops_in, np.minimum(ee[jc], ke), ks)
        between = iv.union_sets(between, iv.union(ks[ops_in], cut[ops_in]))
        kept = iv.union(cut, ke)
    return iv.union_sets(getnext, kept), between


#: the loop over a dataset inside a tf.function (autograph's ``for x in dataset:``): a reduce over a
#: ``scan`` whose function is the loop's body
_LOOP_NAME = "ReduceDatasetOp::DoCompute"
_SCAN_RE = re.compile(r"^ReduceIterator::Root(?:::\w+)*::Scan$")
_SCAN_INPUT_RE = re.compile(r"^ReduceIterator::Root(?:::\w+)*::Scan::\w+$")


def _is_loop(name: str) -> bool:
    return name == _LOOP_NAME


def _is_scan(name: str) -> bool:
    return bool(_SCAN_RE.match(name))


def _is_scan_input(name: str) -> bool:
    return bool(_SCAN_INPUT_RE.match(name))


def in_graph_loop(trace: Trace) -> tuple[iv.IntervalSet, iv.IntervalSet]:
    """(body, input) of a training loop over a dataset inside a ``tf.function`` (TensorFlow's tf.function
    guide: ``for x, y in dataset: train_one_step(...)`` in one function, a whole epoch a call), on a CPU
    trace. Autograph runs such a loop as a ``reduce`` over a ``scan`` of the dataset, the loop's body
    the scan's function: tf.data's threads run the training step's op kernels, one batch after another,
    while the caller's thread waits in the function. *input* is each ``Scan``'s fetch of its next batch
    (``ReduceIterator::Root::Prefetch::Scan::BatchV2``); *body* the rest of the ``Scan`` events, the
    step's own work. Both empty without such a loop."""
    loops, scans, inputs = [], [], []
    cache: dict = {}  # each predicate's event-name ids, once a plane
    for plane in trace.host_planes():
        if _LOOP_NAME not in plane.event_names:
            continue
        for ln in plane.lines:
            if ln.name.startswith("tf_data"):
                loops.append(_set(plane, ln, _is_loop, cache))
                scans.append(_set(plane, ln, _is_scan, cache))
                inputs.append(_set(plane, ln, _is_scan_input, cache))
    loop = iv.union_sets(*loops)
    if not loop[0].size:
        return iv.EMPTY, iv.EMPTY
    fetch = iv.intersect(iv.union_sets(*inputs), loop)
    body = iv.subtract(iv.intersect(iv.union_sets(*scans), loop), fetch)
    return body, fetch


def _is_input(name: str) -> bool:
    return name in INPUT_NAMES and name != INPUT_MARKER


def _is_marker(name: str) -> bool:
    return name == INPUT_MARKER


def _is_kernel_run(name: str) -> bool:
    return name == "KernelAndDeviceFunc::Run"


def _is_launch(name: str) -> bool:
    """A GPU run's executor-thread event that launches work (not the batch's send to the device)."""
    return (is_host_op(name) or name in DISPATCH_NAMES) and not is_input_send(name)


def _host_sets(trace: Trace, steps: Steps, gpu: bool) -> dict[str, iv.IntervalSet]:
    cache: dict = {}
    inp, coll, ops, disp, wait, func, kern, send, marker = [], [], [], [], [], [], [], [], []
    main = steps.main_line
    main_disp = iv.EMPTY
    body, fetch = in_graph_loop(trace) if not gpu else (iv.EMPTY, iv.EMPTY)
    inp.append(fetch)
    for plane in trace.host_planes():
        for ln in plane.lines:
            inp.append(_set(plane, ln, _is_input, cache))
            if ln is main:  # the loop's next() on a tf.data iterator, GIL reacquired included
                inp.append(_calls_around(plane, ln, _set(plane, ln, _is_eager_getnext, cache), cache))
            marker.append(_set(plane, ln, _is_marker, cache))
            coll.append(_set(plane, ln, is_collective, cache))
            if ln is main:
                main_disp = _set(plane, ln, is_dispatch, cache)
                disp.append(main_disp)
                wait.append(_set(plane, ln, is_wait, cache))
                func.append(_set(plane, ln, is_function_run, cache))
                kern.append(_set(plane, ln, _is_kernel_run, cache))
                if not gpu:  # ops a function runs inline on the caller's thread (and XLA clusters)
                    ops.append(_set(plane, ln, is_host_op, cache))
            elif ln.name.startswith("tf_data"):
                if body[0].size:  # the op kernels of a loop's body that tf.data's threads run
                    ops.append(iv.intersect(_set(plane, ln, is_host_op, cache), body))
            else:
                if gpu:
                    # host-side events of a GPU run's executor threads are kernel launches/op dispatch, but
                    # the batch's sends to the device are input transfer
                    send.append(_set(plane, ln, is_input_send, cache))
                    disp.append(_set(plane, ln, _is_launch, cache))
                else:
                    ops.append(_set(plane, ln, is_cpu_work, cache))
    main_set = iv.EMPTY
    if main is not None and len(main):
        main_set = iv.union(main.start_ps, main.end_ps)
    # eager kernels run inline on the main thread: KernelAndDeviceFunc::Run outside function calls
    fn = iv.union_sets(*func)
    eager_kern = iv.subtract(iv.union_sets(*kern), fn)
    input_set, between = input_wait_set(
        iv.union_sets(*inp), iv.union_sets(*marker), iv.subtract(iv.union_sets(main_disp, eager_kern), fn)
    )
    return {
        "input": input_set,
        "between_steps": between,
        "collective": iv.union_sets(*coll),
        "host_ops": iv.union_sets(*ops, eager_kern) if not gpu else iv.union_sets(*ops),
        "dispatch": iv.union_sets(*disp, fn) if not gpu else iv.union_sets(*disp),
        "wait": iv.union_sets(*wait),
        "input_send": iv.union_sets(*send),
        "function": fn,
        "main_busy": main_set,
    }


def _is_h2d(name: str) -> bool:
    return name.startswith("MemcpyH2D") or name == "Memcpy HtoD"


def _is_d2h(name: str) -> bool:
    return name.startswith("MemcpyD2H") or name == "Memcpy DtoH"


def _is_device_compute(name: str) -> bool:
    return not name.startswith(("Memcpy", "Memset")) and not is_collective(name)


def _device_sets(plane: Plane) -> dict[str, iv.IntervalSet]:
    cache: dict = {}  # each predicate's event-name ids, once (a predicate defined per line never hits)
    comp, h2d, d2h, coll = [], [], [], []
    for ln in plane.lines:
        if ln.is_derived or not len(ln):
            continue
        h2d.append(_set(plane, ln, _is_h2d, cache))
        d2h.append(_set(plane, ln, _is_d2h, cache))
        coll.append(_set(plane, ln, is_collective, cache))
        comp.append(_set(plane, ln, _is_device_compute, cache))
    return {
        "collective": iv.union_sets(*coll),
        "device_compute": iv.union_sets(*comp),
        "h2d": iv.union_sets(*h2d),
        "d2h": iv.union_sets(*d2h),
    }


def active_device_planes(trace: Trace) -> list[Plane]:
    return [
        p
        for p in trace.device_planes()
        if p.device_kind in ("GPU", "TPU") and any(len(ln) for ln in p.lines if not ln.is_derived)
    ]


@dataclass
class BreakdownResult:
    breakdown: Breakdown
    per_step_ps: dict[str, np.ndarray]  # category -> ps per step (for the main device)
    per_device: dict[str, dict[str, float]] = field(default_factory=dict)  # device -> share per category
    sets: dict[str, iv.IntervalSet] = field(default_factory=dict)
    #: the classification order of the main device (CPU: the host), to tell an instant's category
    ordered: list[tuple[str, iv.IntervalSet]] = field(default_factory=list)
    rest_category: str = "host_compute"  # where an instant no set covers goes


def _classify(window_lo: np.ndarray, window_hi: np.ndarray, ordered: list[tuple[str, iv.IntervalSet]]):
    """Assign each instant of each window to the first category whose set covers it."""
    out: dict[str, np.ndarray] = {c: np.zeros(window_lo.size, dtype=np.int64) for c in CATEGORIES}
    taken = iv.EMPTY
    for cat, s in ordered:
        own = iv.subtract(s, taken) if taken[0].size else s
        out[cat] = out[cat] + iv.per_window(own, window_lo, window_hi)
        taken = iv.union_sets(taken, s)
    total = window_hi - window_lo
    covered = sum(out[c] for c in CATEGORIES)
    return out, total - covered, taken


def compute_breakdown(trace: Trace, steps: Steps, notes: list[str] | None = None) -> BreakdownResult:
    notes = list(notes or [])
    lo, hi = steps.starts, steps.ends
    devices = active_device_planes(trace)
    empty_gpu = [p.name for p in trace.device_planes("GPU") if p not in devices]
    if empty_gpu and not devices:
        notes.append(
            f"device plane(s) {', '.join(empty_gpu)} present but EMPTY: device tracing failed (CUPTI), "
            "so only host activity is classified"
        )
    gpu = bool(devices)
    host = _host_sets(trace, steps, gpu)
    between = float(iv.per_window(host["between_steps"], lo, hi).sum()) / (float((hi - lo).sum()) or 1.0)
    if between >= 0.05:
        notes.append(
            f"{between * 100:.0f} % of step time is host work between steps that is not getting the batch "
            "(the loop's own work after one step and before the next: metric updates, logging); it is "
            "dispatch / host compute here, not input wait"
        )
    per_device: dict[str, dict[str, float]] = {}
    if gpu:
        results = []
        unexplained = iv.EMPTY
        first_ordered: list[tuple[str, iv.IntervalSet]] = []
        for plane in devices:
            dev = _device_sets(plane)
            ordered = [
                ("collective", iv.union_sets(dev["collective"], host["collective"])),
                ("device_compute", dev["device_compute"]),
                # input transfer: the device's H2D copies and the host's sends of the batch (IteratorGetNext _Send)
                ("h2d", iv.union_sets(dev["h2d"], host["input_send"])),
                ("d2h", dev["d2h"]),
                ("input_wait", host["input"]),
                ("dispatch", host["dispatch"]),
                ("device_idle", host["wait"]),
                ("host_compute", host["main_busy"]),
            ]
            out, rest, taken = _classify(lo, hi, ordered)
            out["other"] = out["other"] + rest
            results.append((plane, out, dev))
            if len(results) == 1:
                first_ordered = ordered
            if len(results) == 1:  # the unexplained time of the first device: what "other" is made of
                unexplained = iv.subtract(iv.union(lo, hi), taken)
            tot = float((hi - lo).sum()) or 1.0
            per_device[plane.name] = {c: float(out[c].sum()) / tot for c in CATEGORIES}
        # the breakdown shown is the mean over active devices (per step)
        per_step = {c: np.mean([r[1][c] for r in results], axis=0).astype(np.int64) for c in CATEGORIES}
        sets = {**host, **{f"{k}@{results[0][0].name}": v for k, v in results[0][2].items()}}
        sets["unexplained"] = unexplained
        device_kind = devices[0].device_kind or "GPU"
    else:
        ordered = [
            ("input_wait", host["input"]),
            ("collective", host["collective"]),
            ("device_compute", host["host_ops"]),
            ("dispatch", host["dispatch"]),
        ]
        out, rest, _ = _classify(lo, hi, ordered)
        out["host_compute"] = out["host_compute"] + rest
        first_ordered = ordered
        fn_share = float(iv.per_window(host["function"], lo, hi).sum()) / (float((hi - lo).sum()) or 1.0)
        if not host["host_ops"][0].size and fn_share >= 0.5:
            notes.append(
                f"{NO_OPS_NOTE}: {fn_share * 100:.0f} % of the step is inside the step function, whose ops "
                "are not in the trace (host tracer level 1, or only the Python thread's events exported); "
                "that time is counted as dispatch and cannot be split further"
            )
        unexplained = iv.EMPTY  # on a CPU run the rest of the step is the main thread's (host compute)
        per_step = out
        sets = host
        device_kind = "CPU"
    total = hi - lo
    tot_all = float(total.sum()) or 1.0
    share = {c: float(per_step[c].sum()) / tot_all for c in CATEGORIES}
    # the per-step rows: rounding of the mean over devices may leave a few ps; put them in "other"
    fix = total - sum(per_step[c] for c in CATEGORIES)
    per_step["other"] = per_step["other"] + fix
    t0 = int(lo.min()) if lo.size else 0
    rows = [
        StepBreakdown(
            step=int(steps.numbers[i]),
            start_ms=(int(lo[i]) - t0) / 1e9,
            total_ms=int(total[i]) / 1e9,
            ms={c: int(per_step[c][i]) / 1e9 for c in CATEGORIES},
        )
        for i in range(lo.size)
    ]
    bd = Breakdown(
        source=steps.source,
        device_kind=device_kind,  # type: ignore[arg-type]
        steps=rows,
        share=share,
        avg_step_ms=float(total.mean()) / 1e9 if total.size else 0.0,
        notes=notes,
    )
    return BreakdownResult(
        breakdown=bd,
        per_step_ps=per_step,
        per_device=per_device,
        sets=sets,
        ordered=first_ordered,
        rest_category="other" if gpu else "host_compute",
    )
