"""Profile a script: capture it (one process, or this worker's part of a multi-worker job), build the
report once, store it. The ``profile`` and ``scale`` commands and the notebook's ``%tfdoctor profile``
call :func:`profile_script`; the fix loop measures its trials through the same capture and build.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfdoctor.capture.child.clock import Windows
from tfdoctor.capture.runner import CaptureConfig, CaptureProgress, CaptureResult, run_capture
from tfdoctor.errors import TfdoctorError, UsageError
from tfdoctor.model import FixSummary, Report
from tfdoctor.rundir import RunDir
from tfdoctor.session.build import finish_run
from tfdoctor.session.fix_loop import DEFAULT_ROUNDS, LoopConfig
from tfdoctor.store import RunStore
from tfdoctor.userfiles import (
    Source,
    UserFileError,
    atomic_write_bytes,
    check_writable,
    make_backup,
    write_source,
)

Progress = Callable[[CaptureProgress], None]
Display = Callable[[str], AbstractContextManager[Progress | None]]


def profile_script(
    store: RunStore,
    cfg: CaptureConfig,
    *,
    run_id: str | None = None,
    force: bool = False,
    kind: str = "profile",
    parent: str | None = None,
    display: Display | None = None,
    rerun_short: bool = False,
) -> tuple[RunDir, CaptureResult, Report]:
    """Capture ``cfg.script`` into a new run of ``store``; returns (the run, what happened, its report).

    ``display(label)`` is the face's progress display: a context manager, entered while the script
    runs, that yields the progress callback.

    ``rerun_short`` (``tfdoctor profile`` without ``--steps``): a script that ended by itself before the
    profile window (no trace: TensorFlow's tf.function guide trains 20 epochs, a step each, against the
    40 steps planned) is run once more in the same run directory over the steps it has, its warm-up the
    first run's as it became; ``cfg.steps`` becomes what a fix loop after it, its warm-up adaptive, must
    plan to end there too (:func:`short_steps`); the result's message says so.
    """
    ident = cfg.worker()
    name = Path(str(cfg.script)).name
    label = f"{name} [{ident.name}]" if ident is not None else name
    with display(label) if display is not None else nullcontext(None) as progress:
        if ident is not None:  # one worker of a multi-worker job (TF_CONFIG): its part of one shared run
            from tfdoctor.session.distributed import capture_worker

            return capture_worker(store, cfg, ident, run_id=run_id, force=force, progress=progress)
        run = store.new_run(str(cfg.script), cfg.args, kind=kind, parent=parent, run_id=run_id, force=force)
        result = run_capture(cfg, run, progress=progress)
        steps = short_steps(cfg, result) if rerun_short else None
        if steps is not None:
            first = len(result.steps)
            planned = cfg.steps
            # the second run's warm-up is the first one's, as long as it grew (a warm-up growing further
            # would cut the profile window short); a fix loop after it plans the steps, warm-up adaptive
            again_cfg = dataclasses.replace(cfg, steps=first, warmup=result.windows.warmup)
            cfg.steps = steps
            result = run_capture(again_cfg, run, progress=progress)
            again = (
                f"the script ended by itself after {first} of {planned} steps, before the profile window: "
                f"run again over the {first} steps it has (as --steps {first} --warmup {again_cfg.warmup})"
            )
            result.message = f"{again}; {result.message}" if result.message else again
    report = finish_run(store, run, result)
    return run, result, report


def short_steps(cfg: CaptureConfig, result: CaptureResult) -> int | None:
    """The steps to plan a second run of a script that ended by itself before its profile window (no
    trace), or None where a second run would not help: it failed or was stopped, a trace came, or the
    steps it has leave under two steps each for the timing and profile windows past its warm-up. The
    second run keeps the first one's warm-up as it became (fixed) and plans all the steps the script
    has; the count returned, for a fix loop after it whose warm-up is adaptive again, is the steps it
    ran less the warm-up's growth, so its windows end where the script does."""
    if not cfg.profile or result.status != "complete" or result.trace_files:
        return None
    n = len(result.steps)
    planned = cfg.windows()
    if n >= planned.total:
        return None
    grown = max(0, result.windows.warmup - planned.warmup)
    try:  # the second run: its warm-up the first one's; the planned steps: the warm-up grows as much
        again = Windows.split(n, result.windows.warmup, cfg.profile_steps, cfg.profile)
        Windows.split(n - grown, cfg.warmup, cfg.profile_steps, cfg.profile)
    except ValueError:
        return None
    if again.timing < 2 or again.profile < 2:
        return None
    return n - grown


