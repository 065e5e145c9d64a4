"""One run's directory: the ONLY module that names the files in it.

Layout (the directories are the source of truth; the store's index can always be rebuilt from them)::

    runs/<run_id>/
      meta.json        id, script, args, kind, status, created, updated, error, parent
      capture.json     what was run, with which windows and switches (the parent writes it)
      harness.json     what the harness did (windows as they happened, warm-up, hook errors)
      facts.json       what the harness recorded (tfdoctor.model.Facts)
      steps.jsonl      one StepTiming per line, written as the script runs (progress)
      report.json      tfdoctor.model.Report
      stdout.log / stderr.log
      logdir/          a standard TensorBoard logdir (plugins/profile/<ts>/<host>.xplane.pb)
      fix.patch        the combined patch of kept fixes (``--fix``)
      workers/<task>/  a multi-worker job: each worker's own run directory (+ worker.json when done)

Every JSON file is written atomically (temp file + ``os.replace``), so a reader never sees half a
file and a crash never leaves a corrupt one. Run ids are ``[A-Za-z0-9._-]`` only: no path traversal.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tfdoctor.errors import TfdoctorError
from tfdoctor.model import Report, StepTiming

# the files of a run directory (RunDir.file(NAME))
META = "meta.json"
CAPTURE = "capture.json"
HARNESS = "harness.json"
FACTS = "facts.json"
STEPS = "steps.jsonl"
BETWEEN_FITS = (
    "between_fits"  # made when the watch of the work between fit() calls begins (capture/child/gap.py)
)
REPORT = "report.json"
STDOUT = "stdout.log"
STDERR = "stderr.log"
PATCH = "fix.patch"
SCALE = "scale.json"  # a ``tfdoctor scale`` run's result (it has no report.json)
LOGDIR = "logdir"
WORKERS = "workers"  # a multi-worker job's per-worker run directories
WORKER_DONE = "worker.json"  # written into workers/<task>/ when the worker has published (or failed)
WORKER_SESSION = "workers"  # the profile session directory every worker publishes its trace into

#: a run id, matched whole (``fullmatch``: ``$`` would accept a trailing newline)
RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def file_mode() -> int:
    """The mode a new file gets under the process's umask (0o644 for the usual 022): mkstemp's 0600
    would make a shared run store or an exported report unreadable to colleagues."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), file_mode())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


class HarnessRecord(BaseModel):
    """harness.json: what the harness (or the in-kernel capture) did. Written by the child as it goes
    (``started_ns``, windows entered) and completed at its end; absent when the child died."""

    model_config = ConfigDict(extra="allow")

    status: str | None = None
    error: str | None = None
    steps: int | None = None
    warmup: dict[str, Any] | None = None
    windows_actual: dict[str, int] | None = None
    why_no_steps: str | None = None
    # what the capture itself could not do (a hook that raised, facts it could not collect): never
    # swallowed, the report says it
    hook_errors: list[str] = Field(default_factory=list)
    profiler_error: str | None = None
    # the script's own profiler starts, left off under tfdoctor, each caller once
    # ("tf.profiler.experimental.start at train.py:24", "Keras's TensorBoard(profile_batch=...) at train.py:9")
    own_profiler: list[str] = Field(default_factory=list)
    profile_started_ns: int | None = None
    profile_stopped_ns: int | None = None
    # the harness's live descendants as it left ([pid, start ticks, name]): a child started with
    # setsid and an empty environment may have been born after the parent's last scan
    processes: list[tuple[int, int, str]] = Field(default_factory=list)


class UnsafeRunFile(TfdoctorError):
    """A run file that is a link, leads out of its run directory, or is not a regular file."""


