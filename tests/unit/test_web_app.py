"""The FastAPI app, route by route, through TestClient over a real run store in a tmp dir."""

from __future__ import annotations

import json
import os

import pytest
import web_samples as ws
from fastapi.testclient import TestClient

from tfdoctor.cli import build_parser
from tfdoctor.store import RunStore
from tfdoctor.web.main import create_app

HTML = {"Accept": "text/html"}


@pytest.fixture()
def store(tmp_path, monkeypatch) -> RunStore:
    monkeypatch.setenv("TFDOCTOR_HOME", str(tmp_path / "home"))
    return RunStore(tmp_path / "home")


@pytest.fixture()
def client(store) -> TestClient:
    return TestClient(create_app(store.home))


@pytest.fixture()
def runs(store):
    after = ws.save(store, ws.after_report())
    before = ws.save(store, ws.report(after_run_id=after.id))
    return before, after


class TestRunsList:
    def test_newest_first_with_throughput_and_speedup(self, client, store, runs):
        r = client.get("/", headers=HTML)
        assert r.status_code == 200
        text = r.text
        before, after = runs
        # after was created at 10:16, before at 10:15: newest first
        assert text.index(after.id) < text.index(before.id)
        assert "5,120.0 ex/s" in text  # 160 steps/s x 32 (from the report: the index has no figures)
        assert "4.38x" in text
        assert 'href="/runs/' + before.id + '"' in text

    def test_empty_store_says_how_to_start(self, client):
        r = client.get("/", headers=HTML)
        assert r.status_code == 200
        assert "No runs yet" in r.text and "tfdoctor profile" in r.text

    def test_api_runs_is_typed_and_bounded(self, client, runs):
        r = client.get("/api/runs")
        assert r.status_code == 200
        rows = r.json()
        assert [x["id"] for x in rows] == [runs[1].id, runs[0].id]
        assert rows[1]["examples_per_s"] == pytest.approx(5120.0)
        assert rows[1]["device"] == "CPU"
        assert client.get("/api/runs?limit=1").json()[0]["id"] == runs[1].id
        assert client.get("/api/runs?limit=0").status_code == 422
        assert client.get("/api/runs?limit=100000").status_code == 422


