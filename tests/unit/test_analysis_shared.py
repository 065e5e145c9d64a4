"""Steps and breakdown on real GPU traces from public repositories (../shared/traces)."""

from pathlib import Path

import pytest
from real_traces import find_shared, in_ci, missing

from tfdoctor.analysis import analyze
from tfdoctor.model import CATEGORIES
from tfdoctor.trace import load

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces"
pytestmark = pytest.mark.skipif(
    not SHARED.exists() and not in_ci(), reason="../shared/traces not present (runs, and fails, under CI)"
)
PFE = SHARED / "PFE_TensorFlow_Profiler/applications/cnn"


def _an(rel):
    path = PFE / rel
    if not path.exists():
        missing(f"../shared/traces/PFE_TensorFlow_Profiler/applications/cnn/{rel}")
    return analyze(load(path))


class TestPfeRtx5000:
    """TF 2.3, model.fit from numpy; batch 8 is launch-bound, batch 512 much less (XProf: 54-71 % vs 19-37 %)."""

    @classmethod
    def setup_class(cls):
        cls.b8 = _an("logs_load/download8-20210202-122657")
        cls.b8_fp16 = _an("logs_load/download8-20210202-123317")
        cls.b512 = _an("logs_load/download512-20210202-131913")
        cls.b512_fp16 = _an("logs_load/download512-20210202-132005")

    def test_steps_from_tf23_keras_markers(self):
        for a in (self.b8, self.b512):
            assert a.steps.source == "keras markers"
            assert len(a.steps) == 19
            assert a.breakdown.device_kind == "GPU"

    def test_shares_add_up(self):
        for a in (self.b8, self.b512):
            assert sum(a.breakdown.share[c] for c in CATEGORIES) == pytest.approx(1.0, abs=1e-6)
            for row in a.breakdown.steps:
                assert sum(row.ms.values()) == pytest.approx(row.total_ms, rel=1e-6)

    def test_launch_share_high_at_batch_8_and_lower_at_512(self):
        assert self.b8.share["dispatch"] > 0.5
        assert self.b8_fp16.share["dispatch"] > 0.5
        assert self.b512.share["dispatch"] < self.b8.share["dispatch"] - 0.25
        assert self.b8.details.small_kernel_share > 0.8  # tiny kernels at batch 8

    def test_h2d_every_step_from_numpy_feeding(self):
        assert self.b512.details.h2d_ms_per_step > 1.0
        assert self.b512.share["h2d"] > 0.1

    def test_fp16_runs_are_seen_as_fp16(self):
        assert self.b512_fp16.details.fp16_kernel_share > 0.5
        assert self.b512.details.fp16_kernel_share < 0.05
        assert self.b8.details.compute_capability == pytest.approx(7.5)


def test_empty_gpu_plane_is_noted_not_crashed():
    a = _an("log_prefetch/256_20210203-204242")
    assert a.breakdown is not None
    assert any("EMPTY" in n for n in a.breakdown.notes)


def test_multi_worker_v100_bert():
    f = find_shared("GPU-multi-worker/*.xplane.pb")
    a = analyze(load(f))
    assert a.steps.source == "xprof step line"
    assert a.details.n_devices >= 2
    assert a.details.fp16_kernel_share > 0.5  # BERT under mixed precision
    assert a.details.h2d_ms_per_step > 0


def test_t4_single_step_and_chrome_export():
    d = find_shared("e4040-2023fall-assign2-hd2551/logs/fit")
    a = analyze(load(d))
    assert len(a.steps) == 1 and a.breakdown.device_kind == "GPU"
    assert a.share["device_compute"] > 0.3
