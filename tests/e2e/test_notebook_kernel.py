"""examples/notebook.ipynb executed through a real Jupyter kernel (ipykernel, driven by nbclient):
``%load_ext tfdoctor``, ``%%tfdoctor`` on a Keras fit cell and on a custom loop with ``--fix``,
``%tfdoctor show``. The inline HTML must hold the findings and the breakdown of the stored runs, and
(with Chromium present) render its charts offline in a real browser."""

from __future__ import annotations

import html
import os
import re
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "notebook.ipynb"
CHROMIUM = os.environ.get("TFDOCTOR_CHROMIUM", "/usr/bin/chromium")


def srcdoc(fragment: str) -> str:
    m = re.search(r'srcdoc="([^"]*)"', fragment)
    assert m, fragment[:300]
    return html.unescape(m.group(1))


def tfdoctor_html(cell: dict) -> str:
    frags = [
        o["data"]["text/html"]
        for o in cell.get("outputs", [])
        if o.get("output_type") == "display_data"
        and 'class="tfdoctor"' in o.get("data", {}).get("text/html", "")
    ]
    assert len(frags) == 1, [o.get("output_type") for o in cell.get("outputs", [])]
    return frags[0]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    from tfdoctor.notebook.magics import ensure_kernelspec

    ensure_kernelspec("python3")
    work = tmp_path_factory.mktemp("nb")
    home = work / "tfdoctor-home"
    shutil.copy(NOTEBOOK, work / "notebook.ipynb")
    nb = nbformat.read(work / "notebook.ipynb", as_version=4)
    env = {"TFDOCTOR_HOME": str(home), "TF_CPP_MIN_LOG_LEVEL": "2"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits the environment it is started with
    try:
        client = nbclient.NotebookClient(
            nb, kernel_name="python3", timeout=240, resources={"metadata": {"path": str(work)}}
        )
        client.execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    nbformat.write(nb, work / "executed.ipynb")
    return nb, home, work / "executed.ipynb"


def test_notebook_runs_in_a_real_kernel_and_shows_findings_inline(executed):
    from tfdoctor.store import RunStore

    nb, home, _ = executed
    cells = [c for c in nb.cells if c.cell_type == "code"]
    for c in cells:
        assert not [o for o in c.outputs if o.get("output_type") == "error"], c.source
    fit_cell = next(c for c in cells if c.source.startswith("%%tfdoctor --steps 20 --run-id"))
    loop_cell = next(c for c in cells if "--fix" in c.source.splitlines()[0])
    show_cell = next(c for c in cells if c.source.startswith("%tfdoctor show"))

    store = RunStore(home)
    demo = store.get("notebook-demo").report()
    assert demo is not None and demo.status == "complete" and len(demo.steps) == 20
    assert demo.facts.loop_kind == "keras_fit" and demo.breakdown and demo.breakdown.steps
    assert demo.findings, "the sequential map without prefetch should be reported"

    for cell in (fit_cell, show_cell):
        frag = tfdoctor_html(cell)
        assert 'data-run-id="notebook-demo"' in frag
        page = srcdoc(frag)
        assert 'id="sec-breakdown"' in page and 'id="chart-breakdown"' in page
        assert 'id="sec-findings"' in page
        for f in demo.findings:
            assert f.rule_id in page and html.escape(f.claim, quote=False) in page

    page = srcdoc(tfdoctor_html(loop_cell))
    runs = [r for r in store.list() if r["kind"] == "notebook"]
    loop_run = next(r for r in runs if r["id"] != "notebook-demo")
    loop = store.get(loop_run["id"]).report()
    assert loop.facts.loop_kind == "custom" and loop.facts.step_kind == "tf.function"
    assert loop.fix is not None
    trials = {t.fix_id: t for t in loop.fix.trials}
    assert (
        trials["xla-jit"].status in ("kept", "rejected") and trials["tfdata-parallel-map"].status == "skipped"
    )
    assert 'id="sec-fixes"' in page and "xla-jit" in page and "tfdata-parallel-map" in page
    plain = next(
        o["data"]["text/plain"]
        for o in loop_cell.outputs
        if 'class="tfdoctor"' in o.get("data", {}).get("text/html", "")
    )
    assert "measured only in a subprocess" in plain


def test_the_saved_notebook_is_small_and_its_outputs_clean(executed):
    """plotly.js once per kernel, the report once per cell, no TF C++ log lines in the outputs, the
    cell after a profiled `history = model.fit(...)` runs, runs named by their In[] number."""
    from tfdoctor.report.html import plotly_js
    from tfdoctor.store import RunStore

    nb, home, path = executed
    cells = [c for c in nb.cells if c.cell_type == "code"]
    plotly_size = len(plotly_js())
    size = path.stat().st_size
    # three reports (fit, custom loop with its fix trials, show) and one copy of plotly
    assert size < plotly_size + 3_000_000, f"{size / 1e6:.1f} MB saved"
    carriers = [
        c
        for c in cells
        for o in c.outputs
        if "tfdoctor-plotly-js" in o.get("data", {}).get("text/html", "")
        and 'class="tfdoctor-plotly-js"' in o["data"]["text/html"]
    ]
    assert len(carriers) == 1 and carriers[0].source.startswith("%%tfdoctor --steps 20 --run-id")
    for c in cells:
        for o in c.outputs:
            text = o.get("text", "") + o.get("data", {}).get("text/plain", "")
            assert "I0000" not in text and "cpu_feature_guard" not in text and "oneDNN" not in text, text[
                :300
            ]
            if "text/html" in o.get("data", {}) and 'class="tfdoctor"' in o["data"]["text/html"]:
                assert (
                    len(o["data"]["text/html"]) < (plotly_size * 1.1 if c is carriers[0] else 0) + 1_500_000
                )
    after = next(c for c in cells if c.source.startswith('print(f"fit ran'))
    out = "".join(o.get("text", "") for o in after.outputs)
    assert "epoch(s) before tfdoctor ended it" in out, after.outputs
    fit_cell = next(c for c in cells if c.source.startswith("%%tfdoctor --steps 20 --run-id"))
    demo = RunStore(home).get("notebook-demo").report()
    assert demo.script == f"cell In[{fit_cell.execution_count}]"
    assert demo.facts.source.get("fit", "").startswith(f"In[{fit_cell.execution_count}]:"), demo.facts.source
    assert "%%tfdoctor --fix" in srcdoc(tfdoctor_html(fit_cell))  # the advice a notebook user can follow


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found")
def test_inline_report_renders_its_charts_offline_in_a_browser(executed, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    nb, _, _ = executed
    # the notebook's outputs in order, as a frontend shows them: the first report carries plotly.js,
    # the later ones (the custom loop's, the show cell's) take it from the page
    frags = [
        tfdoctor_html(c)
        for c in nb.cells
        if c.cell_type == "code"
        and c.source.startswith("%")
        and any('class="tfdoctor"' in o.get("data", {}).get("text/html", "") for o in c.outputs)
    ]
    assert len(frags) == 3
    out = tmp_path / "output.html"
    out.write_text(f"<!doctype html><html><body>{''.join(frags)}</body></html>", encoding="utf-8")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(out.as_uri())
            for i in range(3):
                frame = page.frame_locator("iframe.tfdoctor-report").nth(i)
                frame.locator('#chart-breakdown[data-rendered="1"]').wait_for(timeout=30_000)
            frame = page.frame_locator("iframe.tfdoctor-report").first
            assert frame.locator("#sec-findings details.finding").count() >= 1
            height = page.evaluate(
                "document.querySelector('iframe.tfdoctor-report').getBoundingClientRect().height"
            )
            assert height > 420  # sized to its page by the onload handler
            assert [u for u in requests if not u.startswith(("file:", "about:", "data:"))] == []
        finally:
            browser.close()
