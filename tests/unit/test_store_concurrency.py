"""The run store under concurrent writers and readers: no corrupted index, no half-written JSON."""

import json
import multiprocessing as mp

from tfdoctor.store import RunStore


def _writer(home: str, n: int, tag: str) -> None:
    store = RunStore(home)
    for i in range(n):
        run = store.new_run(f"{tag}_{i}.py", ["--x", str(i)])
        for k in range(5):
            store.update(run, status="running", steps_per_s=float(k))
            run.write_json("facts.json", {"k": k, "blob": "x" * 20000})
        run.write_json("report.json", {})  # a run is complete only with its report on disk
        store.update(run, status="complete", examples_per_s=float(i))


def _reader(home: str, rounds: int, q) -> None:
    store = RunStore(home)
    bad = 0
    for _ in range(rounds):
        for row in store.list():
            run = store.get(row["id"])
            facts = run.read_json("facts.json", {})
            if facts and len(facts.get("blob", "")) != 20000:
                bad += 1
    q.put(bad)


def test_two_writers_and_a_reader(tmp_path):
    home = str(tmp_path / "home")
    RunStore(home).runs_dir.mkdir(parents=True)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(home, 8, "a")),
        ctx.Process(target=_writer, args=(home, 8, "b")),
        ctx.Process(target=_reader, args=(home, 30, q)),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert q.get(timeout=5) == 0
    store = RunStore(home)
    rows = store.list()
    assert len(rows) == 16
    assert {r["status"] for r in rows} == {"complete"}
    for r in rows:
        meta = json.loads((store.runs_dir / r["id"] / "meta.json").read_text())
        assert meta["status"] == "complete"
    # the index can be rebuilt from the directories alone
    store.index_path.unlink()
    assert store.reindex() == 16
    assert len(store.list()) == 16


def test_run_ids_refuse_traversal(tmp_path):
    import pytest

    from tfdoctor.store import RunNotFound

    store = RunStore(tmp_path)
    store.runs_dir.mkdir(parents=True)
    for bad in ("../etc", "..", "a/../../b", "/etc/passwd", "x\x00y", ".hidden"):
        with pytest.raises(RunNotFound):
            store.get(bad)


def test_a_run_left_running_by_a_killed_process_is_marked_interrupted(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    home = tmp_path / "home"
    code = (
        "import sys, time; from tfdoctor.store import RunStore;"
        f"r = RunStore({str(home)!r}).new_run('train.py', run_id='doomed'); print('ready', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    store = RunStore(home)
    assert store.list()[0]["status"] == "running"  # its writer is alive: still running
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    rows = store.list()
    assert rows[0]["status"] == "interrupted"
    meta = store.get("doomed").meta
    assert meta["status"] == "interrupted" and f"pid {proc.pid}" in meta["error"]
