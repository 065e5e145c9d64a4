"""Record Keras ``TensorBoard(profile_batch=2)`` profiles: one profiled step each, no tfdoctor involved.

The most common way people record a TensorFlow profile: ``model.fit(..., callbacks=[TensorBoard(log_dir,
profile_batch=2)])``. Each scenario writes ``sample_traces/keras-<scenario>/logdir/`` (a TensorBoard logdir
with ``plugins/profile/<run>/<host>.xplane.pb``) and ``facts.json`` (what the harness would record: the dtype
policy, the CPU flags that decide bf16 advice). Small models and few batches keep each trace well under 1 MB.

    python sample_traces/keras-profile-batch/record.py [conv2d dense conv2d-bf16 ...]   # default: all

Recorded on TF 2.21 CPU, Keras 3, oneDNN (op kernels named ``_MklNativeFusedConv2D``, ``_MklFusedMatMul``...).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

ROOT = Path(__file__).resolve().parents[1]


def _cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    return " ".join(sorted(set(re.findall(r"\b(avx512_bf16|amx_bf16|amx_tile|avx512f|avx2|fma)\b", text))))


def _conv2d() -> tf.keras.Model:
    return tf.keras.Sequential(
        [
            tf.keras.Input((32, 32, 3)),
            tf.keras.layers.Conv2D(32, 3, activation="relu", padding="same"),
            tf.keras.layers.Conv2D(32, 3, activation="relu", padding="same"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(64, 3, activation="relu", padding="same"),
            tf.keras.layers.GlobalAveragePooling2D(),
            tf.keras.layers.Dense(10, dtype="float32"),
        ]
    )


def _dense() -> tf.keras.Model:
    return tf.keras.Sequential(
        [
            tf.keras.Input((256,)),
            tf.keras.layers.Dense(512, activation="relu"),
            tf.keras.layers.Dense(512, activation="relu"),
            tf.keras.layers.Dense(10, dtype="float32"),
        ]
    )


SCENARIOS = {
    # name: (model, input shape, batch, policy)
    "conv2d": (_conv2d, (32, 32, 3), 64, "float32"),
    "dense": (_dense, (256,), 128, "float32"),
    "conv2d-bf16": (_conv2d, (32, 32, 3), 64, "mixed_bfloat16"),
    # a GPU script's policy on a CPU (the Keras mixed precision guide run on a laptop): 4x slower here
    "conv2d-fp16": (_conv2d, (32, 32, 3), 64, "mixed_float16"),
}


def record(name: str) -> Path:
    build, shape, batch, policy = SCENARIOS[name]
    tf.keras.mixed_precision.set_global_policy(policy)
    out = ROOT / f"keras-{name}"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rng = np.random.default_rng(0)
    n = batch * 4  # 4 batches: the profile of batch 2 and a few around it
    x = rng.standard_normal((n, *shape)).astype("float32")
    y = rng.integers(0, 10, n)
    model = build()
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    logdir = out / "logdir"
    model.fit(
        x,
        y,
        batch_size=batch,
        epochs=1,
        verbose=0,
        callbacks=[tf.keras.callbacks.TensorBoard(str(logdir), profile_batch=2, write_graph=False)],
    )
    # keep the profile only: the event files of the scalars are not what this fixture is about
    for p in logdir.rglob("*"):
        if p.is_file() and "plugins" not in p.parts:
            p.unlink()
    facts = {
        "tf_version": tf.__version__,
        "keras_version": tf.keras.__version__ if hasattr(tf.keras, "__version__") else None,
        "python_version": sys.version.split()[0],
        "devices": [{"name": "/physical_device:CPU:0", "kind": "CPU"}],
        "dtype_policy": policy,
        "batch_size": batch,
        "num_replicas": 1,
        "extra": {
            "cpu_count": str(os.cpu_count()),
            "cpu_flags": _cpu_flags(),
            "recorded_by": "sample_traces/keras-profile-batch/record.py",
        },
    }
    (out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")
    tf.keras.mixed_precision.set_global_policy("float32")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out.relative_to(ROOT.parent)}: {size / 1024:.0f} KiB", flush=True)
    return out


if __name__ == "__main__":
    for name in sys.argv[1:] or list(SCENARIOS):
        record(name)
