"""The timeline: downsampling plain arrays, lanes from real traces, the cache in the run directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from real_traces import shared

from tfdoctor.analysis.steps import find_steps
from tfdoctor.report.charts import timeline_figure
from tfdoctor.report.timeline import (
    CACHE_NAME,
    KINDS,
    LaneArrays,
    classify,
    downsample,
    short_lane_names,
    timeline_for_run,
    timeline_from_trace,
)
from tfdoctor.rundir import RunDir, load_steps
from tfdoctor.store import RunStore
from tfdoctor.trace import load

#: the tensorflow/profiler demo (Apache-2.0: sample_traces/third_party/) and a ../shared/traces-only run;
#: ``shared()`` finds the in-repo copy first, skips when neither is there, and fails under CI=true
MULTI_WORKER = "tensorflow-profiler/demo/plugins/profile/GPU-multi-worker"
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
PFE_B8 = "PFE_TensorFlow_Profiler/applications/cnn/logs_load/download8-20210202-122657"


def lane(name, starts, durs, names=None, group="host"):
    starts = np.asarray(starts, dtype=float)
    return LaneArrays(group, name, starts, np.asarray(durs, dtype=float), names or ["op"] * len(starts))


class TestDownsample:
    def test_big_events_and_gaps_are_kept_exactly(self):
        tl = downsample([lane("main", [0, 10, 30], [5, 10, 20], ["a", "b", "c"])], (0, 100), px=100)
        (row,) = tl.rows
        assert row.start_ms == [0, 10, 30] and row.dur_ms == [5, 10, 20] and row.count == [1, 1, 1]
        assert row.name == ["a", "b", "c"] and tl.blocks == 3 and not tl.truncated

    def test_runs_of_tiny_events_merge_but_gaps_stay(self):
        # 1,000 events of 0.01 ms every 0.02 ms in [0, 20), a 30 ms gap, then 1,000 more in [50, 70)
        s = np.concatenate([np.arange(1000) * 0.02, 50 + np.arange(1000) * 0.02])
        names = ["EagerExecute"] * 1500 + ["MatMul:MatMul"] * 500
        tl = downsample([lane("main", s, np.full(2000, 0.01), names)], (0, 100), px=1000)
        (row,) = tl.rows
        assert row.count == [1000, 1000]
        assert row.start_ms[0] == 0 and row.start_ms[1] == 50
        assert row.dur_ms[0] == pytest.approx(19.99) and row.dur_ms[1] == pytest.approx(19.99)
        assert row.name[0] == "1000 events: EagerExecute ×1000"
        assert row.name[1].startswith("1000 events: EagerExecute ×500, MatMul:MatMul ×500")
        assert tl.events_in_window == 2000 and tl.blocks == 2
        assert row.kind == ["dispatch", "dispatch"]

    def test_nesting_becomes_depth_rows(self):
        tl = downsample(
            [lane("main", [0, 1, 2, 20], [50, 10, 3, 5], ["train", "EagerExecute", "MatMul:MatMul", "x"])],
            (0, 60),
            px=600,
        )
        assert [(r.depth, r.name) for r in tl.rows] == [
            (0, ["train"]),
            (1, ["EagerExecute", "x"]),
            (2, ["MatMul:MatMul"]),
        ]
        assert tl.rows[0].kind == ["step"]

    def test_window_clips_and_drops_instants(self):
        tl = downsample([lane("main", [-5, 2, 8, 50], [10, 0, 4, 1])], (0, 10), px=100)
        (row,) = tl.rows
        assert row.start_ms == [0, 8] and row.dur_ms == [5, 2]

    def test_block_budget_is_held(self):
        rng = np.random.default_rng(0)
        lanes = []
        for k in range(20):
            s = np.sort(rng.uniform(0, 1000, 20_000))
            lanes.append(lane(f"t{k}", s, rng.uniform(0.001, 0.2, s.size)))
        tl = downsample(lanes, (0, 1000), px=1600, max_blocks=3000)
        assert tl.blocks == sum(len(r.start_ms) for r in tl.rows) <= 3000
        assert tl.events_in_window == 400_000
        assert tl.resolution_ms > 1000 / 1600  # had to coarsen
        fig = timeline_figure(tl)
        assert sum(len(t["x"]) for t in fig["data"]) == tl.blocks

    def test_lane_order_host_then_tfdata_then_device(self):
        tl = downsample(
            [
                lane("Stream #7", [0], [1], group="device"),
                lane("tf_data_private_threadpool #1", [0], [1], group="tf.data"),
                lane("python", [0], [1]),
            ],
            (0, 2),
        )
        assert [r.group for r in tl.rows] == ["host", "tf.data", "device"]


def test_names_and_classes():
    assert short_lane_names(["a/-123456789", "a/987654321", "python"]) == ["a #1", "a #2", "python"]
    assert classify("Iterator::Root::Prefetch") == "input"
    assert classify("EagerLocalExecute: __inference_train_step_123") == "function"
    assert classify("MemcpyH2D") == "copy"
    assert classify("ncclAllReduceRingLLKernel") == "collective"
    assert classify("dense/MatMul:MatMul") == "compute"
    assert classify("TFE_Py_FastPathExecute_C") == "dispatch"


class TestRealTraces:
    def test_gpu_trace_has_device_streams_and_steps(self):
        trace = load(shared(MULTI_WORKER))
        steps = find_steps(trace)
        tl = timeline_from_trace(trace, steps)
        groups = {r.group for r in tl.rows}
        assert "device" in groups and "host" in groups
        assert any(r.lane.startswith("GPU:") and "Stream #" in r.lane for r in tl.rows)
        assert 1 <= len(tl.steps) <= 5 and tl.blocks <= 6000
        lo, hi = tl.window_ms
        assert all(lo - 1e-3 <= s <= hi for r in tl.rows for s in r.start_ms)
        kinds = {k for r in tl.rows for k in r.kind}
        assert "compute" in kinds or "copy" in kinds

    def test_run_timeline_is_cached_in_the_run_dir(self, tmp_path):
        store = RunStore(tmp_path)
        run = store.new_run("cnn.py")
        shutil.copytree(shared(PFE_B8) / "train", run.logdir)
        assert run.trace_files()
        assert timeline_for_run(run, build=False) is None
        first = timeline_for_run(run)
        assert first is not None and first.rows and first.steps
        assert "steps" in first.notes[0] and "of the 19 profiled steps" in first.notes[0]
        assert (run.path / CACHE_NAME).is_file()
        again = timeline_for_run(run, build=False)
        assert again == first
        # a new trace file (a re-analysis) invalidates the cache
        extra = run.trace_files()[0].with_name("other.xplane.pb")
        shutil.copy(run.trace_files()[0], extra)
        assert timeline_for_run(run, build=False) is None
        assert timeline_for_run(run).signature != first.signature

    def test_no_trace_no_timeline(self, tmp_path):
        run = RunStore(tmp_path).new_run("x.py")
        assert timeline_for_run(run) is None

    def test_unreadable_trace_is_a_note(self, tmp_path):
        run = RunStore(tmp_path).new_run("x.py")
        bad = run.logdir / "plugins/profile/2026_01_01_00_00_00/host.xplane.pb"
        bad.parent.mkdir(parents=True)
        bad.write_bytes(b"\x00garbage" * 10)
        tl = timeline_for_run(run)
        assert tl is not None and not tl.rows and tl.notes[0].startswith("no timeline:")


def _cpu_timeline(name: str):
    run = RunDir(SAMPLES / name)
    trace = load(run.logdir)
    return timeline_from_trace(trace, find_steps(trace, load_steps(run)))


def _compute_ms(row, tl) -> float:
    """Duration of the row's compute blocks inside the steps shown."""
    lo, hi = tl.steps[0].start_ms, tl.steps[-1].end_ms
    return sum(
        min(s + d, hi) - max(s, lo)
        for s, d, k in zip(row.start_ms, row.dur_ms, row.kind, strict=True)
        if k == "compute" and s < hi and s + d > lo
    )


