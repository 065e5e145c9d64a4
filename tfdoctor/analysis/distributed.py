"""Replica and worker balance of a distributed run: per-replica and per-worker step timing, collective
(all-reduce) time and its overlap with compute, stragglers, idle devices, input imbalance.

``summarize(trace, steps, facts, worker_steps)`` -> :class:`~tfdoctor.model.DistributedSummary`, or
None for a run on one device of one host. Three views, whichever the trace holds:

* **devices**: one accelerator plane per GPU/TPU. Each device is timed over its own XProf ``Steps``
  line when it has one (a multi-worker trace's devices step at different times), else over the run's
  steps. Devices with no kernel inside the steps are *idle*.
* **replicas** on a CPU-only ``MirroredStrategy`` over logical CPU devices: there is no device plane,
  but TensorFlow names the ops of replica *k* ``replica_k/...`` (replica 0 keeps the bare names), so
  each replica's op time is the union of its ops on the host's worker threads.
* **workers**: one per host of a merged multi-host trace (``tfdoctor.trace.load`` keeps each plane's
  host), each analysed on its own planes: its own step markers, breakdown and collective time.

A *straggler* is the replica or worker with the most *own work* per step (compute for a replica; step
time minus collective wait for a worker: in synchronous training the fast ones wait in the all-reduce
for the slow one). Nothing here imports TensorFlow.
"""

from __future__ import annotations

import re
import statistics

import numpy as np

from tfdoctor.analysis import intervals as iv
from tfdoctor.analysis.breakdown import (
    INPUT_NAMES,
    active_device_planes,
    compute_breakdown,
    is_collective,
    is_cpu_work,
    is_host_op,
)
from tfdoctor.analysis.steps import Steps, find_steps
from tfdoctor.model import DistributedSummary, Facts, ReplicaTiming, StepTiming
from tfdoctor.trace.model import Plane, Trace

_REPLICA_RE = re.compile(r"(?:^|/)replica_(\d+)/")
#: how much longer the slowest replica's own work may be than the fastest's before it is a straggler
STRAGGLER_RATIO = 1.25
#: a straggling worker also makes the others wait: their collective time exceeds its own by this share
#: of the step (two CPU workers on one small machine differ by ~15 % from noise alone)
STRAGGLER_WAIT = 0.2


def replica_of(name: str) -> int:
    """The replica an op belongs to under a MirroredStrategy: ``replica_1/dense/MatMul`` and
    ``gradient_tape/replica_1/dense/MatMul`` -> 1; ``-1`` for a name without a replica marker."""
    m = _REPLICA_RE.search(name)
    return int(m.group(1)) if m else -1


def replica_ids(names: list[str]) -> np.ndarray:
    """Replica of each op name; replica 0 keeps the bare names, so a bare name is replica 0 only when
    some other replica has the same op (``replica_k/`` removed), else it belongs to no replica (-1)."""
    rep = np.array([replica_of(n) for n in names], dtype=np.int64)
    mirrored = {
        _REPLICA_RE.sub(lambda m: "/" if m.group(0).startswith("/") else "", n, count=1)
        for n, r in zip(names, rep.tolist(), strict=True)
        if r > 0
    }
    for i, n in enumerate(names):
        if rep[i] < 0 and n in mirrored:
            rep[i] = 0
    return rep


def _ms(ps: float) -> float:
    return float(ps) / 1e9


