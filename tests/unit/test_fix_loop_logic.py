"""The fix loop's decisions without running TensorFlow: candidate order, the noise band, paired rounds,
loss and output sanity, the patch and the backup name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from tfdoctor.capture.child.clock import Windows
from tfdoctor.capture.runner import CaptureResult
from tfdoctor.fixes import all_fixes
from tfdoctor.fixes.workspace import backup_path, make_workspace, unified_diff
from tfdoctor.model import Facts, Finding, FixSummary, Report, StepTiming, Throughput
from tfdoctor.report.terminal import fix_table
from tfdoctor.rundir import RunDir
from tfdoctor.session.fix_loop import (
    DECISIVE,
    MEMO_COLD,
    FixLoop,
    LoopConfig,
    Round,
    beats,
    examples_per_step,
    judge,
    loss_problem,
    memo_problem,
    needs_confirmation,
    noise_band,
    order_candidates,
    output_change,
    settles,
)
from tfdoctor.store import RunStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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
    calm = Throughput(steps_per_s=10, step_ms_median=100, windows=[9.8, 10.0, 10.1, 10.0, 10.2], spread=0.04)
    hit = Throughput(steps_per_s=40, step_ms_median=25, windows=[5.0, 39.0, 40.0, 41.0, 40.5], spread=0.9)
    assert noise_band(calm) == pytest.approx(0.1 / 10.0 / 2)  # inner windows 10.0 .. 10.1
    assert noise_band(hit) == pytest.approx(1.5 / 40.0 / 2)  # inner windows 39 .. 40.5
    assert beats(hit, calm)[0]
    assert noise_band(Throughput(steps_per_s=1, step_ms_median=1, spread=0.5)) == 0.25


def test_without_batch_sizes_steps_per_second_are_scaled_by_the_examples_factor() -> None:
    ok, speedup, why = beats(_tp(6.0, 0.0, None), _tp(10.0, 0.0, None), examples_factor=2.0)
    assert ok and speedup == pytest.approx(1.2) and "scaled" in why


# -- paired rounds: the decision as pure functions -----------------------------------------------------
def _banded(rate: float, band: float = 0.02, batch: int = 32) -> Throughput:
    """steps/s ``rate`` whose sub-windows give exactly ``band`` (noise_band drops the extreme windows)."""
    windows = [rate * (1 - band), rate * (1 - band), rate, rate * (1 + band), rate * (1 + band)]
    return Throughput(
        examples_per_s=rate * batch, steps_per_s=rate, step_ms_median=1000 / rate, windows=windows, spread=0.0
    )


def test_a_clear_win_or_loss_is_decided_on_its_one_run() -> None:
    win = beats(_banded(40.0), _banded(10.0))  # tf-function on the eager loop: ~4x
    assert not needs_confirmation(win[1], rounds=2)
    assert judge(win, []).keep and judge(win, []).reason.startswith(
        "faster: 320.0 → 1280.0 examples/s (4.00x"
    )
    loss = beats(_banded(1.6), _banded(10.0))  # XLA on a CPU: ~0.16x
    assert not needs_confirmation(loss[1], rounds=2)
    verdict = judge(loss, [])
    assert not verdict.keep and verdict.reason.startswith("not faster beyond the noise band:")
    # the edges of the undecided range: outside [1/DECISIVE, DECISIVE] one run decides
    assert needs_confirmation(DECISIVE, 2) and needs_confirmation(1 / DECISIVE, 2)
    assert not needs_confirmation(DECISIVE * 1.01, 2) and not needs_confirmation(0.99 / DECISIVE, 2)


def test_without_rounds_the_single_run_rule_decides_even_close_calls() -> None:
    first = beats(_banded(13.0), _banded(10.0))  # 1.3x beyond both ±2 % bands
    assert not needs_confirmation(first[1], rounds=0)
    assert judge(first, []) == judge(first, [])  # deterministic
    assert judge(first, []).keep and judge(first, []).reason == f"faster: {first[2]}"
    inside = beats(_banded(10.3, 0.05), _banded(10.0, 0.05))  # 3 % inside ±5 % bands
    assert not judge(inside, []).keep


def test_a_borderline_win_confirmed_in_one_clear_round_stops_there() -> None:
    first = beats(_banded(13.0), _banded(10.0))
    assert first[0] and needs_confirmation(first[1], rounds=2)
    # the machine slowed down between the runs: the pair still shows the gain
    rnd = Round.of(_banded(10.4), _banded(8.0))
    assert rnd.ratio == pytest.approx(1.3) and rnd.band == pytest.approx(0.04)
    assert settles(True, rnd)  # 1.3 > 1.02 × 1.04: no second round
    verdict = judge(first, [rnd])
    assert verdict.keep
    assert verdict.reason.startswith(
        "faster in paired round: 1.30x (back to back with the reference); single run"
    )


def test_a_borderline_win_that_was_drift_is_rejected_on_the_paired_rounds() -> None:
    # one run 1.4x, but measured back to back the fix is as fast as the reference, in both orders
    first = beats(_banded(14.0), _banded(10.0))
    assert first[0] and needs_confirmation(first[1], rounds=2)
    rounds = [Round.of(_banded(10.1), _banded(10.0)), Round.of(_banded(8.8), _banded(9.0))]
    assert not settles(True, rounds[0])  # 1.01x does not clearly agree with "keep": a second round
    assert not rounds[1].slower  # 0.98x is within its ±4 %
    verdict = judge(first, rounds)
    assert not verdict.keep
    assert "not faster in paired rounds: 1.01x, 0.98x → median 0.994x" in verdict.reason
    assert "single run 320.0 → 448.0 examples/s (1.40x" in verdict.reason


def test_mixed_rounds_are_decided_on_their_median_unless_one_round_is_clearly_slower() -> None:
    first = beats(_banded(11.0), _banded(10.0))
    up, down = Round(1.07, 0.05), Round(0.98, 0.05)
    verdict = judge(first, [up, down])  # median 1.025 > 1.02, and 0.98 is inside its ±5 %
    assert verdict.keep and "paired rounds: 1.07x, 0.98x → median 1.025x" in verdict.reason
    assert not judge(first, [Round(1.03, 0.05), Round(0.98, 0.05)]).keep  # median 1.005
    # a round where the fix was slower beyond that round's band vetoes a high median
    veto = judge(first, [Round(1.30, 0.04), Round(0.90, 0.04)])
    assert not veto.keep and "round 2 slower than the reference beyond its band (±4 %)" in veto.reason
    # a clear "reject" in the first round settles too
    assert settles(False, Round(0.90, 0.04)) and not settles(False, Round(1.0, 0.04))


def test_a_trial_whose_cache_did_not_warm_is_not_judged_on_speed() -> None:
    assert memo_problem(Facts(memo_warm=False)) == MEMO_COLD
    assert MEMO_COLD.startswith("its cache did not warm within the warm-up limit")
    assert memo_problem(Facts(memo_warm=True)) is None
    assert memo_problem(Facts()) is None and memo_problem(None) is None  # no tfdoctor cache in the script


def test_one_slow_step_moves_one_sub_window_and_neither_the_rate_nor_the_band() -> None:
    """Throughput.from_steps stays sub-window medians: a 500 ms hiccup among 25 ms steps (a 20-step timing
    window) lands in one of 5 windows; the median and noise_band (extremes dropped) ignore it."""
    durations = [25] * 20
    durations[13] = 500
    steps, t = [], 0
    for i, ms in enumerate(durations):
        steps.append(StepTiming(index=i, window="timing", start_ns=t, end_ns=t + ms * 1_000_000, examples=32))
        t += ms * 1_000_000
    tp = Throughput.from_steps(steps, 32)
    assert tp is not None and tp.steps_per_s == pytest.approx(40.0)
    assert sorted(tp.windows)[0] == pytest.approx(4 / 0.575) and noise_band(tp) == pytest.approx(0.0)


def test_reports_written_before_paired_rounds_still_load() -> None:
    old = {
        "baseline": {"steps_per_s": 10.0, "step_ms_median": 100.0},
        "trials": [{"fix_id": "tf-function", "description": "d", "status": "kept", "reason": "faster: ..."}],
        "wall_s": 65.0,
    }
    summary = FixSummary.model_validate(old)
    assert summary.confirm_rounds == 0  # decided on one run each, as they were
    assert summary.trials[0].paired_ratios == [] and summary.trials[0].paired_run_ids == []


# -- paired rounds: which runs the loop makes, in which order ---------------------------------------
class ScriptedLoop(FixLoop):
    """The real loop with its one measuring step replaced by prepared results, keyed by the run's label
    ("tf-function", "tf-function: reference, paired round 1", "tf-function: paired round 1", "combined: ...").
    A label without a result fails the test: the loop made a run it should not have."""

    def __init__(self, *args, rates: dict[str, float], fail=(), cold=(), **kw):
        super().__init__(*args, **kw)
        self.rates, self.fail, self.cold = rates, set(fail), set(cold)
        self.measured: list[str] = []

    def measure(self, label, code, switches, *, profile=False):
        self.measured.append(label)
        run = self.store.new_run(str(self.script), kind="fix", parent=self.baseline.id)
        windows = Windows(warmup=3, timing=20, profile=0)
        if label in self.fail:
            res = CaptureResult(
                status="failed", returncode=1, windows=windows, error="boom", message="exit 1"
            )
            rep = Report(run_id=run.id, script="s", created="c", status="failed")
            return run, res, rep
        key = "combined" if label.startswith("combined: ") else label
        facts = Facts(memo_warm=False) if label in self.cold else Facts()
        res = CaptureResult(status="complete", returncode=0, windows=windows, facts=facts)
        tp = _banded(self.rates[key])
        return run, res, Report(run_id=run.id, script="s", created="c", status="complete", throughput=tp)


def _scripted(
    tmp_path: Path, rates: dict[str, float], only: list[str], rounds: int = 2, **kw
) -> ScriptedLoop:
    script = tmp_path / "user" / "naive_loop.py"
    script.parent.mkdir(parents=True)
    script.write_text((EXAMPLES / "naive_loop.py").read_text())
    store = RunStore(tmp_path / "home")
    base: RunDir = store.new_run(str(script), run_id="base")
    report = Report(
        run_id="base",
        script=str(script),
        created="c",
        status="complete",
        throughput=_banded(10.0),
        facts=Facts(loop_kind="custom", step_kind="eager", input_kind="python_generator"),
    )
    cfg = LoopConfig(script=script, only=only, final_profile=False, confirm_rounds=rounds)
    return ScriptedLoop(store, base, report, cfg, rates=rates, **kw)


def test_one_clear_round_confirms_and_the_latest_measurement_is_the_next_reference(tmp_path: Path) -> None:
    rates = {
        "tf-function": 13.0,  # 1.3x: not decisive
        "tf-function: reference, paired round 1": 8.0,  # the machine slowed down: both sides alike
        "tf-function: paired round 1": 10.4,  # 1.3x back to back: clearly a gain, no second round
        "generator-prefetch": 41.6,  # 4x over tf-function's latest 10.4: decisive on its one run
        "combined": 40.0,
    }
    events = []
    loop = _scripted(tmp_path, rates, ["tf-function", "generator-prefetch"], on_event=events.append)
    summary = loop.run()
    assert loop.measured == [
        "tf-function",
        "tf-function: reference, paired round 1",
        "tf-function: paired round 1",
        "generator-prefetch",
        "combined: tf-function, generator-prefetch",
    ]
    tf_fn, gen = summary.trials
    assert tf_fn.status == "kept" and tf_fn.paired_ratios == [pytest.approx(1.3)]
    assert len(tf_fn.paired_run_ids) == 2 and tf_fn.run_id not in tf_fn.paired_run_ids
    assert all(loop.store.get(r).meta["parent"] == "base" for r in tf_fn.paired_run_ids)
    assert tf_fn.reason.startswith("faster in paired round: 1.30x")
    assert (
        gen.status == "kept" and gen.paired_ratios == [] and "332.8 → 1331.2 examples/s (4.00x" in gen.reason
    )
    assert summary.confirm_rounds == 2 and summary.kept == ["tf-function", "generator-prefetch"]
    assert any(e.kind == "trial" and "paired round 1/2, reference" in e.message for e in events)
    # the terminal table shows the paired figures
    console = Console(record=True, width=220)
    console.print(fix_table(loop.baseline.report()))
    text = console.export_text()
    assert "paired 1.30x" in text and "their median decided" in text


def test_two_rounds_alternate_the_order_and_a_drift_win_is_rolled_back(tmp_path: Path) -> None:
    rates = {
        "tf-function": 14.0,  # 1.4x on one run, minutes after the baseline
        "tf-function: reference, paired round 1": 10.0,
        "tf-function: paired round 1": 10.1,  # 1.01x: not clear, a second round, trial first
        "tf-function: paired round 2": 8.8,
        "tf-function: reference, paired round 2": 9.0,  # 0.98x
        "generator-prefetch": 36.0,  # 4x over the reference's latest 9.0
        "combined": 36.0,
    }
    loop = _scripted(tmp_path, rates, ["tf-function", "generator-prefetch"])
    summary = loop.run()
    assert loop.measured[:5] == [
        "tf-function",
        "tf-function: reference, paired round 1",
        "tf-function: paired round 1",
        "tf-function: paired round 2",
        "tf-function: reference, paired round 2",
    ]
    tf_fn, gen = summary.trials
    assert tf_fn.status == "rejected" and tf_fn.paired_ratios == [
        pytest.approx(1.01),
        pytest.approx(0.9778, abs=1e-4),
    ]
    assert len(tf_fn.paired_run_ids) == 4
    assert tf_fn.reason.startswith("not faster in paired rounds: 1.01x, 0.98x → median 0.994x")
    assert gen.status == "kept" and "288.0 → 1152.0 examples/s" in gen.reason  # vs the latest reference
    assert summary.kept == ["generator-prefetch"]


def test_rounds_zero_decides_every_trial_on_its_one_run(tmp_path: Path) -> None:
    loop = _scripted(tmp_path, {"tf-function": 13.0, "combined": 13.0}, ["tf-function"], rounds=0)
    summary = loop.run()
    assert loop.measured == ["tf-function", "combined: tf-function"]
    (trial,) = summary.trials
    assert (
        trial.status == "kept"
        and trial.paired_ratios == []
        and trial.reason.startswith("faster: 320.0 → 416.0")
    )
    assert summary.confirm_rounds == 0


def test_a_paired_run_that_fails_fails_the_trial_and_a_failed_reference_leaves_the_single_run(
    tmp_path: Path,
) -> None:
    rates = {"tf-function": 13.0, "tf-function: reference, paired round 1": 10.0}
    loop = _scripted(tmp_path, rates, ["tf-function"], fail={"tf-function: paired round 1"})
    (trial,) = loop.run().trials
    assert trial.status == "failed" and trial.error == "boom" and len(trial.paired_run_ids) == 2
    assert trial.reason == "its run in paired round 1 failed, rolled back: exit 1"
    rates = {"tf-function": 13.0, "combined": 13.0}
    loop = _scripted(tmp_path / "2", rates, ["tf-function"], fail={"tf-function: reference, paired round 1"})
    (trial,) = loop.run().trials
    assert loop.measured == ["tf-function", "tf-function: reference, paired round 1", "combined: tf-function"]
    assert trial.status == "kept" and trial.reason.startswith("faster: 320.0 → 416.0")
    assert (
        "the reference's re-run in paired round 1 measured nothing (exit 1): decided on the single run"
        in trial.reason
    )


def test_a_cold_cache_is_rejected_without_paired_rounds(tmp_path: Path) -> None:
    loop = _scripted(tmp_path, {"tf-function": 13.0}, ["tf-function"], cold={"tf-function"})
    (trial,) = loop.run().trials
    assert loop.measured == ["tf-function"]
    assert trial.status == "rejected" and trial.reason == MEMO_COLD and trial.throughput is not None


def test_each_batch_scale_variant_is_its_own_row_and_a_failed_bigger_batch_keeps_the_smaller(
    tmp_path: Path,
) -> None:
    rates = {"batch-scale ×2": 30.0, "combined": 30.0}  # 3x: decisive on its one run
    loop = _scripted(tmp_path, rates, ["batch-scale"], fail={"batch-scale ×4"})
    summary = loop.run()
    assert loop.measured == ["batch-scale ×2", "batch-scale ×4", "combined: batch-scale ×2"]
    two, four = summary.trials
    assert (two.name, two.status) == ("batch-scale ×2", "kept")
    assert (four.name, four.status, four.fix_id) == ("batch-scale ×4", "failed", "batch-scale")
    assert summary.kept == ["batch-scale ×2"]
    console = Console(record=True, width=220)
    console.print(fix_table(loop.baseline.report()))
    text = console.export_text()
    assert "batch-scale ×2" in text and "batch-scale ×4" in text


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


def test_output_of_a_run_that_went_further_may_add_ordinary_lines_not_trouble() -> None:
    """A trial whose warm-up waited a whole epoch for its cache (or that trains on bigger batches)
    reaches the end of an epoch the reference never reached: its epoch line is expected, its
    warnings are not, and lines it no longer prints still count."""
    before = "step 10: loss 1.23\nstep 20: loss 1.1\n"
    longer = "step 10: loss 1.2\nstep 20: loss 1.1\nepoch 1: loss 0.9 (128 steps, 38.1 steps/s)\nstep 130: loss 0.5\n"
    assert output_change(before, longer, further=True) is None
    why = output_change(before, longer)
    assert why is not None and "new '" in why  # without further: a change, as before
    trouble = longer + "WARN: 5 out of the last 5 calls triggered tf.function retracing\n"
    assert "triggered tf.function retrac" in (output_change(before, trouble, further=True) or "")
    assert "loss is nan" in (output_change(before, longer + "loss is nan\n", further=True) or "")
    fewer = "epoch 1: loss 0.9 (128 steps, 38.1 steps/s)\n"
    assert "fewer 'step #: loss #'" in (output_change(before, fewer, further=True) or "")


def test_losses_compare_across_shifted_windows_warm_up_included() -> None:
    """The reference timed steps 6-40; a trial that warmed up for 131 steps still has losses for
    steps 0-40 (its warm-up): the trajectory is compared there, not skipped."""
    ref = [s.model_copy(update={"window": "warmup" if s.index < 6 else "timing"}) for s in _steps([2.0] * 40)]
    trial = [
        s.model_copy(update={"window": "warmup" if s.index < 131 else "timing"}) for s in _steps([9.0] * 160)
    ]
    assert "off the baseline" in (loss_problem(ref, trial, scaled=False) or "")
    same = [s.model_copy(update={"loss": 2.05}) for s in trial]
    assert loss_problem(ref, same, scaled=False) is None


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
