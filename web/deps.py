"""Dependencies shared by the routes: settings, the run store, and run lookup that refuses
anything but a plain run id inside the store (no ``..``, no absolute paths, no symlink escapes)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from tfdoctor.errors import TfdoctorError
from tfdoctor.model import Report
from tfdoctor.rundir import REPORT, RunDir, UnsafeRunFile, valid_run_id
from tfdoctor.store import RunStore


@dataclass
class Settings:
    home: Path
    #: at most this many runs in the list, this many steps in /api/runs/{id}
    max_runs: int = 500
    max_steps: int = 2000
    _report_cache: dict[str, tuple[int, int, Report]] = field(default_factory=dict)

    @property
    def store(self) -> RunStore:
        return RunStore(self.home)


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_store(settings: SettingsDep) -> RunStore:
    return settings.store


StoreDep = Annotated[RunStore, Depends(get_store)]


def lookup_run(store: RunStore, run_id: str) -> RunDir:
    """The run directory ``run_id`` inside the store, or a 404."""
    if not valid_run_id(run_id):
        raise HTTPException(status_code=404, detail=f"no run {run_id!r}")
    root = store.runs_dir.resolve()
    path = (store.runs_dir / run_id).resolve()
    if path.parent != root or not path.is_dir():
        raise HTTPException(status_code=404, detail=f"no run {run_id!r}")
    return RunDir(path)


def get_run(run_id: str, store: StoreDep) -> RunDir:
    return lookup_run(store, run_id)


RunDep = Annotated[RunDir, Depends(get_run)]


def read_report(settings: Settings, run: RunDir) -> tuple[Report | None, str | None]:
    """(report or None, why it could not be read) — cached per run by the file's mtime and size."""
    path = run.file(REPORT)
    try:
        st = path.stat()
    except FileNotFoundError:
        return None, None
    key = os.fspath(path)
    hit = settings._report_cache.get(key)
    if hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
        return hit[2], None
    try:
        report = run.report()
    except (TfdoctorError, ValueError) as e:
        return None, f"report.json could not be read: {str(e).splitlines()[0][:300]}"
    if report is None:
        return None, None
    if len(settings._report_cache) > 64:
        settings._report_cache.clear()
    settings._report_cache[key] = (st.st_mtime_ns, st.st_size, report)
    return report, None


def read_run_text(run: RunDir, name: str, limit: int) -> str | None:
    """A run file's text for a page, or None: missing, bigger than ``limit`` bytes, or unsafe (a
    link, a file under a folder leading out of the run directory, a FIFO: never read, see
    :meth:`RunDir.read_bytes`)."""
    try:
        data = run.read_bytes(name, max_bytes=limit + 1)
    except (UnsafeRunFile, OSError):
        return None
    if data is None or len(data) > limit:
        return None
    return data.decode("utf-8", "replace")