def _device_timing(plane: Plane, lo: np.ndarray, hi: np.ndarray) -> ReplicaTiming:
    """Busy, compute and collective time of one device plane over the windows [lo, hi)."""
    own = plane.line("Steps")
    if own is not None and len(own):
        order = np.argsort(own.start_ps)
        lo, hi = own.start_ps[order], own.end_ps[order]
    busy, comp, coll = [], [], []
    names = np.asarray(plane.event_names, dtype=object)
    for ln in plane.lines:
        if ln.is_derived or not len(ln):
            continue
        n = names[ln.name_idx]
        is_copy = np.array([str(x).startswith(("Memcpy", "Memset")) for x in n], dtype=bool)
        is_coll = np.array([is_collective(str(x)) for x in n], dtype=bool)
        busy.append(iv.union(ln.start_ps, ln.end_ps))
        comp.append(iv.union(ln.start_ps[~is_copy & ~is_coll], ln.end_ps[~is_copy & ~is_coll]))
        coll.append(iv.union(ln.start_ps[is_coll], ln.end_ps[is_coll]))
    b, c, k = iv.union_sets(*busy), iv.union_sets(*comp), iv.union_sets(*coll)
    n_steps = int(lo.size)
    span = float((hi - lo).sum()) or 1.0
    busy_ps = float(iv.per_window(b, lo, hi).sum())
    comp_ps = float(iv.per_window(c, lo, hi).sum())
    coll_ps = float(iv.per_window(k, lo, hi).sum())
    overlap_ps = float(iv.per_window(iv.intersect(k, c), lo, hi).sum())
    step_ms = _ms(float(np.median(hi - lo))) if n_steps else 0.0
    return ReplicaTiming(
        name=plane.name,
        kind="device",
        host=plane.host,
        active=comp_ps > 0 or coll_ps > 0,
        steps=n_steps,
        step_ms=round(step_ms, 4),
        busy_ms=round(_ms(comp_ps) / max(n_steps, 1), 4),
        collective_ms=round(_ms(coll_ps) / max(n_steps, 1), 4),
        collective_overlap=round(overlap_ps / coll_ps, 4) if coll_ps else 0.0,
        busy_share=round(busy_ps / span, 4),
    )


def _cpu_replicas(trace: Trace, steps: Steps) -> list[ReplicaTiming]:
    """Per-replica op time on a CPU-only MirroredStrategy run (``replica_k/`` op names)."""
    lo, hi = steps.starts, steps.ends
    n_steps = len(steps)
    per: dict[tuple[str, int], list[iv.IntervalSet]] = {}
    for plane in trace.host_planes():
        names = np.asarray(plane.event_names, dtype=object)
        work = np.array([is_cpu_work(str(n)) and not is_collective(str(n)) for n in names], dtype=bool)
        rep = replica_ids([str(n) for n in names])
        if not (rep > 0).any():
            continue
        for ln in plane.lines:
            if ln is steps.main_line or not len(ln) or ln.name.startswith("tf_data"):
                continue
            r = rep[ln.name_idx]
            sel = work[ln.name_idx] & (r >= 0)
            for k in np.unique(r[sel]).tolist():
                m = sel & (r == k)
                per.setdefault((plane.host, int(k)), []).append(iv.union(ln.start_ps[m], ln.end_ps[m]))
    span = float((hi - lo).sum()) or 1.0
    step_ms = _ms(float(np.median(hi - lo))) if n_steps else 0.0
    out = []
    for (host, k), sets in sorted(per.items()):
        busy = float(iv.per_window(iv.union_sets(*sets), lo, hi).sum())
        out.append(
            ReplicaTiming(
                name=f"replica {k}",
                kind="replica",
                host=host,
                active=busy > 0,
                steps=n_steps,
                step_ms=round(step_ms, 4),
                busy_ms=round(_ms(busy) / max(n_steps, 1), 4),
                busy_share=round(busy / span, 4),
            )
        )
    return out


def host_trace(trace: Trace, host: str) -> Trace:
    """The planes of one host (worker) of a merged trace, on the same time base."""
    return Trace(
        planes=[p for p in trace.planes if p.host == host],
        origin_ns=trace.origin_ns,
        source=trace.source,
        format=trace.format,
        hostnames=[host],
    )