class TestRunPage:
    def test_page_carries_everything(self, client, runs):
        before, _ = runs
        r = client.get(f"/runs/{before.id}", headers=HTML)
        assert r.status_code == 200
        t = r.text
        assert "Dispatch-bound: 76 %" in t  # verdict
        for fig in ("chart-share", "chart-breakdown", "chart-throughput"):
            assert f'id="{fig}"' in t
        data = json.loads(
            t.split('<script type="application/json" id="tfd-data">', 1)[1].split("</script>", 1)[0]
        )
        assert set(data["figures"]) >= {"breakdown", "share", "throughput"}
        # before vs after: two x axes in the per-step chart, two rows in the share chart
        assert "xaxis2" in data["figures"]["breakdown"]["layout"]
        assert data["figures"]["share"]["data"][0]["y"] == ["after fixes", "before"]
        assert 'id="finding-TFD201-eager-dispatch"' in t
        assert 'href="#fix-tf-function"' in t
        assert 'id="fix-tf-function"' in t
        assert "tensorboard --logdir" in t and before.path.name in t
        assert 'class="hl"' in t  # highlighted patch
        assert "num_parallel_calls" in t
        assert "TensorFlow" in t and "2.21.0" in t
        assert '<script src="/static/plotly.min.js"></script>' in t
        assert data["progress_url"] == f"/api/runs/{before.id}/progress"

    def test_unknown_run_is_a_404_page(self, client):
        r = client.get("/runs/20990101-000000-nope-0000", headers=HTML)
        assert r.status_code == 404
        assert "text/html" in r.headers["content-type"]
        assert "no run" in r.text and "All runs" in r.text

    @pytest.mark.parametrize(
        "path",
        [
            "/runs/..%2F..%2F..%2Fetc%2Fpasswd",
            "/runs/%2e%2e",
            "/runs/%2e%2e%2fhome",
            "/runs/.hidden",
            "/api/runs/..%2F..%2Fetc",
            "/api/runs/%2e%2e/findings",
            "/api/runs/..%5C..%5Cwindows",
            "/runs/a%00b",
        ],
    )
    def test_path_traversal_is_refused(self, client, runs, path):
        r = client.get(path, headers=HTML)
        assert r.status_code == 404
        assert "root:" not in r.text

    def test_symlink_out_of_the_store_is_refused(self, client, store, tmp_path, runs):
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "meta.json").write_text('{"script": "secret.py"}')
        os.symlink(outside, store.runs_dir / "linked-run")
        assert client.get("/runs/linked-run", headers=HTML).status_code == 404
        assert client.get("/api/runs/linked-run").status_code == 404

    def test_every_user_string_is_escaped(self, client, store):
        op = '<img src=x onerror="alert(2)">'
        r0 = ws.report(
            "20261121-120000-hostile-0001",
            script=f"/tmp/{ws.HOSTILE}.py",
            op_name=op,
            error=f"Traceback: {ws.HOSTILE}",
            status="failed",
        )
        ws.save(store, r0)
        for path in ("/", f"/runs/{r0.run_id}"):
            t = client.get(path, headers=HTML).text
            assert ws.HOSTILE not in t
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in t
            assert "onerror=" not in t.replace("onerror=&#34;", "")
            assert "<img" not in t
        t = client.get(f"/runs/{r0.run_id}", headers=HTML).text
        assert "&lt;img src=x onerror=" in t

    def test_running_run_without_report_shows_live_progress(self, client, store):
        run = store.new_run("examples/function_loop.py", ["--steps", "20"])
        store.update(run, target_steps=20)
        ws.write_steps(run, ws.steps(5))
        t = client.get(f"/runs/{run.id}", headers=HTML).text
        assert 'id="live"' in t and "Profiling is in progress." in t
        p = client.get(f"/api/runs/{run.id}/progress").json()
        assert p["status"] == "running" and p["steps_done"] == 5 and p["fraction"] == pytest.approx(0.25)
        assert p["last_step_ms"] == pytest.approx(6.0)
        assert p["phase"] == "profiling" and not p["has_report"]
        # steps.jsonl grows, a half-written line is ignored
        with open(run.file("steps.jsonl"), "a") as f:
            for s in ws.steps(7)[5:]:
                f.write(s.model_dump_json() + "\n")
            f.write('{"index": 7, "wind')
        p = client.get(f"/api/runs/{run.id}/progress").json()
        assert p["steps_done"] == 8 and p["last_loss"] == pytest.approx(2.3 - 0.06)
        store.update(run, status="complete")
        run.write_report(ws.report(run.id))
        p = client.get(f"/api/runs/{run.id}/progress").json()
        assert p["status"] == "complete" and p["has_report"]

    def test_unreadable_report_is_said_not_a_500(self, client, store):
        run = store.new_run("train.py")
        store.update(run, status="complete")
        run.file("report.json").write_text("{not json")
        r = client.get(f"/runs/{run.id}", headers=HTML)
        assert r.status_code == 200
        assert "report.json could not be read" in r.text
        d = client.get(f"/api/runs/{run.id}").json()
        assert d["report"] is None and "could not be read" in d["report_error"]

    def test_patch_and_download(self, client, runs):
        before, after = runs
        r = client.get(f"/runs/{before.id}/patch")
        assert r.status_code == 200 and r.text == ws.PATCH and "text/x-diff" in r.headers["content-type"]
        assert client.get(f"/runs/{after.id}/patch", headers=HTML).status_code == 404
        r = client.get(f"/runs/{before.id}/report.html")
        assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
        assert "/static/plotly.min.js" not in r.text and "Plotly" in r.text


