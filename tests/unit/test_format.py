"""The one formatter (tfdoctor.report.format): one figure for one quantity in every face."""

from __future__ import annotations

from tfdoctor.model import FixSummary, Throughput
from tfdoctor.report import format as fmt


def test_ratios_and_intervals() -> None:
    assert fmt.ratio(4.375) == "4.38x" and fmt.ratio(0.981) == "0.981x" and fmt.ratio(1.018) == "1.018x"
    assert fmt.ratio(None) == "n/a" and fmt.ratio(float("inf")) == "∞x"
    assert fmt.ratio_ci(1.29, [1.21, 1.37]) == "1.29x [1.21x, 1.37x]"
    assert fmt.ratio_ci(1.03, (0.99, 1.08)) == "1.030x [0.990x, 1.080x]"  # near the bar: 3 decimals
    assert fmt.ratio_ci(2.0, None) == "2.00x"
    # far below 1: two significant digits, never a bound of "0.00x"
    assert fmt.ratio(0.04) == "0.040x" and fmt.ratio(0.0021) == "0.0021x" and fmt.ratio(0.5) == "0.50x"
    assert fmt.ratio_ci(0.04, [0.002, 0.11]) == "0.0400x [0.0020x, 0.1100x]"


def test_rates_and_noise_are_half_the_range() -> None:
    t = Throughput(
        examples_per_s=1234.5, steps_per_s=38.6, step_ms_median=25.9, windows=[37, 39, 40], spread=0.08
    )
    assert fmt.headline_rate(t) == "1,234 examples/s" and fmt.headline_rate(t, short=True) == "1,234 ex/s"
    assert fmt.rate(12.34, "examples/s") == "12.3 examples/s" and fmt.rate(4.567, "steps/s") == "4.57 steps/s"
    assert fmt.noise(t) == "±4 %"  # spread 8 %: ± half of it
    assert fmt.noise(t.model_copy(update={"windows": []})) == ""


def test_the_fix_headline_says_whether_the_training_changed() -> None:
    same = FixSummary(
        baseline=None,
        kept=["tf-function"],
        combined_speedup=4.38,
        combined_ci=[4.1, 4.7],
        combined_verdict="faster",
    )
    assert fmt.fix_headline(same) == (
        "Combined: 4.38x [4.10x, 4.70x] vs the baseline, side by side; same training, faster (tf-function)."
    )
    changed = same.model_copy(
        update={
            "training_changes": {"batch size": "32 → 64"},
            "kept": ["batch-scale ×2"],
            "combined_verdict": "undecided",
        }
    )
    assert "(not decided: noisy machine); changed batch size 32 → 64 (batch-scale ×2)" in fmt.fix_headline(
        changed
    )
    # the same training, not decided side by side: no claim of "faster"
    undecided = same.model_copy(
        update={"combined_speedup": 0.9, "combined_ci": [0.78, 1.03], "combined_verdict": "undecided"}
    )
    assert fmt.fix_headline(undecided) == (
        "Combined: 0.900x [0.780x, 1.030x] vs the baseline, side by side (not decided: noisy machine); "
        "same training (tf-function)."
    )
    assert fmt.fix_headline(FixSummary(baseline=None)) == "No fix kept."


def test_the_fix_headline_says_when_other_processes_loaded_the_machine() -> None:
    """TensorFlow's CVAE tutorial: a --fix run beside the unit suite kept a prefetch at 1.62x that
    measured 1.02x on the quiet machine minutes later. The runs' outside load is said with the figures."""
    busy = FixSummary(
        baseline=None,
        kept=["tfdata-prefetch"],
        combined_speedup=1.26,
        combined_ci=[1.06, 1.51],
        combined_verdict="faster",
        outside_load=0.48,
        busy_runs=9,
        measured_runs=14,
    )
    assert fmt.fix_headline(busy).endswith(
        "same training, faster (tfdata-prefetch). Other processes kept up to 48 % of the CPUs busy during 9 "
        "of the 14 measured runs: these figures describe a loaded machine; run --fix again on a quiet one to "
        "confirm them."
    )
    assert fmt.fix_headline(
        FixSummary(baseline=None, outside_load=0.5, busy_runs=2, measured_runs=5)
    ).startswith(
        "No fix kept. Other processes kept up to 50 % of the CPUs busy during 2 of the 5 measured runs"
    )
    quiet = busy.model_copy(update={"outside_load": 0.03, "busy_runs": 0})
    assert "Other processes" not in fmt.fix_headline(quiet)