def _worker_timing(
    trace: Trace, host: str, steps_clock: list[StepTiming] | None
) -> tuple[ReplicaTiming, list[str]]:
    sub = host_trace(trace, host)
    st = find_steps(sub, steps_clock)
    if st is None or not len(st):
        return ReplicaTiming(name=host, kind="worker", host=host, active=False), [
            f"{host}: no steps found in its trace"
        ]
    res = compute_breakdown(sub, st)
    per = res.per_step_ps
    n = len(st)
    step_ms = _ms(float(np.median(st.durations)))
    coll_ps = float(per["collective"].sum())
    comp_ps = float(per["device_compute"].sum())
    coll_set, work_set = _collective_and_ops(sub, st)
    coll_all = float(iv.per_window(coll_set, st.starts, st.ends).sum())
    overlap = float(iv.per_window(iv.intersect(coll_set, work_set), st.starts, st.ends).sum())
    span = float(st.durations.sum()) or 1.0
    return (
        ReplicaTiming(
            name=host,
            kind="worker",
            host=host,
            active=True,
            steps=n,
            step_ms=round(step_ms, 4),
            busy_ms=round(_ms(comp_ps) / n, 4),
            input_wait_ms=round(_ms(float(per["input_wait"].sum())) / n, 4),
            collective_ms=round(_ms(coll_ps) / n, 4),
            collective_overlap=round(overlap / coll_all, 4) if coll_all else 0.0,
            busy_share=round(comp_ps / span, 4),
        ),
        [],
    )


def _straggler(items: list[ReplicaTiming], own) -> tuple[str | None, float]:
    live = [(r.name, own(r)) for r in items if r.active and own(r) > 0]
    if len(live) < 2:
        return None, 1.0
    slow = max(live, key=lambda x: x[1])
    fast = min(v for _, v in live)
    ratio = slow[1] / fast if fast > 0 else 1.0
    return (slow[0] if ratio >= STRAGGLER_RATIO else None), round(ratio, 4)


def hosts_of(trace: Trace) -> list[str]:
    seen: list[str] = []
    for p in trace.planes:
        if p.host and p.host not in seen and (p.is_host or p.is_device):
            seen.append(p.host)
    return seen


