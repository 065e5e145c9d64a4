"""The pure parts of two benchmark scripts: benchmarks/corpus_fix.py (each ratio to the expert as the
judge's estimate over the side-by-side rounds, its verdict against the 0.9 target, re-rendering saved
rows, the hand-written "Reading it" paragraph kept) and benchmarks/fix_repeat.py (a ``--fix --json``
report's trials kept per run, the trials decided differently shown with both runs' figures)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import corpus_fix as cf
import fix_repeat as fr
from _common import update_section

from tfdoctor.fixes.judge import Estimate

EXPERT = [3000.0, 2800.0, 3200.0, 3100.0, 2900.0]


def _row(name: str, factor: list[float], **extra: object) -> dict:
    """A row as study() saved it before it recorded the round order: three variants, rotating rounds."""
    structural = [e * f for e, f in zip(EXPERT, factor, strict=False)]
    n = len(factor)
    return {
        "name": name,
        "fix_rounds": 4,
        "structural": {"kept": ["tf-function"], "trials": [], "speedup": None, "ci": None, "wall": 10.0},
        "full": None,
        "side": {"baseline": 1000.0, "structural": structural[0], "expert": EXPERT[0]},
        "per_round": {"baseline": [1000.0] * n, "structural": structural, "expert": EXPERT[:n]},
        "ratios": {"baseline": [1000.0 / e for e in EXPERT[:n]], "structural": factor, "expert": [1.0] * n},
        **extra,
    }


def test_round_orders_fall_back_to_the_rotation_and_prefer_the_record() -> None:
    old = _row("a.py", [1.0, 1.0, 1.0, 1.0])
    assert cf.round_orders(old) == [
        ["baseline", "structural", "expert"],
        ["structural", "expert", "baseline"],
        ["expert", "baseline", "structural"],
        ["baseline", "structural", "expert"],
    ]
    recorded = [["expert", "structural", "baseline"]] * 4
    assert cf.round_orders(_row("a.py", [1.0] * 4, round_order=recorded)) == recorded


def test_expert_pairs_skip_failed_rounds_and_carry_the_order() -> None:
    row = _row("a.py", [0.9, 1.0, 1.1, 1.2])
    row["per_round"]["structural"][1] = None  # failed in round 2
    pairs = cf.expert_pairs(row, "structural")
    assert [round(p.ratio, 6) for p in pairs] == [0.9, 1.1, 1.2]
    # rounds 1, 3, 4: b/s/e (structural first: BA), e/b/s (expert first: AB), b/s/e (BA)
    assert [p.order for p in pairs] == ["BA", "AB", "BA"]
    assert all(p.ref.rate in EXPERT for p in pairs)


def test_verdict_against_the_target() -> None:
    assert cf.verdict(Estimate(0.95, 0.91, 0.99, 3)) == "met"
    assert cf.verdict(Estimate(0.95, 0.90, 0.99, 3)) == "met"  # at the target counts
    assert cf.verdict(Estimate(0.80, 0.70, 0.89, 3)) == "not met"
    assert cf.verdict(Estimate(0.89, 0.78, 1.02, 3)) == "not decided (3 rounds)"
    # one round: no run-to-run spread, no interval worth the name: never decided
    assert cf.verdict(Estimate(0.5, 0.5, 0.5, 1)) == "not decided (1 round)"
    assert cf.verdict(None) == "not measured"
    assert cf.ratio_text(Estimate(0.89, 0.78, 1.02, 3)) == "0.89 [0.78, 1.02]"
    # two decimals would print the target for a low just under it: three then
    assert cf.ratio_text(Estimate(0.95, 0.8996, 1.0, 3)) == "0.95 [0.900, 1.00]"
    assert cf.ratio_text(Estimate(0.95, 0.8996, 1.0, 3)) != cf.ratio_text(Estimate(0.95, 0.9, 1.0, 3))


def test_estimates_of_steady_rows_decide_and_noisy_ones_do_not() -> None:
    steady_high = cf.to_expert(_row("a.py", [1.20, 1.22, 1.19, 1.21, 1.20]), "structural")
    steady_low = cf.to_expert(_row("b.py", [0.60, 0.62, 0.59, 0.61, 0.60]), "structural")
    noisy = cf.to_expert(_row("c.py", [0.7, 1.1, 0.8, 1.05, 0.95]), "structural")
    assert steady_high is not None and steady_low is not None and noisy is not None
    assert cf.verdict(steady_high) == "met" and steady_high.low < 1.19 < steady_high.high
    assert cf.verdict(steady_low) == "not met"
    assert cf.verdict(noisy) == "not decided (5 rounds)"
    # the point is the geometric mean of the rounds' ratios
    assert noisy.ratio == pytest.approx((0.7 * 1.1 * 0.8 * 1.05 * 0.95) ** (1 / 5))


def test_render_from_saved_rows_merges_and_keeps_the_reading_paragraph(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps([_row("z.py", [0.6, 0.62, 0.61]), _row("y.py", [0.7, 1.1, 0.8])]))
    b.write_text(json.dumps([_row("y.py", [1.2, 1.21, 1.22, 1.19, 1.2], steps=20, measured="T")]))
    rows = cf.merge([a, b])
    assert [r["name"] for r in rows] == ["y.py", "z.py"] and len(rows[0]["per_round"]["expert"]) == 5

    doc = tmp_path / "bench.md"
    reading = "**Reading it** (by hand).\n\n- a point, with [brackets].\n- another."
    update_section(cf.SECTION, "## old\n\n| t |\n\n" + reading + "\n\n### y.py\n\nold details", doc=doc)
    assert cf.current_reading(doc) == reading
    text = cf.render(rows, 30, when="W", note="A note.", reading=cf.current_reading(doc))
    update_section(cf.SECTION, text, doc=doc)
    assert cf.current_reading(doc) == reading  # a second re-render keeps it again
    written = doc.read_text()
    assert written.count("**Reading it**") == 1 and "old details" not in written
    assert "met on **1** (y 1.20 [" in text and "not met on **1** (z 0.61 [" in text
    assert "| y.py |" in text and "| met | not run | 5 |" in text and "| not met | not run | 3 |" in text
    assert "3-5 per row" in text and "20-30 steps per run" in text and "A note." in text
    assert "geometric mean" in text and "(median 0.61)" in text


def _report(trials: list[dict], kept: list[str], speedup: float) -> dict:
    return {
        "fix": {
            "kept": kept,
            "combined_speedup": speedup,
            "combined_ci": [speedup * 0.9, speedup * 1.1],
            "combined_verdict": "faster",
            "combined_note": "verified over 2 paired rounds against the baseline",
            "trials": trials,
        }
    }


def _trial(fix_id: str, status: str, speedup: float | None, verdict: str | None, reason: str) -> dict:
    ci = [speedup * 0.9, speedup * 1.1] if speedup else None
    return {"fix_id": fix_id, "label": "", "status": status, "reason": reason, "speedup": speedup,
            "speedup_ci": ci, "verdict": verdict, "description": "", "patch": ""}  # fmt: skip


def test_fix_repeat_keeps_every_trial_and_shows_differences() -> None:
    one = fr.summarize(
        _report(
            [
                _trial("tf-function", "kept", 3.0, "faster", "faster: 3.00x [2.70x, 3.30x] over 2 rounds"),
                _trial("xla-jit", "kept", 1.3, "faster", "faster: 1.30x [1.17x, 1.43x] over 2 rounds"),
                _trial("xla-jit", "rejected", 0.9, "not faster", "slower: 0.90x on a second try"),
            ],
            ["tf-function", "xla-jit"],
            3.9,
        ),
        100.0,
    )
    two = fr.summarize(
        _report(
            [
                _trial("tf-function", "kept", 2.8, "faster", "faster: 2.80x [2.52x, 3.08x] over 2 rounds"),
                _trial("xla-jit", "rejected", 1.1, "undecided", "not decided (noisy machine): 1.10x …"),
                _trial("tfdata-cache", "skipped", None, None, "no tf.data pipeline"),
            ],
            ["tf-function"],
            2.8,
        ),
        90.0,
    )
    assert list(one["trials"]) == ["tf-function", "xla-jit", "xla-jit #2"]
    assert one["trials"]["xla-jit"]["reason"].startswith("faster: 1.30x") and one["note"].startswith(
        "verified"
    )
    row = fr.compare("corpus/x.py", one, two)
    assert row["same_kept"] is False and row["decisions_differ"] == ["xla-jit"]
    assert row["tried_in_one_run"] == ["tfdata-cache", "xla-jit #2"]
    assert row["runs"][0]["trials"]["tf-function"]["speedup"] == 3.0
    text = fr.render([row])
    assert "run 1 kept 1.30x [1.17x, 1.43x]: faster: 1.30x" in text
    assert "run 2 not decided 1.100x [0.990x, 1.210x]: not decided (noisy machine)" in text
    assert "**tfdata-cache**: run 1 not tried; run 2 skipped: no tf.data pipeline" in text
    json.dumps(row)  # the results file holds it
    assert row["same_fixes"] is False and "**differ**" in text
    # the same fixes at another batch factor: told apart from a different set
    one["kept"], two["kept"] = ["tf-function", "batch-scale ×8"], ["batch-scale ×4", "tf-function"]
    row = fr.compare("corpus/x.py", one, two)
    assert row["same_kept"] is False and row["same_fixes"] is True
    assert "**same fixes, other factor**: tf-function, batch-scale ×8 / batch-scale ×4" in fr.render([row])


def test_fix_repeat_names_corpus_scripts_with_their_manifest_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(fr.ROOT)  # the paths as typed at the repository root
    got = dict(fr.targets(["examples/corpus/quickstart_closure.py", "examples/naive_loop.py"]))
    corpus = {p.name: args for p, args in got.items()}
    assert corpus["quickstart_closure.py"] == ["--epochs", "1"] and corpus["naive_loop.py"] == []
    assert fr.display(fr.CORPUS / "multifile" / "train.py") == "multifile/train.py"


def test_rounds_added_to_a_saved_row_continue_its_rotation_and_refresh_its_figures() -> None:
    """``--add-rounds-to``: the new rounds' orders go on from the saved rounds' rotation, and the row's
    medians, ratios and estimates are recomputed over all its rounds (what add_rounds does around the
    measuring itself)."""
    row = _row("a.py", [0.8, 0.85, 0.9])
    variants = ["baseline", "structural", "expert"]
    assert [cf.rotation(variants, r) for r in range(3, 5)] == [
        ["baseline", "structural", "expert"],
        ["structural", "expert", "baseline"],
    ]
    before = cf.to_expert(row, "structural")
    more = dict(row)
    more["round_order"] = [*cf.round_orders(row), *[cf.rotation(variants, r) for r in range(3, 5)]]
    more["per_round"] = {
        "baseline": [*row["per_round"]["baseline"], 1000.0, 1000.0],
        "structural": [*row["per_round"]["structural"], 3100.0 * 0.86, 2900.0 * 0.84],
        "expert": [*row["per_round"]["expert"], 3100.0, 2900.0],
    }
    got = cf.with_figures(more)
    assert got["ratios"]["structural"] == pytest.approx([0.8, 0.85, 0.9, 0.86, 0.84])
    assert got["side"]["expert"] == 3000.0  # the median of the five rounds
    after = cf.to_expert(got, "structural")
    assert after is not None and before is not None and after.rounds == 5 and before.rounds == 3
    assert (after.high - after.low) < (before.high - before.low)  # more rounds, a narrower interval
    assert got["to_expert"]["structural"]["rounds"] == 5


def test_both_headlines_are_checked_against_the_side_by_side_rounds() -> None:
    row = _row("a.py", [1.0, 1.0, 1.0])
    assert cf.reproduced(row, "full") == "not run"
    row["structural"].update(speedup=3.0, ci=[2.8, 3.2])
    row["full"] = {"kept": ["tf-function", "batch-scale ×4"], "trials": [], "speedup": 5.0, "ci": [4.5, 5.5]}
    row["per_round"]["full"] = [4200.0, 4300.0, None]  # its rounds' ratios to the baseline: 4.2, 4.3
    assert cf.reproduced(row) == "3.00x [2.80, 3.20] → 3.00x (within)"  # structural / baseline
    assert cf.reproduced(row, "full") == "5.00x [4.50, 5.50] → 4.25x (outside)"
