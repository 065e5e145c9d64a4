"""The run page payload, the static HTML report, ``tfdoctor report --html`` and ``tfdoctor compare``."""

from __future__ import annotations

import json
import re

import pytest
import web_samples as ws

from tfdoctor.cli import main
from tfdoctor.model import Report
from tfdoctor.report import charts
from tfdoctor.report.compare import compare
from tfdoctor.report.html import (
    OutputExists,
    after_run_id,
    derived_verdict,
    render_run,
    report_html,
    run_page,
    write_output,
)
from tfdoctor.store import RunStore


def _data(html: str) -> dict:
    return json.loads(
        html.split('<script type="application/json" id="tfd-data">', 1)[1].split("</script>", 1)[0]
    )


class TestRunPagePayload:
    def setup_method(self):
        self.before = ws.report(after_run_id="20261121-101600-train-fix1")
        self.after = ws.after_report()
        self.page = run_page(self.before, after=self.after)

    def test_breakdown_before_and_after(self):
        fig = self.page.figures["breakdown"]
        names = {t["name"] for t in fig["data"]}
        assert names == {"Input wait", "Host compute", "Launch / dispatch", "Device compute"}
        assert {t["xaxis"] for t in fig["data"]} == {"x", "x2"}
        first = next(t for t in fig["data"] if t["name"] == "Launch / dispatch" and t["xaxis"] == "x")
        assert first["x"][0] == "13" and first["y"][0] == pytest.approx(
            2.4 * (1 + 0.03 * ((0 % 11) - 5) / 5), rel=1e-3
        )
        share = self.page.figures["share"]
        disp = next(t for t in share["data"] if t["name"] == "Launch / dispatch")
        assert disp["y"] == ["after fixes", "before"]
        assert disp["x"][1] > 5 * disp["x"][0]

    def test_throughput_per_fix_with_noise_band(self):
        fig = self.page.figures["throughput"]
        bar = fig["data"][0]
        assert bar["x"] == ["baseline", "tf-function", "xla", "combined"]
        assert bar["y"][0] == pytest.approx(160 * 32)
        assert bar["text"] == ["", "4.10x", "0.981x", "4.38x"]
        assert bar["error_y"]["array"][0] == pytest.approx(160 * 32 * 0.03, rel=1e-6)
        assert bar["error_y"]["arrayminus"][0] == pytest.approx(160 * 32 * 0.03, rel=1e-6)
        band = fig["layout"]["shapes"][0]
        assert band["y0"] == pytest.approx(160 * 32 * 0.97) and band["y1"] == pytest.approx(160 * 32 * 1.03)
        colors = bar["marker"]["color"]
        assert colors[1] == charts.STATUS_COLORS["kept"] and colors[2] == charts.STATUS_COLORS["rejected"]

    def test_findings_ordered_and_linked_to_fixes(self):
        f = self.page.findings
        assert [x.rule_id for x in f] == ["TFD201", "TFD101", "TFD401"]
        assert f[0].fixes == [("tf-function", "fix-tf-function")]
        assert f[1].fixes == [("tfdata-autotune", None)]  # no trial of that fix
        assert f[0].saving == "≈ 62 % of step time"
        assert f[0].ranges == [(6.1, 6.4), (12.2, 12.5)]
        assert not f[2].decided and f[2].why_not == "batch size is fixed by the dataset"

    def test_metrics_facts_patch(self):
        m = {x.label: x for x in self.page.metrics}
        assert m["Baseline"].value == "5,120 ex/s"
        assert m["After fixes"].value == "22,400 ex/s" and m["After fixes"].tone == "good"
        assert m["After fixes"].sub.startswith("4.38x")
        assert m["Findings"].value == "3" and m["Findings"].sub == "1 high"
        facts = dict(self.page.facts)
        assert facts["TensorFlow"] == "2.21.0" and facts["Batch size"] == "32"
        assert facts["Dataset"] == "map → batch → repeat"
        assert facts["Where: the training step function"] == "train.py:31"
        assert "XLA (jit_compile)" in facts and facts["XLA (jit_compile)"] == "off"
        assert self.page.patch_stats == "+3 −1"
        assert (
            '<span class="gi">+    ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)</span>'
            in self.page.patch_html
        )

    def test_tensorboard_command_quotes_the_path(self, tmp_path):
        p = tmp_path / "my runs" / "r1"
        page = run_page(self.before, run_path=p)
        assert page.tensorboard_cmd == f"tensorboard --logdir '{p}/logdir'"
        assert run_page(self.before).tensorboard_cmd is None

    def test_after_run_is_the_combined_or_last_kept_trial(self):
        assert after_run_id(self.before) == "20261121-101600-train-fix1"
        assert after_run_id(ws.report(with_fix=False)) is None

    def test_no_rule_verdict_falls_back_to_the_breakdown(self):
        r = self.before.model_copy(update={"verdict": ""})
        page = run_page(r)
        assert page.verdict_derived
        assert page.verdict == (
            "Step time (5.9 ms on average) is dominated by launch / dispatch (41 %), then host compute (36 %)."
        )
        empty = Report(
            run_id="x", script="t.py", created="2026-01-01T00:00:00", status="failed", error="boom"
        )
        assert derived_verdict(empty).startswith("The run ended with status “failed”")

    def test_long_runs_are_binned(self):
        r = ws.report(n_steps=1000)
        fig = run_page(r).figures["breakdown"]
        bar = fig["data"][0]
        assert len(bar["x"]) == 334 == -(-1000 // 3)
        assert bar["customdata"][0] == "steps 13–15 (mean)"
        total_before = sum(s.ms["input_wait"] for s in r.breakdown.steps)
        assert sum(bar["y"]) * 3 == pytest.approx(total_before, rel=0.01)


class TestStaticReport:
    def test_self_contained(self, tmp_path):
        html = report_html(ws.report(), run_path=tmp_path)
        # plotly inlined, no script/style/img loaded from anywhere
        assert "/static/plotly.min.js" not in html
        assert re.search(r"<script[^>]+src=", html) is None
        assert re.search(r"<link[^>]+href=", html) is None
        assert "Plotly" in html and len(html) > 3_000_000
        data = _data(html)
        assert set(data["figures"]) >= {"breakdown", "throughput", "share"}
        assert data["progress_url"] is None
        assert 'href="/' not in html  # no links into a server that is not there

    def test_same_content_as_the_server_page(self):
        page = run_page(ws.report())
        static = render_run(page, standalone=True)
        served = render_run(page, standalone=False, progress_url="/api/runs/x/progress")
        strip = re.compile(r"<script.*?</script>|<header.*?</header>|<footer.*?</footer>|<link[^>]*>", re.S)
        assert strip.sub("", static) == strip.sub("", served)
        assert _data(static)["figures"] == _data(served)["figures"]

    def test_escapes_script_and_op_names(self):
        r = ws.report(
            script=f"{ws.HOSTILE}.py", op_name="<b>MatMul</b>&co", error=f"x {ws.HOSTILE}", status="failed"
        )
        html = report_html(r)
        body = html.split("<script>", 1)[0]  # the part before plotly's inlined source
        assert ws.HOSTILE not in html.replace(ws.HOSTILE.replace("</", "<\\/"), "")
        assert "&lt;script&gt;alert(1)&lt;/script&gt;.py" in body
        assert "&lt;b&gt;MatMul&lt;/b&gt;&amp;co" in body
        assert "<b>MatMul" not in html
        # JSON data islands cannot close their <script> either
        assert ws.HOSTILE not in html.split('id="tfd-data">', 1)[1].split("</script>", 1)[0]

    def test_write_refuses_to_overwrite(self, tmp_path):
        out = tmp_path / "r.html"
        write_output(out, "one", force=False)
        with pytest.raises(OutputExists):
            write_output(out, "two", force=False)
        assert out.read_text() == "one"
        write_output(out, "two", force=True)
        assert out.read_text() == "two"


class TestCommands:
    @pytest.fixture()
    def store(self, tmp_path, monkeypatch):
        monkeypatch.setenv("TFDOCTOR_HOME", str(tmp_path / "home"))
        s = RunStore()
        ws.save(s, ws.after_report())
        ws.save(s, ws.report(after_run_id="20261121-101600-train-fix1"))
        return s

    def test_report_html_and_force(self, store, tmp_path, capsys):
        out = tmp_path / "out.html"
        assert main(["report", "20261121-101500-train-ab12", "--html", str(out)]) == 0
        html = out.read_text()
        assert "Dispatch-bound" in html and "after fixes" in html
        out.write_text("mine")
        assert main(["report", "20261121-101500-train-ab12", "--html", str(out)]) == 6
        assert out.read_text() == "mine"
        assert "pass --force" in capsys.readouterr().err
        assert main(["report", "20261121-101500-train-ab12", "--html", str(out), "--force"]) == 0
        assert out.read_text() != "mine"

    def test_report_unknown_run(self, store, capsys):
        assert main(["report", "no-such-run", "--html", "x.html"]) == 2
        assert "no run 'no-such-run'" in capsys.readouterr().err

    def test_report_json(self, store, capsys):
        assert main(["report", "20261121-101500-train-ab12", "--json"]) == 0
        assert Report.model_validate_json(capsys.readouterr().out).run_id == "20261121-101500-train-ab12"

    def test_compare_terminal_json_html(self, store, tmp_path, capsys):
        a, b = "20261121-101500-train-ab12", "20261121-101600-train-fix1"
        assert main(["compare", a, b]) == 0
        out = capsys.readouterr().out
        assert "B is 4.38x faster than A (examples/s)" in out and "Launch / dispatch" in out
        assert main(["compare", a, b, "--json"]) == 0
        c = json.loads(capsys.readouterr().out)
        assert c["speedup"] == pytest.approx(700 / 160)
        out_html = tmp_path / "c.html"
        assert main(["compare", a, b, "--html", str(out_html)]) == 0
        assert "B is 4.38x faster than A" in out_html.read_text()
        assert main(["compare", a, b, "--html", str(out_html)]) == 6


def test_compare_within_noise():
    a = ws.report("a", with_fix=False)
    b = ws.report("b", with_fix=False).model_copy(update={"throughput": ws.throughput(162.0)})
    c = compare(a, b)
    assert c.speedup == pytest.approx(162 / 160) and c.within_noise is True
    assert all(d.delta_ms == pytest.approx(0.0) for d in c.categories)
    assert c.both == ["TFD101", "TFD201", "TFD401"] and not c.only_a


def test_run_page_shows_replicas_and_workers_of_a_distributed_run():
    """The real two-worker straggler trace: the page names both workers, flags the straggler and says
    where the time went; a single-device report has no such section."""
    from pathlib import Path

    from tfdoctor.analysis import analyze
    from tfdoctor.analysis.distributed import summary_for
    from tfdoctor.model import Facts
    from tfdoctor.trace import load

    logdir = Path(__file__).resolve().parents[2] / "sample_traces/distribution-straggler/logdir"
    facts = Facts(num_replicas=2, strategy="CollectiveAllReduceStrategy")
    dist = summary_for(analyze(load(logdir)), facts)
    report = ws.report().model_copy(update={"distributed": dist, "facts": facts})
    page = run_page(report)
    assert page.distributed is not None
    assert [r.name for r in page.distributed.rows if r.kind == "worker"] == ["worker-0", "worker-1"]
    assert [r.name for r in page.distributed.rows if r.straggler] == ["worker-1"]
    assert "CollectiveAllReduceStrategy × 2" in page.distributed.summary
    assert "straggler worker-1" in page.distributed.summary
    html = render_run(page, standalone=True)
    section = html.split('id="sec-distributed"', 1)[1].split("</section>", 1)[0]
    assert section.count('<tr class="replica-worker') == 2 and "straggler" in section
    w1 = next(r for r in dist.workers if r.name == "worker-1")
    assert f"{w1.input_wait_ms:,.2f}" in section  # its input wait, as the analysis measured it
    assert run_page(ws.report()).distributed is None
    assert 'id="sec-distributed"' not in render_run(run_page(ws.report()), standalone=True)


def test_facts_show_the_warm_up_and_the_memo_cache():
    from tfdoctor.model import Facts
    from tfdoctor.report.html import facts_rows

    rows = dict(
        facts_rows(
            Facts(
                warmup_steps=131,
                warmup_note="memo cache warm after 131 steps",
                memo_hits=4096,
                memo_misses=0,
                memo_warm=True,
            )
        )
    )
    assert rows["Warm-up"] == "131 steps (memo cache warm after 131 steps)"
    assert rows["Memo cache (generator-cache)"] == "4,096 hits, 0 misses at the end of the warm-up, warm"
    assert "Warm-up" not in dict(facts_rows(Facts()))


def test_facts_name_a_custom_loops_batches_a_call_apart_from_keras_steps_per_execution():
    from tfdoctor.model import Facts
    from tfdoctor.report.html import facts_rows

    fit = dict(facts_rows(Facts(loop_kind="keras_fit", steps_per_execution=8)))
    assert fit["steps_per_execution"] == "8"
    loop = dict(facts_rows(Facts(loop_kind="custom", steps_per_execution=64)))
    assert loop["Batches a call (in-graph loop)"] == "64" and "steps_per_execution" not in loop


def test_the_run_page_names_the_fit_whose_steps_were_timed():
    """A script fitting several models (keras-io's SimCLR): the facts table says which fit() was timed."""
    from tfdoctor.model import Facts, Report, StepTiming
    from tfdoctor.report.html import render_run, run_page

    facts = Facts(
        loop_kind="keras_fit", source={"fit_phase_1": "/w/train.py:160"}, script_fit_lines=[160, 279, 301]
    )
    steps = [StepTiming(index=i, window="timing", start_ns=i, end_ns=i + 1, phase=1) for i in range(4)]
    report = Report(run_id="r", script="train.py", created="", status="complete", facts=facts, steps=steps)
    page = render_run(run_page(report), standalone=True)
    assert "Timed" in page and "fit() at line 160, the 1st of 3 in the script" in page
