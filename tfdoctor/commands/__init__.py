"""One module per verb. Each module defines ``COMMAND``: a class with a docstring (its help text),
``name``, ``prepare_parser(parser)`` and ``run(args) -> int``. The CLI discovers them; adding a verb
is adding a module here, nothing else.
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


def discover() -> list[type]:
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        cmd = getattr(mod, "COMMAND", None)
        if cmd is not None:
            found.append(cmd)
    return found
