"""Where a Keras epoch begins on a real run: the harness marks each epoch's first step (its iterator is
made anew: Throughput.from_steps leaves such a step out where it stalled) and begins it with the epoch,
what ran between the epochs in no step. On a dataset of unknown cardinality, Keras learns an epoch's end
inside a batch it began (the iterator ran out): that batch's compute start had kept the next epoch's
first step from beginning with its epoch, and an epoch-end callback's 0.4 s counted as that step's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.store import RunStore

pytestmark = pytest.mark.integration
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "unknown_cardinality_fit.py"


def test_each_epochs_first_step_is_marked_and_begins_with_its_epoch(tfd_home):
    run = RunStore(tfd_home).new_run(str(SCRIPT), [])
    cfg = CaptureConfig(
        script=SCRIPT,
        args=[],
        steps=16,
        warmup=3,
        profile=False,
        timeout_s=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    res = run_capture(cfg, run)
    assert res.ok, (res.message, res.error, res.stderr_tail)
    steps = sorted(res.steps, key=lambda s: s.index)
    assert len(steps) >= 13
    assert [s.index for s in steps if s.epoch_start] == [i for i in (0, 6, 12) if i < len(steps)]
    for s in steps:
        if s.epoch_start and s.index > 0:
            before = steps[s.index - 1]
            # the callback's sleep lies between the two steps (the step begins after it); the step itself
            # may still wait for the old iterator's delete, TensorFlow's own pause at an epoch's start
            assert s.start_ns - before.end_ns >= 0.35e9, (before, s)