class TestCpuCompute:
    """On CPU the Eigen threads carry only zero-duration ThreadpoolListener marks: compute is drawn where
    the kernels ran (recorded traces of sample_traces/)."""

    def test_eager_kernels_are_a_row_on_the_python_thread(self):
        tl = _cpu_timeline("cpu-naive_loop")
        (row,) = [r for r in tl.rows if r.kernels]
        assert row.lane == "python" and row.label == "python › kernels"
        assert set(row.kind) == {"compute"}
        # the kernels take most of an eager step here (KernelAndDeviceFunc::Run under EagerKernelExecute)
        steps_ms = tl.steps[-1].end_ms - tl.steps[0].start_ms
        assert _compute_ms(row, tl) > 0.3 * steps_ms
        # and the chart draws that row with the "Ops / kernels" colour
        fig = timeline_figure(tl)
        assert fig is not None
        (comp,) = [d for d in fig["data"] if d["name"] == KINDS["compute"]]
        assert "python › kernels" in comp["y"]

    @pytest.mark.parametrize("name", ["cpu-keras_fit", "cpu-function_loop"])
    def test_graph_kernels_are_on_the_tf_compute_lanes(self, name):
        tl = _cpu_timeline(name)
        comp = [r for r in tl.rows if r.group == "host" and r.lane.startswith("tf_Compute")]
        assert comp and max(_compute_ms(r, tl) for r in comp) > 0
        # the function call's own run on the Python thread is the call, not compute lifted from it
        lifted = [r for r in tl.rows if r.kernels]
        assert sum(_compute_ms(r, tl) for r in lifted) < 0.05 * sum(_compute_ms(r, tl) for r in comp)

    @pytest.mark.parametrize("name", ["cpu-naive_loop", "cpu-keras_fit", "cpu-function_loop"])
    def test_instant_only_eigen_lanes_are_named_not_drawn(self, name):
        tl = _cpu_timeline(name)
        assert not any("Eigen" in r.lane for r in tl.rows)
        (note,) = [n for n in tl.notes if "only instant markers" in n]
        assert "tf_numa_-1_Eigen" in note


def test_deep_kernels_are_lifted_but_not_from_a_function_call():
    # step > dispatch > dispatch > dispatch > kernel (depth 4) and a function call holding a kernel
    names = [
        "train",
        "TFE_Py_FastPathExecute_C",
        "EagerExecute",
        "EagerKernelExecute",
        "KernelAndDeviceFunc::Run",
    ]
    names += [
        "EagerLocalExecute: __inference_train_step_1",
        "EagerExecute",
        "EagerKernelExecute",
        "x",
        "KernelAndDeviceFunc::Run",
    ]
    starts = [0, 1, 1.5, 2, 2.5, 20, 21, 22, 23, 24]
    durs = [40, 8, 7, 6, 5, 15, 10, 9, 8, 7]
    tl = downsample([lane("python", starts, durs, names)], (0, 50), px=500, max_depth=3)
    (row,) = [r for r in tl.rows if r.kernels]
    assert row.start_ms == [2.5] and row.kind == ["compute"] and row.depth == 4
