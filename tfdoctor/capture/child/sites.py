"""How the child names a line of the user's script: ``train.py:42`` and the line's code, as the report
shows them (the gap watch and the hooks both record sites)."""

from __future__ import annotations

import linecache
import os


def site(filename: str, line: int) -> str:
    """``train.py:42``: the file's base name and the line."""
    return f"{os.path.basename(filename)}:{line}"


def code(filename: str, line: int) -> str:
    """The source of that line, stripped ("" where it cannot be read)."""
    return linecache.getline(filename, line).strip()
