"""Profile part of a running script from inside it: ``with tfdoctor.profile():`` and the Keras callback.

:class:`ScriptSession` is what both faces (:mod:`tfdoctor.api`, :mod:`tfdoctor.keras`) drive: the same
in-process capture as ``%%tfdoctor`` (:class:`~tfdoctor.capture.inproc.InProcessCapture`: the step
hooks, the warm-up / timing / profile windows, ``steps.jsonl``, the TF profiler), the same report
(:func:`~tfdoctor.session.build.finish_run`) and the same run store as ``tfdoctor profile``.

* Keras ``fit`` is ended at the planned step with ``model.stop_training`` (it returns its History);
  a custom loop is stopped by ``StopCapture`` raised from its optimizer step, which the ``with``
  statement swallows: the code after the loop inside the block does not run, the code after the
  block does, and :attr:`ScriptSession.message` says so.
* Nested (the script already runs under ``tfdoctor profile``, or inside ``%%tfdoctor``): the session
  does nothing and lets the outer capture count the steps (``nested`` is True).
* ``fix=True``: after the block, the fix loop of ``tfdoctor profile SCRIPT --fix`` runs on the whole
  script in child processes (the fixes rewrite the script's source: only a run of the script can
  measure them); its result is a separate run, named in :attr:`ScriptSession.fix_run_id`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

from tfdoctor.capture.child.clock import Windows
from tfdoctor.capture.inproc import InProcessCapture, InProcessResult
from tfdoctor.capture.inproc import busy as inproc_busy
from tfdoctor.errors import UsageError
from tfdoctor.model import Report
from tfdoctor.rundir import RunDir
from tfdoctor.session.build import finish_run
from tfdoctor.store import RunStore

#: the CLI's default (``tfdoctor profile --steps``) and the notebook's: one number everywhere
DEFAULT_STEPS = 40


def capture_active() -> bool:
    """True when this process is already profiled: the harness of ``tfdoctor profile`` (its hooks
    are installed for the whole process) or an in-process capture (``%%tfdoctor``, another session)."""
    if inproc_busy():
        return True
    from tfdoctor.capture.child import hooks

    return bool(hooks._PATCHES) or any(isinstance(f, hooks.PostImportHooks) for f in sys.meta_path)


def caller_location(depth: int) -> tuple[str, int]:
    """(file, line) of the frame ``depth`` levels above the caller of this function."""
    frame = sys._getframe(depth + 1)
    return frame.f_code.co_filename, frame.f_lineno


class ScriptSession:
    """One in-script capture: :meth:`start`, the user's training, :meth:`stop`. Holds the run, the
    capture result and the report afterwards."""

    def __init__(
        self,
        *,
        steps: int = DEFAULT_STEPS,
        warmup: int | None = None,
        profile_steps: int | None = None,
        fix: bool = False,
        only: list[str] | None = None,
        run_id: str | None = None,
        force: bool = False,
        home: str | os.PathLike[str] | None = None,
        show: bool = True,
        stream: TextIO | None = None,
        location: tuple[str, int] | None = None,
    ):
        try:
            self.windows = Windows.split(steps, warmup, profile_steps)
        except ValueError as e:
            raise UsageError(str(e)) from None
        self.steps = steps
        self.warmup = warmup
        self.fix = fix
        self.only = list(only or [])
        self.run_id = run_id
        self.force = force
        self.home = home
        self.show = show
        self.stream = stream
        self.location = location
        self.nested = False
        self.started = False
        self.run: RunDir | None = None
        self.store: RunStore | None = None
        self.result: InProcessResult | None = None
        self.report: Report | None = None
        self.fix_run_id: str | None = None
        self._capture: InProcessCapture | None = None

    # -- what the faces read --------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self._capture is not None

    @property
    def message(self) -> str | None:
        """One line on how the capture ended (None when it ran its planned steps in one fit call)."""
        return self.result.capture.message if self.result is not None else None

    @property
    def script(self) -> str:
        if self.location is not None:
            return self.location[0]
        return sys.argv[0] if sys.argv and sys.argv[0] else "<script>"

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> ScriptSession:
        """Create the run and install the hooks (nothing, when another capture already runs)."""
        if self.started:
            raise UsageError("this tfdoctor profile session was already used: make a new one per block")
        self.started = True
        if capture_active():
            self.nested = True
            return self
        store = RunStore(os.fspath(self.home) if self.home is not None else None)
        where = f"{self.location[0]}:{self.location[1]}" if self.location else self.script
        run = store.new_run(
            self.script, list(sys.argv[1:]), kind="profile", run_id=self.run_id, force=self.force
        )
        store.update(run, inscript=where)
        cap = InProcessCapture(run, self.windows, label=where, soft_stop=True)
        try:
            cap.start()
        except BaseException:
            store.update(run, status="failed", error="the capture could not start")
            raise
        self.store, self.run, self._capture = store, run, cap
        return self

    def stop(self, exc: BaseException | None) -> bool:
        """Uninstall the hooks, build and store the report, show it. ``exc``: what the block raised.

        Returns True when ``exc`` is tfdoctor's own stop (the ``with`` statement swallows it then).
        """
        cap = self._capture
        if cap is None:
            return False
        from tfdoctor.capture.child.clock import StopCapture

        self._capture = None
        ours = isinstance(exc, StopCapture)
        res = cap.stop(exc)
        if ours and res.capture.status == "complete":
            note = (
                f"stopped after {res.capture.windows.total} steps inside the training loop: the rest of "
                "the `with tfdoctor.profile()` block did not run"
            )
            res.capture.message = f"{res.capture.message}; {note}" if res.capture.message else note
        self.result = res
        assert self.store is not None and self.run is not None
        self.report = finish_run(self.store, self.run, res.capture)
        if self.show:
            self._show()
        if self.fix and res.capture.status == "complete":
            self.fix_run_id = self._fix()
        return ours

    # -- output ----------------------------------------------------------------------------------------
    def _show(self) -> None:
        from rich.console import Console

        from tfdoctor.report.terminal import render

        assert self.report is not None and self.run is not None
        console = Console(file=self.stream or sys.stderr, highlight=False)
        render(self.report, console, run_dir=str(self.run.path))
        if self.message:
            console.print(f"note: {self.message}", markup=False, soft_wrap=True)
        console.print(
            f"tfdoctor: run {self.run.id} stored; `tfdoctor report {self.run.id}` shows it again",
            markup=False,
            soft_wrap=True,
        )

    def fix_command(self) -> list[str]:
        """The ``tfdoctor profile SCRIPT --fix`` command line that ``fix=True`` runs."""
        script = Path(self.script)
        cmd = [sys.executable, "-m", "tfdoctor", "profile", str(script), "--fix", "--steps", str(self.steps)]
        if self.warmup is not None:
            cmd += ["--warmup", str(self.warmup)]
        if self.only:
            cmd += ["--only", ",".join(self.only)]
        if self.home is not None:
            cmd += ["--home", os.fspath(self.home)]
        if self.run is not None:
            cmd += ["--run-id", f"{self.run.id}-fix", "--force"]
        return [*cmd, "--", *sys.argv[1:]]

    def _fix(self) -> str | None:
        """The fix loop on the whole script, in child processes (as ``tfdoctor profile --fix``)."""
        script = Path(self.script)
        if script.suffix != ".py" or not script.is_file():
            raise UsageError(
                f"fix=True needs the script's file to rewrite and re-run; {self.script!r} is not one "
                "(in a notebook use %%tfdoctor --fix)"
            )
        cmd = self.fix_command()
        stream = self.stream or sys.stderr
        print(f"tfdoctor: fix loop: {' '.join(cmd[1:])}", file=stream, flush=True)
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        stream.write(proc.stdout)
        stream.flush()
        return f"{self.run.id}-fix" if self.run is not None else None


def keras_fit_arguments(model: Any) -> tuple[Any, Any]:
    """(x, batch_size) of the ``fit`` call of ``model`` running on this stack, or (None, None).

    A callback is given neither; the hooks read the batch size from them (a tf.data dataset's batch,
    ``batch_size=``, Keras's default of 32 for arrays)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "fit" and frame.f_locals.get("self") is model:
            loc = frame.f_locals
            return loc.get("x"), loc.get("batch_size")
        frame = frame.f_back  # type: ignore[assignment]
    return None, None
