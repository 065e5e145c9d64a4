"""The run store under faults (issue 16, items 8-11): a run is complete only with its report on disk,
``--force`` never deletes a live run, a read-only store is one line for ``profile`` and a read-only
listing for ``serve``, run ids are matched whole."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tfdoctor.capture.child.clock import Windows
from tfdoctor.capture.runner import CaptureResult
from tfdoctor.errors import RunExists, TfdoctorError
from tfdoctor.rundir import REPORT, valid_run_id
from tfdoctor.session import build
from tfdoctor.store import RunStore, StoreNotWritable

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _result(status: str = "complete") -> CaptureResult:
    return CaptureResult(status=status, returncode=0, windows=Windows(warmup=1, timing=2, profile=0))  # type: ignore[arg-type]


# -- item 8: complete only when report.json is on disk ----------------------------------------------
def test_complete_waits_for_the_report(tmp_path):
    store = RunStore(tmp_path / "home")
    run = store.new_run("train.py")
    store.update(run, status="complete")
    assert run.meta["status"] == "running" and run.meta["finishing"] == "complete"
    assert store.list()[0]["status"] == "running"
    run.file(REPORT).write_text("{}")
    store.update(run, steps_per_s=3.0)
    assert run.meta["status"] == "complete" and run.meta["finishing"] is None
    assert store.list()[0]["status"] == "complete"


def test_ctrl_c_while_the_report_is_built_never_leaves_a_complete_run_without_report(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "home")
    run = store.new_run("train.py")

    def interrupted(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "build_report", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build.finish_run(store, run, _result())
    assert not run.file(REPORT).exists()
    assert run.meta["status"] != "complete"
    assert store.list()[0]["status"] != "complete"


WRITER_DIES_BEFORE_THE_REPORT = """
import sys
from tfdoctor.store import RunStore
store = RunStore(sys.argv[1])
run = store.new_run("train.py", run_id="halfway")
store.update(run, status="complete")  # then the process ends before report.json is written
"""


def test_a_writer_that_died_before_the_report_leaves_an_interrupted_run(tmp_path):
    home = tmp_path / "home"
    subprocess.run([sys.executable, "-c", WRITER_DIES_BEFORE_THE_REPORT, str(home)], env=ENV, check=True)
    row = RunStore(home).list()[0]
    assert row["id"] == "halfway" and row["status"] == "interrupted"
    assert "while its report was being built" in row["error"]


def test_a_report_written_after_complete_makes_the_run_complete_everywhere(tmp_path):
    from tfdoctor.model import Report

    store = RunStore(tmp_path / "home")
    run = store.new_run("train.py")
    store.update(run, status="complete")
    run.write_report(
        Report(run_id=run.id, script="train.py", created="2026-01-01T00:00:00+00:00", status="complete")
    )
    assert run.meta["status"] == "complete"
    assert store.list()[0]["status"] == "complete"  # the index follows


def test_a_scale_run_is_complete_with_its_scale_json(tmp_path):
    store = RunStore(tmp_path / "home")
    run = store.new_run("train.py", kind="scale")
    run.write_json("scale.json", {"points": []})
    store.update(run, status="complete")
    assert run.meta["status"] == "complete"


# -- item 9: --force never deletes a run whose writer is alive --------------------------------------
HOLD_A_RUN = """
import sys, time
from tfdoctor.store import RunStore
RunStore(sys.argv[1]).new_run("train.py", run_id="live")
print("ready", flush=True)
time.sleep(120)
"""


@contextlib.contextmanager
def live_writer(home: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_RUN, str(home)], env=ENV, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_force_is_refused_while_the_runs_writer_is_alive(tmp_path):
    home = tmp_path / "home"
    store = RunStore(home)
    with live_writer(home) as proc:
        (store.runs_dir / "live" / "steps.jsonl").write_text("{}\n")
        with pytest.raises(RunExists, match=f"still being written by process {proc.pid}"):
            store.new_run("other.py", run_id="live", force=True)
        assert (store.runs_dir / "live" / "steps.jsonl").exists()  # nothing of it deleted
    run = store.new_run("other.py", run_id="live", force=True)  # its writer is gone: replaced
    assert run.meta["script"] == "other.py" and not run.file("steps.jsonl").exists()


def test_a_reused_pid_does_not_keep_a_dead_run_alive(tmp_path):
    store = RunStore(tmp_path / "home")
    run = store.new_run("train.py", run_id="old")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        # the recorded writer's pid is alive, but that process started at another time: a reused pid
        run.update_meta(pid=other.pid, pid_start=12345)
        assert store.new_run("train.py", run_id="old", force=True).meta["status"] == "running"
        run.update_meta(pid=other.pid, pid_start=None)  # no start time recorded: the pid decides
        with pytest.raises(RunExists):
            store.new_run("train.py", run_id="old", force=True)
    finally:
        other.kill()
        other.wait()


# -- item 10: a read-only store ---------------------------------------------------------------------
def test_profile_into_an_unwritable_home_is_one_line(tmp_path):
    home = tmp_path / "home"
    home.write_text("a file where the store's folder should be")
    script = tmp_path / "train.py"
    script.write_text("print('train')\n")
    res = subprocess.run(
        [sys.executable, "-m", "tfdoctor", "profile", str(script), "--steps", "5"],
        env={**ENV, "TFDOCTOR_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert res.returncode != 0
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("tfdoctor: ")]
    assert len(lines) == 1 and f"cannot write runs under {home}" in lines[0], res.stderr


def test_new_run_in_an_unwritable_home_raises_store_not_writable(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "runs").write_text("not a folder")
    with pytest.raises(StoreNotWritable, match="cannot write runs under"):
        RunStore(home).new_run("train.py")


@contextlib.contextmanager
def read_only(*folders: Path) -> Iterator[None]:
    """chmod a-w for a normal user; as root (modes do not stop root) the folders are made immutable."""
    if os.geteuid() != 0:
        for f in folders:
            f.chmod(0o555)
        try:
            yield
        finally:
            for f in folders:
                f.chmod(0o755)
        return
    if shutil.which("chattr") is None:
        pytest.skip("running as root (modes do not stop root) and chattr is not installed")
    done: list[Path] = []
    try:
        for f in folders:
            res = subprocess.run(["chattr", "+i", str(f)], capture_output=True, text=True)
            if res.returncode != 0:
                pytest.skip(
                    f"running as root (modes do not stop root) and chattr +i fails: {res.stderr.strip()}"
                )
            done.append(f)
        yield
    finally:
        for f in done:
            subprocess.run(["chattr", "-i", str(f)], check=True)


def _stored_runs(home: Path) -> RunStore:
    from tfdoctor.model import Report

    store = RunStore(home)
    for rid, status in (("a-run", "complete"), ("b-run", "failed")):
        run = store.new_run("train.py", run_id=rid)
        run.write_report(
            Report(run_id=rid, script="train.py", created="2026-01-01T00:00:00+00:00", status="complete")
        )
        store.update(run, status=status)
    return store


def test_serve_lists_a_read_only_store(tmp_path):
    from fastapi.testclient import TestClient

    from tfdoctor.web.main import create_app

    home = tmp_path / "home"
    store = _stored_runs(home)
    for p in home.glob("index.sqlite*"):
        p.unlink()  # a store copied without its index, then made read-only
    with read_only(home, store.runs_dir, *(store.runs_dir / r for r in ("a-run", "b-run"))):
        with pytest.raises(StoreNotWritable):
            store.new_run("train.py")
        client = TestClient(create_app(home))
        r = client.get("/", headers={"Accept": "text/html"})
        assert r.status_code == 200 and "a-run" in r.text and "b-run" in r.text
        assert client.get("/runs/a-run", headers={"Accept": "text/html"}).status_code == 200
        rows = {x["id"]: x["status"] for x in client.get("/api/runs").json()}
        assert rows == {"a-run": "complete", "b-run": "failed"}


def test_an_index_that_cannot_be_opened_falls_back_to_the_run_directories(tmp_path):
    home = tmp_path / "home"
    store = _stored_runs(home)
    for p in home.glob("index.sqlite*"):
        p.unlink()
    (home / "index.sqlite").mkdir()  # sqlite cannot open it: works the same for root
    assert {r["id"]: r["status"] for r in store.list()} == {"a-run": "complete", "b-run": "failed"}


# -- item 11: run ids are matched whole -------------------------------------------------------------
@pytest.mark.parametrize("rid", ["abc\n", "abc\r\n", "abc\n\n", "\nabc"])
def test_run_ids_with_a_trailing_or_leading_newline_are_refused(tmp_path, rid):
    assert not valid_run_id(rid)
    with pytest.raises(TfdoctorError, match="invalid run id"):
        RunStore(tmp_path / "home").new_run("train.py", run_id=rid)
    assert not (tmp_path / "home" / "runs" / rid).exists()


def test_a_stale_check_of_a_live_writer_keeps_it_running(tmp_path):
    store = RunStore(tmp_path / "home")
    run = store.new_run("train.py")
    time.sleep(0.01)
    assert not store.mark_stale(run)  # this process wrote it and is alive
    assert run.meta["status"] == "running"


def test_links_in_a_runs_logdir_are_never_read_as_its_trace(tmp_path):
    """A run's trace files are the regular files inside its run directory: an ``*.xplane.pb`` link (to a
    trace elsewhere, or to any file), or a linked folder in the logdir, is left out."""
    real = ROOT / "sample_traces" / "cpu-keras_fit" / "logdir" / "plugins" / "profile"
    store = RunStore(tmp_path / "home")
    run = store.new_run("train.py", run_id="links")
    session = run.logdir / "plugins" / "profile" / "2026_11_25_00_00_00"
    session.mkdir(parents=True)
    own = session / "vm.xplane.pb"
    shutil.copyfile(next(real.rglob("*.xplane.pb")), own)
    elsewhere = tmp_path / "elsewhere.xplane.pb"
    elsewhere.write_bytes(b"not the run's")
    (session / "other.xplane.pb").symlink_to(elsewhere)
    (session / "passwd.xplane.pb").symlink_to("/etc/passwd")
    (run.logdir / "plugins" / "linked").symlink_to(real, target_is_directory=True)
    assert run.trace_files() == [own]
