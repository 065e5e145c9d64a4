"""Which GPU kernel names mean which precision: one matmul / convolution per dtype, each inside its own
host annotation (``dtype:<label>``), in one profile. tfdoctor reads the 16-bit share of kernel time from
kernel names (analysis/details.py); cuBLAS 12.8+ on Hopper names its GEMMs ``nvjet_sm90_<abc>_...`` with
no dtype spelled out, so the names are taken from what ran, not guessed.

    python sample_traces/gpu-jax/kernel_dtypes.py OUTDIR     # on a GPU: OUTDIR/kernel_dtypes.xplane.pb

tests/unit/test_gpu_traces.py maps each kernel in that trace to its annotation and checks the reader's
precision classes against it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    import jax
    import jax.numpy as jnp
    from jax import lax

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    key = jax.random.PRNGKey(0)
    n = 512 if "--small" in sys.argv else 4096

    def mm(dtype, precision=None, out_dtype=None):
        a = jax.random.normal(key, (n, n), jnp.float32).astype(dtype)
        f = jax.jit(lambda x, y: jnp.matmul(x, y, precision=precision, preferred_element_type=out_dtype))
        return lambda: f(a, a)

    def conv(dtype):
        x = jax.random.normal(key, (64, 56, 56, 128), jnp.float32).astype(dtype)
        w = jax.random.normal(key, (3, 3, 128, 128), jnp.float32).astype(dtype)
        f = jax.jit(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
        return lambda: f(x, w)

    cases = {
        "fp32-default": mm(jnp.float32),
        "fp32-highest": mm(jnp.float32, precision=lax.Precision.HIGHEST),
        "bf16": mm(jnp.bfloat16),
        "fp16": mm(jnp.float16),
        "bf16-in-fp32-out": mm(jnp.bfloat16, out_dtype=jnp.float32),
        "fp16-in-fp32-out": mm(jnp.float16, out_dtype=jnp.float32),
        "conv-fp32": conv(jnp.float32),
        "conv-bf16": conv(jnp.bfloat16),
        "conv-fp16": conv(jnp.float16),
    }
    for fn in cases.values():  # compile outside the trace
        fn().block_until_ready()
    logdir = Path(tempfile.mkdtemp(prefix="kernel-dtypes-"))
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    jax.profiler.start_trace(str(logdir), profiler_options=options)
    for label, fn in cases.items():
        with jax.profiler.TraceAnnotation(f"dtype:{label}"):
            for _ in range(2):
                fn().block_until_ready()
        time.sleep(0.005)  # keep each label's kernels apart in time
    jax.profiler.stop_trace()
    (pb,) = logdir.glob("plugins/profile/*/*.xplane.pb")
    shutil.copy(pb, out / "kernel_dtypes.xplane.pb")
    print(f"{len(cases)} cases, trace {pb.stat().st_size / 1e6:.2f} MB on {jax.devices()[0].device_kind}")


if __name__ == "__main__":
    main()
