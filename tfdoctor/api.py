"""The in-script API: ``with tfdoctor.profile(steps=40) as run:`` around a training call.

    import tfdoctor

    with tfdoctor.profile(steps=40) as run:
        history = model.fit(ds, epochs=5)     # stopped after 40 steps; fit returns its History
    print(run.report.throughput, run.run_id)

The same hooks, windows, report and run store as ``tfdoctor profile`` and ``%%tfdoctor``
(:mod:`tfdoctor.session.inscript`). Importing this module does not import TensorFlow.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import TextIO

from tfdoctor.model import Report
from tfdoctor.session.inscript import DEFAULT_STEPS, ScriptSession, caller_location


class Profile:
    """A context manager profiling the training that runs inside its block (see :func:`profile`)."""

    def __init__(self, session: ScriptSession):
        self.session = session

    def __enter__(self) -> Profile:
        self.session.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        return self.session.stop(exc)

    @property
    def run_id(self) -> str | None:
        """The stored run's id (None when nested inside another capture)."""
        return self.session.run.id if self.session.run is not None else None

    @property
    def run_dir(self) -> str | None:
        return str(self.session.run.path) if self.session.run is not None else None

    @property
    def report(self) -> Report | None:
        """The report (None before the block ends, and when nested)."""
        return self.session.report

    @property
    def message(self) -> str | None:
        """How the capture ended, when not simply after its planned steps in one fit call."""
        return self.session.message

    @property
    def nested(self) -> bool:
        """True when the script already runs under ``tfdoctor profile`` or ``%%tfdoctor``: this block
        then records nothing itself (the outer capture counts its steps)."""
        return self.session.nested

    @property
    def fix_run_id(self) -> str | None:
        """With ``fix=True``: the run of the fix loop (``tfdoctor report <id>``)."""
        return self.session.fix_run_id


def profile(
    steps: int = DEFAULT_STEPS,
    *,
    warmup: int | None = None,
    profile_steps: int | None = None,
    fix: bool = False,
    only: list[str] | None = None,
    run_id: str | None = None,
    force: bool = False,
    home: str | os.PathLike[str] | None = None,
    show: bool = True,
    stream: TextIO | None = None,
) -> Profile:
    """Profile the training inside the ``with`` block for ``steps`` steps, then stop it and report.

    ``steps``, ``warmup``, ``profile_steps``, ``run_id``, ``force`` and ``home`` mean what the options
    of ``tfdoctor profile`` mean. ``show``: print the report (to ``stream``, default stderr) when the
    block ends. ``fix``: afterwards, run the fix loop of ``tfdoctor profile SCRIPT --fix`` on this
    script (child processes; the block records nothing in them; ``only``: the fix ids to try, as
    ``--only``). Keras ``fit`` returns normally at the planned step; a custom loop is stopped where
    it is and the rest of the block is skipped (the ``with`` statement swallows that stop; any other
    exception from the block propagates after the run is stored).
    """
    session = ScriptSession(
        steps=steps,
        warmup=warmup,
        profile_steps=profile_steps,
        fix=fix,
        only=only,
        run_id=run_id,
        force=force,
        home=home,
        show=show,
        stream=stream,
        location=caller_location(1),
    )
    return Profile(session)
