"""An IPython InteractiveShell with a capturing display publisher and tfdoctor loaded.

These tests run in their own pytest pass (``pytest -m notebook``): the shell is a process-wide
singleton, and profiling in the kernel patches TensorFlow/Keras classes for the cell's duration.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class Shell:
    """The shell plus helpers to read what the magic displayed."""

    def __init__(self, ip, home: Path):
        self.ip = ip
        self.home = home

    @property
    def outputs(self) -> list[dict]:
        return self.ip.display_pub.outputs

    def run(self, code: str):
        return self.ip.run_cell(code, store_history=True)

    def html(self) -> list[str]:
        return [o["data"]["text/html"] for o in self.outputs if "text/html" in o["data"]]

    def plain(self) -> list[str]:
        return [o["data"]["text/plain"] for o in self.outputs if "text/plain" in o["data"]]

    def clear(self) -> None:
        self.ip.display_pub.outputs.clear()


@pytest.fixture
def shell(tfd_home: Path) -> Iterator[Shell]:
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    from tfdoctor.notebook import magics

    ip = InteractiveShell.instance()
    ip.display_pub = CapturingDisplayPublisher()
    magics._plotly_sent = False  # each test is a fresh notebook page: its first report carries plotly
    ip.run_line_magic("load_ext", "tfdoctor")
    ip.user_ns.clear()
    ip.init_user_ns()
    try:
        yield Shell(ip, tfd_home)
    finally:
        ip.display_pub.outputs.clear()
