"""The run store: run directories (:mod:`tfdoctor.rundir`) under one home, plus an SQLite index (WAL).

    $TFDOCTOR_HOME (default ~/.tfdoctor)/
      index.sqlite
      runs/<run_id>/   a RunDir

The directories are the source of truth; the index can always be rebuilt from them.
"""

from __future__ import annotations

import builtins
import datetime as _dt
import difflib
import os
import re
import secrets
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tfdoctor.errors import RunExists, TfdoctorError
from tfdoctor.rundir import META, REPORT, SCALE, RunDir, is_run_dir, now_iso, valid_run_id


class RunNotFound(TfdoctorError):
    exit_code = 2


class StoreNotWritable(TfdoctorError):
    """The run store's folder cannot be written (read-only, full, not a folder)."""


def _proc_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return int(f.read().rsplit(")", 1)[-1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def writer_alive(meta: dict[str, Any]) -> bool:
    """Whether the process that writes this run (meta.json's pid, on this host) is still running.

    A pid reused by an unrelated process does not count when meta.json recorded the writer's start
    time (``pid_start``)."""
    pid, host = meta.get("pid"), meta.get("host")
    if not isinstance(pid, int) or host != socket.gethostname() or not _alive(pid):
        return False
    started = meta.get("pid_start")
    return not isinstance(started, int) or _proc_start(pid) in (None, started)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) is not alive either
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def default_home() -> Path:
    return Path(os.environ.get("TFDOCTOR_HOME") or Path.home() / ".tfdoctor")


_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  created TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT 'profile',
  script TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'running',
  device TEXT,
  examples_per_s REAL,
  steps_per_s REAL,
  speedup REAL,
  parent TEXT,
  error TEXT
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created);
"""

_INDEX_FIELDS = (
    "created",
    "kind",
    "script",
    "status",
    "device",
    "examples_per_s",
    "steps_per_s",
    "speedup",
    "parent",
    "error",
)


class RunStore:
    def __init__(self, home: Path | str | None = None):
        self.home = Path(home) if home is not None else default_home()
        self.runs_dir = self.home / "runs"
        self.index_path = self.home / "index.sqlite"

    # -- index ---------------------------------------------------------------------------------
    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.index_path, timeout=30)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(_SCHEMA)
            con.row_factory = sqlite3.Row
            with con:
                yield con
        finally:
            con.close()

    def _index(self, run: RunDir, meta: dict[str, Any]) -> None:
        row = {k: meta.get(k) for k in _INDEX_FIELDS}
        row["created"] = row["created"] or now_iso()
        row["kind"] = row["kind"] or "profile"
        row["script"] = row["script"] or ""
        row["status"] = row["status"] or "running"
        with self._db() as con:
            con.execute(
                f"INSERT OR REPLACE INTO runs (id, {', '.join(_INDEX_FIELDS)}) "
                f"VALUES (?, {', '.join('?' for _ in _INDEX_FIELDS)})",
                (run.id, *(row[k] for k in _INDEX_FIELDS)),
            )

    # -- runs ----------------------------------------------------------------------------------
    def new_run(
        self,
        script: str,
        args: list[str] | None = None,
        *,
        kind: str = "profile",
        parent: str | None = None,
        run_id: str | None = None,
        force: bool = False,
    ) -> RunDir:
        """Create a run directory. An explicit ``run_id`` that exists is refused unless ``force``; a
        generated one (time stamp to the second, script, 4 random hex digits) that is taken draws again:
        a fix loop makes many runs a second, and two of them drew the same digits."""
        if run_id is None:
            return self._make_run(self._fresh_dir(script), script, args, kind, parent)
        if not valid_run_id(run_id):
            raise TfdoctorError(f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-'")
        path = self.runs_dir / run_id
        if path.exists() or path.is_symlink():
            if not force:
                raise RunExists(f"run {run_id} already exists at {path}; pass --force to replace it")
            old = RunDir(path)
            try:
                old_meta = old.meta if path.is_dir() and not path.is_symlink() else {}
            except TfdoctorError:
                old_meta = {}
            # a run still written by another live process is never deleted (this process may replace
            # its own: the notebook kernel re-running a cell with --run-id X --force)
            if (
                old_meta.get("status") == "running"
                and old_meta.get("pid") != os.getpid()
                and writer_alive(old_meta)
            ):
                raise RunExists(
                    f"run {run_id} is still being written by process {old_meta.get('pid')}; "
                    "not replaced (stop that run first, or choose another --run-id)"
                )
            import shutil

            try:
                if path.is_symlink() or not path.is_dir():
                    path.unlink()
                else:
                    shutil.rmtree(path)
            except OSError as e:
                raise self._not_writable(e) from None
        try:
            path.mkdir(parents=True)
        except FileExistsError:  # another process created it between our check and now
            raise RunExists(f"run {run_id} already exists at {path}; pass --force to replace it") from None
        except OSError as e:
            raise self._not_writable(e) from None
        return self._make_run(path, script, args, kind, parent)

    def _fresh_dir(self, script: str) -> Path:
        """A new run directory under a generated id (mkdir is the atomic claim, across processes too)."""
        stem = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(script).stem)[:40].strip("-") or "run"
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        for _ in range(1000):
            path = self.runs_dir / f"{stamp}-{stem}-{secrets.token_hex(2)}"
            try:
                path.mkdir(parents=True)
                return path
            except FileExistsError:
                continue  # taken this second: draw again
            except OSError as e:
                raise self._not_writable(e) from None
        raise RunExists(f"no free run id for {stem} in {self.runs_dir} at {stamp}")

    def _make_run(
        self, path: Path, script: str, args: list[str] | None, kind: str, parent: str | None
    ) -> RunDir:
        run_id = path.name
        run = RunDir(path)
        meta = {
            "id": run_id,
            "script": str(script),
            "args": list(args or []),
            "kind": kind,
            "parent": parent,
            "status": "running",
            "created": now_iso(),
            # who is writing this run: a run left "running" by a process that died is stale (see list())
            "pid": os.getpid(),
            "pid_start": _proc_start(os.getpid()),
            "host": socket.gethostname(),
        }
        try:
            run.update_meta(**meta)
            self._index(run, run.meta)
        except (OSError, sqlite3.Error) as e:
            raise self._not_writable(e) from None
        return run

    def _not_writable(self, e: BaseException) -> StoreNotWritable:
        why = getattr(e, "strerror", None) or str(e)
        return StoreNotWritable(
            f"cannot write runs under {self.home} ({why}); set TFDOCTOR_HOME or --home to a writable folder"
        )

    def update(self, run: RunDir, **fields: Any) -> dict[str, Any]:
        """Update a run's meta.json and its index row (status, throughput, speedup, error, ...).

        A run is "complete" only once its report.json (a scale run: scale.json) is on disk: ``status="complete"`` before that
        is kept aside (``finishing``) and the run stays "running" until an update after the report
        was written; a process stopped in between (^C while the report is built) leaves a run that
        the next listing marks "interrupted", never a "complete" run without a report.
        """
        result = run.file(SCALE if (fields.get("kind") or run.meta.get("kind")) == "scale" else REPORT)
        if fields.get("status") == "complete" and not result.is_file():
            fields["status"] = "running"
            fields["finishing"] = "complete"
        elif "status" in fields:
            fields["finishing"] = None
        elif result.is_file():
            pending = run.meta.get("finishing")
            if pending:
                fields["status"] = pending
                fields["finishing"] = None
        meta = run.update_meta(**fields)
        self._index(run, meta)
        return meta

    def get(self, ref: str | os.PathLike[str]) -> RunDir:
        """A run by id (in this store) or by path to a run directory."""
        ref_s = os.fspath(ref)
        p = Path(ref_s)
        if is_run_dir(p):
            return RunDir(p.resolve())
        if not valid_run_id(ref_s):
            raise RunNotFound(
                f"no run {ref_s!r}: not a run directory and not a valid run id", hint=self._hint(p.name)
            )
        path = self.runs_dir / ref_s
        if not path.is_dir():
            raise RunNotFound(f"no run {ref_s!r} in {self.runs_dir}", hint=self._hint(ref_s))
        return RunDir(path)

    def close_ids(self, ref: str, n: int = 5) -> list[str]:
        """Run ids of this store that look like ``ref`` (containing it, or a near spelling), newest first."""
        try:
            ids = sorted((q.name for q in self.runs_dir.iterdir() if q.is_dir()), reverse=True)
        except OSError:
            return []
        near = difflib.get_close_matches(ref, ids, n=n, cutoff=0.6)
        return list(dict.fromkeys([i for i in ids if ref and ref in i] + near))[:n]

    def _hint(self, ref: str) -> str:
        close = self.close_ids(ref)
        if close:
            return "did you mean: " + ", ".join(close)
        return "list the runs with: tfdoctor runs"

    def mark_stale(self, run: RunDir) -> bool:
        """A run still "running" whose writer process is gone (killed, crashed machine session) is
        marked "interrupted" with the reason. Only runs written on this host are judged."""
        meta = run.meta
        if meta.get("status") != "running":
            return False
        pid, host = meta.get("pid"), meta.get("host")
        if not isinstance(pid, int) or host != socket.gethostname() or writer_alive(meta):
            return False
        when = " while its report was being built" if meta.get("finishing") else ""
        self.update(
            run,
            status="interrupted",
            error=f"the tfdoctor process (pid {pid}) ended{when} without finishing this run",
        )
        return True

    def list(self, limit: int = 200) -> list[dict[str, Any]]:
        """Index rows, newest first. Runs whose directory vanished are dropped from the index; runs
        left "running" by a dead process are marked interrupted. A store that cannot be written
        (read-only folder or index) is listed read-only from the run directories."""
        try:
            return self._list_indexed(limit)
        except (OSError, sqlite3.Error):
            if not self.runs_dir.is_dir():
                raise
            return self.scan(limit)

    def _list_indexed(self, limit: int) -> builtins.list[dict[str, Any]]:
        with self._db() as con:
            running = [r["id"] for r in con.execute("SELECT id FROM runs WHERE status = 'running'")]
        for rid in running:
            path = self.runs_dir / rid
            if path.is_dir():
                try:
                    run = RunDir(path)
                    meta = run.meta
                    if meta.get("status") != "running":  # finished since (RunDir.write_report)
                        self._index(run, meta)
                    else:
                        self.mark_stale(run)
                except TfdoctorError:
                    continue  # an unreadable meta.json: listed as it is
        with self._db() as con:
            rows = [
                dict(r)
                for r in con.execute("SELECT * FROM runs ORDER BY created DESC, id DESC LIMIT ?", (limit,))
            ]
            gone = [r["id"] for r in rows if not (self.runs_dir / r["id"]).is_dir()]
            for rid in gone:
                con.execute("DELETE FROM runs WHERE id = ?", (rid,))
        return [r for r in rows if r["id"] not in gone]

    def scan(self, limit: int = 200) -> builtins.list[dict[str, Any]]:
        """Rows like :meth:`list`'s, read from the run directories' meta.json without writing
        anything (a read-only store). A run left "running" by a dead writer is shown "interrupted"."""
        rows = []
        for path in self.runs_dir.iterdir():
            if not (valid_run_id(path.name) and path.is_dir() and not path.is_symlink()):
                continue
            try:
                meta = RunDir(path).meta
            except TfdoctorError:
                continue
            row: dict[str, Any] = {k: meta.get(k) for k in _INDEX_FIELDS}
            row["id"] = path.name
            row["created"] = str(row["created"] or "")
            row["kind"] = row["kind"] or "profile"
            row["script"] = row["script"] or ""
            row["status"] = row["status"] or "running"
            if row["status"] == "running" and isinstance(meta.get("pid"), int) and not writer_alive(meta):
                row["status"] = "interrupted" if meta.get("host") == socket.gethostname() else "running"
            rows.append(row)
        rows.sort(key=lambda r: (r["created"], r["id"]), reverse=True)
        return rows[:limit]

    def reindex(self) -> int:
        """Rebuild the index from the run directories (the source of truth)."""
        n = 0
        if not self.runs_dir.is_dir():
            return 0
        for path in sorted(self.runs_dir.iterdir()):
            if path.is_dir() and valid_run_id(path.name) and (path / META).is_file():
                run = RunDir(path)
                try:
                    self._index(run, run.meta)
                    n += 1
                except TfdoctorError:
                    continue
        return n
