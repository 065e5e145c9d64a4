"""``tfdoctor.keras.Profile()``: a Keras callback profiling the ``fit`` it is passed to.

    model.fit(ds, epochs=5, callbacks=[tfdoctor.keras.Profile(steps=40)])

Same capture, windows, report and run store as ``tfdoctor profile`` (:mod:`tfdoctor.session.inscript`).
At the planned step the callback sets ``model.stop_training`` (fit returns its History). A callback
used again in a later ``fit`` does nothing: one callback, one run. Importing this module imports Keras.
"""

from __future__ import annotations

import atexit
import os
from typing import Any, TextIO

import keras

from tfdoctor.model import Report
from tfdoctor.session.inscript import DEFAULT_STEPS, ScriptSession, caller_location, keras_fit_arguments


class Profile(keras.callbacks.Callback):
    """Profile this ``fit`` for ``steps`` training steps (options as in :func:`tfdoctor.profile`)."""

    def __init__(
        self,
        steps: int = DEFAULT_STEPS,
        *,
        warmup: int | None = None,
        profile_steps: int | None = None,
        run_id: str | None = None,
        force: bool = False,
        home: str | os.PathLike[str] | None = None,
        show: bool = True,
        stream: TextIO | None = None,
    ):
        super().__init__()
        self.session = ScriptSession(
            steps=steps,
            warmup=warmup,
            profile_steps=profile_steps,
            run_id=run_id,
            force=force,
            home=home,
            show=show,
            stream=stream,
            location=caller_location(1),
        )
        self._tracker: Any = None

    # -- what the user reads ---------------------------------------------------------------------------
    @property
    def run_id(self) -> str | None:
        return self.session.run.id if self.session.run is not None else None

    @property
    def report(self) -> Report | None:
        return self.session.report

    @property
    def message(self) -> str | None:
        return self.session.message

    @property
    def nested(self) -> bool:
        return self.session.nested

    # -- Keras's calls ---------------------------------------------------------------------------------
    def on_train_begin(self, logs: Any = None) -> None:
        if self.session.started:
            return  # a second fit: this callback's run is done
        self.session.start()
        cap = self.session._capture
        if cap is None:
            return  # nested: the outer capture's own hooks see this fit
        tracker = cap.tracker
        self._tracker = tracker
        x, batch_size = keras_fit_arguments(self.model)
        tracker._guard("fit begin", lambda: tracker.fit_begin(self.model, x, batch_size))
        tracker.in_fit = max(tracker.in_fit, 1)
        # fit may raise before on_train_end: the run is then closed at exit as failed, not left open
        atexit.register(self._close_unfinished)

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        t = self._tracker
        if t is not None:
            t._guard("fit batch begin", t.fit_batch_begin)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        from tfdoctor.capture.child.clock import StopCapture

        t = self._tracker
        if t is None:
            return
        try:
            t._guard("fit batch end", lambda: t.fit_batch_end(logs))
        except StopCapture:
            self.model.stop_training = True

    def on_train_end(self, logs: Any = None) -> None:
        t = self._tracker
        if t is None:
            return
        self._tracker = None
        atexit.unregister(self._close_unfinished)
        t.fit_end(self.model)
        self.session.stop(None)

    def _close_unfinished(self) -> None:
        if self._tracker is not None:
            self._tracker = None
            self.session.stop(RuntimeError("fit raised before it ended (the callback saw no on_train_end)"))