def test_a_rate_of_calls_of_several_batches_says_so() -> None:
    """Beside a baseline of 56 steps/s, a steps-per-execution trial's 7.7 steps/s read as a slowdown; each
    of its steps is 8 batches (its examples/s, the figure compared, is the higher)."""
    from tfdoctor.report.html import fmt_rate
    from tfdoctor.report.terminal import fmt_throughput

    t = Throughput(examples_per_s=618.0, steps_per_s=7.73, step_ms_median=130.9, batches_per_step=8)
    assert fmt_throughput(t) == "618 examples/s · 7.73 steps/s · 130.9 ms/step of 8 batches"
    assert fmt_rate(t) == ("618 ex/s", "130.9 ms/step of 8 batches")
    plain = t.model_copy(update={"batches_per_step": None})
    assert fmt_throughput(plain) == "618 examples/s · 7.73 steps/s · 130.9 ms/step"


def test_the_report_names_the_fit_it_timed_where_the_script_has_several() -> None:
    """keras-io's SimCLR fits a baseline, pre-trains, then fine-tunes: the run times the first fit() it
    reaches, and says which one (a single fit() says nothing)."""
    from tfdoctor.model import Facts, Report, StepTiming

    def report(phases: list[int], script_lines: list[int], sites: dict[int, int]) -> Report:
        steps = [
            StepTiming(index=i, window="timing", start_ns=i, end_ns=i + 1, phase=p)
            for i, p in enumerate(phases)
        ]
        source = {f"fit_phase_{p}": f"/w/train.py:{n}" for p, n in sites.items()}
        facts = Facts(loop_kind="keras_fit", source=source, script_fit_lines=script_lines)
        return Report(run_id="r", script="train.py", created="", status="complete", facts=facts, steps=steps)

    assert fmt.timed_fit(report([1, 1], [160, 279, 301], {1: 160})) == (
        "timed: fit() at line 160, the 1st of 3 in the script"
    )
    assert fmt.timed_fit(report([2], [160, 279, 301], {1: 160, 2: 279})) == (
        "timed: fit() at line 279, the 2nd of 3 in the script"
    )
    assert fmt.timed_fit(report([1, 2], [40, 52], {1: 40, 2: 52})) == "timed: fit() at line 40 and 52"
    assert fmt.timed_fit(report([1], [160], {1: 160})) is None  # one fit()
    assert fmt.timed_fit(report([1], [160, 279], {})) is None  # not known which
    elsewhere = report([1], [160, 279], {1: 160})
    elsewhere.facts.source["fit_phase_1"] = "/w/trainer.py:160"  # a fit() in a module beside the script
    assert fmt.timed_fit(elsewhere) is None


def test_the_fix_headline_says_the_one_off_cost_the_kept_fixes_add_at_the_start() -> None:
    """keras-io's DQN (Breakout): tf.function + XLA gave 5.41x a step; the final state's first step took
    4.4-5.5 s (tracing, XLA compile) against the baseline's 0.6-0.9 s, so a 600-frame run measured
    3.1-4.2x as a whole while frames 300-600 measured 5.9-6.8x. The headline says the one-off and when
    it has paid for itself (extra / (1 - 1 / speed-up) of the original's training)."""
    fx = FixSummary(
        baseline=None,
        kept=["tf-function", "xla-jit"],
        combined_speedup=5.0,
        combined_ci=[4.3, 6.8],
        combined_verdict="faster",
        combined_startup_s=4.8,
    )
    assert fmt.fix_headline(fx).endswith(
        "(tf-function, xla-jit). The kept fixes add a one-off 4.8 s in the first steps (tracing, compiling), "
        "which these figures leave out: it has paid for itself after about 6 s of the original's training."
    )
    # under a second, or nothing gained: no sentence
    assert "one-off" not in fmt.fix_headline(fx.model_copy(update={"combined_startup_s": 0.6}))
    assert "one-off" not in fmt.fix_headline(fx.model_copy(update={"combined_startup_s": None}))
    assert "one-off" not in fmt.fix_headline(
        fx.model_copy(update={"combined_speedup": 0.95, "combined_verdict": "undecided"})
    )
