"""The hooks' per-step shortcuts (a batch's size read from its first item, a scalar told by its rank, the
process id kept across a fork) answer what the general code answers: they run once a step in place,
where every line costs several times what it costs warm (docs/benchmarks.md, perturbation)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tfdoctor.capture.child.clock import StepClock, Windows
from tfdoctor.capture.child.hooks import Tracker, _is_scalar, first_dim, loss_parts, read_parts, scalar_loss


class _Shaped:
    """An object with a shape and no rank (a TensorSpec-like value): the general path reads it."""

    def __init__(self, *dims):
        self.shape = dims


class PerReplica:  # named as tf.distribute's: its parts are one worker's batch
    def __init__(self, *values):
        self.values = values


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ((np.zeros((32, 4)), np.zeros(32)), 32),
        ([np.zeros((8, 2))], 8),
        (np.zeros((16, 3)), 16),
        # breadth first: the label array is a leaf of the top level, the image inside a dict is not
        (({"image": np.zeros((4, 2))}, np.zeros(64)), 64),
        ({"x": np.zeros((5, 1))}, 5),
        ((_Shaped(None, 3), np.zeros((7, 3))), 7),  # the first leaf's batch is unknown: the next one's
        ((np.float32(1.0), np.zeros((9, 1))), 9),  # a 0-d first item has no batch
        ((PerReplica(np.zeros((2, 1)), np.zeros((3, 1))), np.zeros(5)), 5),  # tf.distribute: all replicas
        (PerReplica(np.zeros((2, 1)), np.zeros((3, 1))), 5),
        ((), None),
        ("text", None),
        ((_Shaped(), _Shaped(None)), None),
    ],
)
def test_first_dim(value, want):
    assert first_dim(value) == want


def test_first_dim_of_tensors():
    tf = pytest.importorskip("tensorflow")
    assert first_dim((tf.zeros((12, 3)), tf.zeros((12,)))) == 12
    assert first_dim(tf.zeros(())) is None


def test_is_scalar_by_rank_and_by_shape():
    assert _is_scalar(1) and _is_scalar(2.5)
    assert _is_scalar(np.float32(1.0)) and _is_scalar(np.array(3.0))
    assert not _is_scalar(np.zeros(1)) and not _is_scalar(np.zeros((2, 2)))
    assert _is_scalar(_Shaped()) and not _is_scalar(_Shaped(3))  # no ndim: its shape tells
    assert not _is_scalar("loss")


def test_a_loss_read_once_is_the_loss_read_twice():
    tf = pytest.importorskip("tensorflow")
    for value in (
        tf.constant(1.5),
        (tf.zeros((3,)), tf.constant(2.0)),
        {"d_loss": 0.5, "g_loss": tf.constant(1.0)},
    ):
        assert read_parts(loss_parts(value)) == scalar_loss(value)
    assert scalar_loss(float("nan")) != scalar_loss(float("nan"))  # a read NaN stays NaN
    assert read_parts(None) is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_is_not_the_main_thread_of_the_script(tmp_path):
    """A tf.data or multiprocessing worker forked from the script keeps the forking thread's id: only the
    process id tells it apart, and the hooks must not count its steps."""
    tracker = Tracker(StepClock(Windows(1, 1, 0), tmp_path / "steps.jsonl"))
    assert tracker.on_main()
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 when it knows it is not the script's main thread
        os._exit(0 if not tracker.on_main() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert tracker.on_main()  # the parent still is


def test_a_call_with_only_tensors_reads_its_batch(tmp_path):
    tf = pytest.importorskip("tensorflow")
    tracker = Tracker(StepClock(Windows(1, 1, 0), tmp_path / "steps.jsonl"))
    tracker.modules.update(tf=tf, tensor_cls=type(tf.constant(0)))
    tracker._note_call_args((tf.zeros((6, 2)), tf.zeros((6,))))
    assert tracker.step_batch == 6
    tracker.step_batch = None
    tracker.modules["dataset_cls"] = tf.data.Dataset
    ds = tf.data.Dataset.from_tensor_slices(np.zeros((10, 2), np.float32)).batch(5)
    tracker._note_call_args((ds, tf.zeros(())))  # a dataset handed to the step: its batch, not a tensor's
    assert tracker.step_batch == 5 and tracker.step_saw_tfdata
