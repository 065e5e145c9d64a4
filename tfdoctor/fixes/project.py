"""A project of several files: the modules beside the script that the script imports (``import model``,
``from data import make_dataset``, ``from . import utils``), followed from module to module.

The fixes look for their pattern in the script first and then in these modules (the model built in
``model.py``, the optimizer in ``optim.py``); an edit there comes back in ``FixOutcome.files`` and goes
into the patch and ``--apply`` like the script's own. Read with :mod:`ast`: nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

#: never follow more than this many modules (a vendored package beside the script is not the user's code)
MAX_MODULES = 20
#: nor modules bigger than this (generated or vendored code)
MAX_BYTES = 512 * 1024


def _candidates(folder: Path, dotted: str) -> list[Path]:
    parts = dotted.split(".")
    return [folder.joinpath(*parts).with_suffix(".py"), folder.joinpath(*parts, "__init__.py")]


def imported_modules(source: str, folder: Path, root: Path) -> list[Path]:
    """The files under ``root`` that ``source`` (a file in ``folder``) imports, in order of import."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out: list[Path] = []
    for node in ast.walk(tree):
        names: list[str] = []
        base = root
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # from . import x / from .pkg import y: relative to the importing file
                base = folder
                for _ in range(node.level - 1):
                    base = base.parent
            mod = node.module or ""
            names = [mod] if mod else []
            names += [f"{mod}.{a.name}" if mod else a.name for a in node.names if a.name != "*"]
        for name in names:
            for path in _candidates(base, name):
                if path.is_file() and root in path.resolve().parents:  # under the script's folder
                    if path not in out:
                        out.append(path)
                    break
    return out


def local_modules(script: Path, root: Path | None = None) -> dict[str, str]:
    """The modules beside ``script`` it imports, directly or through each other: relative path (to the
    script's folder, ``/``-separated) → source. The script itself is not included. ``root``: the folder
    absolute imports start from and the paths are relative to, when not the script's (a module run as
    ``python -m pkg.train``: the working directory, so ``from pkg.model import build`` is
    ``pkg/model.py``)."""
    script = script.resolve()
    root = root.resolve() if root is not None else script.parent
    found: dict[str, str] = {}
    queue = [script]
    seen = {script}
    while queue and len(found) < MAX_MODULES:
        f = queue.pop(0)
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if f != script:
            found[f.relative_to(root).as_posix()] = text
        for m in imported_modules(text, f.parent, root):
            m = m.resolve()
            if m not in seen and m.stat().st_size <= MAX_BYTES:
                seen.add(m)
                queue.append(m)
    return found
