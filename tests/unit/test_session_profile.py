"""session.profile: the fix loop's configuration from a capture just run or a stored run."""

from __future__ import annotations

import pytest

from tfdoctor.capture.runner import CaptureConfig
from tfdoctor.errors import UsageError
from tfdoctor.rundir import CAPTURE, RunDir, atomic_write_json
from tfdoctor.session.profile import FixOptions, fix_config, fix_config_for_run


def test_fix_config_carries_the_capture_and_the_options(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    cfg = CaptureConfig(script=script, args=["--lr", "0.1"], steps=30, warmup=4, env={"A": "1"})
    loop = fix_config(cfg, FixOptions(only=["xla-jit"], rounds=3, allow_unchecked=True))
    assert (loop.script, loop.args, loop.steps, loop.warmup, loop.env) == (
        script,
        ["--lr", "0.1"],
        30,
        4,
        {"A": "1"},
    )
    assert (loop.only, loop.confirm_rounds, loop.allow_unchecked) == (["xla-jit"], 3, True)


def test_fix_config_for_a_stored_run_reads_its_capture_record(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    run = RunDir(tmp_path / "run")
    atomic_write_json(
        run.file(CAPTURE),
        {
            "script": str(script),
            "args": ["x"],
            "windows": {"warmup": 5, "timing": 20, "profile": 10},
            "warmup_adaptive": True,
            "env": {"B": "2"},
            "something_new": 1,
        },
    )
    loop = fix_config_for_run(run, FixOptions(skip=["batch-scale"]))
    assert loop.steps == 35 and loop.warmup is None  # adaptive: the loop's runs warm up adaptively too
    assert loop.args == ["x"] and loop.env == {"B": "2"} and loop.skip == ["batch-scale"]
    atomic_write_json(
        run.file(CAPTURE), {"script": str(script), "windows": {"warmup": 5, "timing": 20, "profile": 10}}
    )
    assert fix_config_for_run(run, FixOptions()).warmup == 5  # --warmup N was given: exact again


def test_a_run_that_cannot_be_rerun_is_a_usage_error(tmp_path):
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    with pytest.raises(UsageError, match=r"no capture\.json"):
        fix_config_for_run(run, FixOptions())
    atomic_write_json(run.file(CAPTURE), {"script": str(tmp_path / "gone.py")})
    with pytest.raises(UsageError, match="the profiled script is gone"):
        fix_config_for_run(run, FixOptions())
    run.file(CAPTURE).write_text("{not json")
    with pytest.raises(UsageError, match="unreadable"):
        fix_config_for_run(run, FixOptions())
