"""What the hooks say a loop is fed by, on real TensorFlow runs of the input shapes they used to
misread (issue 13): fit on a keras.utils.PyDataset (its batch size was not seen: no examples/s), and
tf.distribute datasets (their tf.data pipeline was reported as "numpy"). Timing-only captures of a few
steps (no profiler), seconds each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfdoctor.capture.runner import CaptureConfig, CaptureResult, run_capture
from tfdoctor.model import Throughput
from tfdoctor.store import RunStore

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "corpus"
DIST = ROOT / "tests" / "scripts" / "distributed_input.py"
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def capture(tfd_home: Path, script: Path, *args: str) -> CaptureResult:
    run = RunStore(tfd_home).new_run(str(script), list(args))
    cfg = CaptureConfig(
        script=script, args=list(args), steps=8, warmup=3, profile=False, timeout_s=300, env=QUIET
    )
    res = run_capture(cfg, run)
    assert res.ok, (res.message, res.error, res.stderr_tail)
    return res


def test_fit_on_a_pydataset_counts_the_batch_its_getitem_returns(tfd_home):
    res = capture(tfd_home, CORPUS / "pydataset_fit.py", "--epochs", "1")
    f = res.facts
    assert (f.loop_kind, f.input_kind) == ("keras_fit", "python_generator")
    assert f.batch_size == 64  # BATCH_SIZE of the script, as __getitem__ slices it
    assert {s.examples for s in res.steps} == {64}
    tp = Throughput.from_steps([s for s in res.steps if s.window == "timing"], f.batch_size)
    assert tp is not None and tp.examples_per_s == pytest.approx(64 * tp.steps_per_s)


def test_the_tutorials_distribute_datasets_from_function_is_tf_data_with_its_pipeline(tfd_home):
    res = capture(tfd_home, CORPUS / "mirrored_ctl.py", "--epochs", "1")
    f = res.facts
    assert (f.strategy, f.num_replicas, f.input_kind) == ("MirroredStrategy", 1, "tf.data")
    assert [d.op for d in f.dataset] == ["from_tensor_slices", "shard", "shuffle", "map", "batch"]
    assert [d.parallel for d in f.dataset if d.op == "map"] == [False]
    assert f.batch_size == 64  # BATCH_SIZE_PER_REPLICA x 1 replica
    assert int(f.extra["seen_tfdata_next"]) >= 8


@pytest.mark.parametrize(
    "args",
    [
        ("--how", "function"),  # per-replica batches of 8, read in the loop: the step gets 2 x 8
        ("--how", "dataset", "--iterator-in-step"),  # global batches of 16, next() inside the step
    ],
)
def test_two_replicas_a_step_takes_the_global_batch(tfd_home, args):
    res = capture(tfd_home, DIST, *args)
    f = res.facts
    assert (f.strategy, f.num_replicas, f.input_kind) == ("MirroredStrategy", 2, "tf.data")
    assert [d.op for d in f.dataset] == ["from_tensor_slices", "repeat", "map", "batch"]
    assert f.batch_size == 16
    assert {s.examples for s in res.steps} == {16}
