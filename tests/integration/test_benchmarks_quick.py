"""CI's check on the benchmarks: ``benchmarks/run_all.sh --quick`` runs every benchmark script once,
small, and each must execute (timed figures are never asserted here; docs/benchmarks.md untouched)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def test_every_benchmark_script_runs_in_quick_mode(tmp_path, tfd_home):
    before = _digest(DOC)
    env = {**os.environ, "TFDOCTOR_BENCH_CACHE": str(tmp_path / "cache"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "run_all.sh"), "--quick"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        # generous: every benchmark script runs real TensorFlow; on a loaded 2-core CI machine the
        # quick pass took past 1500 s (issue 16, item 19). Nothing timed is asserted here.
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    for name in ("fix_speedup", "fix_gains", "trace_speed", "perturbation", "fix_cost", "retrace", "gpu"):
        assert f"=== {name}: ok" in proc.stdout, proc.stdout[-4000:]
    # each printed its figures (not only "ok"): the ratios each script exists to produce
    assert "XProf÷tfdoctor" in proc.stdout
    assert "gain B/A" in proc.stdout and "round 1 (AB)" in proc.stdout
    assert "perturbation" in proc.stdout and "steps/s" in proc.stdout
    assert "baseline window" in proc.stdout
    assert "| tensor epoch |" in proc.stdout and "| python epoch |" in proc.stdout
    assert _digest(DOC) == before  # quick mode never rewrites the figures
    assert (tmp_path / "cache" / "results" / "trace_speed.json").is_file()


def test_a_script_rewrites_only_its_own_section(tmp_path, monkeypatch):
    import sys

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    sys.modules.pop("_common", None)
    from _common import update_section

    doc = tmp_path / "benchmarks.md"
    update_section("a", "## A\n\nfirst", doc)
    update_section("b", "## B\n\nsecond", doc)
    before_b = doc.read_text().split("<!-- bench:b -->")[1]
    update_section("a", "## A\n\nnew figures", doc)
    text = doc.read_text()
    assert "new figures" in text and "first" not in text
    assert text.split("<!-- bench:b -->")[1] == before_b  # the other section byte for byte
    assert text.index("<!-- bench:a -->") < text.index("<!-- bench:b -->")  # order kept
    assert text.count("<!-- bench:a -->") == 1
    update_section("c", "## C\n\nthird", doc, after="a")  # a new section placed after the one named
    text = doc.read_text()
    assert text.index("<!-- /bench:a -->") < text.index("<!-- bench:c -->") < text.index("<!-- bench:b -->")
