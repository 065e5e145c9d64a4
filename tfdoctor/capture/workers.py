"""A multi-worker job as the parent sees it: this process's task (``TF_CONFIG``), profiler addresses,
which hosts a remote capture is missing and why. TensorFlow-free."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from tfdoctor.errors import UsageError

WORKER_ROLES = ("chief", "worker")


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


def first_line(e: BaseException) -> str:
    text = str(getattr(e, "message", "") or e).strip()
    return text.splitlines()[0] if text else type(e).__name__