def summarize(
    trace: Trace,
    steps: Steps | None,
    facts: Facts | None = None,
    worker_steps: dict[str, list[StepTiming]] | None = None,
) -> DistributedSummary | None:
    """The distributed view of a run, or None when it ran on one device of one host."""
    facts = facts or Facts()
    hosts = [h for h in hosts_of(trace) if any(p.is_host for p in trace.planes if p.host == h)]
    accel = [p for p in trace.device_planes() if p.device_kind in ("GPU", "TPU")]
    notes: list[str] = []
    replicas: list[ReplicaTiming] = []
    idle: list[str] = []
    if accel and steps is not None and len(steps):
        replicas = [_device_timing(p, steps.starts, steps.ends) for p in accel]
        idle = [r.name if len(hosts) < 2 else f"{r.host} {r.name}" for r in replicas if not r.active]
        copies_only = [
            p.name
            for p, r in zip(accel, replicas, strict=True)
            if not r.active and p in active_device_planes(trace)
        ]
        if copies_only:
            notes.append(f"only copies, no kernels, on {', '.join(copies_only)}")
    elif steps is not None and len(steps):
        replicas = _cpu_replicas(trace, steps)
    workers: list[ReplicaTiming] = []
    if len(hosts) > 1:
        for h in hosts:
            w, why = _worker_timing(trace, h, (worker_steps or {}).get(h))
            workers.append(w)
            notes.extend(why)
    distributed = (
        len(hosts) > 1 or len(accel) > 1 or len(replicas) > 1 or facts.num_replicas > 1 or bool(worker_steps)
    )
    if not distributed:
        return None
    # stragglers: workers first (the whole job waits for the slowest host), then replicas
    straggler, ratio = None, 1.0
    if len(workers) > 1:
        straggler, ratio = _straggler(workers, lambda r: r.step_ms - r.collective_ms)
        if straggler is not None:
            slow = next(w for w in workers if w.name == straggler)
            others = [w.collective_ms for w in workers if w.active and w.name != straggler]
            step = statistics.fmean(w.step_ms for w in workers if w.active) or 1.0
            if not others or (statistics.fmean(others) - slow.collective_ms) / step < STRAGGLER_WAIT:
                straggler = None
    if straggler is None and len(replicas) > 1:
        s2, r2 = _straggler(replicas, lambda r: r.busy_ms)
        if s2 is not None or ratio == 1.0:
            straggler, ratio = s2, r2
    # collective share and overlap: from the workers where there are several, else the replicas / run
    src = [w for w in workers if w.active] or [r for r in replicas if r.active]
    coll_share = 0.0
    overlap = 0.0
    if src and any(r.collective_ms for r in src):
        coll_share = statistics.fmean(r.collective_ms / r.step_ms for r in src if r.step_ms > 0)
        overlap = statistics.fmean(r.collective_overlap for r in src if r.collective_ms > 0)
    elif steps is not None and len(steps):
        coll_share, overlap = _host_collectives(trace, steps)
    imbalance = 0.0
    live = [w for w in workers if w.active and w.step_ms > 0]
    if len(live) > 1:
        waits = [w.input_wait_ms for w in live]
        imbalance = (max(waits) - min(waits)) / statistics.fmean(w.step_ms for w in live)
    one_per_worker = len(workers) > 1 and facts.num_replicas <= len(workers)
    if facts.num_replicas > 1 and not accel and not replicas and steps is not None and not one_per_worker:
        notes.append(
            f"{facts.strategy or 'the strategy'} ran {facts.num_replicas} replicas but the trace names no "
            "replica's ops (replica_k/...): per-replica time is not available"
        )
    return DistributedSummary(
        strategy=facts.strategy,
        num_replicas=facts.num_replicas,
        hosts=hosts,
        replicas=replicas,
        workers=workers,
        idle_devices=idle,
        straggler=straggler,
        straggler_ratio=ratio,
        collective_share=round(coll_share, 4),
        collective_overlap=round(overlap, 4),
        input_imbalance=round(imbalance, 4),
        notes=notes,
    )


def _collective_and_ops(trace: Trace, steps: Steps) -> tuple[iv.IntervalSet, iv.IntervalSet]:
    """Collective events, and TF op kernels ("scope:OpType", collectives excluded) off the main thread,
    on the host planes: what the CPU computes while an all-reduce is under way."""
    coll, work = [], []
    for plane in trace.host_planes():
        names = np.asarray(plane.event_names, dtype=object)
        c = np.array([is_collective(str(n)) for n in names], dtype=bool)
        w = np.array([is_host_op(str(n)) and str(n) not in INPUT_NAMES for n in names], dtype=bool)
        for ln in plane.lines:
            if not len(ln):
                continue
            m = c[ln.name_idx]
            coll.append(iv.union(ln.start_ps[m], ln.end_ps[m]))
            if ln is not steps.main_line:
                k = w[ln.name_idx]
                work.append(iv.union(ln.start_ps[k], ln.end_ps[k]))
    return iv.union_sets(*coll), iv.union_sets(*work)


def _host_collectives(trace: Trace, steps: Steps) -> tuple[float, float]:
    """Collective share of step time and its overlap with op kernels, from the host planes (CPU runs)."""
    cs, ws = _collective_and_ops(trace, steps)
    span = float(steps.durations.sum()) or 1.0
    c_ps = float(iv.per_window(cs, steps.starts, steps.ends).sum())
    o_ps = float(iv.per_window(iv.intersect(cs, ws), steps.starts, steps.ends).sum())
    return c_ps / span, (o_ps / c_ps if c_ps else 0.0)


def summary_for(analysis, facts: Facts | None = None, worker_steps=None) -> DistributedSummary | None:
    """:func:`summarize` on an :class:`~tfdoctor.analysis.Analysis` (None when it has no steps)."""
    if analysis is None or analysis.steps is None:
        return None
    return summarize(analysis.trace, analysis.steps, facts, worker_steps)
