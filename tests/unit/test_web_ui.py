"""Web UI items that a user meets (issue 18): /docs offline, fix trials grouped under their run,
the run page's apply hint, the Facts table's labels, the throughput chart's labels, file modes.
(The same pages at 390 and 1400 px in Chromium: tests/e2e/test_browser_layout.py.)"""

from __future__ import annotations

import os
import re
import stat

import pytest
import web_samples as ws
from fastapi.testclient import TestClient

from tfdoctor.cli import main
from tfdoctor.report.charts import throughput_figure, unique_labels
from tfdoctor.store import RunStore
from tfdoctor.web.main import create_app

HTML = {"Accept": "text/html"}


@pytest.fixture()
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path / "home")


@pytest.fixture()
def client(store) -> TestClient:
    return TestClient(create_app(store.home))


@pytest.fixture()
def runs(store):
    after = ws.save(store, ws.after_report())
    before = ws.save(store, ws.report(after_run_id=after.id))
    trials = []
    for i, fid in enumerate(["tf-function", "xla-jit", "generator-prefetch"]):
        t = store.new_run(
            "examples/train.py", [], kind="fix", parent=before.id, run_id=f"{before.id}-t{i}-{fid}"
        )
        store.update(
            t, status="complete", examples_per_s=100.0 + i, created=f"2026-11-21T10:15:0{i + 1}+00:00"
        )
        trials.append(t.id)
    return before, after, trials


def test_docs_page_loads_swagger_ui_from_this_server(client) -> None:
    page = client.get("/docs").text
    urls = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert urls and all(u.startswith("/") for u in urls), urls  # nothing from a CDN
    for u in urls:
        r = client.get(u)
        assert r.status_code == 200 and len(r.content) > 100, u
    assert "SwaggerUIBundle" in client.get("/static/docs/swagger-ui-bundle.js").text
    assert client.get("/openapi.json").json()["info"]["title"] == "tfdoctor"
    redoc = client.get("/redoc").text
    assert all(u.startswith("/") for u in re.findall(r'(?:src|href)="([^"]+)"', redoc))


def test_fix_trials_are_grouped_under_their_run(client, runs) -> None:
    before, after, trials = runs
    page = client.get("/", headers=HTML).text
    rows = re.findall(r'<a class="script" href="/runs/([^"]+)"', page)
    assert rows == [after.id, before.id]  # the trials are no rows of their own
    group = page.split(f'data-parent="{before.id}"')[1].split("</details>")[0]
    assert "3 fix trials" in group and all(t in group for t in trials)
    # compare offers the runs, not the trials, and defaults to the two newest runs
    selects = re.findall(r'<option value="([^"]+)"( selected)?>', page)
    assert {v for v, _ in selects} == {before.id, after.id}
    pick = client.get("/compare", headers=HTML).text
    assert not any(t in pick for t in trials)


def test_apply_hint_names_the_run_id(client, runs) -> None:
    before, _, _ = runs
    page = client.get(f"/runs/{before.id}", headers=HTML).text
    assert f"tfdoctor fix {before.id} --force --apply" in page
    assert "tfdoctor fix examples/train.py" not in page
    assert f"{before.path}/fix.patch" in page


def test_facts_table_has_labels_not_raw_keys(client, store) -> None:
    r = ws.report(with_fix=False)
    facts = r.facts.model_copy(
        update={
            "extra": {"seen_tape_enter": "40", "seen_apply_gradients": "40", "switch_jit": "1"},
            "cpu_flags": ["avx2", "avx512_bf16"],
            "cpu_count": 2,
        }
    )
    run = ws.save(store, r.model_copy(update={"facts": facts}))
    page = client.get(f"/runs/{run.id}", headers=HTML).text
    facts_html = page.split('id="sec-facts"')[1].split("</section>")[0]
    heads = re.findall(r"<th>([^<]+)</th>", facts_html)
    assert not [h for h in heads if re.fullmatch(r"[a-z]+(_[a-z0-9]+)+", h)], heads  # no snake_case keys
    assert "Calls seen by the hooks" in heads and "CPU features" in heads and "Run-time switch: jit" in heads
    assert "tape enter 40" in facts_html and "avx2, avx512_bf16" in facts_html


def test_throughput_chart_labels_are_distinct_and_not_clipped() -> None:
    r = ws.report()
    fx = r.fix
    twice = fx.model_copy(update={"trials": [*fx.trials, fx.trials[1]]})
    fig = throughput_figure(r.model_copy(update={"fix": twice}))
    assert fig is not None
    x = fig["data"][0]["x"]
    assert len(set(x)) == len(x) == 5 and "xla (2)" in x
    assert fig["layout"]["xaxis"]["automargin"] is True
    assert unique_labels(["a", "b", "a", "a"]) == ["a", "b", "a (2)", "a (3)"]


def test_stored_and_exported_files_follow_the_umask(tmp_path) -> None:
    old = os.umask(0o022)
    try:
        store = RunStore(tmp_path / "home")
        run = ws.save(store, ws.report(with_fix=False))
        out = tmp_path / "report.html"
        assert main(["report", run.id, "--home", str(store.home), "--html", str(out)]) == 0
    finally:
        os.umask(old)
    for p in (run.file("meta.json"), run.file("report.json"), out):
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
