"""Patched copies of the user's files, and the unified diff between two versions of the script.

The user's files are never written here: a fix runs on a copy of the script's folder in a temporary
work directory (big files and bulky folders are linked, not copied), and the patch is relative to the
script's folder so it applies there with ``git apply`` or ``patch -p1``.
"""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

#: folders never copied into the work directory
SKIP_DIRS = frozenset(
    {".git", "__pycache__", ".tfdoctor", ".ipynb_checkpoints", ".venv", "venv", "node_modules"}
)
#: files at least this big are symlinked (data sets, checkpoints), smaller ones copied
LINK_BYTES = 4 * 1024 * 1024


def make_workspace(script: Path, dest: Path) -> Path:
    """Copy the script's folder to ``dest``; returns the copied script's path."""
    src = script.resolve().parent

    def copy(s: str, d: str) -> str:
        if os.path.getsize(s) >= LINK_BYTES and not s.endswith(".py"):
            os.symlink(os.path.abspath(s), d)
            return d
        return shutil.copy2(s, d)

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in SKIP_DIRS}

    shutil.copytree(src, dest, ignore=ignore, copy_function=copy, symlinks=True, dirs_exist_ok=True)
    return dest / script.name


def unified_diff(before: str, after: str, relpath: str) -> str:
    """A ``git apply``-able diff of one file (``a/<relpath>`` → ``b/<relpath>``); "" when unchanged."""
    if before == after:
        return ""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    out = [f"diff --git a/{relpath} b/{relpath}\n"]
    for line in difflib.unified_diff(a, b, fromfile=f"a/{relpath}", tofile=f"b/{relpath}"):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def backup_path(script: Path) -> Path:
    """``train.py.tfdoctor-bak``, or the first free ``.tfdoctor-bak.N``: a backup is never overwritten."""
    p = script.with_name(script.name + ".tfdoctor-bak")
    n = 1
    while p.exists():
        p = script.with_name(f"{script.name}.tfdoctor-bak.{n}")
        n += 1
    return p
