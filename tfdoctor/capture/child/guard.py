"""The write guard of a fix trial: the run works on a copy of the script's folder, and must not change
a file of the user's outside it.

A trial runs the edited script in a temporary copy of its folder (``tfdoctor.fixes.workspace``), so
what it writes beside itself (a checkpoint, a CSV log, TensorBoard events) lands in the copy. Two
ways out remain, and this guard closes them for Python-level opens (``open``, ``io.open``,
``os.open``, so ``zipfile``, ``numpy.save``, Keras's ``.keras`` files, ``CSVLogger``...), through an
audit hook (:func:`sys.addaudithook`, raised before the file is opened):

* **A linked big file.** Files of 4 MiB and more are symlinked into the copy, not copied (data sets,
  checkpoints). Opening one for writing would write through the link into the user's file: the link
  is replaced by a file of the copy's own first (a copy of the user's file when the open keeps its
  contents, nothing when it truncates), and the open goes there.
* **A path outside the copy** (an absolute path, ``../out``, or a working directory the copy does not
  cover). Opening an *existing* file there for writing would overwrite the user's data: the open
  fails with :class:`PermissionError` whose message starts with :data:`MARK`, and the fix loop stops
  with it. New files are let through (nothing of the user's is lost), and so are files made after
  ``since_ns`` (an earlier trial of the same fix loop made them), temporary directories, the run's
  own directory, device files and dot-directories of the home folder (``~/.keras``, ``~/.cache``:
  the libraries' caches).

h5py opens its files in its C library, below the audit hook: ``h5py.File`` is wrapped to ask the
guard first (:func:`guard_h5py`; Keras's ``.weights.h5`` and legacy ``.h5`` saves). Other writes below
Python (TensorFlow's own file system) are not seen here; the fix loop checks the linked files' size
and time stamp after each trial (:func:`changed_links`) and stops when one changed.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable

#: how a refused write's message starts (the fix loop recognises a trial failed by the guard by it)
MARK = "tfdoctor write guard"

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def scratch_place(real: str, allow: Iterable[str], home: str) -> bool:
    """Is the resolved path ``real`` inside one of the (resolved) folders ``allow`` or a dot-folder of
    ``home`` (``~/.keras``, ``~/.cache``, ``~/.config``: the libraries' own)?"""
    if any(_inside(real, a) for a in allow):
        return True
    return (
        bool(home) and _inside(real, home) and os.path.relpath(real, home).split(os.sep, 1)[0].startswith(".")
    )


def writes(mode: object, flags: object) -> bool:
    """Does an ``open`` audit event's mode / flags open the file for writing?"""
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def truncates(mode: object, flags: object) -> bool:
    """Does it throw the old contents away (so a linked file need not be copied first)?"""
    if isinstance(mode, str):
        return ("w" in mode and "+" not in mode) or "x" in mode
    return isinstance(flags, int) and bool(flags & os.O_TRUNC) and not (flags & os.O_RDWR)


class WriteGuard:
    """The audit hook's logic (kept apart from :func:`install` so it is tested without a hook)."""

    def __init__(self, root: str, since_ns: int, allow: Iterable[str] = (), temp: bool = True) -> None:
        self.root = os.path.realpath(root)
        self.since_ns = since_ns
        home = os.path.expanduser("~")
        scratch = (tempfile.gettempdir(),) if temp else ()
        self.allow = [os.path.realpath(p) for p in (*allow, *scratch, "/dev", "/proc", "/sys") if p]
        self.home = os.path.realpath(home) if home and home != "~" else ""
        self.busy = False

    def allowed(self, real: str) -> bool:
        return _inside(real, self.root) or scratch_place(real, self.allow, self.home)

    def check(self, path: object, mode: object, flags: object) -> None:
        """Called for each ``open`` event: breaks a link, or raises for a user's file outside the copy."""
        if self.busy or isinstance(path, int) or not writes(mode, flags):
            return
        try:
            name = os.fsdecode(path)  # type: ignore[arg-type]
        except TypeError:
            return
        full = os.path.abspath(name)
        self.busy = True  # the copy below opens files itself
        try:
            if _inside(os.path.realpath(os.path.dirname(full)), self.root) and os.path.islink(full):
                target = os.path.realpath(full)
                if not _inside(target, self.root):
                    os.unlink(full)
                    if not truncates(mode, flags) and os.path.isfile(target):
                        shutil.copy2(target, full)
                return
            real = os.path.realpath(full)
            if self.allowed(real) or not os.path.isfile(real):
                return
            if os.stat(real).st_mtime_ns >= self.since_ns:
                return  # made by an earlier trial of this fix loop
        finally:
            self.busy = False
        todo = (
            "give the script a path inside its own folder for it (a relative one, or an argument)"
            if os.path.isabs(name)
            else f"it is relative to the working directory {os.getcwd()}, outside the copy: run "
            "tfdoctor from the script's folder (or a folder above it)"
        )
        raise PermissionError(
            errno.EACCES,
            f"{MARK}: this fix trial runs on a copy of the script's folder and would overwrite "
            f"{real}, a file of yours outside the copy; {todo}",
            real,
        )


def install(root: str, since_ns: int, allow: Iterable[str] = (), temp: bool = True) -> WriteGuard:
    """Install the guard for the rest of this process (audit hooks cannot be removed). ``temp``: the
    temporary directories are scratch space (a test turns that off: its files live there)."""
    guard = WriteGuard(root, since_ns, allow, temp)

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event == "open" and len(args) >= 3:
            guard.check(args[0], args[1], args[2])

    sys.addaudithook(hook)
    return guard


def guard_h5py(guard: WriteGuard, h5py: object) -> None:
    """Wrap ``h5py.File`` so that opening a file for writing asks ``guard`` first (h5py's mode: "r",
    "r+", "w", "w-", "x", "a"; default "r")."""
    cls = getattr(h5py, "File", None)
    init = getattr(cls, "__init__", None)
    if cls is None or init is None or getattr(init, "_tfdoctor_guard", False):
        return

    def __init__(self: object, name: object, mode: object = "r", *args: object, **kwargs: object) -> None:
        if isinstance(name, (str, bytes, os.PathLike)):
            guard.check(name, mode if isinstance(mode, str) else "r", None)
        init(self, name, mode, *args, **kwargs)

    __init__._tfdoctor_guard = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


def link_states(root: str) -> dict[str, tuple[int, int]]:
    """``{target: (size, mtime_ns)}`` of the files the links under ``root`` point to outside it."""
    out: dict[str, tuple[int, int]] = {}
    real_root = os.path.realpath(root)
    for folder, dirs, files in os.walk(root):
        for name in (*files, *dirs):
            p = os.path.join(folder, name)
            if not os.path.islink(p):
                continue
            target = os.path.realpath(p)
            if _inside(target, real_root) or not os.path.isfile(target):
                continue
            st = os.stat(target)
            out[target] = (st.st_size, st.st_mtime_ns)
    return out


def changed_links(before: dict[str, tuple[int, int]]) -> list[str]:
    """The linked files whose size or time stamp is no longer what ``before`` recorded."""
    out = []
    for target, state in before.items():
        try:
            st = os.stat(target)
        except OSError:
            out.append(target)
            continue
        if (st.st_size, st.st_mtime_ns) != state:
            out.append(target)
    return out


__all__ = [
    "MARK",
    "WriteGuard",
    "changed_links",
    "guard_h5py",
    "install",
    "link_states",
    "scratch_place",
    "truncates",
    "writes",
]
