"""Where the tests find real traces: in the repository (sample_traces/, sample_traces/third_party/ for the
Apache-2.0 third-party ones) or in ``../shared/traces`` beside the checkout (real traces whose licenses do
not allow copying them here).

A test that needs a ``../shared`` trace skips when it is absent on a contributor's machine, and FAILS under
CI (``CI=true``): CI must check what it claims to check.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "traces"
THIRD_PARTY = ROOT / "sample_traces" / "third_party"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(what: str) -> None:
    """Skip outside CI, fail in CI: a fixture the test needs is not there."""
    msg = f"{what} not present (../shared/traces beside the checkout)"
    if in_ci():
        pytest.fail(f"{msg}: CI must have it")
    pytest.skip(msg)


def shared(rel: str) -> Path:
    """``../shared/traces/<rel>``, or the in-repo third-party copy of it; skip (fail under CI) if neither."""
    for base in (THIRD_PARTY, SHARED):
        if (base / rel).exists():
            return base / rel
    missing(f"../shared/traces/{rel}")
    raise AssertionError  # unreachable: missing() raises


def find_shared(pattern: str) -> Path:
    """The first path under the in-repo third-party copies or ``../shared/traces`` matching ``pattern``
    (an ``rglob`` pattern); skip outside CI, fail under CI, when none does (never a bare StopIteration)."""
    for base in (THIRD_PARTY, SHARED):
        if base.exists():
            for path in sorted(base.rglob(pattern)):
                return path
    missing(f"../shared/traces/**/{pattern}")
    raise AssertionError  # unreachable: missing() raises


def require_shared() -> Path:
    """The ../shared/traces folder itself (skip outside CI, fail under CI when it is absent)."""
    if not SHARED.exists():
        missing("../shared/traces")
    return SHARED
