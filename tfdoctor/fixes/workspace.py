"""Patched copies of the user's files, and the unified diff between two versions of the script and of
the modules beside it that the script imports (:mod:`tfdoctor.fixes.project`).

The user's files are never written here: a fix runs on a copy of the script's folder in a temporary
work directory (big files and bulky folders are linked, not copied), and the patch is relative to the
script's folder so it applies there with ``git apply`` or ``patch -p1``: the script as ``a/train.py``,
a module beside it as ``a/model.py`` or ``a/pkg/data.py``, all in one patch.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from tfdoctor.userfiles import Source, backup_candidates

#: folders never copied into the work directory
SKIP_DIRS = frozenset(
    {".git", "__pycache__", ".tfdoctor", ".ipynb_checkpoints", ".venv", "venv", "node_modules"}
)
#: files at least this big are symlinked (data sets, checkpoints), smaller ones copied
LINK_BYTES = 4 * 1024 * 1024


#: the most files a working directory above the script's folder may hold for the copy to start there
MAX_ROOT_FILES = 5000


def workspace_root(script: Path, cwd: Path) -> Path:
    """The folder a fix trial copies: the script's own, or the working directory when it lies above it
    (``python src/train.py`` from the repository's root: the script's relative paths, ``data/...``
    and ``checkpoints/...``, are relative to that) and is a project, not the home folder or ``/``
    (at most :data:`MAX_ROOT_FILES` files outside :data:`SKIP_DIRS`)."""
    folder = script.resolve().parent
    cwd = cwd.resolve()
    if cwd == folder or cwd not in folder.parents or _too_big_to_copy(cwd):
        return folder
    return cwd


def _too_big_to_copy(root: Path) -> str:
    """Why the (resolved) folder ``root`` is not a project a trial may copy: "your home folder or /", or
    "more than N files there" (outside :data:`SKIP_DIRS`); "" when it is one."""
    if root == Path(root.anchor) or root == Path.home().resolve():
        return "your home folder or /"
    n = 0
    for _, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        n += len(files)
        if n > MAX_ROOT_FILES:
            return f"more than {MAX_ROOT_FILES} files there"
    return ""


def check_module_root(root: Path) -> None:
    """A fix trial of ``profile -m pkg.train`` copies the folder it runs from (the package must be
    importable from the copy, as ``python -m`` finds it there): refused in one line when that folder is
    the home folder, ``/`` or holds more than :data:`MAX_ROOT_FILES` files (outside :data:`SKIP_DIRS`)."""
    from tfdoctor.errors import UsageError

    root = root.resolve()
    why = _too_big_to_copy(root)
    if why:
        raise UsageError(
            f"--fix with -m copies the folder the module runs from, {root}, for each trial: {why}; run "
            "tfdoctor from the project's own folder (the one holding the package), or give it with --cwd"
        )


def make_workspace(script: Path, dest: Path, root: Path | None = None) -> Path:
    """Copy ``root`` (default: the script's folder; :func:`workspace_root`) to ``dest``; returns the
    copied script's path."""
    src = (root or script.resolve().parent).resolve()

    def copy(s: str, d: str) -> str:
        if os.path.getsize(s) >= LINK_BYTES and not s.endswith(".py"):
            os.symlink(os.path.abspath(s), d)
            return d
        return shutil.copy2(s, d)

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in SKIP_DIRS}

    shutil.copytree(src, dest, ignore=ignore, copy_function=copy, symlinks=True, dirs_exist_ok=True)
    return dest / script.resolve().relative_to(src)


