"""Training loops inside one tf.function call (real TensorFlow runs of tests/data/shapes scripts):
TensorFlow's tf.function guide trains a whole epoch as ``for x, y in dataset:`` inside the function,
the distributed-training tutorial runs ``for _ in tf.range(steps): step_fn(next(iterator))``. A step
of tfdoctor's is one call; its examples are every batch the call ran (counted from the optimizer's
``iterations``), and on a CPU the epoch loop's op kernels, which tf.data's threads run, are compute.
Before: 16x and 64x too few examples/s, and "Dispatch-bound: 100 %" for the epoch loop."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.model import Report
from tfdoctor.session.build import build_report
from tfdoctor.store import RunStore

SHAPES = Path(__file__).resolve().parents[1] / "data" / "shapes"


def _profile(tfd_home: Path, folder: Path, name: str, steps: int, profile: bool) -> Report:
    folder.mkdir()
    script = folder / name
    shutil.copy(SHAPES / name, script)
    run = RunStore(tfd_home).new_run(str(script), [])
    cfg = CaptureConfig(
        script=script,
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        steps=steps,
        warmup=3,
        profile_steps=3 if profile else None,
        profile=profile,
        timeout_s=600,
    )
    res = run_capture(cfg, run)
    assert res.ok, res.error
    return build_report(run)


def test_an_epoch_in_one_tf_function_counts_its_batches_and_its_kernels(
    tfd_home: Path, tmp_path: Path
) -> None:
    report = _profile(tfd_home, tmp_path / "epoch", "tf_function_epoch.py", steps=12, profile=True)
    facts = report.facts
    # 4096 rows in batches of 64: 64 optimizer updates a call
    assert (facts.steps_per_execution, facts.batch_size, facts.input_kind) == (64, 64, "tf.data"), facts
    assert facts.loop_kind == "custom" and facts.step_kind == "tf.function", facts
    timed = [s for s in report.steps if s.window == "timing"]
    assert timed and all(s.examples == 64 * 64 for s in timed), [s.examples for s in timed]
    assert all(s.loss is not None and math.isfinite(s.loss) for s in timed), [s.loss for s in timed]
    t = report.throughput
    assert t is not None and t.batches_per_step == 64
    assert t.examples_per_s is not None and abs(t.examples_per_s / (t.steps_per_s * 4096) - 1) < 0.01, t
    # the loop's body runs on tf.data's threads: its kernels are the step's compute, the scan's fetch of
    # each batch its input wait; the caller's thread only waits in the function (was: dispatch 100 %)
    # (profiled steps: the profiler's cost on the loop's ~3,000 op events a step, 1.7x here, lands in the
    # executor's gaps between them, dispatch; compute measured 0.14-0.21 of the profiled step, before 0.001)
    share = report.breakdown.share
    assert share["device_compute"] > 0.08, share
    assert share["input_wait"] > 0.0, share
    assert share["dispatch"] < 0.85, share


def test_several_steps_a_call_over_an_iterator_count_every_batch(tfd_home: Path, tmp_path: Path) -> None:
    report = _profile(tfd_home, tmp_path / "range", "multi_step_range.py", steps=24, profile=False)
    facts = report.facts
    assert (facts.steps_per_execution, facts.batch_size, facts.input_kind) == (16, 64, "tf.data"), facts
    timed = [s for s in report.steps if s.window == "timing"]
    assert timed and all(s.examples == 16 * 64 for s in timed), [s.examples for s in timed]
    t = report.throughput
    assert t is not None and t.batches_per_step == 16
    assert t.examples_per_s is not None and abs(t.examples_per_s / (t.steps_per_s * 1024) - 1) < 0.01, t
    # the step's loss: the Mean metric it updates, its 16 updates' share of each call
    assert all(s.loss is not None and 0.0 < s.loss < 10.0 for s in timed), [s.loss for s in timed]


def test_a_script_ending_before_the_profile_window_is_profiled_again_to_its_length(
    tfd_home: Path, tmp_path: Path, capsys
) -> None:
    """tf_function_epoch.py trains 20 epochs, a step each, against the 40 steps planned without
    ``--steps``: the run ended before its profile window with no trace ("try --steps 20"). The profile
    command runs it again, planned to the steps it has, into the same run; a ``--steps`` the user gave
    is left as given."""
    from tfdoctor.cli import main

    script = tmp_path / "tf_function_epoch.py"
    shutil.copy(SHAPES / script.name, script)
    assert main(["profile", str(script), "--run-id", "short", "--timeout", "600"]) == 0
    err = " ".join(capsys.readouterr().err.split())  # the console wraps its notes
    assert "the script ended by itself after 20 of 40 steps, before the profile window: run again" in err, err
    run = RunStore(tfd_home).get("short")
    report = run.report()
    assert report is not None and run.trace_files() and report.breakdown is not None
    # the second run: the first one's warm-up (fixed), the rest of the 20 steps timed and profiled
    windows = run.capture_record().windows
    assert sum(windows.values()) == 20 and windows["profile"] >= 2, windows
    profiled = [s for s in report.steps if s.window == "profile"]
    assert len(profiled) == windows["profile"], [s.window for s in report.steps]
    # --steps given: one run, as asked, with the hint
    assert main(["profile", str(script), "--run-id", "given", "--steps", "30", "--timeout", "600"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "run again" not in err and "try --steps 20" in err, err
