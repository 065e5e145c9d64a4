"""``tfdoctor profile`` end to end, as a user runs it: exit codes, one clear line, no traceback, and
the run directory kept for every kind of failure."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfdoctor.cli import main
from tfdoctor.errors import RunError, RunExists, TensorFlowMissing, UsageError
from tfdoctor.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "scripts"
TINY = SCRIPTS / "tiny_train.py"


def tfdoctor(
    home: Path, *argv: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "TFDOCTOR_HOME": str(home), "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tfdoctor", *argv],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def assert_one_clear_line(stderr: str, *needles: str) -> str:
    assert "Traceback (most recent call last)" not in stderr.split("── the script's last words")[0]
    line = next(ln for ln in stderr.splitlines() if ln.startswith("tfdoctor: "))
    for n in needles:
        assert n in line, line
    return line


# -- bad input caught before anything runs (no TensorFlow needed, in-process) ----------------------
@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda d: d / "missing.py", "no such file"),
        (lambda d: d, "is a directory"),
        (lambda d: (d / "notes.txt", (d / "notes.txt").write_text("x = 1\n"))[0], "not a Python script"),
        (lambda d: (d / "bad.py", (d / "bad.py").write_text("for x in:\n"))[0], "bad.py:1: syntax error"),
    ],
)
def test_bad_scripts_are_refused_before_a_run_exists(tfd_home, tmp_path, capsys, make, needle):
    target = make(tmp_path)
    assert main(["profile", str(target)]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert_one_clear_line(err, needle)
    assert not (tfd_home / "runs").exists() or not list((tfd_home / "runs").iterdir())


def test_options_after_the_script_and_script_args_after_dashdash(tfd_home, capsys):
    assert main(["profile", str(TINY), "--steps", "2"]) == UsageError.exit_code
    assert_one_clear_line(capsys.readouterr().err, "--steps 2 leaves no timing window")
    assert main(["profile", str(TINY), "--epochs", "3"]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert_one_clear_line(err, "unknown option(s) --epochs 3", "after --")
    assert f"tfdoctor profile {TINY} -- --epochs 3" in err


def test_existing_run_id_needs_force(tfd_home, capsys):
    RunStore(tfd_home).new_run("x.py", run_id="taken")
    assert main(["profile", str(TINY), "--run-id", "taken"]) == RunExists.exit_code
    assert_one_clear_line(capsys.readouterr().err, "run taken already exists", "--force")


# -- real runs -------------------------------------------------------------------------------------
@pytest.mark.integration
def test_profile_a_keras_fit_script_with_args_and_force(tfd_home):
    store = RunStore(tfd_home)
    old = store.new_run("old.py", run_id="fitrun")  # replaced thanks to --force
    store.update(old, status="failed")  # finished: a run still being written is never replaced
    args = ["--loop", "fit", "--input", "numpy", "--batch-size", "8"]
    res = tfdoctor(
        tfd_home, "profile", str(TINY), "--steps", "12", "--run-id", "fitrun", "--force", "--", *args
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Step-time breakdown" in out and "steps from tfdoctor markers" in out
    assert "keras_fit loop" in out and "batch 8" in out
    run_dir = tfd_home / "runs" / "fitrun"
    lines = [ln.strip() for ln in out.splitlines()]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Run directory:"))
    assert lines[at] == f"Run directory: {run_dir}" or (
        lines[at] == "Run directory:" and lines[at + 1] == str(run_dir)
    )
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "complete" and report["args"] == args
    assert report["facts"]["batch_size"] == 8 and report["breakdown"]["steps"]
    assert report["throughput"]["examples_per_s"] > 0
    row = RunStore(tfd_home).list()[0]
    assert row["id"] == "fitrun" and row["status"] == "complete" and row["steps_per_s"] > 0
    assert row["device"] == "CPU" and row["script"] == str(TINY)


@pytest.mark.integration
def test_json_output_is_the_report(tfd_home):
    res = tfdoctor(tfd_home, "profile", str(TINY), "--steps", "12", "--json", "--", "--loop", "function")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["facts"]["step_kind"] == "tf.function"
    # --steps is the planned total: the adaptive warm-up may add steps before the 9 timed/profiled ones
    warm = report["facts"]["warmup_steps"]
    assert warm >= 3 and len(report["steps"]) == 9 + warm and report["trace_files"]
    assert sum(s["window"] == "warmup" for s in report["steps"]) == warm


@pytest.mark.integration
def test_script_that_raises_shows_its_traceback_and_keeps_the_run(tfd_home):
    res = tfdoctor(tfd_home, "profile", str(SCRIPTS / "raises.py"), "--steps", "12", "--run-id", "boom")
    assert res.returncode == RunError.exit_code
    line = assert_one_clear_line(res.stderr, "failed after 3 steps", "ValueError: corrupt record in shard 3")
    assert "raises.py:14 in load_batch" in res.stderr  # the traceback's last frame in the user's code
    assert "partial run kept" in res.stderr and line
    run_dir = tfd_home / "runs" / "boom"
    assert len((run_dir / "steps.jsonl").read_text().splitlines()) == 3
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "failed" and "ValueError" in report["error"]
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "failed"


@pytest.mark.integration
def test_script_that_never_trains_says_so_and_why(tfd_home):
    res = tfdoctor(tfd_home, "profile", str(SCRIPTS / "no_training.py"), "--run-id", "idle")
    assert res.returncode == RunError.exit_code
    assert_one_clear_line(res.stderr, "no training steps seen", "optimizer.apply_gradients")
    assert "predictions:" in res.stderr  # what the script printed
    meta = json.loads((tfd_home / "runs" / "idle" / "meta.json").read_text())
    assert meta["status"] == "no_steps"
    assert (tfd_home / "runs" / "idle" / "report.json").exists()


@pytest.mark.integration
def test_an_eager_steps_input_changing_shape_is_a_fact(tfd_home):
    """A batch padded to its own longest sequence: the facts say the eager step's input changed shape (the
    tf-function fix then compiles it with reduce_retracing=True); a loop of fixed shapes says it did not."""
    res = tfdoctor(tfd_home, "profile", str(SCRIPTS / "dynamic_padding.py"), "--steps", "20", "--json")
    assert res.returncode == 0, res.stderr
    facts = json.loads(res.stdout)["facts"]
    assert facts["step_kind"] == "eager" and facts["input_shapes_vary"] is True
    res = tfdoctor(tfd_home, "profile", str(TINY), "--steps", "12", "--json", "--", "--loop", "eager")
    assert res.returncode == 0, res.stderr
    facts = json.loads(res.stdout)["facts"]
    assert facts["step_kind"] == "eager" and facts["input_shapes_vary"] is False


@pytest.mark.integration
def test_a_tf1_style_session_script_is_told_why_no_step_was_seen(tfd_home):
    """Eager execution off and Session.run steps (legacy repositories run on TF2 through tf.compat.v1):
    the run ends with why, not with a list of hooks that never fired."""
    res = tfdoctor(tfd_home, "profile", str(SCRIPTS / "graph_mode_v1.py"), "--run-id", "v1")
    assert res.returncode == RunError.exit_code
    assert_one_clear_line(
        res.stderr, "no training steps seen: the script turned eager execution off", "Session.run"
    )
    assert "final loss" in res.stderr  # the script ran to its end


@pytest.mark.integration
def test_script_that_hangs_times_out_and_keeps_the_partial_run(tfd_home):
    # the timeout leaves room for importing TensorFlow and 5 steps on a busy 2-core machine
    res = tfdoctor(tfd_home, "profile", str(SCRIPTS / "hangs.py"), "--timeout", "30", "--run-id", "stuck")
    assert res.returncode == 124
    assert_one_clear_line(res.stderr, "did not finish its 40 steps within --timeout 30 s", "5 steps seen")
    run_dir = tfd_home / "runs" / "stuck"
    assert len((run_dir / "steps.jsonl").read_text().splitlines()) == 5
    assert json.loads((run_dir / "report.json").read_text())["status"] == "timeout"
    assert RunStore(tfd_home).list()[0]["status"] == "timeout"


@pytest.mark.integration
def test_ctrl_c_stops_the_child_and_writes_a_partial_report(tfd_home):
    env = {**os.environ, "TFDOCTOR_HOME": str(tfd_home), "TF_CPP_MIN_LOG_LEVEL": "2"}
    argv = ["--loop", "eager", "--input", "generator", "--input-sleep", "0.01", "--steps", "100000"]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tfdoctor",
            "profile",
            str(TINY),
            "--steps",
            "100000",
            "--run-id",
            "cc",
            "--",
            *argv,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    steps = tfd_home / "runs" / "cc" / "steps.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (steps.exists() and len(steps.read_text().splitlines()) >= 10):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    # the stop is bounded (15 s grace, then SIGKILL) but the report after it imports and reads on a
    # machine that may be loaded 2-3x: a CI run once took 69 s here (10-17 s on a quiet one)
    _out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err
    assert_one_clear_line(err, "interrupted after")
    run_dir = tfd_home / "runs" / "cc"
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "interrupted" and len(report["steps"]) >= 10
    assert json.loads((run_dir / "harness.json").read_text())["status"] == "interrupted"
    assert not _harness_running(run_dir)


def _harness_running(run_dir: Path) -> bool:
    pid = json.loads((run_dir / "harness.json").read_text())["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


@pytest.mark.integration
def test_tensorflow_missing_is_one_line_with_the_install_command(tfd_home, tmp_path):
    fake = tmp_path / "site" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named tensorflow (simulated)')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])}
    res = tfdoctor(tfd_home, "profile", str(SCRIPTS / "raises.py"), env=env)
    assert res.returncode == TensorFlowMissing.exit_code
    assert_one_clear_line(res.stderr, "TensorFlow is not installed", "pip install 'tfdoctor[tensorflow]'")


def test_tensorflow_missing_is_detected_in_the_parent_without_importing_it(tfd_home, tmp_path):
    """An environment without TensorFlow at all: refused before any run directory exists.

    Built as a copy of this environment's site-packages (symlinks) minus TensorFlow, used with
    ``python -S`` so the real site-packages is not on the path."""
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    env_dir = tmp_path / "no-tf-site"
    env_dir.mkdir()
    for entry in site.iterdir():
        if entry.name.startswith(("tensorflow", "tf_keras", "keras", "tfdoctor", "__editable__")):
            continue
        (env_dir / entry.name).symlink_to(entry)
    env = {
        **os.environ,
        "TFDOCTOR_HOME": str(tfd_home),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(env_dir)]),
    }
    probe = subprocess.run(
        [sys.executable, "-S", "-c", "import importlib.util; print(importlib.util.find_spec('tensorflow'))"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert probe.stdout.strip() == "None", probe
    res = subprocess.run(
        [sys.executable, "-S", "-m", "tfdoctor", "profile", str(SCRIPTS / "raises.py")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == TensorFlowMissing.exit_code, res.stderr
    assert_one_clear_line(res.stderr, "TensorFlow is not installed", "pip install")
    assert not (tfd_home / "runs").exists() or not list((tfd_home / "runs").iterdir())
