"""CI's check on the benchmarks: ``benchmarks/run_all.sh --quick`` runs every benchmark script once,
small, and each must execute (timed figures are never asserted here; docs/benchmarks.md untouched). The
scripts run in two halves, this file's and test_benchmarks_quick_rest.py's."""

from __future__ import annotations

import pytest
from bench_quick import FIRST, REST, ROOT, run_quick

pytestmark = pytest.mark.integration


def test_every_script_of_run_all_is_in_one_half():
    listed = (
        (ROOT / "benchmarks" / "run_all.sh").read_text().split("scripts=(", 1)[1].split(")", 1)[0].split()
    )
    assert sorted(listed) == sorted(FIRST + REST)


def test_the_first_benchmark_scripts_run_in_quick_mode(tmp_path, tfd_home):
    out = run_quick(tmp_path, FIRST)
    # each printed its figures (not only "ok"): the ratios each script exists to produce
    assert "XProf÷tfdoctor" in out
    assert "gain B/A" in out and "round 1 (AB)" in out
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
