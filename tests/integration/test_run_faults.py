"""Faults during a run, end to end through ``tfdoctor profile``: the script killed by a signal, out of
memory, hung past the timeout, the disk filling up while the trace is written.

For each fault the same promises are checked (``assert_fault_handled``):
- the CLI exits non-zero with one clear ``tfdoctor:`` line saying what happened, and no traceback
  of tfdoctor's own;
- the run store stays consistent: the run's meta.json status says what happened, report.json says
  the same (with the error), the SQLite index agrees with meta.json;
- an earlier run in the same store is untouched (its files hash the same, its index row unchanged);
- the user's files are untouched (every file in the script's folder hashes the same);
- no process of the run is left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfdoctor.store import RunStore

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "scripts" / "tiny_train.py"

#: A tiny eager custom loop; FAULT(i) runs before step i (the harness counts apply_gradients calls).
TRAIN = """
import os, signal, sys
import numpy as np
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
optimizer = keras.optimizers.SGD(0.01)
x = np.ones((16, 8), np.float32)
for i in range(10_000):
    FAULT
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
"""


def script_with(fault: str) -> str:
    return TRAIN.replace("FAULT", fault.strip().replace("\n", "\n    "))


def tree_hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def index_row(home: Path, run_id: str) -> dict:
    return next(r for r in RunStore(home).list() if r["id"] == run_id)


def tfdoctor(home: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TFDOCTOR_HOME": str(home), "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(
        [sys.executable, "-m", "tfdoctor", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def earlier_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one complete earlier run ("earlier"), recorded once and copied per test."""
    home = tmp_path_factory.mktemp("earlier") / "home"
    res = tfdoctor(
        home, "profile", str(TINY), "--steps", "12", "--run-id", "earlier", "--", "--loop", "eager"
    )
    assert res.returncode == 0, res.stderr
    return home


class Scene:
    """One fault scenario: a store with an earlier run, a user folder with the script, hashes taken."""

    def __init__(self, root: Path, earlier: Path, source: str, home: Path | None = None):
        self.home = home if home is not None else root / "home"
        if self.home.exists():
            shutil.rmtree(self.home)
        shutil.copytree(earlier, self.home)
        self.user = root / "user"
        self.user.mkdir()
        self.script = self.user / "train.py"
        self.script.write_text(source)
        (self.user / "data.csv").write_text("a,b\n1,2\n")  # a file of the user's beside the script
        self.user_before = tree_hashes(self.user)
        self.earlier_before = tree_hashes(self.home / "runs" / "earlier")
        self.earlier_row = index_row(self.home, "earlier")

    def profile(self, *options: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return tfdoctor(
            self.home, "profile", str(self.script), "--run-id", "faulty", *options, timeout=timeout
        )

    @property
    def run_dir(self) -> Path:
        return self.home / "runs" / "faulty"


def assert_fault_handled(
    scene: Scene, res: subprocess.CompletedProcess[str], status: str, *needles: str
) -> str:
    """The common promises; returns the one ``tfdoctor:`` line."""
    assert res.returncode != 0, res.stderr
    own_part = res.stderr.split("── the script's last words")[0].split("── where the script failed")[0]
    assert "Traceback (most recent call last)" not in own_part, res.stderr
    assert f'File "{ROOT / "tfdoctor"}' not in res.stderr, res.stderr  # no tfdoctor frames anywhere
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("tfdoctor: ")]
    assert len(lines) == 1, res.stderr
    line = lines[0]
    for needle in needles:
        assert needle in line, line
    # the run store says what happened, in every place
    meta = json.loads((scene.run_dir / "meta.json").read_text())
    report = json.loads((scene.run_dir / "report.json").read_text())
    assert meta["status"] == status, meta
    assert report["status"] == status
    assert report["error"], report
    row = index_row(scene.home, "faulty")
    assert row["status"] == meta["status"]
    assert row["error"] == meta.get("error")
    # earlier runs and the user's files untouched
    assert tree_hashes(scene.home / "runs" / "earlier") == scene.earlier_before
    assert index_row(scene.home, "earlier") == scene.earlier_row
    assert tree_hashes(scene.user) == scene.user_before
    # nothing left running
    harness = json.loads((scene.run_dir / "harness.json").read_text())
    assert not _alive(harness["pid"])
    return line


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


