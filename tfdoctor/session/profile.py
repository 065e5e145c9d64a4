"""Profile a script: capture it (one process, or this worker's part of a multi-worker job), build the
report once, store it. The ``profile`` and ``scale`` commands and the notebook's ``%tfdoctor profile``
call :func:`profile_script`; the fix loop measures its trials through the same capture and build.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from tfdoctor.capture.runner import CaptureConfig, CaptureProgress, CaptureResult, run_capture
from tfdoctor.capture.workers import WorkerIdentity, from_tf_config
from tfdoctor.model import Report
from tfdoctor.rundir import RunDir
from tfdoctor.session.build import finish_run
from tfdoctor.store import RunStore

Progress = Callable[[CaptureProgress], None]
Display = Callable[[str], AbstractContextManager[Progress | None]]


def worker_identity(cfg: CaptureConfig) -> WorkerIdentity | None:
    """This process's task when ``TF_CONFIG`` (the environment's, or the one the run sets) names a
    cluster of two or more training tasks; None for an ordinary one-process run."""
    return from_tf_config({**os.environ, **cfg.env})


def profile_script(
    store: RunStore,
    cfg: CaptureConfig,
    *,
    run_id: str | None = None,
    force: bool = False,
    kind: str = "profile",
    parent: str | None = None,
    display: Display | None = None,
) -> tuple[RunDir, CaptureResult, Report]:
    """Capture ``cfg.script`` into a new run of ``store``; returns (the run, what happened, its report).

    ``display(label)`` is the face's progress display: a context manager, entered while the script
    runs, that yields the progress callback.
    """
    ident = worker_identity(cfg)
    name = Path(str(cfg.script)).name
    label = f"{name} [{ident.name}]" if ident is not None else name
    with display(label) if display is not None else nullcontext(None) as progress:
        if ident is not None:  # one worker of a multi-worker job (TF_CONFIG): its part of one shared run
            from tfdoctor.session.distributed import capture_worker

            return capture_worker(store, cfg, ident, run_id=run_id, force=force, progress=progress)
        run = store.new_run(str(cfg.script), cfg.args, kind=kind, parent=parent, run_id=run_id, force=force)
        result = run_capture(cfg, run, progress=progress)
    report = finish_run(store, run, result)
    return run, result, report
