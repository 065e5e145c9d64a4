"""The run store: run directories, ids, meta and the SQLite index."""

from __future__ import annotations

import json
import os

import pytest

from tfdoctor.errors import RunExists, TfdoctorError
from tfdoctor.model import Report
from tfdoctor.rundir import RunDir, atomic_write_json, valid_run_id
from tfdoctor.store import RunNotFound, RunStore, default_home


def test_default_home_follows_the_environment(tfd_home):
    assert default_home() == tfd_home
    assert RunStore().home == tfd_home


def test_new_run_creates_the_directory_meta_and_index_row(tfd_home):
    store = RunStore()
    run = store.new_run("path/to/my train.py", ["--epochs", "3"])
    assert run.path.parent == tfd_home / "runs"
    assert "my-train" in run.id and valid_run_id(run.id)
    meta = run.meta
    assert meta["status"] == "running" and meta["args"] == ["--epochs", "3"] and meta["kind"] == "profile"
    rows = store.list()
    assert [r["id"] for r in rows] == [run.id]
    assert rows[0]["script"] == "path/to/my train.py"


def test_explicit_run_id_is_refused_when_it_exists_unless_forced(tfd_home):
    store = RunStore()
    run = store.new_run("a.py", run_id="baseline")
    (run.path / "steps.jsonl").write_text("old\n")
    with pytest.raises(RunExists, match=r"already exists.*--force") as err:
        store.new_run("a.py", run_id="baseline")
    assert err.value.exit_code == RunExists.exit_code
    assert (run.path / "steps.jsonl").exists()  # nothing touched
    again = store.new_run("b.py", run_id="baseline", force=True)
    assert again.path == run.path
    assert not (again.path / "steps.jsonl").exists()
    assert again.meta["script"] == "b.py"


@pytest.mark.parametrize("bad", ["../evil", "a/b", "", ".hidden", "x" * 200, "a..b"])
def test_invalid_run_ids_are_refused(tfd_home, bad):
    with pytest.raises(TfdoctorError):
        RunStore().new_run("a.py", run_id=bad)


def test_update_changes_meta_and_the_index(tfd_home):
    store = RunStore()
    run = store.new_run("a.py")
    run.write_json("report.json", {})  # "complete" needs the report on disk (test_store_faults.py)
    store.update(run, status="complete", steps_per_s=12.5, examples_per_s=400.0, device="CPU")
    assert run.meta["status"] == "complete"
    row = store.list()[0]
    assert (row["status"], row["steps_per_s"], row["examples_per_s"], row["device"]) == (
        "complete",
        12.5,
        400.0,
        "CPU",
    )


def test_get_by_id_or_by_path(tfd_home, tmp_path):
    store = RunStore()
    run = store.new_run("a.py", run_id="r1")
    assert store.get("r1").path == run.path
    assert store.get(run.path).path == run.path.resolve()
    with pytest.raises(RunNotFound):
        store.get("nope")
    with pytest.raises(RunNotFound):
        store.get("../../etc")


def test_list_drops_runs_whose_directory_vanished_and_reindex_rebuilds(tfd_home):
    store = RunStore()
    keep = store.new_run("a.py", run_id="keep")
    gone = store.new_run("b.py", run_id="gone")
    for p in gone.path.iterdir():
        p.unlink()
    gone.path.rmdir()
    assert [r["id"] for r in store.list()] == ["keep"]
    store.index_path.unlink()
    assert store.reindex() == 1
    assert [r["id"] for r in store.list()] == [keep.id]


def test_report_round_trip(tfd_home):
    run = RunStore().new_run("a.py")
    assert run.report() is None
    report = Report(run_id=run.id, script="a.py", created="2026-01-01T00:00:00+00:00", status="complete")
    run.write_report(report)
    assert run.report() == report


def test_unreadable_json_is_a_clear_error_and_atomic_writes_leave_no_temp_files(tmp_path):
    run = RunDir(tmp_path / "r")
    atomic_write_json(run.path / "facts.json", {"a": 1})
    assert json.loads((run.path / "facts.json").read_text()) == {"a": 1}
    assert sorted(os.listdir(run.path)) == ["facts.json"]
    (run.path / "facts.json").write_text("{not json")
    with pytest.raises(TfdoctorError, match=r"facts\.json: unreadable"):
        run.read_json("facts.json")
    assert run.read_json("missing.json", {"d": 1}) == {"d": 1}
    assert run.trace_files() == []


def test_a_generated_run_id_already_taken_draws_again(tmp_path, monkeypatch):
    """A fix loop makes many runs a second; two drew the same 4 hex digits in the same second, and the
    second run failed with RunExists. A generated id that is taken draws again (an explicit one is
    still refused)."""
    import datetime
    import secrets

    import tfdoctor.store as store_mod

    class Frozen(datetime.datetime):  # both runs in the same second
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 11, 26, 11, 6, 15)

    draws = iter(["abcd", "abcd", "abcd", "ef01"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(draws))
    monkeypatch.setattr(store_mod._dt, "datetime", Frozen)
    store = RunStore(tmp_path)
    first = store.new_run("train.py")
    second = store.new_run("train.py")
    assert first.id.endswith("-train-abcd") and second.id.endswith("-train-ef01")
    assert store.get(second.id).meta["status"] == "running"
    with pytest.raises(RunExists):
        store.new_run("train.py", run_id=first.id)