# -- the script killed by a signal ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fault", "signame", "at_step"),
    [
        # SIGKILL (what the kernel's OOM killer sends) in the profile window, while the profiler runs
        ("if i == 14: os.kill(os.getpid(), signal.SIGKILL)", "SIGKILL", 14),
        # a real segmentation fault in native code, in the timing window
        ("if i == 6:\n    import ctypes; ctypes.string_at(0)", "SIGSEGV", 6),
    ],
    ids=["sigkill-in-profile-window", "sigsegv-in-timing-window"],
)
def test_script_killed_by_a_signal(tmp_path, earlier_store, fault, signame, at_step):
    scene = Scene(tmp_path, earlier_store, script_with(fault))
    res = scene.profile("--steps", "20", "--warmup", "3", "--profile-steps", "8")
    assert res.returncode == 5, res.stderr
    line = assert_fault_handled(scene, res, "failed", f"killed by {signame}", f"after {at_step} steps")
    assert "the script's process died" in line
    steps = (scene.run_dir / "steps.jsonl").read_text().splitlines()
    assert len(steps) == at_step  # every step finished before the signal is kept
    report = json.loads((scene.run_dir / "report.json").read_text())
    assert len(report["steps"]) == at_step


# -- out of memory ----------------------------------------------------------------------------------
OOM = """
if i == 6:
    import resource
    # bound the address space a little above what is in use now, then allocate until it runs out
    vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), resource.RLIM_INFINITY))
    hoard = []
    while True:
        hoard.append(np.ones(16 << 20, np.uint8))
"""


def test_script_running_out_of_memory(tmp_path, earlier_store):
    scene = Scene(tmp_path, earlier_store, script_with(OOM))
    res = scene.profile("--steps", "20", "--warmup", "3", "--profile-steps", "8")
    assert res.returncode == 5, res.stderr
    line = assert_fault_handled(scene, res, "failed", "after 6 steps", "MemoryError")
    assert "failed" in line
    report = json.loads((scene.run_dir / "report.json").read_text())
    assert "Unable to allocate" in report["error"]
    # where the script's own code raised is shown (train.py:LINE), and its traceback kept with the run
    assert "train.py" in res.stderr.split("── where the script failed")[1]
    assert "MemoryError" in json.loads((scene.run_dir / "harness.json").read_text())["error"]


# -- hang past the timeout --------------------------------------------------------------------------
def test_script_hanging_past_the_timeout(tmp_path, earlier_store):
    scene = Scene(tmp_path, earlier_store, script_with("if i == 5:\n    import time; time.sleep(3600)"))
    res = scene.profile("--steps", "20", "--timeout", "25")
    assert res.returncode == 124, res.stderr
    assert_fault_handled(scene, res, "timeout", "did not finish its 20 steps within --timeout 25 s")
    assert len((scene.run_dir / "steps.jsonl").read_text().splitlines()) == 5


# -- disk full while the trace is written -----------------------------------------------------------
#: Many small eager ops per step: the profile window's trace (~300 KB) cannot fit in what is left.
BIG_TRACE = "y = tf.ones((4, 4))\nfor _ in range(100):\n    y = y * 1.0001"


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A 1 MiB tmpfs (root can mount one; elsewhere the test is skipped)."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: Path, leave: int) -> None:
    avail = shutil.disk_usage(mnt).free
    with open(mnt / "filler", "wb") as f:
        f.write(b"\0" * max(0, avail - leave))


