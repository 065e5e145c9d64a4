"""The quick benchmark pass CI runs (``benchmarks/run_all.sh --quick``), shared by test_benchmarks_quick.py and
test_benchmarks_quick_rest.py: two test files, so that two pytest-xdist workers run the halves side by side."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


#: the scripts of ``run_all.sh``, in two halves of about four minutes each on 2 cores (test_benchmarks_quick.py
#: runs the first, test_benchmarks_quick_rest.py the second)
FIRST = ("fix_speedup", "fix_gains", "trace_speed", "gpu")
REST = ("perturbation", "fix_cost", "retrace")


def run_quick(tmp_path: Path, names: tuple[str, ...]) -> str:
    """``run_all.sh --quick --only <names>``: each named script must execute and say ok; returns stdout."""
    before = _digest(DOC)
    env = {**os.environ, "TFDOCTOR_BENCH_CACHE": str(tmp_path / "cache"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "run_all.sh"), "--quick", "--only", ",".join(names)],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        # generous: every benchmark script runs real TensorFlow; on a loaded 2-core CI machine the
        # quick pass took past 1500 s (issue 16, item 19). Nothing timed is asserted here.
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    for name in names:
        assert f"=== {name}: ok" in proc.stdout, proc.stdout[-4000:]
    assert _digest(DOC) == before  # quick mode never rewrites the figures
    return proc.stdout
