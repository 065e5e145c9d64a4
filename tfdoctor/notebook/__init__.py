"""The IPython face: ``%load_ext tfdoctor``, then ``%%tfdoctor`` on a cell or ``%tfdoctor profile script.py``.

IPython is imported only when the extension loads (:mod:`.magics`).
"""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    from tfdoctor.notebook.magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from tfdoctor.notebook.magics import unload_ipython_extension as _unload

    _unload(ipython)
