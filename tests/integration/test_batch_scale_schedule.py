"""batch-scale on a LearningRateSchedule of the script's own (TensorFlow's Transformer tutorial's
``CustomSchedule``): the patched script, run with real TensorFlow, trains on a rate that is the original
schedule run twice as far per step, scaled by √2 (Adam), and its optimizer's config still serialises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tfdoctor.fixes import FixContext, Hardware, get_fix

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import json
    import tensorflow as tf

    BATCH_SIZE = 64


    class CustomSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
        def __init__(self, d_model, warmup_steps=4000):
            super().__init__()
            self.d_model = tf.cast(d_model, tf.float32)
            self.warmup_steps = warmup_steps

        def __call__(self, step):
            step = tf.cast(step, tf.float32)
            arg1 = tf.math.rsqrt(step)
            arg2 = step * (self.warmup_steps**-1.5)
            return tf.math.rsqrt(self.d_model) * tf.math.minimum(arg1, arg2)

        def get_config(self):
            return {"d_model": 128, "warmup_steps": self.warmup_steps}


    learning_rate = CustomSchedule(128)
    optimizer = tf.keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    steps = [1, 100, 2000, 3000, 8000]
    original = CustomSchedule(128)
    print("RATES " + json.dumps({
        "used": [float(learning_rate(tf.constant(s))) for s in steps],
        "original_at_2x": [float(original(tf.constant(2 * s))) for s in steps],
        "config": sorted(optimizer.get_config()),
    }))
    """
)


def test_the_wrapped_schedule_is_the_original_per_example_scaled_by_the_rule(tmp_path):
    out = get_fix("batch-scale").apply(
        SCRIPT, FixContext(hardware=Hardware(cpu_bf16=True), params={"factor": "2"})
    )
    assert out.changed and "NOT SCALED" not in out.reason, out.reason
    script = tmp_path / "train.py"
    script.write_text(out.code)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RATES "))
    got = json.loads(line.removeprefix("RATES "))
    assert got["used"] == pytest.approx([2**0.5 * r for r in got["original_at_2x"]], rel=1e-5)
    assert "learning_rate" in got["config"]  # the wrapper serialises (get_config) inside the optimizer's
