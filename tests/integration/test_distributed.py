"""Real distributed TF runs on localhost: two MultiWorkerMirroredStrategy workers each under
`tfdoctor profile` into one run, `tfdoctor scale` over 1 and 2 logical CPU devices, and
`tfdoctor capture grpc://...` against two workers' profiler servers. Ports are chosen free at test
time, everything binds 127.0.0.1, every process has a deadline."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfdoctor.model import Report

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
MULTI = ROOT / "examples/multiworker.py"


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def tf_config(ports: list[int], index: int) -> str:
    return json.dumps(
        {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}
    )


def tfdoctor(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tfdoctor.cli", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_workers_profile_into_one_run_and_the_straggler_is_found(tfd_home):
    ports = free_ports(2)
    args = [
        "profile",
        str(MULTI),
        "--run-id",
        "job",
        "--steps",
        "16",
        "--profile-steps",
        "5",
        "--timeout",
        "150",
    ]
    script = ["--", "--slow-worker", "1", "--slow-ms", "15"]
    procs = [tfdoctor(*args, *script, env={**os.environ, "TF_CONFIG": tf_config(ports, i)}) for i in (1, 0)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[1][-3000:]
    run = tfd_home / "runs" / "job"
    published = sorted(p.name for p in (run / "logdir/plugins/profile/workers").glob("*.xplane.pb"))
    assert published == ["worker-0.xplane.pb", "worker-1.xplane.pb"]
    report = Report.model_validate_json((run / "report.json").read_text())
    d = report.distributed
    assert d is not None and [w.name for w in d.workers] == ["worker-0", "worker-1"]
    assert report.facts.num_replicas == 2
    assert all(w.steps >= 4 and w.collective_ms > 0 for w in d.workers)
    assert d.straggler == "worker-1"
    assert {f.rule_id for f in report.findings} >= {"TFD606"}
    assert "Replicas and workers" in outs[1]  # the chief shows the merged report
    # analyze re-reads the same run as one merged run
    again = subprocess.run(
        [sys.executable, "-m", "tfdoctor.cli", "analyze", "job", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert again.returncode == 0, again.stderr
    assert Report.model_validate_json(again.stdout).distributed.straggler == "worker-1"


def test_scale_runs_mirrored_on_one_and_two_logical_cpus(tfd_home):
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfdoctor.cli",
            "scale",
            str(ROOT / "examples/mirrored.py"),
            "--replicas",
            "1,2",
            "--steps",
            "24",
            "--run-id",
            "sc",
            "--json",
            "--",
            "--width",
            "256",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert [pt["ran_replicas"] for pt in res["points"]] == [1, 2]
    assert [pt["global_batch"] for pt in res["points"]] == [64, 128]
    two = res["points"][1]
    assert two["speedup"] > 0 and two["efficiency"] == pytest.approx(two["speedup"] / 2, rel=1e-3)
    r2 = Report.model_validate_json((tfd_home / "runs/sc-r2/report.json").read_text())
    assert [r.name for r in r2.distributed.replicas] == ["replica 0", "replica 1"]
    assert r2.breakdown.share["collective"] > 0


def test_capture_from_two_profiler_servers(tfd_home, tmp_path):
    ports = free_ports(2)
    port = ports[0]
    log = open(tmp_path / "job.log", "w")  # noqa: SIM115
    job = subprocess.Popen(
        [sys.executable, str(MULTI), "--launch", "2", "--epochs", "200", "--profiler-port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 150
        while "worker 1 epoch 1" not in (tmp_path / "job.log").read_text() and time.monotonic() < deadline:
            assert job.poll() is None, (tmp_path / "job.log").read_text()[-2000:]
            time.sleep(0.5)
        cap = subprocess.run(
            [
                sys.executable,
                "-m",
                "tfdoctor.cli",
                "capture",
                f"grpc://127.0.0.1:{port},grpc://127.0.0.1:{port + 1}",
                "--duration-ms",
                "1500",
                "--run-id",
                "g",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
        )
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        log.close()
    assert cap.returncode == 0, cap.stderr[-3000:]
    report = Report.model_validate_json(cap.stdout)
    assert len(report.trace_files) == 2
    assert report.breakdown.source.endswith("markers")  # the job's own Trace("train", step_num=...)
    assert len(report.distributed.workers) == 2
    assert all(w.collective_ms > 0 for w in report.distributed.workers)


def test_capture_reports_an_unreachable_server(tfd_home):
    (port,) = free_ports(1)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfdoctor.cli",
            "capture",
            f"grpc://127.0.0.1:{port}",
            "--duration-ms",
            "200",
            "--attempts",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "tfdoctor:" in p.stderr
