"""The loss the hooks record per step: what the fix loop's loss check reads (a step without one is
'no loss could be read', and fixes that change the training are then not kept)."""

from __future__ import annotations

import numpy as np

from tfdoctor.capture.child.hooks import returns_nothing, scalar_loss


def test_loss_key_wins_and_metrics_are_ignored():
    assert scalar_loss({"loss": np.float32(2.0), "accuracy": 0.5}) == 2.0
    assert scalar_loss({"accuracy": 0.5}) is None


def test_named_losses_without_a_loss_key_are_summed():
    # keras-io's GAN train_step returns {"d_loss": ..., "g_loss": ...}; the VAE's adds kl/reconstruction
    assert scalar_loss({"d_loss": 0.5, "g_loss": np.float32(1.25)}) == 1.75
    assert scalar_loss({"loss": 3.0, "kl_loss": 1.0, "reconstruction_loss": 2.0}) == 3.0
    assert scalar_loss({"d_loss": np.array([0.1, 0.2]), "g_loss": 1.0}) is None  # not a scalar: not guessed


def test_scalars_and_tuples():
    assert scalar_loss(np.float64(0.25)) == 0.25
    assert scalar_loss((np.zeros(3), np.float32(1.5))) == 1.5
    assert scalar_loss(np.zeros(4)) is None


def _dcgan_step(images):  # TF's DCGAN tutorial: the step returns nothing
    def helper():
        return images  # a nested function's return is not the step's

    for _ in range(2):
        if images is None:
            return
    helper()


class _Module:
    def train(self, x):  # a tf.Module's exported train signature: returns its loss
        if x:
            return {"loss": x}
        return None


def test_which_steps_return_nothing():
    """Only a step with no ``return <value>`` has its gradient targets kept through its graph (the
    capture adds one assign to it); one that returns a value is read from what it returns, and its
    graph stays as written."""
    assert returns_nothing(_dcgan_step)
    assert not returns_nothing(_Module.train)
    assert not returns_nothing(lambda x: x)  # no readable def of its own: not touched
    assert not returns_nothing(len)  # no Python source