class CaptureRecord(BaseModel):
    """capture.json: what was run, with which windows and switches (the parent writes it before the
    child starts; the harness reads it). A remote capture writes its addresses and duration instead."""

    model_config = ConfigDict(extra="allow")

    script: str | None = None
    args: list[str] = Field(default_factory=list)
    cwd: str | None = None
    run_dir: str | None = None
    logdir: str | None = None
    windows: dict[str, int] = Field(default_factory=dict)  # warmup / timing / profile steps, as planned
    warmup_adaptive: bool = False
    switches: dict[str, str] = Field(default_factory=dict)
    profiler_options: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float | None = None
    env: dict[str, str] = Field(default_factory=dict)
    fit: int | None = None  # --fit N: the phase of fit() training timed (None: the first)
    module: str | None = None  # -m MODULE: run as python -m MODULE from ``cwd`` (``script``: its file)


def is_run_dir(path: Path) -> bool:
    """A directory written by tfdoctor (a stored run, or one copied elsewhere such as sample_traces/)."""
    return any((path / name).is_file() for name in (META, REPORT, FACTS))


def valid_run_id(run_id: str) -> bool:
    return isinstance(run_id, str) and bool(RUN_ID_RE.fullmatch(run_id)) and ".." not in run_id


@dataclass(frozen=True)
class RunDir:
    """One run's directory. Cheap to construct; reads files on demand."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def logdir(self) -> Path:
        return self.path / LOGDIR

    def file(self, name: str) -> Path:
        return self.path / name

    def read_bytes(self, name: str, max_bytes: int | None = None) -> bytes | None:
        """A run file's bytes (the first ``max_bytes``), ``None`` when it does not exist.

        Never follows a link out of the run directory, and reads regular files only: a run file
        that is a symlink (``fix.patch -> /etc/passwd``), sits under a linked folder leading
        elsewhere, or is a FIFO/device raises :class:`UnsafeRunFile` instead of being read.
        """
        p = self.path / name
        root = os.path.realpath(self.path)
        if os.path.commonpath([root, os.path.realpath(p.parent)]) != root:
            raise UnsafeRunFile(f"{p}: its folder leads out of the run directory; not read")
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        except OSError:
            if os.path.islink(p):
                raise UnsafeRunFile(f"{p}: a symbolic link; run files are never read through links") from None
            raise
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafeRunFile(f"{p}: not a regular file; not read")
            return f.read() if max_bytes is None else f.read(max_bytes)

    def read_text(self, name: str, max_bytes: int | None = None) -> str | None:
        """:meth:`read_bytes` decoded as UTF-8 (undecodable bytes replaced)."""
        data = self.read_bytes(name, max_bytes)
        return None if data is None else data.decode("utf-8", "replace")

    def read_json(self, name: str, default: Any = None) -> Any:
        p = self.path / name
        try:
            data = self.read_bytes(name)
            if data is None:
                return default
            return json.loads(data)
        except (OSError, ValueError) as e:
            raise TfdoctorError(f"{p}: unreadable ({e})") from e

    def write_json(self, name: str, obj: Any) -> None:
        atomic_write_json(self.path / name, obj)

    @property
    def meta(self) -> dict[str, Any]:
        try:
            return self.read_json(META, {}) or {}
        except UnsafeRunFile as e:  # a linked meta.json is not read; the run still lists, saying why
            return {"error": str(e)}

    def update_meta(self, **fields: Any) -> dict[str, Any]:
        meta = self.meta
        meta.update(fields)
        meta["updated"] = now_iso()
        self.write_json(META, meta)
        return meta

    def report(self) -> Report | None:
        data = self.read_json(REPORT)
        return None if data is None else Report.model_validate(data)

    def write_report(self, report: Report) -> None:
        """Write report.json; a run whose "complete" waited for it (meta.json's ``finishing``, see
        ``RunStore.update``) is complete from now on."""
        atomic_write_text(self.path / REPORT, report.model_dump_json(indent=2) + "\n")
        meta = self.meta
        if meta.get("finishing"):
            self.update_meta(status=meta["finishing"], finishing=None)

    def trace_files(self) -> list[Path]:
        """The run's ``*.xplane.pb`` files: regular files inside the run directory only (a link in the
        logdir, to a file or a folder elsewhere, is never read as the run's trace)."""
        if not self.logdir.exists():
            return []
        root = os.path.realpath(self.path)
        out = []
        for p in self.logdir.rglob("*.xplane.pb"):
            real = os.path.realpath(p)
            if os.path.commonpath([root, real]) != root or p.is_symlink():
                continue
            if stat.S_ISREG(os.lstat(p).st_mode):
                out.append(p)
        return sorted(out)

    def capture_record(self) -> CaptureRecord | None:
        """capture.json, typed; None when the run has none."""
        data = self.read_json(CAPTURE)
        return None if data is None else CaptureRecord.model_validate(data)

    def harness(self) -> HarnessRecord | None:
        """harness.json, typed; None when the child never wrote it."""
        data = self.read_json(HARNESS)
        return None if data is None else HarnessRecord.model_validate(data)

    def steps(self) -> list[StepTiming]:
        """steps.jsonl: the harness's step clock (a line cut short by a crash is skipped)."""
        return load_steps(self)

    def worker(self, name: str) -> RunDir:
        """A multi-worker job's run directory for worker ``name`` (``workers/<name>/``)."""
        return RunDir(self.path / WORKERS / name)

    def published_trace(self, name: str) -> Path:
        """Where worker ``name`` publishes its trace: one host file of the run's one TensorBoard session."""
        return self.logdir / "plugins" / "profile" / WORKER_SESSION / f"{name}.xplane.pb"

    def worker_names(self) -> list[str]:
        root = self.path / WORKERS
        return sorted(d.name for d in root.iterdir() if d.is_dir()) if root.is_dir() else []