def test_disk_full_while_writing_the_trace(tmp_path, earlier_store, tiny_fs):
    scene = Scene(tmp_path, earlier_store, script_with(BIG_TRACE), home=tiny_fs / "home")
    _fill(tiny_fs, leave=160 * 1024)  # room for the run's small files, not for its trace
    res = scene.profile("--steps", "20", "--warmup", "3", "--profile-steps", "10")
    assert res.returncode == 5, res.stderr
    line = assert_fault_handled(scene, res, "failed", "disk is full")
    assert "No space left on device" in line
    report = json.loads((scene.run_dir / "report.json").read_text())
    assert len(report["steps"]) >= 10  # the steps measured before the disk filled up are kept
    assert report["trace_files"] == []  # the truncated trace was not kept as if it were one


# -- ^C during a fix run ----------------------------------------------------------------------------
def _fix_runs(home: Path) -> list[dict]:
    runs = [json.loads(p.read_text()) for p in sorted((home / "runs").glob("*/meta.json"))]
    return [m for m in runs if m.get("kind") == "fix"]


def test_ctrl_c_during_a_fix_run(tmp_path, earlier_store):
    # an eager loop fed by a Python generator: the fix loop has candidates (tf.function, prefetch, …)
    source = (TINY.read_text()).replace("default=1000", "default=100000")
    scene = Scene(tmp_path, earlier_store, source)
    env = {**os.environ, "TFDOCTOR_HOME": str(scene.home), "TF_CPP_MIN_LOG_LEVEL": "2"}
    argv = ["--loop", "eager", "--input", "generator", "--input-sleep", "0.02"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfdoctor", "profile", str(scene.script), "--run-id", "faulty",
         "--steps", "30", "--fix", "--apply", "--", *argv],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    fix_steps = None
    while time.monotonic() < deadline and proc.poll() is None:
        fix = _fix_runs(scene.home)
        if fix:
            fix_steps = scene.home / "runs" / fix[0]["id"] / "steps.jsonl"
            if fix_steps.exists() and len(fix_steps.read_text().splitlines()) >= 3:
                break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1]
    assert fix_steps is not None, "no fix run started"
    proc.send_signal(signal.SIGINT)
    res = subprocess.CompletedProcess(proc.args, 0, *proc.communicate(timeout=120))
    res.returncode = proc.returncode
    assert proc.returncode == 130, res.stderr
    # the baseline profile run is complete; the fix run that was measuring is recorded as interrupted
    baseline = json.loads((scene.run_dir / "meta.json").read_text())
    assert baseline["status"] == "complete"
    assert index_row(scene.home, "faulty")["status"] == "complete"
    fix = _fix_runs(scene.home)
    assert len(fix) == 1, [m["id"] for m in fix]  # the loop stopped: no further fix was started
    assert fix[0]["status"] == "interrupted"
    assert index_row(scene.home, fix[0]["id"])["status"] == "interrupted"
    fix_report = json.loads((scene.home / "runs" / fix[0]["id"] / "report.json").read_text())
    assert fix_report["status"] == "interrupted"
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("tfdoctor: ")]
    assert len(lines) == 1 and "interrupted" in lines[0], res.stderr
    assert "Traceback (most recent call last)" not in res.stderr
    # nothing applied (--apply was given), nothing of the user's touched, the earlier run intact
    assert tree_hashes(scene.user) == scene.user_before
    assert not list(scene.user.glob("*.tfdoctor-bak"))
    assert tree_hashes(scene.home / "runs" / "earlier") == scene.earlier_before
    assert index_row(scene.home, "earlier") == scene.earlier_row
    harness = json.loads((scene.home / "runs" / fix[0]["id"] / "harness.json").read_text())
    assert not _alive(harness["pid"])


