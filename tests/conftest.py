"""Fixtures shared by every test pass. Keep this small: one fixture per need."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def tfd_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh run store: TFDOCTOR_HOME points into the test's tmp dir (never ~/.tfdoctor)."""
    home = tmp_path / "tfdoctor-home"
    monkeypatch.setenv("TFDOCTOR_HOME", str(home))
    return home