def load_steps(run: RunDir) -> list[StepTiming]:
    path = run.file(STEPS)
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(StepTiming.model_validate_json(line))
        except ValueError:
            continue  # a line cut short by a crash: the rest of the run still counts
    return out


def worker_steps(run: RunDir) -> dict[str, list[StepTiming]]:
    """Each worker's step timings (``workers/<task>/steps.jsonl``), keyed by task name."""
    return {name: load_steps(run.worker(name)) for name in run.worker_names()}


def worker_steps_by_host(run: RunDir) -> dict[str, list[StepTiming]]:
    """:func:`worker_steps` keyed by every name the merged trace may give the worker's host: the
    worker's name (its published file) and the hostname its harness recorded."""
    out: dict[str, list[StepTiming]] = {}
    for name, steps in worker_steps(run).items():
        out[name] = steps
        facts = run.worker(name).read_json(FACTS, {}) or {}
        host = facts.get("hostname")
        if host and host not in out:
            out[host] = steps
    return out


class StepTail:
    """Reads a run's steps.jsonl as the child appends to it (the parent's progress)."""

    def __init__(self, run: RunDir):
        self.path = run.file(STEPS)
        self.offset = 0
        self.buf = b""
        self.steps: list[StepTiming] = []

    def poll(self) -> list[StepTiming]:
        """The steps appended since the last poll (a line still being written waits for the next)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        new = []
        for line in lines:
            if line.strip():
                try:
                    new.append(StepTiming.model_validate_json(line))
                except ValueError:
                    continue
        self.steps.extend(new)
        return new


#: a steps.jsonl larger than this is read from its last 256 KiB only (progress of a huge run)
MAX_STEPS_FILE = 64 * 1024 * 1024


def tail_step_records(run: RunDir) -> tuple[int, list[dict[str, Any]]]:
    """(number of step lines, the last ones parsed) of steps.jsonl, read in bounded size."""
    path = run.file(STEPS)
    if path.is_symlink() or not path.is_file():  # never read through a link, nor a FIFO
        return 0, []
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0, []
    if size > MAX_STEPS_FILE:
        with open(path, "rb") as f:
            f.seek(size - 256 * 1024)
            data = f.read()
        n = -1  # unknown
    else:
        data = path.read_bytes()
        n = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    last = []
    for line in data.splitlines()[-101:]:
        try:
            last.append(json.loads(line))
        except ValueError:
            continue  # a line being written
    return (n if n >= 0 else len(last)), last
