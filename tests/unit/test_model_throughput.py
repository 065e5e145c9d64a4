import pytest

from tfdoctor.model import StepTiming, Throughput


def _steps(durs_ms, examples=None):
    out, t = [], 0
    for i, d in enumerate(durs_ms):
        ex = examples[i] if examples else None
        out.append(StepTiming(index=i, window="timing", start_ns=t, end_ns=t + int(d * 1e6), examples=ex))
        t += int(d * 1e6)
    return out


def test_median_of_sub_windows_and_spread():
    tp = Throughput.from_steps(_steps([10] * 8 + [20] * 2), batch_size=32, n_windows=5)
    assert tp.windows == pytest.approx([100, 100, 100, 100, 50])
    assert tp.steps_per_s == pytest.approx(100)
    assert tp.examples_per_s == pytest.approx(3200)
    assert tp.spread == pytest.approx(0.5)
    assert tp.n_steps == 10


def test_examples_counted_by_the_harness_win_over_the_batch_fact():
    tp = Throughput.from_steps(_steps([10] * 10, examples=[16, 32] * 5), batch_size=32)
    assert tp.examples_per_s == pytest.approx(100 * 24)


def test_no_batch_size_means_steps_only():
    tp = Throughput.from_steps(_steps([10] * 6), batch_size=None)
    assert tp.examples_per_s is None and tp.steps_per_s == pytest.approx(100)
    assert Throughput.from_steps([], batch_size=8) is None


def test_a_step_of_several_batches_says_how_many():
    """Keras compile(steps_per_execution=8): one measured step is one call of 8 batches."""
    tp = Throughput.from_steps(_steps([80] * 6, examples=[80] * 6), batch_size=10, steps_per_execution=8)
    assert tp.batches_per_step == 8 and tp.steps_per_s == pytest.approx(12.5)
    assert tp.examples_per_s == pytest.approx(1000)
    one = Throughput.from_steps(_steps([10] * 6), batch_size=10, steps_per_execution=1)
    assert one.batches_per_step is None
