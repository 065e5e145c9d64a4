"""One module per verb. Each module defines ``COMMAND``: a class with a docstring (its help text),
``name`` (the module's name), ``prepare_parser(parser)`` and ``run(args) -> int``. The CLI discovers them;
adding a verb is adding a module here, nothing else.

Modules are found without importing them (:func:`names`); a verb's module is imported when that verb
runs (:func:`load`): ``tfdoctor analyze`` does not pay for LibCST, FastAPI or the fix loop.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from typing import Protocol


class Command(Protocol):
    name: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def names() -> list[str]:
    """The verbs: the command modules' names, found without importing any of them."""
    return sorted(i.name for i in pkgutil.iter_modules(__path__) if not i.name.startswith("_"))


def load(name: str) -> type[Command] | None:
    """The ``COMMAND`` class of one verb's module (imported now), or None if it defines none."""
    mod = importlib.import_module(f"{__name__}.{name}")
    return getattr(mod, "COMMAND", None)


def discover() -> list[type[Command]]:
    """Every command class (imports every command module: for the full help)."""
    return [c for c in (load(n) for n in names()) if c is not None]