class TestApi:
    def test_run_detail_and_step_bound(self, client, runs):
        before, _ = runs
        d = client.get(f"/api/runs/{before.id}").json()
        assert d["summary"]["id"] == before.id
        assert d["report"]["verdict"].startswith("Dispatch-bound")
        assert len(d["report"]["steps"]) == 20 and not d["steps_truncated"]
        d = client.get(f"/api/runs/{before.id}?max_steps=3").json()
        assert len(d["report"]["steps"]) == 3 and d["steps_truncated"]
        assert client.get(f"/api/runs/{before.id}?max_steps=-1").status_code == 422

    def test_findings(self, client, runs):
        f = client.get(f"/api/runs/{runs[0].id}/findings").json()
        assert [x["rule_id"] for x in f] == ["TFD201", "TFD101", "TFD401"]
        assert f[0]["fix_ids"] == ["tf-function"]
        assert client.get("/api/runs/nope-run/findings").status_code == 404
        assert client.get("/api/runs/nope-run/findings").json() == {"detail": "no run 'nope-run'"}

    def test_timeline_needs_a_trace(self, client, runs):
        assert client.get(f"/api/runs/{runs[0].id}/timeline").status_code == 404
        r = client.get(f"/api/runs/{runs[0].id}/timeline/figure")
        assert r.status_code == 200 and r.json()["figure"] is None

    def test_compare(self, client, runs):
        before, after = runs
        c = client.get(f"/api/compare?a={before.id}&b={after.id}").json()
        assert c["speedup"] == pytest.approx(700 / 160)
        assert c["unit"] == "examples/s" and c["within_noise"] is False
        dispatch = next(x for x in c["categories"] if x["category"] == "dispatch")
        assert dispatch["delta_ms"] == pytest.approx(0.2 - 2.4, rel=0.05)
        assert c["only_a"] == ["TFD101", "TFD201", "TFD401"]
        assert client.get(f"/api/compare?a={before.id}&b=..%2Fx").status_code == 404

    def test_compare_pages(self, client, runs):
        before, after = runs
        t = client.get(f"/compare?a={before.id}&b={after.id}", headers=HTML).text
        assert "B is 4.38x faster than A (examples/s)" in t
        assert 'id="delta-table"' in t and "−2." not in t and "-2.2" in t
        t = client.get("/compare", headers=HTML).text
        assert "<select" in t and before.id in t

    def test_openapi_documents_response_models(self, client):
        spec = client.get("/openapi.json").json()
        paths = spec["paths"]
        for p in (
            "/api/runs",
            "/api/runs/{run_id}",
            "/api/runs/{run_id}/findings",
            "/api/runs/{run_id}/progress",
        ):
            assert "200" in paths[p]["get"]["responses"]
        assert "RunDetail" in spec["components"]["schemas"] and "Finding" in spec["components"]["schemas"]
        assert client.get("/docs").status_code == 200
        assert "/runs/{run_id}" not in paths  # HTML pages stay out of the API docs

    def test_static_assets(self, client):
        r = client.get("/static/plotly.min.js")
        assert r.status_code == 200 and len(r.content) > 1_000_000
        assert client.get("/static/favicon.svg").status_code == 200
        assert client.get("/static/../main.py").status_code == 404


def test_serve_binds_localhost_unless_told():
    args = build_parser().parse_args(["serve"])
    assert args.host == "127.0.0.1" and args.port == 8765
    assert build_parser().parse_args(["serve", "--host", "0.0.0.0"]).host == "0.0.0.0"


def test_serve_refuses_a_taken_port(tmp_path, capsys):
    import socket

    from tfdoctor.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc = main(["serve", "--port", str(port), "--home", str(tmp_path)])
    assert rc == 1
    assert "port is taken" in capsys.readouterr().err


def test_open_in_browser_starts_a_server_and_opens_the_run(store, runs, monkeypatch):
    import socket
    import time
    import urllib.request
    import webbrowser

    from tfdoctor.web.main import open_in_browser, server_running

    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before, _ = runs
    url = open_in_browser(before, port=port, block=False)
    assert url == f"http://127.0.0.1:{port}/runs/{before.id}"
    for _ in range(100):
        if opened:
            break
        time.sleep(0.05)
    assert opened == [url]
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.status == 200 and before.id in r.read().decode()
    # a second call finds the running server and only opens the page
    assert server_running("127.0.0.1", port)
    assert open_in_browser(before.id, port=port, block=False) == url
    assert opened == [url, url]
