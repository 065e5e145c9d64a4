"""Real H100 traces (sample_traces/gpu-jax-*, recorded by sample_traces/gpu-jax/record.py and
kernel_dtypes.py with JAX's profiler: the GPU machine had no TensorFlow). The XPlane format, CUPTI's device
plane and tfdoctor's step markers are the same as a TensorFlow run's; what these check is the reader and the
device-side figures on a current GPU: steps, input wait, H2D copies, compute capability, and which kernels
compute in 16-bit (cuBLAS's ``nvjet_sm90_*`` GEMMs spell no dtype)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tfdoctor.analysis import analyze, measured_precision
from tfdoctor.analysis.details import is_16bit_kernel, is_tensor_core_kernel
from tfdoctor.rules import evaluate
from tfdoctor.rules._base import Example
from tfdoctor.rules._examples import load_example
from tfdoctor.trace import load

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
#: the labels kernel_dtypes.py ran each case under, and whether its kernels compute in 16-bit
SIXTEEN_BIT = {
    "fp32-default": False,  # tf32 tensor cores, fp32 storage
    "fp32-highest": False,
    "bf16": True,
    "fp16": True,
    "bf16-in-fp32-out": True,
    "fp16-in-fp32-out": True,
    "conv-fp32": False,
    "conv-bf16": True,
    "conv-fp16": True,
}


def _wall_ms(name: str) -> float:
    facts = json.loads((SAMPLES / name / "facts.json").read_text())
    return float(facts["extra"]["ms_per_step_wall_clock"])


def _kernels_by_label() -> dict[str, list[str]]:
    """Each GEMM / convolution kernel of kernel_dtypes.py's trace under the annotation it ran in."""
    trace = load(SAMPLES / "gpu-jax-kernel-dtypes" / "logdir")
    spans = []
    for plane in trace.host_planes():
        for ln in plane.lines:
            for name, s, d in zip(
                plane.names_of(ln).tolist(), ln.start_ps.tolist(), ln.dur_ps.tolist(), strict=True
            ):
                if str(name).startswith("dtype:"):
                    spans.append((s, s + d, str(name)[len("dtype:") :]))
    out: dict[str, list[str]] = {}
    for plane in trace.device_planes():
        for ln in plane.lines:
            for name, s, d in zip(
                plane.names_of(ln).tolist(), ln.start_ps.tolist(), ln.dur_ps.tolist(), strict=True
            ):
                if d < 20_000_000:  # under 20 us: memsets, transposes, workspace init, not the compute
                    continue
                (label,) = [lab for a, b, lab in spans if a <= s <= b]
                out.setdefault(label, []).append(str(name))
    return out


def test_every_kernel_is_read_at_the_precision_it_ran_in():
    kernels = _kernels_by_label()
    assert set(kernels) == set(SIXTEEN_BIT)
    for label, names in kernels.items():
        assert names, label
        for name in names:
            assert is_16bit_kernel(name) == SIXTEEN_BIT[label], (label, name)
    # cuBLAS 12.8+ on Hopper: the GEMMs are nvjet kernels, their type letters the only dtype
    assert all(n.startswith("nvjet_sm90_t") for n in kernels["bf16"])
    assert all(n.startswith("nvjet_sm90_h") for n in kernels["fp16"])
    # the full-fp32 GEMM runs on CUDA cores (ffma); tf32, bf16, fp16 on tensor cores
    assert not any(is_tensor_core_kernel(n) for n in kernels["fp32-highest"])
    for label in ("fp32-default", "bf16", "fp16", "conv-bf16"):
        assert all(is_tensor_core_kernel(n) for n in kernels[label]), label


@pytest.mark.parametrize(
    "name", ["gpu-jax-input-bound", "gpu-jax-op-by-op", "gpu-jax-compute-bound", "gpu-jax-copy-bound"]
)
def test_steps_and_step_time_match_the_loops_own_clock(name):
    a = analyze(load(SAMPLES / name / "logdir"))
    assert a.steps is not None and a.steps.source == "tfdoctor markers"
    assert len(a.steps) == 12 and np.array_equal(a.steps.numbers, np.arange(12))
    # the loop timed its 12 steps with perf_counter while tracing: the same steps
    assert a.breakdown.avg_step_ms == pytest.approx(_wall_ms(name), rel=0.03)
    d = a.details
    assert d.device_kind == "GPU" and d.n_devices == 1 and d.compute_capability == 9.0


def test_input_bound_run_reads_as_input_bound_with_its_copies():
    a, f = load_example(Example("sample_traces/gpu-jax-input-bound", True))
    findings, verdict = evaluate(a, f)
    assert a.share["input_wait"] >= 0.6 and a.details.device_busy_share < 0.1
    assert a.details.h2d_ms_per_step > 0  # device_put of every batch
    stall = next(x for x in findings if x.rule_id == "TFD101")
    assert stall.severity == "high"
    assert verdict.startswith("Input-bound:")
    # an fp32 model on an H100: the mixed-precision advice, with its evidence
    fp32 = next(x for x in findings if x.rule_id == "TFD402")
    assert "compute-capability 9.0" in fp32.claim


def test_bf16_run_reads_as_16bit_and_is_not_told_to_use_mixed_precision():
    a, f = load_example(Example("sample_traces/gpu-jax-compute-bound", True))
    findings, verdict = evaluate(a, f)
    d = a.details
    # the three big GEMMs (nvjet_sm90_tst/tss) are most of the kernel time; XLA's fusions spell no dtype
    assert 0.6 <= d.fp16_kernel_share < 1.0 and d.tensor_core_share >= d.fp16_kernel_share
    assert measured_precision(a.trace, a.steps, d).label.startswith("mixed")
    assert not any(x.rule_id == "TFD402" for x in findings)
    assert verdict.startswith("Compute-bound:")


def test_a_minor_finding_does_not_name_the_bound_of_a_step_that_is_mostly_host_work():
    """64 MiB of numpy a step handed to the step: the GPU computes 5 % of the step, copies 9 %, and the
    host stages the copy (JAX's ``H2D Dispatch`` / ``Transpose::Execute``) the rest. The only finding is
    TFD402 (fp32 on an H100, est. saving 1 %): the verdict had read "Compute-bound: 100 % of kernel time
    is fp32 ..."; it now leads with the step's largest share and cites the finding."""
    a, f = load_example(Example("sample_traces/gpu-jax-copy-bound", True))
    findings, verdict = evaluate(a, f)
    assert a.share["host_compute"] >= 0.8 and a.share["device_compute"] < 0.1
    assert a.details.h2d_ms_per_step == pytest.approx(1.24, abs=0.1)  # 64 MiB over PCIe
    top = findings[0]
    assert top.rule_id == "TFD402" and top.est_saving < 0.1
    assert verdict.startswith(
        "Host-bound: 86 % of step time is Python and host work outside TF ops; top finding:"
    )
    assert "(TFD402, est. saving 1.3 %)" in verdict and "Compute-bound" not in verdict
