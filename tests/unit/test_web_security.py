"""The web UI lets nobody in (issue 16, items 17-18): requests naming another host are refused (DNS
rebinding), and files inside a run are never read through a link out of the run directory."""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import web_samples as ws
from fastapi.testclient import TestClient

from tfdoctor.rundir import RunDir, UnsafeRunFile
from tfdoctor.store import RunStore
from tfdoctor.web.main import allowed_hosts_for, create_app, host_name

HTML = {"Accept": "text/html"}
SECRET = "root:x:0:0:SECRET-CONTENT-OUTSIDE-THE-RUN:/root:/bin/bash\n"


@pytest.fixture()
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path / "home")


@pytest.fixture()
def run(store) -> RunDir:
    return ws.save(store, ws.report())


@pytest.fixture()
def client(store) -> TestClient:
    return TestClient(create_app(store.home))


# -- item 17: Host header check ---------------------------------------------------------------------
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.nip.io", "localhostx"])
def test_a_request_naming_another_host_is_refused_and_reads_nothing(client, run, host):
    for path in ("/", "/api/runs", f"/runs/{run.id}", f"/api/runs/{run.id}", f"/runs/{run.id}/patch"):
        r = client.get(path, headers={"Host": host, **HTML})
        assert r.status_code == 400, (path, r.status_code)
        assert run.id not in r.text and "train" not in r.text


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8765", "localhost:8765", "LOCALHOST.", "[::1]:8765", "127.0.0.1"]
)
def test_loopback_names_are_served(client, run, host):
    r = client.get("/api/runs", headers={"Host": host})
    assert r.status_code == 200 and r.json()[0]["id"] == run.id


def test_the_names_a_server_answers_follow_its_bind_address():
    assert allowed_hosts_for("127.0.0.1") == {"127.0.0.1", "localhost", "::1"}
    assert "tfd.example.org" in allowed_hosts_for("tfd.example.org")
    assert "10.1.2.3" in allowed_hosts_for("10.1.2.3")
    wild = allowed_hosts_for("0.0.0.0")
    assert host_name(socket.gethostname()) in wild and "evil.example" not in wild
    assert host_name("[::1]:80") == "::1" and host_name("Example.ORG.:443") == "example.org"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def live_server(store, run) -> Iterator[int]:
    """The app under a real uvicorn on 127.0.0.1 (what ``tfdoctor serve`` runs)."""
    import uvicorn

    from tfdoctor.web.main import allowed_hosts_for

    app = create_app(store.home)
    app.state.allowed_hosts.update(allowed_hosts_for("127.0.0.1"))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(30)


def _get(port: int, path: str, host: str) -> tuple[int, str]:
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        con.putrequest("GET", path, skip_host=True)
        con.putheader("Host", host)
        con.endheaders()
        r = con.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        con.close()


def test_dns_rebinding_against_a_real_server_is_refused(live_server, run):
    status, body = _get(live_server, "/api/runs", f"evil.example:{live_server}")
    assert status == 400 and run.id not in body
    status, body = _get(live_server, "/api/runs", f"127.0.0.1:{live_server}")
    assert status == 200 and run.id in body
    status, body = _get(live_server, "/api/runs", f"localhost:{live_server}")
    assert status == 200 and run.id in body


# -- item 18: never follow a link out of the run directory ------------------------------------------
@pytest.fixture()
def secret(tmp_path) -> Path:
    p = tmp_path / "passwd"
    p.write_text(SECRET)
    return p


def test_a_linked_fix_patch_is_not_served(client, store, secret):
    run = ws.save(store, ws.report(with_fix=False))
    run.file("fix.patch").symlink_to(secret)
    page = client.get(f"/runs/{run.id}", headers=HTML)
    assert page.status_code == 200 and "SECRET-CONTENT" not in page.text
    r = client.get(f"/runs/{run.id}/patch")
    assert r.status_code == 404 and "SECRET-CONTENT" not in r.text
    for path in (f"/api/runs/{run.id}", f"/runs/{run.id}/report.html"):
        assert "SECRET-CONTENT" not in client.get(path).text


def test_a_linked_report_meta_or_steps_file_is_not_read(client, store, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    other = ws.save(RunStore(outside), ws.report(run_id="elsewhere", script="SECRET-CONTENT.py"))
    run = ws.save(store, ws.report(with_fix=False))
    for name in ("report.json", "steps.jsonl", "meta.json"):
        run.file(name).unlink()
        run.file(name).symlink_to(other.file(name))
    for path in (f"/runs/{run.id}", f"/api/runs/{run.id}", f"/api/runs/{run.id}/progress", "/"):
        r = client.get(path, headers=HTML)
        assert r.status_code < 500, (path, r.status_code)
        assert "SECRET-CONTENT" not in r.text, path
    assert client.get(f"/api/runs/{run.id}/progress").json()["steps_done"] == 0


def test_a_linked_folder_inside_a_run_is_not_read_through(store, secret):
    run = ws.save(store, ws.report(with_fix=False))
    (run.path / "sub").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(UnsafeRunFile, match="leads out of the run directory"):
        run.read_bytes(f"sub/{secret.name}")


def test_a_fifo_in_a_run_is_not_opened(store):
    run = ws.save(store, ws.report(with_fix=False))
    os.mkfifo(run.file("fix.patch"))
    with pytest.raises(UnsafeRunFile, match="not a regular file"):
        run.read_bytes("fix.patch")  # returns at once: O_NONBLOCK, then refused by fstat
