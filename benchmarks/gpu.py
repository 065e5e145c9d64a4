"""Figure 5: the GPU figures. On a machine with a GPU, runs the perturbation and --fix cost
benchmarks there and records them in their own ``gpu_*`` sections of docs/benchmarks.md (the CPU
tables stay the default); on a CPU-only machine, writes the section that says how to produce them
(never over GPU figures already recorded from another machine).

    python benchmarks/gpu.py           # detect; run on the GPU or document how to
    python benchmarks/gpu.py --quick   # detect and print only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DOC, say, update_section, versions

HERE = Path(__file__).resolve().parent

HOW_TO = """## 5. GPU figures

**Not measured yet: no GPU with TensorFlow on the machines these figures come from.** The tables above
are CPU figures. The one GPU this project was lent (an H100, 2026-11-27, 15 minutes) had no TensorFlow, and
TensorFlow's wheel with its CUDA libraries is many times what can be carried there; its real traces,
recorded with JAX's profiler (the same XPlane format), are `sample_traces/gpu-jax-*`: the reader's steps,
copies and kernel precision are tested on them (`tests/unit/test_gpu_traces.py`), but they are no
measurement of tfdoctor on a TensorFlow job. To record the GPU figures, on a machine with an NVIDIA GPU:

```bash
pip install -e '.[and-cuda,dev]'        # TensorFlow with CUDA
python -c "import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))"   # must list one
python benchmarks/gpu.py                 # perturbation + --fix cost on the GPU, ~15 minutes
python benchmarks/fix_speedup.py --no-doc   # optional: the auto-fix speedup table on the GPU
```

`gpu.py` writes its results into `gpu_perturbation` and `gpu_fix_cost` sections below this one, with
the date, the GPU model and the versions; the CPU tables are left as they are. Trace analysis speed
(figure 2) does not depend on where the trace was recorded, only on its size."""


def gpus() -> list[str]:
    code = (
        "import json, tensorflow as tf\n"
        "d = tf.config.list_physical_devices('GPU')\n"
        "print(json.dumps([tf.config.experimental.get_device_details(x).get('device_name', x.name) for x in d]))"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"cannot ask TensorFlow for GPUs:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description="Figure 5: GPU figures")
    ap.add_argument("--quick", action="store_true", help="detect and print only")
    args = ap.parse_args()
    found = gpus()
    say(f"GPUs: {', '.join(found) if found else 'none'}")
    if args.quick:
        return
    if not found:
        text = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
        if "<!-- bench:gpu_perturbation -->" in text:
            say("no GPU here; GPU figures recorded elsewhere are kept")
            return
        update_section("gpu", HOW_TO)
        say("no GPU here: docs/benchmarks.md says how to measure on one")
        return
    for script, section in (("perturbation.py", "gpu_perturbation"), ("fix_cost.py", "gpu_fix_cost")):
        subprocess.run([sys.executable, str(HERE / script), "--section", section], check=True)
    update_section(
        "gpu",
        "## 5. GPU figures\n\n"
        + f"{versions()} GPU: {', '.join(found)}. Same scripts as figures 3 and 4, run on the GPU:"
        " see the `gpu_perturbation` and `gpu_fix_cost` sections below.",
    )


if __name__ == "__main__":
    main()
