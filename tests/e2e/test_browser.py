"""The web UI and the static report in a real headless Chromium (Debian's, driven by Playwright),
against a real uvicorn server over a store holding a REAL recorded run: a tiny TF training loop run
in a child process under the TF profiler, analysed by tfdoctor's own pipeline (or, once it exists,
``tfdoctor profile examples/function_loop.py --steps 20``). Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CHROMIUM = os.environ.get("TFDOCTOR_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} not found: run scripts/install-browser.sh", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright python package is not installed")
pytest.importorskip("tensorflow", reason="the e2e run records a real TensorFlow training loop")
pytest.importorskip("uvicorn", reason="the web extra is not installed")

# tests/unit/web_samples.py: the model-built reports the unit tests use
_spec = importlib.util.spec_from_file_location("web_samples", ROOT / "tests/unit/web_samples.py")
ws = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ws)

RECORDER = textwrap.dedent(
    """
    # A tiny eager custom loop fed by tf.data, profiled for 8 steps: what tfdoctor's harness
    # writes, minus the harness (facts.json, steps.jsonl, logdir/ with the xplane).
    import json, os, sys, time
    import tensorflow as tf

    run_dir = sys.argv[1]
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.random.normal([1024, 32], seed=1), tf.random.uniform([1024], maxval=10, dtype=tf.int32, seed=2))
    )
    ds = ds.map(lambda x, y: (tf.math.tanh(x) * 2.0, y)).batch(32).repeat()
    model = tf.keras.Sequential(
        [tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(10)]
    )
    opt = tf.keras.optimizers.SGD(0.01)
    lossf = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    it = iter(ds)
    steps = []

    def one(i, window):
        t0 = time.time_ns()
        x, y = next(it)
        t1 = time.time_ns()
        with tf.GradientTape() as tape:
            loss = lossf(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        lv = float(loss)
        steps.append(dict(index=i, window=window, start_ns=t0, end_ns=time.time_ns(),
                          input_wait_ns=t1 - t0, loss=lv, examples=32))

    for i in range(2):
        one(i, "warmup")
    for i in range(2, 12):
        one(i, "timing")
    tf.profiler.experimental.start(os.path.join(run_dir, "logdir"))
    for i in range(12, 20):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            one(i, "profile")
    tf.profiler.experimental.stop()
    with open(os.path.join(run_dir, "steps.jsonl"), "w") as f:
        for s in steps:
            f.write(json.dumps(s) + "\\n")
    facts = dict(
        tf_version=tf.__version__, python_version=sys.version.split()[0],
        devices=[{"name": d.name, "kind": d.device_type} for d in tf.config.list_physical_devices()],
        loop_kind="custom", step_kind="eager", step_counter="apply_gradients", input_kind="tf.data",
        batch_size=32, dtype_policy="float32", optimizer="SGD", learning_rate=0.01,
    )
    with open(os.path.join(run_dir, "facts.json"), "w") as f:
        json.dump(facts, f)
    """
)


def _has_profile_command() -> bool:
    from tfdoctor.commands import discover

    return any(c.name == "profile" for c in discover())


def _record_real_run(home: Path) -> str:
    """A real run in the store at ``home``; returns its id."""
    from tfdoctor.store import RunStore

    env = {**os.environ, "TFDOCTOR_HOME": str(home), "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    store = RunStore(home)
    if _has_profile_command():
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "tfdoctor",
                "profile",
                str(ROOT / "examples/function_loop.py"),
                "--steps",
                "20",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        runs = store.list()
        assert runs, f"tfdoctor profile made no run (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
        return runs[0]["id"]
    from tfdoctor.session.build import build_report

    run = store.new_run("examples/tiny_eager_loop.py", ["--steps", "20"])
    script = home / "recorder.py"
    script.write_text(RECORDER)
    proc = subprocess.run(
        [sys.executable, str(script), str(run.path)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    store.update(run, status="complete")
    report = build_report(run)
    run.write_report(report)
    return run.id


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tfdoctor-home")


@pytest.fixture(scope="module")
def real_run(home) -> str:
    return _record_real_run(home)


@pytest.fixture(scope="module")
def sample_runs(home, real_run):
    """Model-built before/after runs with findings and a fix; the before run gets a copy of the
    real run's trace so its timeline is real too."""
    from tfdoctor.store import RunStore

    store = RunStore(home)
    after = ws.save(store, ws.after_report())
    before = ws.save(store, ws.report(after_run_id=after.id, op_name="<b>MatMul</b>"))
    shutil.copytree(store.runs_dir / real_run / "logdir", before.logdir)
    return before.id, after.id


@pytest.fixture(scope="module")
def server(home, real_run, sample_runs):
    import uvicorn

    from tfdoctor.web.main import create_app

    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(home), host="127.0.0.1", port=port, log_level="warning"))
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    for _ in range(200):
        if srv.started:
            break
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    th.join(timeout=10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


class Page:
    """A page that records console errors and every request it makes."""

    def __init__(self, browser):
        self.ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on(
            "console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None
        )
        self.page.on("request", lambda r: self.requests.append(r.url))

    def close(self):
        self.ctx.close()


@pytest.fixture()
def page(browser):
    p = Page(browser)
    yield p
    p.close()


def _plot_traces(pg, el_id: str) -> int:
    """Number of plotly traces drawn in #el_id (0 when plotly did not render it)."""
    return pg.evaluate(
        """id => { const el = document.getElementById(id);
             if (!el || !el.data || !el.querySelector('.main-svg')) return 0;
             return el.data.filter(t => (t.x && t.x.length) || (t.y && t.y.length)).length; }""",
        el_id,
    )


def _shot(pg, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    pg.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    return path


def test_real_run_page_renders_its_charts(server, home, real_run, page):
    from tfdoctor.store import RunStore

    report = RunStore(home).get(real_run).report()
    assert report is not None and report.breakdown is not None and report.breakdown.steps
    pg = page.page
    resp = pg.goto(f"{server}/runs/{real_run}")
    assert resp.status == 200
    pg.wait_for_selector("#chart-breakdown[data-rendered='1']", timeout=20_000)
    pg.wait_for_selector("#chart-timeline[data-rendered='1']", timeout=30_000)  # fetched, built, cached
    for el in ("chart-share", "chart-breakdown", "chart-throughput", "chart-timeline"):
        assert _plot_traces(pg, el) > 0, el
    n_bars = pg.evaluate("document.getElementById('chart-breakdown').data[0].x.length")
    assert n_bars == len(report.breakdown.steps)  # one bar per profiled step
    assert pg.inner_text("#verdict p").strip()
    assert "tensorboard --logdir" in pg.inner_text("#tb-cmd")
    rows = pg.evaluate("document.getElementById('chart-timeline').data.map(t => t.y).flat()")
    assert any("python" in r for r in rows) and any("tf_data" in r for r in rows)
    findings = pg.locator("details.finding")
    if findings.count():  # the rules found something in this real run: open it
        findings.first.locator("summary").click()
        assert findings.first.get_attribute("open") is not None
        assert findings.first.locator(".finding-body").is_visible()
    _shot(pg, "run-page-real.png")
    assert not page.errors, page.errors


def test_clicking_a_finding_opens_it_and_marks_the_timeline(server, sample_runs, page):
    pg = page.page
    before, _ = sample_runs
    pg.goto(f"{server}/runs/{before}")
    pg.wait_for_selector("#chart-timeline[data-rendered='1']", timeout=30_000)
    card = pg.locator("#finding-TFD201-eager-dispatch")
    assert card.get_attribute("open") is None
    assert not card.locator(".finding-body").is_visible()
    card.locator("summary").click()
    pg.wait_for_selector("#finding-TFD201-eager-dispatch[open]")
    assert card.locator("table.evidence").is_visible()
    assert "<b>MatMul</b>" in card.locator("table.evidence").inner_text()  # escaped, shown as text
    assert pg.locator("#finding-TFD201-eager-dispatch b").count() == 0
    pg.wait_for_function("document.getElementById('chart-timeline').getAttribute('data-highlighted') === '2'")
    shapes = pg.evaluate(
        "document.getElementById('chart-timeline').layout.shapes.filter(s => s.name === 'evidence')"
    )
    assert [(s["x0"], s["x1"]) for s in shapes] == [(6.1, 6.4), (12.2, 12.5)]
    assert pg.evaluate("location.hash") == "#finding-TFD201-eager-dispatch"
    # the fix chip jumps to the fix's row
    card.locator("a.chip").click()
    assert pg.evaluate("location.hash") == "#fix-tf-function"
    assert pg.locator("#fix-tf-function").is_visible()
    # before vs after: the breakdown has two panels
    assert pg.evaluate("!!document.getElementById('chart-breakdown').layout.xaxis2")
    assert _plot_traces(pg, "chart-throughput") == 1
    assert pg.locator("#sec-patch .hl .gi").count() >= 2
    pg.locator("#finding-TFD201-eager-dispatch").scroll_into_view_if_needed()
    _shot(pg, "run-page-finding.png")
    assert not page.errors, page.errors


def test_static_report_works_offline(home, real_run, sample_runs, page, tmp_path):
    out = tmp_path / "report.html"
    env = {**os.environ, "TFDOCTOR_HOME": str(home)}
    before, _ = sample_runs
    proc = subprocess.run(
        [sys.executable, "-m", "tfdoctor", "report", before, "--html", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    pg = page.page
    pg.route(
        "**/*",
        lambda route: route.abort() if not route.request.url.startswith("file:") else route.continue_(),
    )
    pg.goto(out.as_uri())
    pg.wait_for_selector("#chart-timeline[data-rendered='1']", timeout=20_000)
    for el in ("chart-share", "chart-breakdown", "chart-throughput", "chart-timeline"):
        assert _plot_traces(pg, el) > 0, el
    external = [u for u in page.requests if not u.startswith(("file:", "data:", "blob:"))]
    assert external == [], external
    pg.locator("#finding-TFD201-eager-dispatch summary").click()
    assert pg.locator("#finding-TFD201-eager-dispatch table.evidence").is_visible()
    _shot(pg, "static-report.png")
    assert not page.errors, page.errors


def test_live_progress_then_reload_when_done(server, home, page):
    from tfdoctor.store import RunStore

    store = RunStore(home)
    run = store.new_run("examples/live_loop.py", ["--steps", "40"])
    store.update(run, target_steps=40)
    steps = ws.steps(40)
    ws.write_steps(run, steps[:4])
    pg = page.page
    pg.goto(f"{server}/runs/{run.id}")
    assert pg.locator("#live").is_visible()
    pg.wait_for_function("document.getElementById('live-steps').textContent === '4'")
    with open(run.file("steps.jsonl"), "a", encoding="utf-8") as f:
        for s in steps[4:30]:
            f.write(s.model_dump_json() + "\n")
    pg.wait_for_function("document.getElementById('live-steps').textContent === '30'", timeout=15_000)
    assert pg.inner_text("#live-last") == "6.0 ms"
    width = pg.evaluate("document.getElementById('live-bar-fill').style.width")
    assert width == "75%"
    _shot(pg, "run-page-live.png")
    run.write_report(ws.report(run.id, with_fix=False))
    store.update(run, status="complete")
    pg.wait_for_selector("#chart-breakdown[data-rendered='1']", timeout=15_000)  # the page reloaded
    assert pg.locator("#live").count() == 0
    assert pg.text_content("#run-status").strip() == "complete"
    assert not page.errors, page.errors


def test_runs_list_compare_and_404(server, real_run, sample_runs, page):
    pg = page.page
    pg.goto(server + "/")
    rows = pg.locator("#runs tbody tr")
    assert rows.count() >= 3
    assert real_run in pg.inner_text("#runs")
    before, after = sample_runs
    pg.select_option("select[name=a]", before)
    pg.select_option("select[name=b]", after)
    pg.click("form.compare-form button")
    pg.wait_for_selector("#chart-throughput[data-rendered='1']")
    assert "B is 4.38x faster than A" in pg.inner_text("#compare-headline")
    assert _plot_traces(pg, "chart-share") > 0
    _shot(pg, "compare.png")
    resp = pg.goto(server + "/runs/does-not-exist")
    assert resp.status == 404 and "no run" in pg.inner_text("main")
    resp = pg.goto(server + "/runs/..%2F..%2Fetc%2Fpasswd")
    assert resp.status == 404
    api = json.loads(pg.goto(server + "/api/runs").text())
    assert {r["id"] for r in api} >= {real_run, before, after}
    assert not [e for e in page.errors if "404" not in e], page.errors