def _lines(text: str) -> list[str]:
    """``text`` split after each ``\\n`` only (``str.splitlines`` also splits on ``\\f``, ``\\x1c``,
    ``\\u2028``..., which Python source may hold inside a line)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def unified_diff(before: str, after: str, relpath: str, newline: str = "\n") -> str:
    """A ``git apply``-able diff of one file (``a/<relpath>`` → ``b/<relpath>``); "" when unchanged.

    ``before`` and ``after`` are texts with ``\\n`` endings (as :func:`tfdoctor.userfiles.read_source`
    hands them out); ``newline`` is the file's own ending (``Source.newline``): for ``\\r\\n`` every
    content line carries it, so the patch applies to a CRLF file byte for byte.
    """
    if before == after:
        return ""
    a, b = _lines(before), _lines(after)
    out = [f"diff --git a/{relpath} b/{relpath}\n"]
    for i, line in enumerate(difflib.unified_diff(a, b, fromfile=f"a/{relpath}", tofile=f"b/{relpath}")):
        if line.endswith("\n"):
            header = i < 2 or line.startswith("@@")
            out.append(line[:-1] + "\r\n" if newline == "\r\n" and not header else line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def source_diff(src: Source, after: str, relpath: str) -> str:
    """:func:`unified_diff` of a source file as read (``src.text``) and its fixed text, in the file's
    own line endings."""
    return unified_diff(src.text, after, relpath, src.newline)


_DIFF = re.compile(r"^diff --git a/(.+) b/\1\n?$")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def patch_bytes(patch: str, like: Source, modules: Mapping[str, Source] | None = None) -> bytes:
    """A patch (as :func:`unified_diff` makes it, ``\\n`` endings) as bytes for ``fix.patch`` of the
    file ``like``: content lines in the file's own line endings and encoding, so ``git apply`` and
    ``patch -p1`` apply it to a CRLF or latin-1 script byte for byte.

    A patch of several files (the script and ``modules`` beside it: relative path → the module as
    read) has each file's part in that file's own endings and encoding; the header comment and the
    script's part in the script's."""
    if not modules:
        return _file_patch_bytes(patch, like)
    out = []
    for rel, part in _file_parts(patch):
        out.append(_file_patch_bytes(part, modules.get(rel, like) if rel else like))
    return b"".join(out)


def _file_parts(patch: str) -> list[tuple[str, str]]:
    """``patch`` cut before each ``diff --git a/X b/X`` line: (X, its part); the text before the first
    (the header comment) has X "". A content line never starts with ``diff`` (it starts with
    `` ``, ``+``, ``-`` or ``\\``)."""
    parts: list[tuple[str, list[str]]] = [("", [])]
    for line in _lines(patch):
        m = _DIFF.match(line)
        if m:
            parts.append((m.group(1), []))
        parts[-1][1].append(line)
    return [(rel, "".join(lines)) for rel, lines in parts if lines]


def patch_files(patch: str) -> list[str]:
    """The files a patch (as :func:`unified_diff` and :func:`modules_diff` make it) changes, in its
    order: paths relative to the script's folder."""
    return [rel for rel, _ in _file_parts(patch) if rel]


def _file_patch_bytes(patch: str, like: Source) -> bytes:
    lines = _lines(patch)
    out = []
    old = new = 0
    for i, line in enumerate(lines):
        if old > 0 or new > 0:
            tag = line[:1]
            if tag in (" ", "-"):
                old -= 1
            if tag in (" ", "+"):
                new -= 1
            last = i + 1 < len(lines) and lines[i + 1].startswith("\\")  # "\ No newline at end of file"
            if like.newline == "\r\n" and tag in (" ", "-", "+") and line.endswith("\n") and not last:
                line = line[:-1] + "\r\n"
        elif m := _HUNK.match(line):
            old, new = int(m.group(1) or 1), int(m.group(2) or 1)
        out.append(line)
    return "".join(out).encode(like.encoding, errors="replace")


def write_copy(path: Path, text: str, like: Source) -> None:
    """Write a fixed text into the work directory's copy in the original's encoding and line endings
    (a latin-1 script stays latin-1, so its ``coding:`` cookie still tells the truth)."""
    path.write_bytes(like.encode(text))


def backup_path(script: Path) -> Path:
    """``train.py.tfdoctor-bak``, or the first free ``.tfdoctor-bak.N`` (a name taken in any form, a
    dangling link included, is skipped). :func:`tfdoctor.userfiles.make_backup` creates it safely."""
    for p in backup_candidates(script):
        if not os.path.lexists(p):
            return p
    return p


def write_modules(folder: Path, files: Mapping[str, str], like: Mapping[str, Source] | None = None) -> None:
    """Write fixed modules beside the script (``FixOutcome.files``: path relative to the script's
    folder → source) into the work directory's copy of that folder; a module read with
    :func:`tfdoctor.userfiles.read_source` (``like``: relative path → it) in its own encoding and line
    endings, as :func:`write_copy` writes the script."""
    for rel, text in files.items():
        path = folder / rel
        if folder.resolve() not in path.resolve().parents:  # never outside the copy
            raise ValueError(f"{rel}: not inside the script's folder")
        src = (like or {}).get(rel)
        if src is not None:
            write_copy(path, text, src)
        else:
            path.write_text(text, encoding="utf-8")


def modules_diff(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """The ``git apply``-able diff of the modules beside the script that changed (sorted by path)."""
    return "".join(unified_diff(before.get(rel, ""), after[rel], rel) for rel in sorted(after))
