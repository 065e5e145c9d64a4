"""``tfdoctor runs`` and the "no run 'x'" hint, through the CLI's main() on a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfdoctor.cli import main
from tfdoctor.store import RunStore


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = RunStore(tmp_path / "home")
    base = s.new_run("/work/proj/train.py", ["--epochs", "3"], run_id="20261101-100000-train-aaaa")
    s.update(
        base,
        status="complete",
        examples_per_s=1234.5,
        device="CPU",
        speedup=1.8,
        created="2026-11-01T10:00:00+00:00",
    )
    for i, fid in enumerate(["xla-jit", "tfdata-prefetch", "batch-scale"]):
        t = s.new_run(
            "/work/proj/train.py", [], kind="fix", parent=base.id, run_id=f"20261101-10000{i + 1}-{fid}"
        )
        s.update(t, status="complete", examples_per_s=1000.0 + i, created=f"2026-11-01T10:00:0{i + 1}+00:00")
    other = s.new_run("/work/proj/other_model.py", [], run_id="20261102-090000-other_model-bbbb")
    s.update(other, status="failed", error="boom", created="2026-11-02T09:00:00+00:00")
    return s


def runs(store: RunStore, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["runs", "--home", str(store.home), *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_json_lists_every_run_with_its_parent(store: RunStore, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = runs(store, "--json", capsys=capsys)
    rows = json.loads(out)
    assert rc == 0 and len(rows) == 5
    assert rows[0]["id"] == "20261102-090000-other_model-bbbb"  # newest first
    assert {r["parent"] for r in rows if r["kind"] == "fix"} == {"20261101-100000-train-aaaa"}


def test_filters_combine(store: RunStore, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = runs(store, "--json", "--status", "failed", capsys=capsys)
    assert [r["id"] for r in json.loads(out)] == ["20261102-090000-other_model-bbbb"]
    _, out, _ = runs(store, "--json", "--script", "train.py", "--kind", "profile", capsys=capsys)
    assert [r["id"] for r in json.loads(out)] == ["20261101-100000-train-aaaa"]
    _, out, _ = runs(store, "--json", "--since", "2026-11-02", capsys=capsys)
    assert [r["id"] for r in json.loads(out)] == ["20261102-090000-other_model-bbbb"]


@pytest.mark.parametrize("width", [80, 160])
def test_table_groups_trials_under_their_fix_run_and_never_wraps_an_id(
    store: RunStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    rc, out, _ = runs(store, capsys=capsys)
    assert rc == 0
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= width
    assert any("20261101-100000-train-aaaa" in ln for ln in lines)  # whole, on one line
    assert "20261101-100001-xla-jit" not in out  # trials are grouped, not listed as runs
    assert "3 trials" in out or "3 fix trials" in out
    assert "1,234.5 ex/s" in out and "1.80x" in out
    rc, out, _ = runs(store, "--trials", capsys=capsys)
    assert all(f"└ 20261101-10000{i}-" in out for i in (1, 2, 3))
    assert max(len(ln) for ln in out.splitlines()) <= width


def test_empty_store_and_no_match_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["runs", "--home", str(tmp_path / "empty")])
    assert rc == 0 and "no runs in" in capsys.readouterr().out
    rc = main(["runs", "--home", str(tmp_path / "empty"), "--status", "failed"])
    assert "no runs match these filters" in capsys.readouterr().out


def test_no_run_hint_lists_close_ids(store: RunStore, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["report", "20261101-100000-train-aaab", "--home", str(store.home)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "no run '20261101-100000-train-aaab'" in err
    assert "did you mean: 20261101-100000-train-aaaa" in err
    rc = main(["report", "other_model", "--home", str(store.home)])
    assert "did you mean: 20261102-090000-other_model-bbbb" in capsys.readouterr().err
    rc = main(["report", "zzzzzzzz", "--home", str(store.home)])
    assert "list the runs with: tfdoctor runs" in capsys.readouterr().err
