"""Record real GPU xplane traces with JAX's profiler (the same XLA/TSL profiler and XPlane format as
TensorFlow's): the one GPU this project was lent (an H100) had no TensorFlow on it, and none could be
carried there (the TensorFlow and CUDA 12 wheels are many times the 64 MiB a device call may take).

Each scenario is a small MLP training loop (synthetic data) with tfdoctor's own markers, written the way
its harness writes them: ``train`` with ``step_num`` around each step and ``tfdoctor_input`` around the
input fetch. The device plane (``/device:GPU:0``: CUDA kernels, MemcpyH2D) is CUPTI's, as in a TF trace.

    python sample_traces/gpu-jax/record.py OUTDIR [input-bound op-by-op compute-bound]   # default: all

writes ``OUTDIR/<scenario>.xplane.pb`` and ``OUTDIR/<scenario>.facts.json``; ``--install`` puts them under
``sample_traces/gpu-jax-<scenario>/`` (a TensorBoard logdir and ``facts.json``), as the tests read them.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("input-bound", "op-by-op", "compute-bound", "copy-bound")
STEPS = 12  # profiled; a few warm-up steps run first, outside the trace


def _record(scenario: str, out: Path) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    if scenario == "compute-bound":
        batch, width, depth, dtype = 4096, 4096, 4, jnp.bfloat16
    elif scenario == "copy-bound":
        batch, width, depth, dtype = 65536, 256, 2, jnp.float32  # 64 MiB of features a step
    else:
        batch, width, depth, dtype = 256, 512, 3, jnp.float32
    features, classes = 256, 10
    key = jax.random.PRNGKey(0)
    params = []
    fan_in = features
    for _ in range(depth):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (fan_in, width), dtype) * (1 / fan_in**0.5), jnp.zeros(width, dtype)))
        fan_in = width
    key, sub = jax.random.split(key)
    params.append((jax.random.normal(sub, (fan_in, classes), jnp.float32) * (1 / fan_in**0.5), jnp.zeros(classes)))

    def loss_fn(p, x, y):
        h = x.astype(dtype)
        for w, b in p[:-1]:
            h = jax.nn.gelu(h @ w + b)
        w, b = p[-1]
        logits = h.astype(jnp.float32) @ w + b
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, classes), axis=-1))

    def sgd(p, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        return [(w - 0.01 * gw.astype(w.dtype), b - 0.01 * gb.astype(b.dtype)) for (w, b), (gw, gb) in zip(p, grads)], loss

    if scenario == "op-by-op":
        # no jit: every primitive is dispatched on its own (JAX's eager mode), like an eager TF loop
        step = sgd
    else:
        step = jax.jit(sgd)

    def host_batch():
        # per-example Python work on the host, as a generator feeding numpy would do
        xs = np.empty((batch, features), np.float32)
        for i in range(batch):
            xs[i] = np.tanh(rng.standard_normal(features, dtype=np.float32) * 0.5)
        return xs, rng.integers(0, classes, batch)

    if scenario == "compute-bound":
        x_dev = jax.device_put(rng.standard_normal((batch, features), dtype=np.float32))
        y_dev = jax.device_put(rng.integers(0, classes, batch))

        def fetch():
            return x_dev, y_dev
    elif scenario == "copy-bound":
        # big batches ready in host memory, handed to the step as numpy: the step's call copies them to the
        # GPU (pageable memory), as a TF step fed numpy copies its inputs inside the step
        x_host = rng.standard_normal((batch, features), dtype=np.float32)
        y_host = rng.integers(0, classes, batch)

        def fetch():
            return x_host, y_host
    else:

        def fetch():
            xs, ys = host_batch()
            return jax.device_put(xs), jax.device_put(ys)  # an H2D copy each step

    for _ in range(3):  # warm-up: compile outside the trace
        params, loss = step(params, *fetch())
        loss.block_until_ready()
    logdir = Path(tempfile.mkdtemp(prefix=f"gpu-jax-{scenario}-"))
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # Python frames would make the op-by-op trace tens of MB
    jax.profiler.start_trace(str(logdir), profiler_options=options)
    t0 = time.perf_counter()
    losses = []
    for i in range(STEPS):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            with jax.profiler.TraceAnnotation("tfdoctor_input", step_num=i):
                x, y = fetch()
            params, loss = step(params, x, y)
            losses.append(float(loss))  # the loop reads its loss: the step ends when the device does
    elapsed = time.perf_counter() - t0
    jax.profiler.stop_trace()
    (pb,) = logdir.glob("plugins/profile/*/*.xplane.pb")
    shutil.copy(pb, out / f"{scenario}.xplane.pb")
    dev = jax.devices()[0]
    facts = {
        "python_version": platform.python_version(),
        "devices": [{"name": "/physical_device:GPU:0", "kind": "GPU", "model": dev.device_kind}],
        "loop_kind": "custom",
        "step_kind": "eager" if scenario == "op-by-op" else "tf.function",
        "input_kind": "unknown" if scenario == "compute-bound" else "numpy",
        "batch_size": batch,
        "dtype_policy": "mixed_bfloat16" if dtype == jnp.bfloat16 else "float32",
        "jit_compile": scenario != "op-by-op",
        "extra": {
            "recorded_by": "sample_traces/gpu-jax/record.py",
            "framework": f"jax {jax.__version__} (no TensorFlow on the GPU machine)",
            "gpu": dev.device_kind,
            "scenario": scenario,
            "ms_per_step_wall_clock": f"{elapsed / STEPS * 1e3:.2f}",
            "losses": " ".join(f"{v:.4f}" for v in losses),
        },
    }
    (out / f"{scenario}.facts.json").write_text(json.dumps(facts, indent=1) + "\n")
    print(f"{scenario}: {elapsed / STEPS * 1e3:.2f} ms/step, trace {pb.stat().st_size / 1e6:.2f} MB", flush=True)


def _install(out: Path, scenarios: list[str]) -> None:
    for scenario in scenarios:
        dest = ROOT / "sample_traces" / f"gpu-jax-{scenario}"
        shutil.rmtree(dest, ignore_errors=True)
        run = dest / "logdir" / "plugins" / "profile" / "2026_11_27_gpu"
        run.mkdir(parents=True)
        shutil.copy(out / f"{scenario}.xplane.pb", run / "h100.xplane.pb")
        shutil.copy(out / f"{scenario}.facts.json", dest / "facts.json")
        print(f"installed {dest.relative_to(ROOT)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--install", action="store_true", help="copy OUT's traces into sample_traces/gpu-jax-*/")
    args = ap.parse_args()
    bad = sorted(set(args.scenarios) - set(SCENARIOS))
    if bad:
        sys.exit(f"unknown scenario(s): {', '.join(bad)} (known: {', '.join(SCENARIOS)})")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.install:
        _install(args.out, args.scenarios)
        return
    for scenario in args.scenarios:
        _record(scenario, args.out)


if __name__ == "__main__":
    main()