def test_file_size_limit_while_writing_the_trace(tmp_path, earlier_store):
    """Without root (no tmpfs): the child's RLIMIT_FSIZE (ulimit -f) cuts the trace write short.

    Through the API: the interpreter is a wrapper that lowers the limit, then execs Python."""
    from tfdoctor.capture.runner import CaptureConfig, run_capture
    from tfdoctor.session.build import finish_run

    scene = Scene(tmp_path, earlier_store, script_with(BIG_TRACE))
    wrapper = tmp_path / "python-fsize"
    wrapper.write_text(f'#!/bin/sh\nulimit -f 128\nexec "{sys.executable}" "$@"\n')  # 128 blocks of 1 KiB
    wrapper.chmod(0o755)
    store = RunStore(scene.home)
    run = store.new_run(str(scene.script), run_id="faulty")
    cfg = CaptureConfig(script=scene.script, steps=20, warmup=3, profile_steps=10, python=str(wrapper))
    result = run_capture(cfg, run)
    report = finish_run(store, run, result)
    # Python ignores SIGXFSZ: the write fails (EFBIG), the profiler's stop() raises, the harness goes on
    assert result.status == "complete"  # the timing window was measured before the trace write
    assert result.message.startswith("no trace: ") and "File too large" in result.message
    meta = json.loads((scene.run_dir / "meta.json").read_text())
    assert meta["status"] == report.status == index_row(scene.home, "faulty")["status"] == "complete"
    assert "File too large" in meta["note"]
    assert any("File too large" in n for n in report.breakdown.notes)  # the report says what happened
    assert any("no trace analysed" in n for n in report.breakdown.notes)  # and the cut trace is not used
    assert report.throughput is not None and len(report.steps) == 20
    assert tree_hashes(scene.home / "runs" / "earlier") == scene.earlier_before
    assert index_row(scene.home, "earlier") == scene.earlier_row
    assert tree_hashes(scene.user) == scene.user_before


# -- what the script starts, and the parent's death (issue 16, items 6, 7, 12) ----------------------
#: at step 0 the script starts children of every kind, writes their pids to PIDS, then prints 12 MB
SPAWN_CHILDREN = """
if i == 0:
    import multiprocessing, subprocess, time
    kids = [
        subprocess.Popen(["sleep", "600"]).pid,  # in the run's process group
        subprocess.Popen(["sleep", "601"], start_new_session=True).pid,  # setsid: its own group
        subprocess.Popen(["sleep", "602"], start_new_session=True, env={}).pid,  # setsid, no env
    ]
    pid = os.fork()
    if pid == 0:
        time.sleep(603)
        os._exit(0)
    kids.append(pid)
    mp = multiprocessing.get_context("fork").Process(target=time.sleep, args=(604,))
    mp.start()
    kids.append(mp.pid)
    open(PIDS, "w").write(" ".join(map(str, kids)))
    for n in range(120_000):
        print(f"line {n:06d} " + "x" * 90)
"""


def _gone(pids: list[int], within_s: float) -> list[int]:
    """The pids still alive after waiting up to ``within_s`` (zombies count as gone)."""
    deadline = time.monotonic() + within_s
    alive = pids
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            break
        time.sleep(0.2)
    return alive


def test_processes_the_script_started_are_stopped_when_the_run_ends(tmp_path, earlier_store):
    pids_file = tmp_path / "pids.txt"
    source = script_with(SPAWN_CHILDREN.replace("PIDS", repr(str(pids_file))))
    scene = Scene(tmp_path, earlier_store, source)
    res = scene.profile("--steps", "12", "--warmup", "2", "--profile-steps", "3")
    assert res.returncode == 0, res.stderr
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 5
    try:
        assert _gone(pids, within_s=30) == []  # every kind of child stopped, setsid'd ones included
        report = json.loads((scene.run_dir / "report.json").read_text())
        notes = " ".join(report["breakdown"]["notes"])
        assert "left running when the run ended" in notes, notes  # and the run says so
        assert "sleep" in notes
        # item 12: 12 MB printed, the head and the tail kept
        log = (scene.run_dir / "stdout.log").read_bytes()
        assert len(log) < 4.5 * 1024 * 1024
        assert b"line 000000 " in log[:4096] and b"line 119999 " in log[-4096:]
        assert b"bytes of output cut here" in log
    finally:
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
    assert tree_hashes(scene.user) == scene.user_before


