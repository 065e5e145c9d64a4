"""Beyond one process: multi-worker capture into one run, on-demand gRPC capture, logical devices.

**One run for a multi-worker job.** ``tfdoctor profile train.py --run-id JOB`` started on every worker
of a ``MultiWorkerMirroredStrategy`` job (``TF_CONFIG`` set, as the job needs anyway) captures each
worker under the harness into ``runs/JOB/workers/<task>/`` (a full run directory of its own: steps,
facts, its own logdir, the script's output) and publishes the worker's trace into the run's one
TensorBoard session::

    runs/JOB/
      meta.json, report.json, facts.json, steps.jsonl    (the chief's; the report is the merged one)
      logdir/plugins/profile/workers/worker-0.xplane.pb  (one file per worker: a multi-host session
      logdir/plugins/profile/workers/worker-1.xplane.pb   that TensorBoard and ``tfdoctor analyze`` read)
      workers/worker-0/ ... workers/worker-1/             (each worker's own capture)

The chief (task ``chief``, or ``worker`` 0 when the cluster has no chief) waits, bounded, for the other
workers to publish, then writes the merged report. Workers on other machines publish into their own
store: with a shared ``--home`` (NFS) the run is complete as is; otherwise copy ``workers/<task>/`` and
``logdir/plugins/profile/workers/<task>.xplane.pb`` into the chief's run and ``tfdoctor analyze JOB``.

**On demand.** ``capture_grpc`` asks running profiler servers (``tf.profiler.experimental.server
.start(port)`` in the job) for a trace of ``duration_ms`` with ``tf.profiler.experimental.client
.trace`` and stores it as one run.

TensorFlow is imported lazily (only ``capture_grpc`` and the harness side need it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfdoctor.capture.runner import (
    CaptureConfig,
    CaptureProgress,
    CaptureResult,
    check_tensorflow,
    device_label,
    finish_run,
    run_capture,
)
from tfdoctor.errors import RunExists, TensorFlowMissing, TfdoctorError, UsageError
from tfdoctor.model import Report, StepTiming
from tfdoctor.store import RunDir, RunStore, atomic_write_json, now_iso, valid_run_id

SESSION = "workers"  # the profile session directory every worker publishes its trace into
WORKER_ROLES = ("chief", "worker")
DONE = "worker.json"  # written into workers/<task>/ when the worker has published (or failed)


@dataclass(frozen=True)
class WorkerIdentity:
    """This process's task in a multi-worker cluster, from ``TF_CONFIG``."""

    task_type: str
    task_index: int
    cluster: dict[str, list[str]]

    @property
    def name(self) -> str:
        return f"{self.task_type}-{self.task_index}"

    @property
    def n_workers(self) -> int:
        return sum(len(self.cluster.get(r, [])) for r in WORKER_ROLES)

    @property
    def is_chief(self) -> bool:
        if self.cluster.get("chief"):
            return self.task_type == "chief"
        return self.task_type == "worker" and self.task_index == 0

    def all_names(self) -> list[str]:
        return [f"{r}-{i}" for r in WORKER_ROLES for i in range(len(self.cluster.get(r, [])))]


def from_tf_config(env: Mapping[str, str] | None = None) -> WorkerIdentity | None:
    """The worker identity when ``TF_CONFIG`` describes a cluster of two or more training tasks.

    None without ``TF_CONFIG`` or for a one-task cluster; UsageError for a ``TF_CONFIG`` that is not
    valid JSON or names no task of the cluster.
    """
    env = os.environ if env is None else env
    raw = env.get("TF_CONFIG", "").strip()
    if not raw:
        return None
    try:
        cfg = json.loads(raw)
        cluster = {str(k): [str(a) for a in v] for k, v in (cfg.get("cluster") or {}).items()}
        task = cfg.get("task") or {}
        ident = WorkerIdentity(str(task.get("type", "")), int(task.get("index", 0)), cluster)
    except (ValueError, TypeError, AttributeError) as e:
        raise UsageError(f"TF_CONFIG is not a valid cluster description ({e})") from None
    if ident.n_workers < 2:
        return None
    if ident.task_type not in WORKER_ROLES or ident.task_index >= len(cluster.get(ident.task_type, [])):
        raise UsageError(
            f"TF_CONFIG task {ident.name} is not a training task of its cluster "
            f"({', '.join(ident.all_names())}); tfdoctor profiles chief and worker tasks"
        )
    return ident


# -- one run, several workers ----------------------------------------------------------------------


def worker_dir(run: RunDir, name: str) -> RunDir:
    return RunDir(run.path / "workers" / name)


def published_trace(run: RunDir, name: str) -> Path:
    return run.logdir / "plugins" / "profile" / SESSION / f"{name}.xplane.pb"


