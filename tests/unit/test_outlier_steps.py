"""Outlier steps in a real trace: keras-io's anomaly detection (``fit`` on arrays, 27 batches an epoch)
profiled over an epoch boundary (steps 24-33). The first step of epoch 2 (27) took 0.69 s against ~60 ms:
0.59 s of it in ``TFE_DeleteTensorHandle``, the old epoch's tf.data iterator freed while TensorFlow waits
for its autotuning thread (seen with gdb; the script alone pauses the same)."""

from __future__ import annotations

from pathlib import Path

from tfdoctor.analysis import analyze
from tfdoctor.rundir import RunDir
from tfdoctor.trace import load

STALL = Path(__file__).resolve().parents[2] / "sample_traces" / "fit-epoch-iterator-stall"


def test_an_epoch_start_held_by_the_old_iterator_is_left_out_of_the_shares_and_explained():
    run = RunDir(STALL)
    steps = run.steps()
    assert [s.index for s in steps if s.window == "profile"] == list(range(24, 34))
    a = analyze(load(run.logdir), steps)
    assert a.breakdown is not None and a.breakdown.source == "tfdoctor markers"
    assert [s.step for s in a.breakdown.steps] == [n for n in range(24, 34) if n != 27]
    assert max(s.total_ms for s in a.breakdown.steps) < 200
    note = next(n for n in a.breakdown.notes if "left out of the breakdown" in n)
    assert note.startswith("1 of 10 profiled steps left out of the breakdown"), note
    assert (
        "step 27 took 0.69 s (11x the median, 0.59 s of it in TFE_DeleteTensorHandle: a tensor freed" in note
    )
    assert "TensorFlow's own pause" in note