#: at step 3 the script starts a setsid'd child and says so; then it trains until stopped
SPAWN_AND_TRAIN = """
if i == 3:
    import subprocess
    kid = subprocess.Popen(["sleep", "605"], start_new_session=True).pid
    open(PIDS, "w").write(f"{os.getpid()} {kid}")
"""


def test_sigkill_of_tfdoctor_stops_the_training_child_and_its_children(tmp_path, earlier_store):
    pids_file = tmp_path / "pids.txt"
    scene = Scene(tmp_path, earlier_store, script_with(SPAWN_AND_TRAIN.replace("PIDS", repr(str(pids_file)))))
    env = {**os.environ, "TFDOCTOR_HOME": str(scene.home), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfdoctor", "profile", str(scene.script), "--run-id", "faulty",
         "--steps", "1000000", "--timeout", "900"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not pids_file.exists() and proc.poll() is None:
            time.sleep(0.2)
        assert pids_file.exists(), "the script never reached step 3"
        time.sleep(0.5)
        pids = [int(p) for p in pids_file.read_text().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        proc.kill()  # SIGKILL: tfdoctor cannot clean up; the harness's watchdog must
        proc.wait()
        assert _gone(pids, within_s=60) == [], "the training child or its child outlived tfdoctor"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


# -- --fix --apply on a CRLF latin-1 script (issue 16, items 4-5) -----------------------------------
def test_fix_and_apply_keep_a_crlf_latin1_script_as_it_is(tmp_path, earlier_store):
    source = "# -*- coding: latin-1 -*-\n# Café au lait\n" + TINY.read_text() + 'NAME = "Café"\n'
    raw = source.replace("\n", "\r\n").encode("latin-1")
    scene = Scene(tmp_path, earlier_store, "")
    scene.script.write_bytes(raw)
    scene.user_before = tree_hashes(scene.user)
    original = tmp_path / "original"
    shutil.copytree(scene.user, original)
    res = scene.profile(
        "--steps", "24", "--fix", "--apply", "--only", "generator-prefetch", "--fix-rounds", "0", "--",
        "--loop", "eager", "--input", "generator", "--input-sleep", "0.01", timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "UnicodeDecodeError" not in res.stderr and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "changed while the fixes were measured" not in res.stdout + res.stderr
    # every fix run's patch applies to the CRLF latin-1 original, byte for byte
    fix_runs = [m for m in _fix_runs(scene.home)]
    assert fix_runs, "no fix was measured"
    checked = 0
    for meta in fix_runs:
        patch = scene.home / "runs" / meta["id"] / "fix.patch"
        if not patch.read_bytes():
            # a run of the reference state, the original itself (its output measured again when a trial's
            # differed): nothing to apply
            assert "reference" in meta.get("fix", ""), meta
            continue
        checked += 1
        check = subprocess.run(
            ["git", "apply", "--check", str(patch)], cwd=original, capture_output=True, text=True
        )
        assert check.returncode == 0, check.stderr
    assert checked, fix_runs
    summary = json.loads((scene.run_dir / "report.json").read_text())["fix"]
    after = scene.script.read_bytes()
    if summary["kept"]:  # applied: still latin-1, CRLF on every line, the backup the original
        assert after != raw and b"\r\n" in after and b"\n" not in after.replace(b"\r\n", b"")
        assert 'NAME = "Café"'.encode("latin-1") in after
        assert (scene.user / "train.py.tfdoctor-bak").read_bytes() == raw
        applied = tmp_path / "applied"
        shutil.copytree(original, applied)
        subprocess.run(["git", "apply", str(scene.run_dir / "fix.patch")], cwd=applied, check=True)
        assert (applied / "train.py").read_bytes() == after  # the patch and --apply agree
    else:
        assert after == raw
