"""The fix loop's decisions without running TensorFlow: candidate order, the noise band, loss and output
sanity, the patch and the backup name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tfdoctor.fixes import all_fixes
from tfdoctor.fixes.loop import beats, examples_per_step, loss_problem, order_candidates, output_change
from tfdoctor.fixes.workspace import backup_path, make_workspace, unified_diff
from tfdoctor.model import Finding, Report, StepTiming, Throughput


def _report(findings: list[Finding]) -> Report:
    return Report(
        run_id="r", script="train.py", created="2026-01-01T00:00:00", status="complete", findings=findings
    )


def _finding(fix: str, est: float) -> Finding:
    return Finding(rule_id="TFD1", name="x", severity="high", claim="c", est_saving=est, fix_ids=[fix])


def test_candidates_follow_the_findings_estimate_then_the_default_order() -> None:
    report = _report([_finding("generator-prefetch", 0.1), _finding("tf-function", 0.6)])
    order = [f.ID for f, _ in order_candidates(all_fixes(), report)]
    assert order[:2] == ["tf-function", "generator-prefetch"]
    assert sorted(order) == sorted(f.ID for f in all_fixes())


def test_a_fix_is_never_tried_before_the_fixes_it_needs() -> None:
    # the findings rank xla-jit first, but it needs a tf.function step: tf-function goes first
    report = _report([_finding("xla-jit", 0.9), _finding("batch-scale", 0.8), _finding("tf-function", 0.1)])
    order = [f.ID for f, _ in order_candidates(all_fixes(), report)]
    for f in all_fixes():
        for dep in f.AFTER:
            assert order.index(dep) < order.index(f.ID), (dep, f.ID)
    assert order.index("xla-jit") < order.index("generator-prefetch")  # still early: its estimate is high


def test_candidates_without_findings_use_the_default_priority() -> None:
    order = [f.ID for f, est in order_candidates(all_fixes(), _report([]))]
    assert order[0] == "tf-function" and order[-1] == "batch-scale"


def _tp(rate: float, spread: float, batch: int | None = 32) -> Throughput:
    return Throughput(
        examples_per_s=rate * batch if batch else None,
        steps_per_s=rate,
        step_ms_median=1000 / rate,
        spread=spread,
    )


def test_a_fix_must_beat_the_baseline_beyond_both_noise_bands() -> None:
    ok, speedup, why = beats(_tp(12.0, 0.1), _tp(10.0, 0.1))
    assert ok and speedup == pytest.approx(1.2) and "±5 %" in why
    ok, speedup, _ = beats(_tp(11.0, 0.3), _tp(10.0, 0.2))  # 10 % faster inside a ±15 %/±10 % band
    assert not ok and speedup == pytest.approx(1.1)
    assert not beats(_tp(10.1, 0.0), _tp(10.0, 0.0))[0]  # below the minimum gain
    assert not beats(_tp(8.0, 0.0), _tp(10.0, 0.0))[0]


def test_one_outlier_window_does_not_swamp_the_noise_band() -> None:
    from tfdoctor.fixes.loop import noise_band

    calm = Throughput(steps_per_s=10, step_ms_median=100, windows=[9.8, 10.0, 10.1, 10.0, 10.2], spread=0.04)
    hit = Throughput(steps_per_s=40, step_ms_median=25, windows=[5.0, 39.0, 40.0, 41.0, 40.5], spread=0.9)
    assert noise_band(calm) == pytest.approx(0.1 / 10.0 / 2)  # inner windows 10.0 .. 10.1
    assert noise_band(hit) == pytest.approx(1.5 / 40.0 / 2)  # inner windows 39 .. 40.5
    assert beats(hit, calm)[0]
    assert noise_band(Throughput(steps_per_s=1, step_ms_median=1, spread=0.5)) == 0.25


def test_without_batch_sizes_steps_per_second_are_scaled_by_the_examples_factor() -> None:
    ok, speedup, why = beats(_tp(6.0, 0.0, None), _tp(10.0, 0.0, None), examples_factor=2.0)
    assert ok and speedup == pytest.approx(1.2) and "scaled" in why


def _steps(losses: list[float], start: int = 0) -> list[StepTiming]:
    return [
        StepTiming(index=start + i, window="timing", start_ns=i, end_ns=i + 1, loss=v, examples=32)
        for i, v in enumerate(losses)
    ]


def test_losses_must_be_finite_and_near_the_baseline_trajectory() -> None:
    ref = _steps([2.0, 1.9, 1.8, 1.7, 1.6])
    assert loss_problem(ref, _steps([2.1, 1.8, 1.8, 1.6, 1.5]), scaled=False) is None
    assert "not finite" in (loss_problem(ref, _steps([2.0, float("nan"), 1.0, 1.0, 1.0]), scaled=False) or "")
    assert "off the baseline" in (loss_problem(ref, _steps([9.0, 9.1, 9.2, 9.0, 9.3]), scaled=False) or "")
    # a scaled batch may learn faster per step, never diverge
    assert loss_problem(ref, _steps([1.0, 0.9, 0.8, 0.7, 0.6]), scaled=True) is None
    assert loss_problem(ref, _steps([1.0, 0.9, 0.8, 0.7, 0.6]), scaled=False) is not None
    assert loss_problem(ref, [], scaled=False) is None  # nothing recorded: nothing to compare


def test_output_change_ignores_numbers_but_not_missing_lines() -> None:
    before = "step 50: loss 1.23\nepoch 1: loss 0.9 (128 steps, 7.5 steps/s)\n"
    assert output_change(before, "step 50: loss 0.98\nepoch 1: loss 0.7 (128 steps, 38.1 steps/s)\n") is None
    why = output_change(before, "epoch 1: loss 0.7 (128 steps, 38.1 steps/s)\n")
    assert why is not None and "fewer 'step #: loss #'" in why


def test_examples_per_step_is_the_most_common_step_size() -> None:
    steps = _steps([1.0] * 5)
    assert examples_per_step(steps, None) == 32


def test_the_patch_applies_with_git_apply_and_patch(tmp_path: Path) -> None:
    before = "import tensorflow as tf\n\ndef step(x):\n    return x\n"
    after = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n    return x\n"
    patch = unified_diff(before, after, "train.py")
    assert patch.startswith("diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n")
    assert unified_diff(before, before, "train.py") == ""
    for tool in (["git", "apply"], ["patch", "-p1", "-i"]):
        work = tmp_path / tool[0]
        work.mkdir()
        (work / "train.py").write_text(before)
        (work / "fix.patch").write_text(patch)
        if tool[0] == "git":
            subprocess.run(["git", "init", "-q", "."], cwd=work, check=True)
        subprocess.run([*tool, "fix.patch"], cwd=work, check=True, capture_output=True)
        assert (work / "train.py").read_text() == after


def test_a_file_without_final_newline_still_gives_an_applicable_patch(tmp_path: Path) -> None:
    before, after = "x = 1\ny = 2", "x = 1\ny = 3"
    patch = unified_diff(before, after, "t.py")
    assert "\\ No newline at end of file" in patch
    (tmp_path / "t.py").write_text(before)
    (tmp_path / "p").write_text(patch)
    subprocess.run(["git", "init", "-q", "."], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "p"], cwd=tmp_path, check=True)
    assert (tmp_path / "t.py").read_text() == after


def test_backups_are_never_overwritten(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x")
    first = backup_path(script)
    assert first.name == "train.py.tfdoctor-bak"
    first.write_text("old backup")
    second = backup_path(script)
    assert second != first and second.name == "train.py.tfdoctor-bak.1"


def test_the_workspace_copies_the_folder_and_links_big_files(tmp_path: Path) -> None:
    user = tmp_path / "user"
    (user / "pkg").mkdir(parents=True)
    (user / "train.py").write_text("print(1)\n")
    (user / "pkg" / "util.py").write_text("X = 1\n")
    (user / "data.bin").write_bytes(b"\0" * (5 * 1024 * 1024))
    (user / ".git").mkdir()
    copy = make_workspace(user / "train.py", tmp_path / "work")
    assert copy == tmp_path / "work" / "train.py" and copy.read_text() == "print(1)\n"
    assert (tmp_path / "work" / "pkg" / "util.py").is_file()
    assert (tmp_path / "work" / "data.bin").is_symlink()
    assert not (tmp_path / "work" / ".git").exists()
    copy.write_text("changed\n")
    assert (user / "train.py").read_text() == "print(1)\n"