# -- the fix loop's configuration, from a capture just run or from a stored run ----------------------


@dataclass(frozen=True)
class FixOptions:
    """What a face lets the user choose about the fix loop (``--only``, ``--skip``, ``--fix-rounds``...)."""

    only: list[str] | None = None
    skip: list[str] = field(default_factory=list)
    rounds: int = DEFAULT_ROUNDS
    timeout_s: float | None = None  # per fix run; None: from the baseline's duration
    allow_unchecked: bool = False

    def loop(
        self,
        script: Path,
        args: Sequence[str],
        cwd: str | os.PathLike[str] | None,
        steps: int,
        warmup: int | None,
        env: Mapping[str, str],
        fit: int | None = None,
        module: str | None = None,
    ) -> LoopConfig:
        """The loop's configuration for this script run (its arguments, folder, steps) with these options."""
        return LoopConfig(
            script=script,
            args=list(args),
            cwd=Path(cwd) if cwd else None,
            steps=steps,
            warmup=warmup,
            timeout_s=self.timeout_s,
            confirm_rounds=self.rounds,
            allow_unchecked=self.allow_unchecked,
            only=self.only or None,
            skip=list(self.skip),
            env=dict(env),
            fit=fit,
            module=module,
        )


def fix_config(cfg: CaptureConfig, opts: FixOptions) -> LoopConfig:
    """The loop on the run ``cfg`` just captured (``profile --fix``, ``%tfdoctor profile --fix``)."""
    return opts.loop(Path(cfg.script), cfg.args, cfg.cwd, cfg.steps, cfg.warmup, cfg.env, cfg.fit, cfg.module)


def fix_config_for_run(run: RunDir, opts: FixOptions) -> LoopConfig:
    """The loop on a stored profile run (``tfdoctor fix RUN``), from its capture.json; UsageError when
    the run cannot be re-run (no capture.json, the script gone)."""
    try:
        cap = run.capture_record()
    except Exception as e:  # unreadable JSON: TfdoctorError from read_json, or a validation error
        raise UsageError(
            f"{run.id}: capture.json is unreadable, so the script cannot be re-run ({e})"
        ) from None
    if cap is None or not cap.script:
        raise UsageError(f"{run.id}: no capture.json, so the script cannot be re-run")
    script = Path(cap.script)
    if not script.is_file():
        raise UsageError(f"{script}: the profiled script is gone")
    w = cap.windows
    steps = int(w.get("warmup", 6)) + int(w.get("timing", 24)) + int(w.get("profile", 10))
    # the baseline's warm-up: adaptive again unless the user fixed it with --warmup N
    warmup = int(w["warmup"]) if "warmup" in w and not cap.warmup_adaptive else None
    return opts.loop(script, cap.args, cap.cwd, steps, warmup, cap.env, cap.fit, cap.module)


def apply_fixes(script: Path, original: Source, final_source: str) -> Path:
    """Write the fixed source over ``script`` after saving a backup; returns the backup's path.

    Refused when the file's bytes changed since ``original`` was read. The backup is created without
    following links (:func:`tfdoctor.userfiles.make_backup`) and the script replaced atomically in
    its own encoding and line endings: on any failure (full disk, quota, read-only folder) the
    script is left byte-identical and the one-line error names the backup.
    """
    return apply_project(script, original, final_source)[script]


