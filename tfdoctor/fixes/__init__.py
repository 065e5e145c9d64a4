"""The fixes tfdoctor applies, measures and keeps or rolls back.

One module per fix (``tfdoctor/fixes/<fix>.py`` defining ``FIX``, a :class:`Fix` subclass whose class
docstring is its documentation); the registry is discovered from the package, so adding a fix means
adding a module. ``loop.py`` is the measure/keep/roll-back loop, ``workspace.py`` the patched copies.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from tfdoctor.fixes._base import Fix, FixContext, FixOutcome, Hardware

__all__ = ["Fix", "FixContext", "FixOutcome", "Hardware", "all_fixes", "get_fix"]


@lru_cache(maxsize=1)
def _registry() -> tuple[Fix, ...]:
    fixes: list[Fix] = []
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        cls = getattr(module, "FIX", None)
        if cls is not None:
            fixes.append(cls())
    return tuple(sorted(fixes, key=lambda f: (f.PRIORITY, f.ID)))


def all_fixes() -> list[Fix]:
    """Every fix, in default order (PRIORITY)."""
    return list(_registry())


def get_fix(fix_id: str) -> Fix:
    for f in _registry():
        if fix_id == f.ID:
            return f
    raise KeyError(fix_id)
