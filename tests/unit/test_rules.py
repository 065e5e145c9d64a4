"""The rule catalog: every rule's own examples (hit must fire, miss must not), the registry, the runner.

Fixtures are real traces: CPU runs recorded by sample_traces/rules-scenarios/record.py and the public
GPU traces in ../shared/traces. No TensorFlow is imported here.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

import pytest
from real_traces import missing

from tfdoctor.model import Facts, Finding
from tfdoctor.rules import (
    ADVICE_IDS,
    FIX_IDS,
    Context,
    _sort_key,
    all_rules,
    evaluate,
    get_rule,
    run_rules,
    top_finding,
    verdict,
)
from tfdoctor.rules._base import Example
from tfdoctor.rules._examples import example_path, load_example, run_example

HEADINGS = ("What it detects:", "Why it costs throughput:", "Evidence:", "Fix:", "Fix safety:")
CASES = [(r.ID, i, ex) for r in all_rules() for i, ex in enumerate(r.EXAMPLES)]


def _skip_missing(ex: Example) -> None:
    if not example_path(ex).exists():
        if ex.path.startswith("../shared/"):
            missing(f"shared trace {ex.path}")  # skips outside CI, fails under CI=true
        pytest.fail(f"fixture {ex.path} is missing from the repository")


@pytest.mark.parametrize(
    ("rule_id", "idx", "ex"), CASES, ids=[f"{rid}-{'hit' if ex.fires else 'miss'}{i}" for rid, i, ex in CASES]
)
def test_rule_example(rule_id: str, idx: int, ex: Example) -> None:
    _skip_missing(ex)
    rule = get_rule(rule_id)
    found = run_example(rule, ex)
    fired = bool(found) if rule.META else any(f.decided for f in found)
    assert fired == ex.fires, f"{rule_id} on {ex.path} ({ex.note}): {[f.claim for f in found]}"
    for f in found:
        assert f.rule_id == rule.ID and f.name == rule.NAME
        assert f.claim and "\n" not in f.claim
        assert 0.0 <= f.est_saving <= 1.0
        assert set(f.fix_ids) <= FIX_IDS | ADVICE_IDS, f.fix_ids
        if f.decided:
            assert f.evidence, "a decided finding carries evidence"
        else:
            assert f.why_not


# -- the registry -------------------------------------------------------------------------------------


def test_every_rule_has_exactly_one_unique_id_and_name() -> None:
    rules = all_rules()
    ids = [r.ID for r in rules]
    names = [r.NAME for r in rules]
    assert len(ids) == len(set(ids)), ids
    assert len(names) == len(set(names)), names
    for r in rules:
        assert re.fullmatch(r"TFD[0-6]\d\d", r.ID), r.ID
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", r.NAME), r.NAME
        # the module is named after the problem, like the rule
        assert type(r).__module__.rsplit(".", 1)[-1] == r.NAME.replace("-", "_")


def test_every_rule_is_documented_and_has_hit_and_miss_examples() -> None:
    for r in all_rules():
        doc = inspect.getdoc(type(r)) or ""
        for h in HEADINGS:
            assert f"\n{h}\n" in f"\n{doc}\n", f"{r.ID} docstring lacks '{h}'"
        assert any(ex.fires for ex in r.EXAMPLES), f"{r.ID} has no hit example"
        assert any(not ex.fires for ex in r.EXAMPLES), f"{r.ID} has no miss example"


def test_the_catalog_covers_the_issue() -> None:
    names = {r.NAME for r in all_rules()}
    for n in (
        "input-stall",
        "repeated-preprocessing",
        "input-cpu-saturated",
        "eager-dispatch",
        "kernel-launch-overhead",
        "per-step-overhead",
        "function-retracing",
        "host-device-copies",
        "underfilled-fp16-batch",
        "fp32-on-tensor-core-gpu",
        "unfused-small-ops",
        "xla-recompilation",
        "single-gpu-of-many",
    ):
        assert n in names


def test_rules_do_not_import_tensorflow() -> None:
    code = (
        "import sys; from tfdoctor.rules import all_rules, evaluate; from tfdoctor.rules._examples import "
        "load_example; from tfdoctor.rules._base import Example; "
        "a, f = load_example(Example('sample_traces/rules-input-sequential-map', True)); evaluate(a, f); "
        "assert not [m for m in sys.modules if m == 'tensorflow' or m.startswith('tensorflow.')], 'TF imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- findings on real fixtures -------------------------------------------------------------------------


def _eval(path: str, **facts):
    a, f = load_example(Example(path, True, facts=facts))
    return evaluate(a, f)


def test_input_stall_names_the_cause_with_numbers_ranges_and_source() -> None:
    findings, verdict = _eval("sample_traces/rules-input-sequential-map")
    f = next(x for x in findings if x.rule_id == "TFD101")
    assert f.severity == "high"
    share = float(f.claim.split(" %")[0])
    assert share >= 20
    assert "sequentially" in f.claim
    assert f.fix_ids[0] == "tfdata-parallel-map"
    wait = next(e for e in f.evidence if e.label == "input wait")
    assert wait.time_ranges_ms and all(0 <= a < b for a, b in wait.time_ranges_ms)
    assert any(e.source and e.source.startswith("record.py:") for e in f.evidence)
    assert verdict.startswith(f"Input-bound: {share:.0f} % of step time waits for input")
    assert "sequentially" in verdict


def test_generator_cause_and_fix() -> None:
    findings, _ = _eval("sample_traces/rules-input-generator")
    f = next(x for x in findings if x.rule_id == "TFD101")
    assert "Python generator" in f.claim and f.fix_ids[0] == "generator-prefetch"
    # what no fix does (the GIL) is said as advice, and a tf.data source gets none
    advice = next(e for e in f.evidence if e.label == "advice")
    assert "GIL" in advice.value and "num_parallel_calls=tf.data.AUTOTUNE" in advice.value
    findings, _ = _eval("sample_traces/rules-input-sequential-map")
    f = next(x for x in findings if x.rule_id == "TFD101")
    assert "Python generator" not in f.claim and all(e.label != "advice" for e in f.evidence)


def test_findings_are_sorted_by_saving_then_severity_undecided_last() -> None:
    for path in ("sample_traces/rules-input-autotuned-saturated", "sample_traces/rules-xla-recompile"):
        findings, _ = _eval(path)
        decided = [f for f in findings if f.decided]
        assert findings[: len(decided)] == decided
        savings = [f.est_saving for f in decided]
        assert savings == sorted(savings, reverse=True)


def test_no_gpu_rules_and_no_fp16_advice_on_cpu_runs() -> None:
    gpu_rules = {r.ID for r in all_rules() if r.DEVICE}
    cpu_paths = {
        ex.path for _, _, ex in CASES if ex.path.startswith("sample_traces/") and "third_party" not in ex.path
    }
    for path in sorted(cpu_paths):
        findings, _ = _eval(path, extra={"cpu_count": "2", "cpu_flags": "avx2 fma"})
        assert not {f.rule_id for f in findings} & gpu_rules, path
        # no 16-bit advice on a CPU without bf16; a float16 policy there is told to go back to float32
        assert not any("mixed-precision" in f.fix_ids for f in findings if f.rule_id != "TFD404"), path
        assert all(
            f.claim.endswith("float32 runs them at full speed") for f in findings if f.rule_id == "TFD404"
        )
        info = [f for f in findings if f.rule_id == "TFD003"]
        assert len(info) == 1 and info[0].severity == "info"


def test_bf16_advice_only_where_the_cpu_has_it() -> None:
    with_bf16, _ = _eval("sample_traces/rules-well-fed", extra={"cpu_flags": "avx512_bf16 amx_bf16"})
    assert any(f.rule_id == "TFD403" and "mixed_bfloat16" in f.claim for f in with_bf16)
    without, _ = _eval("sample_traces/rules-well-fed", extra={"cpu_flags": ""})
    assert not any(f.rule_id == "TFD403" for f in without)


def test_eager_dispatch_names_the_scripts_own_switch_to_eager() -> None:
    """A debugging setting left in is the cause to name: the fix switches it off (tf-function)."""
    findings, _ = _eval("sample_traces/rules-eager-loop", functions_run_eagerly=True)
    f = next(x for x in findings if x.rule_id == "TFD201")
    assert f.claim.endswith(
        "tf.config.run_functions_eagerly(True) is on, so the step's tf.function runs op by op"
    )
    findings, _ = _eval("sample_traces/rules-eager-loop", loop_kind="keras_fit")
    f = next(x for x in findings if x.rule_id == "TFD201")
    assert f.claim.endswith("Keras fit runs the step eagerly (run_eagerly=True, a debugging setting)")
    findings, _ = _eval("sample_traces/rules-eager-loop")
    assert "debugging" not in next(x for x in findings if x.rule_id == "TFD201").claim


def test_eager_and_retracing_verdicts_name_the_cause() -> None:
    _, v = _eval("sample_traces/rules-eager-loop")
    assert "dispatched one by one" in v
    _, v = _eval("sample_traces/rules-retracing")
    assert "tf.function traces" in v


def test_retracing_counted_by_the_harness_names_tf_function_from_three_retraces() -> None:
    """A text loop padding each batch to its longest sequence under the user's own @tf.function: its
    profile window traced nothing (the lengths seen by then), the harness counted 11 retraces over the run.
    The finding says so and names tf-function, which adds reduce_retracing=True; two retraces stay advice."""
    findings, _ = _eval("sample_traces/rules-well-fed", retraces=11)
    f = next(x for x in findings if x.rule_id == "TFD204")
    assert "the step function was traced 12 times in the run" in f.claim, f.claim
    assert f.fix_ids == ["tf-function"]
    findings, _ = _eval("sample_traces/rules-well-fed", retraces=2)
    f = next(x for x in findings if x.rule_id == "TFD204")
    assert f.fix_ids == ["reduce-retracing"]


def test_a_label_naming_another_category_than_the_largest_cites_the_largest() -> None:
    """keras.io's multi-input LSTM model on this CPU: TFD501 (1536 op kernels a step, 21 % of the step in
    small ones; est. saving 10 %) headed the verdict as "Dispatch-bound" beside a step 78 % in op kernels,
    with nothing said of them: the small-ops family covers device compute, the label does not. The
    largest share is now cited beside it; an eager loop's "Dispatch-bound" beside a Python-heavy step is
    not (its claim names Python already)."""
    a, f = load_example(Example("sample_traces/cpu-keras_fit", True))
    ctx = Context(analysis=a, facts=f)
    findings, _ = evaluate(a, f)
    top = next(x for x in findings if x.decided and x.est_saving > 0)
    small_ops = top.model_copy(
        update={
            "rule_id": "TFD501",
            "family": "compilation",
            "claim": "1536 op kernels per step, 85 % under 20 µs, covering 21 % of step time; XLA is off",
            "est_saving": 0.10,
        }
    )
    v = verdict(ctx, [small_ops])
    assert v.startswith("Dispatch-bound: 1536 op kernels per step")
    assert "(TFD501, est. saving 10 %); largest share: 79 % of step time is TF op kernels on the CPU" in v
    _, eager = _eval("sample_traces/rules-eager-loop")
    assert eager.startswith("Dispatch-bound:") and "largest share" not in eager


def test_no_analysis_is_shown_not_dropped() -> None:
    findings, verdict = evaluate(None, Facts())
    assert verdict.startswith("Not diagnosed")
    f = next(x for x in findings if x.rule_id == "TFD001")
    assert not f.decided and "no trace" in (f.why_not or "")
    assert "TFD101" in f.evidence[0].value


def test_facts_only_rule_runs_without_a_trace() -> None:
    facts = Facts(devices=[{"name": f"/physical_device:GPU:{i}", "kind": "GPU"} for i in range(4)])
    findings, _ = evaluate(None, facts)
    f = next(x for x in findings if x.rule_id == "TFD601")
    assert f.decided and f.est_saving == pytest.approx(0.6)


def test_a_failing_rule_becomes_an_undecided_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = get_rule("TFD101")

    def boom(ctx):
        raise ZeroDivisionError("x")

    monkeypatch.setattr(rule, "detect", boom)
    a, f = load_example(Example("sample_traces/rules-input-sequential-map", True))
    found = run_rules(Context(analysis=a, facts=f))
    bad = next(x for x in found if x.rule_id == "TFD101")
    assert not bad.decided and "ZeroDivisionError" in (bad.why_not or "")
    assert any(x.rule_id == "TFD102" for x in found)  # the others still ran


def test_the_verdicts_top_finding_weighs_step_savings_by_the_steps_share_of_the_loop() -> None:
    """keras-io's PPO: TFD203 saves 30 % of a 1.9 ms step, TFD207 26 % of a loop that spends 96 % of its
    time between bursts of steps: 30 % of a step is 1.2 % of the loop, so TFD207 heads the verdict."""
    step = Finding(rule_id="TFD203", name="n", severity="medium", claim="c", est_saving=0.305)
    loop = Finding(rule_id="TFD207", name="n", severity="high", claim="c", est_saving=0.26)
    assert top_finding([step, loop], 0.96) is loop
    assert top_finding([step, loop]) is step  # no loop outside the steps: savings compare as they are
    assert top_finding([step, loop], 0.1) is step  # 27 % of the loop against 26 %
    # the findings list is ordered the same way, so it leads with the verdict's finding
    assert sorted([step, loop], key=lambda f: _sort_key(f, 0.96)) == [loop, step]
    assert sorted([step, loop], key=_sort_key) == [step, loop]
