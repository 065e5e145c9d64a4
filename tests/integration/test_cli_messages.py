"""``tfdoctor profile`` on a script that fails with Keras's multi-line error: the one-line summary is the
exception's type and first line, and the user's frame is shown instead of the message's last lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import numpy as np
import tensorflow as tf
import keras

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
opt = keras.optimizers.SGD(0.01)
x = np.ones((8, 4), np.float32)


def train_step(batch):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(batch) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))


for i in range(100):
    train_step(x if i < 4 else np.ones((8, 5), np.float32))
"""


def test_failure_message_is_type_first_line_and_the_users_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfdoctor",
            "profile",
            str(script),
            "--steps",
            "20",
            "--home",
            str(tmp_path / "h"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 5, proc.stderr[-3000:]
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("tfdoctor: "))
    assert line.startswith("tfdoctor: the script failed after 4 steps: ValueError: "), line
    assert "(at train.py:13 in train_step)" in line
    assert "Arguments received" not in line
    # the user's frame and its code, not 8 lines of the message's argument dump
    assert "train.py:13 in train_step" in proc.stderr
    assert "loss = tf.reduce_mean(model(batch) ** 2)" in proc.stderr
    assert "last words" not in proc.stderr
