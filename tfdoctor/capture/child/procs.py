"""The processes a run started, found through ``/proc`` (Linux), and stopped.

A run's processes are (a) the harness's process group (the child runs in its own session: the
script's ``subprocess``/``fork``/``multiprocessing`` children stay in it unless they leave it), (b)
every process whose environment carries the run's token (``TFDOCTOR_RUN_TOKEN``: inherited by
descendants, ``setsid`` ones included, unless the script clears the environment), and (c) the
descendants of the harness seen while it ran (a ``setsid`` child started with an empty
environment). Each is identified by pid *and* start time, so a reused pid is never signalled.

Used by the parent at the end of every run, and by the harness's watchdog when the parent dies.
On systems without ``/proc`` only the process group is stopped.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterable
from dataclasses import dataclass

#: the environment variable that marks every process of one run
TOKEN_ENV = "TFDOCTOR_RUN_TOKEN"
#: the file descriptor (inherited by the harness) whose end-of-file means the parent died
WATCHDOG_ENV = "TFDOCTOR_WATCHDOG_FD"
#: the watchdog thread's name: it sits in os.read and runs no Python (the hooks' generator scan ignores it)
WATCHDOG_THREAD = "tfdoctor-watchdog"


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    start: int  # clock ticks since boot: with the pid, a process's identity
    name: str


def _stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    try:
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        rest = raw[raw.rindex(")") + 2 :].split()
        if rest[0] in ("Z", "X"):  # exited, waiting to be reaped: nothing left to stop
            return None
        return Proc(pid=pid, ppid=int(rest[1]), pgid=int(rest[2]), start=int(rest[19]), name=name)
    except (ValueError, IndexError):
        return None


def table() -> dict[int, Proc]:
    """Every live process this process can see, by pid ({} without /proc)."""
    out: dict[int, Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if n.isdigit():
            p = _stat(int(n))
            if p is not None:
                out[p.pid] = p
    return out


def descendants(root: int, procs: dict[int, Proc]) -> dict[int, Proc]:
    children: dict[int, list[Proc]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p)
    out: dict[int, Proc] = {}
    todo = [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c.pid not in out:
                out[c.pid] = c
                todo.append(c.pid)
    return out


def _has_token(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def _ancestors(pid: int, procs: dict[int, Proc]) -> set[int]:
    out = set()
    while pid in procs and pid not in out and pid > 1:
        out.add(pid)
        pid = procs[pid].ppid
    return out


def run_processes(
    pgid: int | None, token: str | None, seen: Iterable[Proc] = (), root: int | None = None
) -> list[Proc]:
    """The live processes of a run: its process group ``pgid``, those carrying ``token``, the
    descendants of ``root``, and those in ``seen`` still alive with the same start time. Never this
    process or one of its ancestors."""
    procs = table()
    mine = _ancestors(os.getpid(), procs)
    found: dict[int, Proc] = {}
    marker = f"{TOKEN_ENV}={token}".encode() if token else None
    for p in procs.values():
        if p.pid in mine:
            continue
        if (pgid is not None and p.pgid == pgid) or (marker is not None and _has_token(p.pid, marker)):
            found[p.pid] = p
    if root is not None:
        found.update({k: v for k, v in descendants(root, procs).items() if k not in mine})
    for s in seen:
        q = procs.get(s.pid)
        if q is not None and q.start == s.start and q.pid not in mine:
            found[q.pid] = q
    return sorted(found.values(), key=lambda p: p.pid)


def kill(procs: Iterable[Proc], sig: int = signal.SIGKILL) -> list[Proc]:
    """Signal each process that is still the same process (pid and start time); returns those signalled."""
    done = []
    for p in procs:
        now = _stat(p.pid)
        if now is None or now.start != p.start:
            continue
        try:
            os.kill(p.pid, sig)
            done.append(p)
        except (ProcessLookupError, PermissionError):
            continue
    return done


def describe(procs: Iterable[Proc], limit: int = 6) -> str:
    ps = list(procs)
    shown = ", ".join(f"{p.name} (pid {p.pid})" for p in ps[:limit])
    return shown + (f" and {len(ps) - limit} more" if len(ps) > limit else "")


def start_watchdog() -> bool:
    """In the harness: when the parent dies (the pipe it holds closes), stop every process of the run
    (this one last). Returns whether a watchdog was started (``TFDOCTOR_WATCHDOG_FD`` set)."""
    try:
        fd = int(os.environ.get(WATCHDOG_ENV, ""))
    except ValueError:
        return False
    os.environ.pop(WATCHDOG_ENV, None)  # not the script's business, nor its children's
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return False
    token = os.environ.get(TOKEN_ENV)

    def watch() -> None:
        while True:
            try:
                if not os.read(fd, 64):
                    break  # end of file: every write end is closed, the parent is gone
            except InterruptedError:
                continue
            except OSError:
                break
        me = os.getpid()
        kill(p for p in run_processes(os.getpgrp(), token, root=me) if p.pid != me)
        try:
            os.killpg(os.getpgrp(), signal.SIGKILL)
        finally:
            os.kill(me, signal.SIGKILL)

    threading.Thread(target=watch, name=WATCHDOG_THREAD, daemon=True).start()
    return True
