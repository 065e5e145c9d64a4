"""Fixtures shared by every test pass. Keep this small: one fixture per need.

Fixture policy (issue 16, item 20): the traces the tests need live in the repository
(``sample_traces/``, ``sample_traces/third_party/`` for the Apache-2.0 third-party ones, found
through ``tests/unit/real_traces.shared``); the few whose licenses keep them out are read from
``../shared/traces`` beside the checkout. A test whose fixture is missing skips on a contributor's
machine, *says so* at the end of the run, and FAILS under CI (``CI=true``): CI must check what it
claims to check. The hook below enforces that for every skip that names a missing fixture, whether it
came from ``real_traces.missing()`` or from a ``skipif`` mark.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

#: words in a skip reason that mean "a fixture this test needs is not there"
MISSING_FIXTURE_WORDS = ("../shared", "shared traces", "shared/traces", "fixture missing")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


def missing_fixture(reason: str) -> bool:
    return any(w in reason for w in MISSING_FIXTURE_WORDS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report)
        if missing_fixture(reason):
            if in_ci():
                report.outcome = "failed"
                report.longrepr = (
                    f"{reason.removeprefix('Skipped: ')} -- under CI a missing fixture is a failure"
                )
            else:
                item.config.stash.setdefault(_MISSING, []).append(f"{item.nodeid}: {reason}")


_MISSING = pytest.StashKey[list[str]]()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    missing = config.stash.get(_MISSING, [])
    if missing:
        terminalreporter.write_sep(
            "-", f"{len(missing)} test(s) skipped: a fixture they need is not here (they fail under CI=true)"
        )
        for line in missing[:20]:
            terminalreporter.write_line(f"  {line}")
        if len(missing) > 20:
            terminalreporter.write_line(f"  ... and {len(missing) - 20} more")


@pytest.fixture
def tfd_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh run store: TFDOCTOR_HOME points into the test's tmp dir (never ~/.tfdoctor)."""
    home = tmp_path / "tfdoctor-home"
    monkeypatch.setenv("TFDOCTOR_HOME", str(home))
    return home