def apply_project(
    script: Path,
    original: Source,
    final_source: str,
    modules: Mapping[str, tuple[Source, str]] | None = None,
) -> dict[Path, Path]:
    """:func:`apply_fixes` for a project of several files: the script and the modules beside it that
    the fixes changed (``modules``: path relative to the script's folder → (the module as read before
    the fixes were measured, its fixed text); ``FixLoop.module_sources`` and ``FixLoop.final_modules``).
    Returns each file written → its backup, the script first.

    Every file is written as the script is (a backup first, then an atomic replace in its own encoding
    and line endings). Nothing at all is written when any of them changed on disk since it was read,
    cannot hold its fixed text in its encoding, or cannot be written; when a later file fails to be
    written, the files written before it get their original bytes back (their backups stay).
    """
    targets: list[tuple[Path, Source, str]] = []
    for _rel, (src, text) in sorted((modules or {}).items()):
        if text != src.text:
            targets.append((src.path, src, text))
    if final_source != original.text or not targets:
        targets.insert(0, (script, original, final_source))
    for path, src, text in targets:  # every check before the first write
        if not src.unchanged_on_disk():
            raise TfdoctorError(
                f"{path} changed while the fixes were measured; not applied (the patch is in fix.patch)"
            )
        src.encode(text)  # an encoding that cannot hold the fix: refused before any write
        if path != script or len(targets) > 1:  # the script alone was checked before the loop
            try:
                check_writable(path)
            except UserFileError:
                raise UserFileError(
                    f"--apply cannot write {path} (a read-only file or folder); nothing was applied "
                    "(the patch is in fix.patch)"
                ) from None
    backups = {path: make_backup(path) for path, _, _ in targets}
    written: list[Path] = []
    for path, src, text in targets:
        try:
            write_source(path, text, src)
        except UserFileError as e:
            undone = _restore(written, backups)
            raise UserFileError(
                f"{e}; not applied (backup of the original: {backups[path]}{undone}; the patch is in fix.patch)"
            ) from None
        written.append(path)
    return backups


def _restore(written: list[Path], backups: Mapping[Path, Path]) -> str:
    """Put back the files written before a later one failed (their backups' bytes, atomically); what
    was done, for the error message ("" when nothing was written before)."""
    failed = []
    for path in written:
        try:
            atomic_write_bytes(path, backups[path].read_bytes())
        except OSError:
            failed.append(str(path))
    if failed:
        return f"; {', '.join(failed)} already written: restore from the backups beside them"
    return f"; {', '.join(map(str, written))} put back as they were" if written else ""


def applied_text(backups: Mapping[Path, Path]) -> str:
    """The line saying which files :func:`apply_project` wrote, with their backups."""
    return "Applied to " + ", ".join(f"{path} (backup: {bak})" for path, bak in backups.items())


def not_verified_text(summary: FixSummary) -> str:
    """Why ``--apply`` wrote nothing although fixes were kept: the combined result was not verified
    faster side by side (the CLI and the notebook say it after "not applied: ")."""
    return (
        "the combined result is not verified faster than the baseline side by side "
        f"({summary.combined_note or 'not measured'}); the patch is in fix.patch"
    )


def fix_options(args: Any) -> FixOptions:
    """The fix options from the flags of ``fix``, ``profile --fix`` and ``%tfdoctor profile --fix`` (an
    argparse namespace; absent flags take the defaults)."""
    return FixOptions(
        only=_fix_ids(getattr(args, "only", None)) or None,
        skip=_fix_ids(getattr(args, "skip", None)),
        rounds=getattr(args, "fix_rounds", DEFAULT_ROUNDS),
        timeout_s=getattr(args, "fix_timeout", None),
        allow_unchecked=getattr(args, "allow_unchecked", False),
    )


def _fix_ids(text: str | None) -> list[str]:
    from tfdoctor.fixes import all_fixes

    ids = [x.strip() for x in (text or "").split(",") if x.strip()]
    known = {f.ID for f in all_fixes()}
    unknown = [x for x in ids if x not in known]
    if unknown:
        raise UsageError(f"unknown fix id(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return ids
