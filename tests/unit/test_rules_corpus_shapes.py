"""Rules on recorded runs of corpus shapes they used to misread (issue 13): a tf.data + fit script on a
busy 2-core CPU with no input wait (its preprocessing competes with the model for the cores), and a
MirroredStrategy trace whose tf.distribute multi-device iterator shows a ``Generator`` stage."""

from __future__ import annotations

from tfdoctor.model import DatasetStage, Facts
from tfdoctor.rules import _figures as fig
from tfdoctor.rules import run_rules
from tfdoctor.rules._base import Context, Example
from tfdoctor.rules._examples import load_example
from tfdoctor.rules.input_stall import InputStall

PROGBAR = "sample_traces/corpus-tfdata-progbar"
MIRRORED = "sample_traces/distribution-mirrored-cpu"


def _ctx(path: str, **facts: object) -> Context:
    analysis, recorded = load_example(Example(path, True, ""))
    return Context(analysis=analysis, facts=Facts.model_validate({**recorded.model_dump(), **facts}))


def _ids(ctx: Context) -> set[str]:
    return {f.rule_id for f in run_rules(ctx) if f.decided}


def test_progbar_fit_preprocessing_takes_the_busy_cpu_and_is_found_without_input_wait():
    ctx = _ctx(PROGBAR)
    assert ctx.share["input_wait"] < 0.05  # TF's injected prefetch keeps up: no input stall to see
    assert ctx.details.host_threads_busy >= 1.0 and ctx.cpu_count == 2
    fn_ms = fig.tfdata_function_ms(ctx)
    assert 0.05 * 2 * fig.profiled_step_ms(ctx) < fn_ms < fig.profiled_step_ms(ctx) * 2
    found = [f for f in run_rules(ctx) if f.rule_id == "TFD102"]
    assert len(found) == 1 and found[0].decided and found[0].fix_ids == ["tfdata-cache"]
    assert "host CPU" in {e.label for e in found[0].evidence}
    assert "TFD101" not in _ids(ctx)  # not input-bound: no parallel-map / prefetch claim


def test_the_same_run_is_not_a_finding_with_a_gpu_or_a_first_map_that_draws_random_numbers():
    gpu = [
        {"name": "/physical_device:CPU:0", "kind": "CPU"},
        {"name": "/physical_device:GPU:0", "kind": "GPU"},
    ]
    assert "TFD102" not in _ids(_ctx(PROGBAR, devices=gpu))  # the model would not compute on these cores
    ctx = _ctx(PROGBAR)
    stages = list(ctx.facts.dataset)
    first_map = next(i for i, s in enumerate(stages) if s.op == "map")
    stages[first_map] = DatasetStage(op="map", parallel=False, detail="random ops: RandomUniform")
    assert "TFD102" in _ids(_ctx(PROGBAR, dataset=ctx.facts.dataset))
    assert "TFD102" not in _ids(_ctx(PROGBAR, dataset=stages))  # nothing deterministic to cache


def test_a_generator_stage_of_tf_distribute_is_not_a_python_generator_when_the_pipeline_is_known():
    ctx = _ctx(MIRRORED)
    assert ctx.details.python_generator  # Iterator::Root::Prefetch::Generator: the multi-device iterator
    assert InputStall._py_in_trace(ctx)  # recorded as "numpy" (before issue 13): the trace decides
    known = _ctx(
        MIRRORED,
        input_kind="tf.data",
        dataset=[DatasetStage(op="from_tensor_slices"), DatasetStage(op="batch", batch_size=64)],
    )
    assert not InputStall._py_in_trace(known)
