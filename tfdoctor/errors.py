"""Errors that reach the user as one clear line and an exit code (never a traceback)."""

from __future__ import annotations

import errno
import os

#: the OS's words for a full disk ("No space left on device"), as a child's stderr carries them
NO_SPACE = os.strerror(errno.ENOSPC)


class TfdoctorError(Exception):
    """A user-facing failure. ``str(err)`` is the one line shown; ``exit_code`` is returned by the CLI."""

    exit_code = 1

    def __init__(self, message: str, *, exit_code: int | None = None, hint: str | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
        self.hint = hint


class UsageError(TfdoctorError):
    """Bad command line: missing script, wrong option combination."""

    exit_code = 2


class TraceError(TfdoctorError):
    """A trace file or logdir that cannot be read: empty, corrupt, unknown format."""

    exit_code = 3


class TensorFlowMissing(TfdoctorError):
    """TensorFlow is needed for this command and is not importable."""

    exit_code = 4

    def __init__(self, detail: str = ""):
        msg = (
            "TensorFlow is not installed in this Python environment"
            + (f" ({detail})" if detail else "")
            + "; install it with: pip install 'tfdoctor[tensorflow]' (or tensorflow / tensorflow-cpu / tf-nightly)"
        )
        super().__init__(msg)


class RunError(TfdoctorError):
    """The user's script failed, hung or trained no steps. The partial run directory is kept."""

    exit_code = 5

    def __init__(self, message: str, *, run_dir: str | None = None, exit_code: int | None = None):
        super().__init__(message, exit_code=exit_code)
        self.run_dir = run_dir


class RunExists(TfdoctorError):
    exit_code = 6
