"""The second half of CI's quick benchmark pass (test_benchmarks_quick.py has the first): a file of its own so
that a second pytest-xdist worker runs it beside the first."""

from __future__ import annotations

import pytest
from bench_quick import REST, run_quick

pytestmark = pytest.mark.integration


def test_the_other_benchmark_scripts_run_in_quick_mode(tmp_path, tfd_home):
    out = run_quick(tmp_path, REST)
    assert "perturbation" in out and "steps/s" in out
    assert "baseline window" in out
    assert "| tensor epoch |" in out and "| python epoch |" in out
