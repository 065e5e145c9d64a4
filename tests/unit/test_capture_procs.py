"""What a run leaves behind (issue 16, items 6, 7, 12), without TensorFlow: the processes a run
started are found (its group, its token, its descendants, setsid'd or not) and stopped, never another
process; the watchdog stops a run whose parent died; stdout.log keeps the head and the tail."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfdoctor.capture.child import procs
from tfdoctor.capture.runner import CappedLog

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def _alive(pid: int) -> bool:
    return procs._stat(pid) is not None  # zombies count as gone


def _wait_gone(pids: list[int], within_s: float = 30) -> list[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


#: a "harness" in its own session: a child in its group, a setsid'd child, a setsid'd child with no env
FAMILY = """
import os, subprocess, sys, time
kids = [
    subprocess.Popen(["sleep", "300"]).pid,
    subprocess.Popen(["sleep", "301"], start_new_session=True).pid,
    subprocess.Popen(["sleep", "302"], start_new_session=True, env={}).pid,
]
print(" ".join(map(str, kids)), flush=True)
time.sleep(300)
"""


@pytest.fixture()
def family():  # type: ignore[no-untyped-def]
    token = os.urandom(8).hex()
    proc = subprocess.Popen(
        [sys.executable, "-c", FAMILY],
        env={**os.environ, procs.TOKEN_ENV: token},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    kids = [int(p) for p in proc.stdout.readline().split()]
    yield proc, token, kids
    for p in [proc.pid, *kids]:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def test_a_runs_processes_are_its_group_its_token_and_its_descendants(family):
    proc, token, (same_group, setsid, setsid_no_env) = family
    bystander = subprocess.Popen(["sleep", "303"])  # same user, not of the run: never touched
    try:
        found = {p.pid for p in procs.run_processes(proc.pid, token)}
        assert {proc.pid, same_group, setsid} <= found  # by group and by token
        assert setsid_no_env not in found  # no token, other group: only the tree finds it
        seen = procs.descendants(proc.pid, procs.table())
        assert setsid_no_env in seen
        found = procs.run_processes(proc.pid, token, seen.values())
        assert {p.pid for p in found} == {proc.pid, same_group, setsid, setsid_no_env}
        assert os.getpid() not in {p.pid for p in found} and bystander.pid not in {p.pid for p in found}
        killed = procs.kill(found)
        assert {p.pid for p in killed} == {p.pid for p in found}
        assert _wait_gone([proc.pid, same_group, setsid, setsid_no_env]) == []
        assert bystander.poll() is None
        assert "sleep (pid" in procs.describe(found)
    finally:
        bystander.kill()
        bystander.wait()


def test_a_reused_pid_is_never_signalled():
    victim = subprocess.Popen(["sleep", "300"])
    try:
        me = procs._stat(victim.pid)
        assert me is not None
        impostor = procs.Proc(pid=me.pid, ppid=me.ppid, pgid=me.pgid, start=me.start + 1, name="sleep")
        assert procs.kill([impostor]) == []
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


WATCHED = """
import os, subprocess, sys, time
from tfdoctor.capture.child import procs
assert procs.start_watchdog()
kid = subprocess.Popen(["sleep", "310"], start_new_session=True).pid
print(os.getpid(), kid, flush=True)
time.sleep(300)
"""


def test_the_watchdog_stops_the_run_when_its_parent_dies():
    """The parent is stood in for by the pipe's write end: closing it is what SIGKILL of tfdoctor does."""
    r, w = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(ROOT), procs.WATCHDOG_ENV: str(r), procs.TOKEN_ENV: "t" * 16}
    child = subprocess.Popen(
        [sys.executable, "-c", WATCHED], env=env, pass_fds=(r,), stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    os.close(r)
    pids: list[int] = []
    try:
        assert child.stdout is not None
        pids = [int(p) for p in child.stdout.readline().split()]
        time.sleep(0.3)
        assert all(_alive(p) for p in pids)
        os.close(w)
        w = -1
        assert child.wait(timeout=60) == -signal.SIGKILL
        assert _wait_gone(pids) == []  # the harness and its setsid'd child
    finally:
        if w >= 0:
            os.close(w)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if child.poll() is None:
            child.kill()
            child.wait()


def test_without_a_watchdog_fd_nothing_is_started(monkeypatch):
    monkeypatch.delenv(procs.WATCHDOG_ENV, raising=False)
    assert procs.start_watchdog() is False


# -- item 12: the log keeps its head and its tail ---------------------------------------------------
def test_a_flood_of_output_keeps_the_head_and_the_tail(tmp_path):
    log = CappedLog(tmp_path / "stdout.log", head=1000, tail=2000)
    lines = [f"line {n:07d}\n".encode() for n in range(200_000)]  # 2.6 MB
    data = b"".join(lines)
    for k in range(0, len(data), 4093):
        log.feed(data[k : k + 4093])
    log.close()
    out = (tmp_path / "stdout.log").read_bytes()
    assert out.startswith(data[:1000])
    assert out.endswith(data[-2000:])
    assert f"{len(data) - 3000} bytes of output cut here".encode() in out
    assert len(out) < 3200


def test_output_under_the_cap_is_kept_whole(tmp_path):
    log = CappedLog(tmp_path / "stdout.log", head=1000, tail=2000)
    for piece in (b"a" * 900, b"b" * 900, b"c" * 900):  # 2700: past the head, within head + tail
        log.feed(piece)
    log.close()
    assert (tmp_path / "stdout.log").read_bytes() == b"a" * 900 + b"b" * 900 + b"c" * 900


def test_the_tail_is_on_disk_while_the_run_goes_on(tmp_path, monkeypatch):
    from tfdoctor.capture import runner

    monkeypatch.setattr(runner, "LOG_TAIL_FLUSH_S", 0.0)
    path = tmp_path / "stdout.log"
    log = CappedLog(path, head=10, tail=10)
    log.feed(b"0123456789" + b"x" * 100 + b"LAST-BYTES")
    assert path.read_bytes().endswith(b"LAST-BYTES")  # before close: a reader sees the latest output
    log.close()
