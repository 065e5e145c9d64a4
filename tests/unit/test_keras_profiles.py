"""Keras ``TensorBoard(profile_batch=2)`` profiles recorded on this CPU (TF 2.21, Keras 3, oneDNN kernels):
one profiled step each (sample_traces/keras-*, recorded by sample_traces/keras-profile-batch/record.py).
The most common way people record a profile must get steps, a breakdown and a verdict, never "no steps"."""

from __future__ import annotations

import gzip
import json

import pytest

from tfdoctor.analysis import analyze
from tfdoctor.analysis.breakdown import NO_OPS_NOTE
from tfdoctor.analysis.ops import op_family
from tfdoctor.model import Facts
from tfdoctor.rules import evaluate
from tfdoctor.rules._base import REPO, Example
from tfdoctor.rules._examples import load_example
from tfdoctor.trace import parse_chrome

BF16_CPU = {"extra": {"cpu_count": "2", "cpu_flags": "avx512_bf16 avx512f avx2 fma"}}


def _eval(name: str, **facts):
    a, f = load_example(Example(f"sample_traces/{name}", True, facts=facts))
    findings, verdict = evaluate(a, f)
    return a, findings, verdict


@pytest.mark.parametrize("name", ["keras-conv2d", "keras-dense", "keras-conv2d-bf16"])
def test_one_profiled_batch_is_one_step_with_a_breakdown(name: str) -> None:
    a, findings, verdict = _eval(name)
    assert a is not None and a.steps is not None and len(a.steps) == 1
    assert a.steps.source == "keras markers"  # Keras 3's "Profiled batch" marker, step_num 1
    assert int(a.steps.numbers[0]) == 1
    assert a.breakdown is not None and sum(a.breakdown.share.values()) == pytest.approx(1.0)
    assert 1.0 < a.breakdown.avg_step_ms < 1000.0
    assert any("one profiled step" in n for n in a.breakdown.notes)
    assert not verdict.startswith("Not diagnosed")
    assert not any(f.rule_id == "TFD001" for f in findings)
    # the CPU run's precision is reported, and says why it is not measured from a CPU trace
    assert a.breakdown.precision is not None and a.breakdown.precision.label == "not measurable"


def test_onednn_kernels_are_matmul_and_conv() -> None:
    a, _, _ = _eval("keras-conv2d")
    types = {n.rsplit(":", 1)[-1] for p in a.trace.host_planes() for n in p.event_names if ":" in n}
    onednn = {t for t in types if t.startswith("_MklNative")}
    # what this CPU's oneDNN build names the Conv2D model's kernels: every conv variant is a conv
    assert {"_MklNativeFusedConv2D", "_MklNativeConv2DBackpropInput"} <= onednn
    assert any(t.startswith("_MklNativeConv2DBackpropFilter") for t in onednn)
    assert all(op_family(t) == "conv" for t in onednn if "Conv2D" in t)
    assert op_family("_MklNativeMaxPool") == op_family("ReluGrad") == "other"


def test_tfd403_fires_on_conv2d_and_dense_fp32_on_a_bf16_cpu() -> None:
    for name, at_least in (("keras-conv2d", 0.9), ("keras-dense", 0.45)):
        _, findings, verdict = _eval(name, **BF16_CPU)
        f = next(x for x in findings if x.rule_id == "TFD403")
        share = float(next(e.value for e in f.evidence if e.label == "MatMul / Conv").split(" %")[0]) / 100
        assert share >= at_least, (name, f.claim)
        assert "mixed_bfloat16" in f.claim and f.fix_ids == ["mixed-precision"]
    # the verdict names the top finding: on the conv model that is TFD403
    _, findings, verdict = _eval("keras-conv2d", **BF16_CPU)
    assert verdict.startswith("Compute-bound: MatMul/Conv ops take") and "(TFD403, est. saving" in verdict
    # not under mixed_bfloat16, not on a CPU without bf16
    _, findings, _ = _eval("keras-conv2d-bf16", **BF16_CPU)
    assert not any(f.rule_id == "TFD403" for f in findings)
    _, findings, _ = _eval("keras-conv2d", extra={"cpu_flags": "avx2 fma"})
    assert not any(f.rule_id == "TFD403" for f in findings)


def test_a_step_function_without_op_events_is_said_not_split() -> None:
    # sagemaker-debugger's trimmed TF 2.2 trace of an 8-GPU host: one python3 thread with one
    # train_function call, the 8 GPU processes named but empty, no op events at all
    a, _, verdict = _eval(
        "third_party/sagemaker-debugger/tests/profiler/resources/tfprofiler_local_missing_metadata"
    )
    assert a is not None and a.steps is not None and a.steps.source == "inferred (one call)"
    assert len(a.trace.device_planes("GPU")) == 8
    assert verdict.startswith("No device trace:")  # the run had GPUs: that is the headline
    assert any(n.startswith(NO_OPS_NOTE) for n in a.breakdown.notes)
    # the same host events without the GPU processes (a CPU run): the step cannot be split, and says so
    src = next(
        (REPO / "sample_traces/third_party/sagemaker-debugger/tests/profiler/resources").glob(
            "tfprofiler_local_missing_metadata/**/*.trace.json.gz"
        )
    )
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if "GPU" not in str(e.get("args", {}).get("name", ""))
    ]
    cpu = analyze(parse_chrome(json.dumps(doc).encode(), "cpu.json"))
    _, verdict = evaluate(cpu, Facts())
    assert verdict.startswith("Not split: 100 % of the step is inside the step function")
    assert "host_tracer_level=2" in verdict
