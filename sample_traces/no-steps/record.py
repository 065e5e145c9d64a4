"""Record a trace without training steps: a few eager ops under the plain TF profiler, no step markers,
no tf.function. What ``tfdoctor analyze`` must answer with "no steps found" (TFD001), not a guess.

    python sample_traces/no-steps/record.py      # writes sample_traces/no-steps/logdir (TF 2.21 CPU)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    logdir = HERE / "logdir"
    shutil.rmtree(logdir, ignore_errors=True)
    a = tf.random.normal((64, 64))
    tf.profiler.experimental.start(str(logdir))
    for _ in range(5):
        a = tf.nn.relu(a @ a) / 64.0
    tf.profiler.experimental.stop()
    print(sum(p.stat().st_size for p in logdir.rglob("*") if p.is_file()), "bytes")