def _claim(store: RunStore, run_id: str, script: str, args: list[str], ident: WorkerIdentity, force: bool):
    """Make (or join) the shared run directory; refuse to overwrite this worker's own earlier part."""
    if not valid_run_id(run_id):
        raise UsageError(f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-'")
    run = RunDir(store.runs_dir / run_id)
    mine = worker_dir(run, ident.name)
    theirs_done = mine.file(DONE).exists() or mine.file("capture.json").exists()
    chief_done = ident.is_chief and run.file("report.json").exists()
    if (theirs_done or chief_done) and not force:
        raise RunExists(
            f"run {run_id} already holds {ident.name}'s capture at {mine.path}; "
            "pass --force (on every worker) to replace it"
        )
    if mine.path.exists():
        shutil.rmtree(mine.path)
    published_trace(run, ident.name).unlink(missing_ok=True)
    if ident.is_chief:
        for name in ("report.json", "facts.json", "steps.jsonl"):
            run.file(name).unlink(missing_ok=True)
    mine.path.mkdir(parents=True)
    if ident.is_chief or not run.file("meta.json").exists():
        fields: dict[str, Any] = {
            "id": run_id,
            "script": script,
            "args": list(args),
            "kind": "multiworker",
            "status": "running",
            "workers": ident.all_names(),
        }
        if ident.is_chief or not run.meta.get("created"):
            fields["created"] = now_iso()
        store.update(run, **fields)
    return run, mine


def publish(run: RunDir, mine: RunDir, name: str, result: CaptureResult) -> Path | None:
    """Copy the worker's newest trace into the run's shared session as ``<name>.xplane.pb``."""
    target = None
    if result.trace_files:
        src = max(result.trace_files, key=lambda p: (p.parent.name, p.stat().st_mtime))
        target = published_trace(run, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(src, tmp)
        os.replace(tmp, target)
    atomic_write_json(
        mine.file(DONE),
        {
            "name": name,
            "status": result.status,
            "message": result.message,
            "steps": len(result.steps),
            "trace": str(target.relative_to(run.path)) if target else None,
            "finished": now_iso(),
        },
    )
    return target


def wait_for_workers(run: RunDir, names: list[str], timeout_s: float, poll_s: float = 0.5) -> list[str]:
    """Wait until every named worker has published (or failed); returns the ones still missing."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [n for n in names if not worker_dir(run, n).file(DONE).exists()]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(poll_s)


def worker_steps(run: RunDir) -> dict[str, list[StepTiming]]:
    """Each worker's harness step clock (``workers/<task>/steps.jsonl``), keyed by worker name."""
    from tfdoctor.pipeline import load_steps

    root = run.path / "workers"
    if not root.is_dir():
        return {}
    return {d.name: load_steps(RunDir(d)) for d in sorted(root.iterdir()) if d.is_dir()}


def capture_worker(
    store: RunStore,
    cfg: CaptureConfig,
    ident: WorkerIdentity,
    *,
    run_id: str | None,
    force: bool = False,
    wait_s: float = 120.0,
    progress: Callable[[CaptureProgress], None] | None = None,
) -> tuple[RunDir, CaptureResult, Report]:
    """Capture this worker of a multi-worker job into the shared run ``run_id``.

    Returns (the shared run, this worker's capture, the report shown: the merged one on the chief,
    this worker's own elsewhere).
    """
    if not run_id:
        raise UsageError(
            f"this is {ident.name} of a {ident.n_workers}-worker job (TF_CONFIG): pass the same --run-id "
            "on every worker so that their traces land in one run",
            hint="e.g. tfdoctor profile train.py --run-id job1 -- ARGS  (on each worker)",
        )
    run, mine = _claim(store, run_id, str(cfg.script), cfg.args, ident, force)
    result = run_capture(cfg, mine, progress=progress)
    publish(run, mine, ident.name, result)
    own = _worker_report(mine, result)
    if not ident.is_chief:
        return run, result, own
    others = [n for n in ident.all_names() if n != ident.name]
    missing = wait_for_workers(run, others, wait_s)
    for name in ("facts.json", "steps.jsonl"):
        if mine.file(name).exists():
            shutil.copyfile(mine.file(name), run.file(name))
    report = finish_run(store, run, result)
    notes = []
    if missing:
        notes.append(
            f"no trace from {', '.join(missing)} within {wait_s:g} s; run tfdoctor analyze {run.id} later"
        )
    notes += failed_workers(run, [n for n in others if n not in missing])
    if notes:
        store.update(run, note="; ".join(notes))
        if report.breakdown is not None:
            report = report.model_copy(
                update={
                    "breakdown": report.breakdown.model_copy(
                        update={"notes": [*report.breakdown.notes, *notes]}
                    )
                }
            )
            run.write_report(report)
    return run, result, report


def failed_workers(run: RunDir, names: list[str]) -> list[str]:
    """A note for each worker that finished without publishing a trace (its ``worker.json`` says why)."""
    out = []
    for name in names:
        done = worker_dir(run, name).read_json(DONE, {}) or {}
        if done.get("trace"):
            continue
        why = done.get("message") or done.get("status") or "no reason recorded"
        note = f"{name} published no trace: {why}; the merged analysis covers the other workers"
        if "killed by SIG" in why:
            note += f". {CRASH_HINT}"
        out.append(note)
    return out


def _worker_report(mine: RunDir, result: CaptureResult) -> Report:
    from tfdoctor.pipeline import build_report

    mine.update_meta(status=result.status, error=result.message if result.status != "complete" else None)
    report = build_report(mine)
    mine.write_report(report)
    return report


# -- on-demand capture from profiler servers --------------------------------------------------------


def parse_addresses(text: str) -> list[str]:
    """``grpc://h1:6009,grpc://h2:6009`` (or without the scheme) -> ``["grpc://h1:6009", ...]``."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        bare = part.removeprefix("grpc://")
        host, sep, port = bare.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"{part!r} is not a profiler address: use grpc://HOST:PORT")
        out.append(f"grpc://{bare}")
    if not out:
        raise UsageError("no profiler address given: use grpc://HOST:PORT[,grpc://HOST2:PORT]")
    return out


def capture_grpc(
    store: RunStore,
    addresses: list[str],
    duration_ms: int,
    *,
    run_id: str | None = None,
    force: bool = False,
    attempts: int = 3,
    host_tracer_level: int = 2,
) -> tuple[RunDir, Report]:
    """Trace the profiler servers at ``addresses`` for ``duration_ms`` into one new run."""
    if duration_ms <= 0:
        raise UsageError(f"--duration-ms must be positive (got {duration_ms})")
    check_tensorflow()
    try:
        from tensorflow.python.framework import errors as tf_errors
        from tensorflow.python.profiler import profiler_client, profiler_v2
    except ImportError as e:
        raise TensorFlowMissing(str(e)) from None
    label = ",".join(addresses)
    run = store.new_run(label, [], kind="capture", run_id=run_id, force=force)
    run.logdir.mkdir(parents=True, exist_ok=True)
    opts = profiler_v2.ProfilerOptions(host_tracer_level=host_tracer_level, python_tracer_level=0)
    t0 = time.time_ns()
    hint = "is tf.profiler.experimental.server.start(PORT) running there, and training?"
    # (session dir, the addresses it lacks, those of them that no longer accept connections)
    best: tuple[Path, list[str], list[str]] | None = None
    tries = max(1, attempts)
    for k in range(1, tries + 1):
        # each try writes into its own logdir: TensorFlow names the session by the second it started,
        # and a session holding two tries' files would be merged as one
        tmp = run.path / f".capture-try-{k}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _trace(profiler_client, label, tmp, duration_ms, attempts, opts)
        except (tf_errors.OpError, RuntimeError, ValueError) as e:  # pybind raises plain exceptions too
            shutil.rmtree(tmp, ignore_errors=True)
            if best is not None:  # a retry for a missing host failed: keep the session we have
                break
            msg = f"no trace from {label}: {_first_line(e)}"
            store.update(run, status="failed", error=msg)
            raise TfdoctorError(msg, hint=hint) from None
        session = _newest_session(tmp)
        if session is None:
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        lacking = missing_hosts(addresses, [f.name for f in session.glob("*.xplane.pb")])
        dead = [a for a in lacking if not answers(a)]
        if best is None or len(lacking) < len(best[1]):
            if best is not None:
                shutil.rmtree(best[0].parents[2], ignore_errors=True)
            best = (session, lacking, dead)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        if len(dead) == len(lacking):
            break  # complete, or the missing hosts are gone (no longer accept connections): no retry helps
        # a host that answered after the client's deadline (a loaded machine serialising its trace) is
        # dropped by TensorFlow without an error: trace the whole session again, so the hosts' traces
        # still cover the same time
    if best is None:
        msg = f"no trace from {label}: the profiler servers returned no trace file"
        store.update(run, status="failed", error=msg)
        raise TfdoctorError(msg, hint=hint)
    session, lacking, dead = best
    dest = run.logdir / "plugins" / "profile" / session.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(session), str(dest))
    for leftover in run.path.glob(".capture-try-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    atomic_write_json(
        run.file("capture.json"),
        {"addresses": addresses, "duration_ms": duration_ms, "started_ns": t0, "ended_ns": time.time_ns()},
    )
    hosts = {p.name.removesuffix(".xplane.pb") for p in run.trace_files()}
    extra = {"captured_from": label, "hosts": ",".join(sorted(hosts))}
    if lacking:
        extra["hosts_without_trace"] = ",".join(lacking)
    if dead:
        extra["hosts_not_answering"] = ",".join(dead)
    atomic_write_json(run.file("facts.json"), {"extra": extra})
    store.update(run, status="complete" if run.trace_files() else "no_steps")
    from tfdoctor.pipeline import build_report

    report = build_report(run)
    if lacking:
        bd = report.breakdown
        note = lacking_note(lacking, dead, tries)
        report = report.model_copy(
            update={"breakdown": bd.model_copy(update={"notes": [*bd.notes, note]}) if bd else bd}
        )
    run.write_report(report)
    store.update(run, device=device_label(report.facts), note=f"{len(hosts)} host(s) from {label}")
    return run, report


def _trace(client: Any, label: str, logdir: Path, duration_ms: int, attempts: int, opts: Any) -> None:
    """One ``profiler_client.trace`` of every address into ``logdir``, stdout kept clean for --json."""
    saved = os.dup(1)
    try:
        sys.stdout.flush()
        os.dup2(2, 1)  # the C++ client prints its progress on stdout: keep stdout for --json
        client.trace(label, str(logdir), duration_ms, num_tracing_attempts=attempts, options=opts)
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _newest_session(logdir: Path) -> Path | None:
    sessions = sorted(p.parent for p in logdir.glob("plugins/profile/*/*.xplane.pb"))
    return sessions[-1] if sessions else None


def missing_hosts(addresses: list[str], files: list[str]) -> list[str]:
    """The addresses no trace file stands for. TensorFlow names a host's file after the address it was
    asked (``10.0.0.2:6009`` -> ``10.0.0.2_6009.xplane.pb``); when the names follow another scheme (a
    server naming itself), only the count can tell, and the addresses beyond it are the missing ones."""
    stems = {f.removesuffix(".xplane.pb") for f in files}
    expected = {a: a.removeprefix("grpc://").replace(":", "_") for a in addresses}
    if stems & set(expected.values()):
        return [a for a, stem in expected.items() if stem not in stems]
    return addresses[len(stems) :] if len(stems) < len(addresses) else []


def answers(address: str, timeout_s: float = 3.0) -> bool:
    """Does anything still accept connections at ``grpc://HOST:PORT``? (After a trace: is the job alive?)"""
    host, _, port = address.removeprefix("grpc://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


#: why a host that stopped answering during a trace most likely did (measured here; docs/distributed.md)
CRASH_HINT = (
    "TensorFlow's profiler can crash a MultiWorkerMirroredStrategy worker when a trace stops (TF 2.21: "
    "an abort in TraceMeRecorder::Consume; measured here with 2 workers: 1 remote trace in 2 at 1500 ms, "
    "1 in 8 at 400 ms, and about 1 run in 3 under `tfdoctor profile --run-id`): keep traces short, and "
    "see docs/distributed.md"
)


def lacking_note(lacking: list[str], dead: list[str], tries: int) -> str:
    """The report's note (and the command's warning) for hosts whose trace is missing."""
    alive = [a for a in lacking if a not in dead]
    bits = []
    if dead:
        bits.append(
            f"{', '.join(dead)} gave no trace and no longer accepts connections: its process has probably "
            "died during the trace. " + CRASH_HINT
        )
    if alive:
        bits.append(f"no trace from {', '.join(alive)} in {tries} tries")
    return "; ".join(bits) + ". The analysis covers the other hosts only."


def _first_line(e: BaseException) -> str:
    text = str(getattr(e, "message", "") or e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# -- logical devices (the harness's ``logical_devices`` switch) -----------------------------------


def configure_logical_devices(tf: Any, n: int) -> str:
    """Before the script touches a device: make ``n`` replicas' worth of devices visible.

    With GPUs, the first ``n`` physical GPUs stay visible (the rest are hidden); without GPUs, the CPU
    is split into ``n`` logical devices, so that ``MirroredStrategy`` can run ``n`` replicas on it.
    Returns what was done, for the run's facts.
    """
    if n < 1:
        raise ValueError(f"logical devices: need at least 1 (got {n})")
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if n > len(gpus):
            return f"{n} replicas asked, {len(gpus)} GPUs present: all kept"
        tf.config.set_visible_devices(gpus[:n], "GPU")
        return f"{n} of {len(gpus)} GPUs visible"
    cpus = tf.config.list_physical_devices("CPU")
    if n > 1:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
        )
    return f"CPU split into {n} logical device(s)"


def worker_steps_by_host(run: RunDir) -> dict[str, list[StepTiming]]:
    """:func:`worker_steps` keyed by every name the merged trace may give the worker's host: the
    worker's name (its published file) and the hostname its harness recorded."""
    out: dict[str, list[StepTiming]] = {}
    for name, steps in worker_steps(run).items():
        out[name] = steps
        facts = worker_dir(run, name).read_json("facts.json", {}) or {}
        host = facts.get("hostname")
        if host and host not in out:
            out[host] = steps
    return out
