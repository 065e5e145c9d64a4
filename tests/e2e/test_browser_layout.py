"""The web UI's pages in a real headless Chromium at 1400 and 390 px (a laptop, a phone): no horizontal
overflow, no console errors, nothing loaded from another host; /docs renders Swagger UI offline.
The runs are model-built (tests/unit/web_samples.py) with fix trials under the --fix run."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.e2e

CHROMIUM = os.environ.get("TFDOCTOR_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
]
ROOT = Path(__file__).resolve().parents[2]

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} not found: run scripts/install-browser.sh", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright python package is not installed")
pytest.importorskip("uvicorn", reason="the web extra is not installed")

_spec = importlib.util.spec_from_file_location("web_samples", ROOT / "tests/unit/web_samples.py")
ws = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ws)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    import uvicorn

    from tfdoctor.store import RunStore
    from tfdoctor.web.main import create_app

    store = RunStore(tmp_path_factory.mktemp("home"))
    after = ws.save(store, ws.after_report())
    before = ws.save(store, ws.report(after_run_id=after.id))
    for i in range(6):
        t = store.new_run(
            "examples/train.py", [], kind="fix", parent=before.id, run_id=f"{before.id}-trial-{i}"
        )
        store.update(t, status="complete", examples_per_s=150.0 + i)
    # a recorded CPU run, its report rebuilt from the trace: the profiler-cost and precision cards, the
    # corrected share bar and the timeline's kernels row (real trace) at both widths
    recorded = store.new_run("examples/keras_fit.py", [], run_id="20261123-200000-keras_fit")
    shutil.copytree(ROOT / "sample_traces/cpu-keras_fit/logdir", recorded.logdir, dirs_exist_ok=True)
    shutil.copy(ROOT / "sample_traces/cpu-keras_fit/steps.jsonl", recorded.file("steps.jsonl"))
    shutil.copy(ROOT / "sample_traces/cpu-keras_fit/harness.json", recorded.file("harness.json"))
    shutil.copy(ROOT / "sample_traces/cpu-keras_fit/facts.json", recorded.file("facts.json"))
    from tfdoctor.session.build import build_report

    recorded.write_report(build_report(recorded))
    store.update(recorded, status="complete")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(
        uvicorn.Config(create_app(store.home), host="127.0.0.1", port=port, log_level="warning")
    )
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    for _ in range(200):
        if srv.started:
            break
        time.sleep(0.05)
    assert srv.started
    yield f"http://127.0.0.1:{port}", before.id, after.id, recorded.id
    srv.should_exit = True
    th.join(timeout=10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


WIDE_ELEMENTS = """w => Array.from(document.querySelectorAll('body *'))
  .filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.right > w + 1
                 && !e.closest('.card') })
  .slice(0, 5).map(e => e.tagName + '.' + e.className)"""


@pytest.mark.parametrize("width", [1400, 390])
def test_pages_fit_the_screen_without_errors(site, browser, width) -> None:
    base, before, after, recorded = site
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    pg = ctx.new_page()
    errors: list[str] = []
    hosts: set[str] = set()
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("request", lambda r: hosts.add(urlparse(r.url).netloc))
    try:
        for path in (
            "/",
            f"/runs/{before}",
            f"/runs/{after}",
            f"/runs/{recorded}",
            f"/compare?a={before}&b={after}",
            "/docs",
        ):
            resp = pg.goto(base + path)
            assert resp is not None and resp.status == 200, path
            if path.startswith("/runs/"):
                pg.wait_for_selector("#chart-breakdown[data-rendered='1']", timeout=20_000)
            if path == f"/runs/{recorded}":
                assert pg.is_visible("#tracer-cost")
                pg.wait_for_selector("#chart-timeline[data-rendered='1']", timeout=30_000)
                assert "python › kernels" in pg.inner_text("#chart-timeline")
            if path == "/docs":
                pg.wait_for_selector(".swagger-ui .info .title", timeout=20_000)
                assert "tfdoctor" in pg.inner_text(".swagger-ui .info .title")
            scroll = pg.evaluate("document.documentElement.scrollWidth")
            assert scroll <= width, (path, scroll, pg.evaluate(WIDE_ELEMENTS, width))
        pg.goto(base + "/")
        assert pg.locator(f"details.trials[data-parent='{before}'] li").count() == 6
        assert pg.locator("#runs a.script").count() == 3
    finally:
        ctx.close()
    assert not errors, errors
    assert hosts == {base.split("//")[1]}, hosts  # everything from this server: works offline
