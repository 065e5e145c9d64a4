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

import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfdoctor.capture.runner import (
    CaptureConfig,
    CaptureProgress,
    CaptureResult,
    check_tensorflow,
    run_capture,
)
from tfdoctor.capture.workers import (
    CRASH_HINT,
    WorkerIdentity,
    answers,
    first_line,
    lacking_note,
    missing_hosts,
)
from tfdoctor.errors import RunExists, TensorFlowMissing, TfdoctorError, UsageError
from tfdoctor.model import Facts, Report
from tfdoctor.rundir import (
    CAPTURE,
    FACTS,
    META,
    REPORT,
    STEPS,
    WORKER_DONE,
    RunDir,
    atomic_write_json,
    now_iso,
    valid_run_id,
)
from tfdoctor.session.build import build_report, device_label, finish_run
from tfdoctor.store import RunStore

# -- one run, several workers ----------------------------------------------------------------------


def _claim(store: RunStore, run_id: str, script: str, args: list[str], ident: WorkerIdentity, force: bool):
    """Make (or join) the shared run directory; refuse to overwrite this worker's own earlier part."""
    if not valid_run_id(run_id):
        raise UsageError(f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-'")
    run = RunDir(store.runs_dir / run_id)
    mine = run.worker(ident.name)
    theirs_done = mine.file(WORKER_DONE).exists() or mine.file(CAPTURE).exists()
    chief_done = ident.is_chief and run.file(REPORT).exists()
    if (theirs_done or chief_done) and not force:
        raise RunExists(
            f"run {run_id} already holds {ident.name}'s capture at {mine.path}; "
            "pass --force (on every worker) to replace it"
        )
    if mine.path.exists():
        shutil.rmtree(mine.path)
    run.published_trace(ident.name).unlink(missing_ok=True)
    if ident.is_chief:
        for name in (REPORT, FACTS, STEPS):
            run.file(name).unlink(missing_ok=True)
    mine.path.mkdir(parents=True)
    if ident.is_chief or not run.file(META).exists():
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
        target = run.published_trace(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(src, tmp)
        os.replace(tmp, target)
    atomic_write_json(
        mine.file(WORKER_DONE),
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
        missing = [n for n in names if not run.worker(n).file(WORKER_DONE).exists()]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(poll_s)


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
    own = _worker_report(mine, result, str(cfg.script), cfg.args)
    if not ident.is_chief:
        return run, result, own
    others = [n for n in ident.all_names() if n != ident.name]
    missing = wait_for_workers(run, others, wait_s)
    for name in (FACTS, STEPS):
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
        done = run.worker(name).read_json(WORKER_DONE, {}) or {}
        if done.get("trace"):
            continue
        why = done.get("message") or done.get("status") or "no reason recorded"
        note = f"{name} published no trace: {why}; the merged analysis covers the other workers"
        if "killed by SIG" in why:
            note += f". {CRASH_HINT}"
        out.append(note)
    return out


def _worker_report(mine: RunDir, result: CaptureResult, script: str, args: list[str]) -> Report:
    """This worker's own report (what a non-chief worker shows): named by the script, like any run."""
    mine.update_meta(
        script=script,
        args=list(args),
        status=result.status,
        error=result.message if result.status != "complete" else None,
    )
    report = build_report(mine)
    mine.write_report(report)
    return report


# -- on-demand capture from profiler servers --------------------------------------------------------


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
            msg = f"no trace from {label}: {first_line(e)}"
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
        run.file(CAPTURE),
        {"addresses": addresses, "duration_ms": duration_ms, "started_ns": t0, "ended_ns": time.time_ns()},
    )
    hosts = sorted({p.name.removesuffix(".xplane.pb") for p in run.trace_files()})
    facts = Facts(captured_from=label, hosts=hosts, hosts_without_trace=lacking, hosts_not_answering=dead)
    atomic_write_json(run.file(FACTS), facts.model_dump(mode="json", exclude_defaults=True))
    store.update(run, status="complete" if run.trace_files() else "no_steps")
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


# -- logical devices (the harness's ``logical_devices`` switch) -----------------------------------
