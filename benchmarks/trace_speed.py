"""Figure 2: trace analysis speed and memory, tfdoctor against XProf's own conversion, same files.

For xplane files of about 10^4 … 10^7 events (recorded once with the plain TensorFlow profiler by
``record_trace.py`` and kept in ``benchmarks/cache/traces``, out of git), each measurement runs in a
fresh worker process, in interleaved rounds (tfdoctor, XProf overview_page, XProf
input_pipeline_analyzer, tfdoctor, …):

* tfdoctor: ``tfdoctor.trace.load`` + ``analyze`` + the rule catalogue (``rules.evaluate``): file to
  findings, everything ``tfdoctor analyze`` does before printing.
* XProf: ``xprof.convert.raw_to_tool_data.xspace_to_tool_data([file], tool, {"use_saved_result":
  False})`` for ``overview_page`` and ``input_pipeline_analyzer`` (its cache file is deleted first).

Reported per size: median wall seconds, events/s, the ratio XProf time / tfdoctor time (> 1: tfdoctor
is faster), and peak memory above the worker's baseline (VmHWM reset after imports) relative to the
file size; plus tracemalloc's peak for tfdoctor's Python-side allocations (a separate pass).

    python benchmarks/trace_speed.py                 # 10^4 … 10^7 events, updates docs/benchmarks.md
    python benchmarks/trace_speed.py --sizes 4,5 -r 3
    python benchmarks/trace_speed.py --quick         # 10^4 only, one round, docs untouched
    python benchmarks/trace_speed.py --process       # whole-process `tfdoctor analyze` vs XProf, small real traces

``--process`` times what a user waits for, start-up included: ``tfdoctor analyze --no-save --json FILE``
as a command (interpreter start, imports, read, analysis, rules, JSON out) against a fresh Python process
that imports XProf and converts the same file to its ``overview_page`` (its cache deleted first), on the
small real traces in the repository, in interleaved rounds (tfdoctor, XProf, tfdoctor, XProf, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CACHE, ROOT, md_table, median, now_utc, say, spread, update_section, versions

HERE = Path(__file__).resolve().parent
TOOLS = ("tfdoctor", "overview_page", "input_pipeline_analyzer")
#: Events per step of record_trace.py's loop, measured on TF 2.21 CPU; recalibrated from the 10^4 file.
PER_STEP_GUESS = 459.0


# -- worker (runs in a fresh process) ------------------------------------------------------------
def worker(tool: str, path: str, trace_malloc: bool) -> dict:
    from _common import reset_peak_rss, rss_kib

    if tool == "tfdoctor":
        from tfdoctor.analysis import analyze
        from tfdoctor.model import Facts
        from tfdoctor.rules import evaluate
        from tfdoctor.trace import load
    else:
        for cached in Path(path).parent.glob("*op_stats*"):
            cached.unlink()
        from xprof.convert import raw_to_tool_data

    if trace_malloc:
        import tracemalloc

        tracemalloc.start()
    base, _ = rss_kib()
    reset_peak_rss()
    cpu0 = os.times()
    t0 = time.perf_counter()
    out: dict = {"tool": tool}
    if tool == "tfdoctor":
        trace = load(path)
        t1 = time.perf_counter()
        analysis = analyze(trace)
        findings, _verdict = evaluate(analysis, Facts())
        out["read_s"] = t1 - t0
        out["events"] = sum(len(ln) for pl in trace.planes for ln in pl.lines)
        out["steps"] = len(analysis.breakdown.steps) if analysis.breakdown else 0
        out["findings"] = [f.rule_id for f in findings]
    else:
        data, _ctype = raw_to_tool_data.xspace_to_tool_data([path], tool, {"use_saved_result": False})
        out["ok"] = bool(data)
        out["bytes_out"] = len(data or b"")
    out["wall_s"] = time.perf_counter() - t0
    cpu1 = os.times()
    out["cpu_s"] = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    _cur, peak = rss_kib()
    out["peak_rss_mib"] = (peak - base) / 1024
    if trace_malloc:
        import tracemalloc

        out["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
    return out


def run_worker(tool: str, path: Path, trace_malloc: bool = False) -> dict:
    cmd = [sys.executable, str(HERE / "trace_speed.py"), "--worker", tool, str(path)]
    if trace_malloc:
        cmd.append("--tracemalloc")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GLOG_minloglevel="3")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{tool} worker failed on {path}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- inputs --------------------------------------------------------------------------------------
def trace_file(exp: int, per_step: float) -> Path:
    """The cached ~10^exp-event xplane file, recorded now when missing."""
    logdir = CACHE / "traces" / f"e{exp}"
    found = sorted(logdir.rglob("*.xplane.pb"))
    if found:
        return found[-1]
    say(f"recording a ~10^{exp}-event trace with the plain TF profiler into {logdir} …")
    subprocess.run(
        [
            sys.executable,
            str(HERE / "record_trace.py"),
            "--events",
            str(10**exp),
            "--per-step",
            f"{per_step:.1f}",
            "--logdir",
            str(logdir),
        ],
        check=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    found = sorted(logdir.rglob("*.xplane.pb"))
    if not found:
        raise RuntimeError(f"the profiler wrote no xplane.pb under {logdir}")
    return found[-1]


def measure(exp: int, path: Path, rounds: int) -> dict:
    size_mib = path.stat().st_size / 2**20
    runs: dict[str, list[dict]] = {t: [] for t in TOOLS}
    for r in range(rounds):
        for tool in TOOLS:
            res = run_worker(tool, path)
            runs[tool].append(res)
            say(
                f"  10^{exp} round {r + 1}/{rounds} {tool:24s} {res['wall_s']:7.2f} s  +{res['peak_rss_mib']:.0f} MiB"
            )
    tm = run_worker("tfdoctor", path, trace_malloc=True)
    events = runs["tfdoctor"][0]["events"]
    row: dict = {"exp": exp, "file_mib": size_mib, "events": events, "rounds": rounds}
    for tool in TOOLS:
        walls = [x["wall_s"] for x in runs[tool]]
        row[tool] = {
            "wall_s": median(walls),
            "spread": spread(walls),
            "cpu_s": median([x["cpu_s"] for x in runs[tool]]),
            "peak_rss_mib": median([x["peak_rss_mib"] for x in runs[tool]]),
        }
    row["tfdoctor"]["read_s"] = median([x["read_s"] for x in runs["tfdoctor"]])
    row["tfdoctor"]["tracemalloc_peak_mib"] = tm["tracemalloc_peak_mib"]
    row["tfdoctor"]["steps"] = runs["tfdoctor"][0]["steps"]
    # ratios per round (side by side), then the median of the ratios
    for tool in TOOLS[1:]:
        ratios = [x["wall_s"] / t["wall_s"] for x, t in zip(runs[tool], runs["tfdoctor"], strict=True)]
        row[f"ratio_{tool}"] = median(ratios)
    return row


# -- whole process: what a user waits for ---------------------------------------------------------
#: small real traces in the repository: Keras profile_batch profiles recorded here, a harness run, the
#: tensorflow/profiler demo's 8-GPU xplane
PROCESS_TRACES = (
    "sample_traces/keras-dense",
    "sample_traces/keras-conv2d",
    "sample_traces/cpu-keras_fit",
    "sample_traces/third_party/tensorflow-profiler/demo/plugins/profile/GPU-multi-worker",
)
_XPROF_PROCESS = (
    "import sys; from pathlib import Path\n"
    "[p.unlink() for p in Path(sys.argv[1]).parent.glob('*op_stats*')]\n"
    "from xprof.convert import raw_to_tool_data\n"
    "data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], 'overview_page', {'use_saved_result': False})\n"
    "assert data\n"
)


_ANALYZE_IMPORTS = (
    "import tfdoctor.cli, tfdoctor.commands.analyze, tfdoctor.rules, tfdoctor.trace.xplane, "
    "tfdoctor.trace._xplane_columnar; tfdoctor.rules.all_rules()"
)


def _timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):  # analyze exits 1 when it cannot diagnose: still a full run
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall


def measure_process(rounds: int) -> list[dict]:
    import shutil
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GLOG_minloglevel="3", TFDOCTOR_HOME=f"{tmp}/home")
        tfd = shutil.which("tfdoctor") or "tfdoctor"
        for rel in PROCESS_TRACES:
            src = ROOT / rel
            xplane = sorted(src.rglob("*.xplane.pb"))[-1]
            work = Path(tmp) / rel.replace("/", "_")  # XProf writes its cache beside the file: a copy
            work.mkdir()
            f = work / xplane.name
            shutil.copyfile(xplane, f)
            walls: dict[str, list[float]] = {"tfdoctor": [], "xprof": [], "python": [], "imports": []}
            for _ in range(rounds):
                walls["tfdoctor"].append(_timed([tfd, "analyze", "--no-save", "--json", str(f)], env))
                walls["xprof"].append(_timed([sys.executable, "-c", _XPROF_PROCESS, str(f)], env))
                # the floors: an empty interpreter, and one that only imports what `analyze` imports
                walls["python"].append(_timed([sys.executable, "-c", "pass"], env))
                walls["imports"].append(_timed([sys.executable, "-c", _ANALYZE_IMPORTS], env))
            ratios = [x / t for x, t in zip(walls["xprof"], walls["tfdoctor"], strict=True)]
            row = {
                "trace": rel,
                "kib": f.stat().st_size / 1024,
                "tfdoctor_s": median(walls["tfdoctor"]),
                "tfdoctor_spread": spread(walls["tfdoctor"]),
                "xprof_s": median(walls["xprof"]),
                "xprof_spread": spread(walls["xprof"]),
                "python_s": median(walls["python"]),
                "imports_s": median(walls["imports"]),
                "ratio": median(ratios),
                "ratios": ratios,
                "rounds": rounds,
            }
            say(
                f"  {rel}: tfdoctor {row['tfdoctor_s']:.2f} s, XProf {row['xprof_s']:.2f} s, "
                f"XProf ÷ tfdoctor {row['ratio']:.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
            )
            rows.append(row)
    return rows


def write_process_doc(rows: list[dict], measured: str) -> None:
    table = md_table(
        [
            "trace",
            "KiB",
            "`tfdoctor analyze` s",
            "floors: `python -c pass` s / a process importing what `analyze` imports s",
            "XProf process s",
            "XProf ÷ tfdoctor (range)",
        ],
        [
            [
                f"`{r['trace']}`",
                f"{r['kib']:.0f}",
                f"{r['tfdoctor_s']:.2f}",
                f"{r['python_s']:.2f} / {r['imports_s']:.2f}",
                f"{r['xprof_s']:.2f}",
                f"**{r['ratio']:.2f}×** ({min(r['ratios']):.2f}-{max(r['ratios']):.2f})",
            ]
            for r in rows
        ],
    )
    body = "\n\n".join(
        [
            "### 2b. Whole process: `tfdoctor analyze` vs XProf's conversion on small real traces",
            versions(measured),
            "What a user waits for, start-up included. tfdoctor: `tfdoctor analyze --no-save --json FILE`"
            " (interpreter start, imports, read, analysis, every rule, JSON out). XProf: a fresh"
            " `python -c` that imports `xprof.convert.raw_to_tool_data` and converts the same file to its"
            " `overview_page` (cache deleted first). Interleaved rounds (tfdoctor, XProf, ...) on a 2-core"
            f" machine shared with other work; {rows[0]['rounds']} rounds per trace, medians, the ratio is the"
            " median of per-round ratios (> 1: tfdoctor is faster).",
            table,
            "The CLI imports a command's module only when that command runs (`tfdoctor/cli.py`,"
            " `tfdoctor/commands/__init__.py`): before, building the parser imported every command module"
            " (LibCST for `fix`, FastAPI for `serve`). Measured 2026-11-23 on the same machine, 5 interleaved"
            " rounds, whole process: importing every command module 1.09-2.68 s (median 1.21 s), `analyze`'s"
            " module alone 0.45-0.68 s (median 0.61 s).",
            "Target (faster than XProf as a whole process): **not met**. XProf's conversion is a C++"
            " extension that imports in ~0.05 s and converts these files in well under 0.1 s; all of"
            " tfdoctor's time on them is start-up: numpy alone takes 0.18-0.53 s to import here and"
            " `tfdoctor.model` (pydantic) 0.21-0.31 s, against XProf's 0.11-0.58 s for the whole run. The"
            " read + analysis + rules themselves take 0.03-0.15 s on these files (table 2: 0.06 s for 10^4"
            " events), and tfdoctor is faster than XProf from ~10^5 events on.",
            "Regenerate: `python benchmarks/trace_speed.py --process` (a few minutes).",
        ]
    )
    update_section("analyze_process", body, after="trace_speed")
    say(f"updated {ROOT / 'docs' / 'benchmarks.md'}")


def render(rows: list[dict]) -> str:
    table = []
    for r in rows:
        t, ov, ip = r["tfdoctor"], r["overview_page"], r["input_pipeline_analyzer"]
        ev = r["events"]
        table.append(
            [
                f"{ev:,}",
                f"{r['file_mib']:.1f}",
                f"{t['wall_s']:.2f} ({t['read_s']:.2f} read)",
                f"{ev / t['wall_s'] / 1e6:.2f} M",
                f"{ov['wall_s']:.2f}",
                f"{ip['wall_s']:.2f}",
                f"**{r['ratio_overview_page']:.2f}×** / **{r['ratio_input_pipeline_analyzer']:.2f}×**",
                f"{ov['cpu_s'] / t['cpu_s']:.2f}× / {ip['cpu_s'] / t['cpu_s']:.2f}×",
                f"{t['peak_rss_mib'] / r['file_mib']:.1f}× ({t['peak_rss_mib']:.0f} MiB)",
                f"{ov['peak_rss_mib'] / r['file_mib']:.1f}× / {ip['peak_rss_mib'] / r['file_mib']:.1f}×",
                f"{t['tracemalloc_peak_mib'] / r['file_mib']:.1f}×",
            ]
        )
    header = [
        "events",
        "file MiB",
        "tfdoctor s",
        "tfdoctor events/s",
        "XProf overview s",
        "XProf input s",
        "XProf ÷ tfdoctor wall time (overview / input)",
        "XProf ÷ tfdoctor CPU time (overview / input)",
        "tfdoctor peak RSS ÷ file",
        "XProf peak RSS ÷ file (ov / in)",
        "tfdoctor tracemalloc ÷ file",
    ]
    return md_table(header, table)


def main() -> None:
    ap = argparse.ArgumentParser(description="Figure 2: trace analysis speed vs XProf")
    ap.add_argument("--worker", nargs=2, metavar=("TOOL", "FILE"), help=argparse.SUPPRESS)
    ap.add_argument("--tracemalloc", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="4,5,6,7", help="powers of ten of the event counts (default 4,5,6,7)")
    ap.add_argument("-r", "--rounds", type=int, default=0, help="interleaved rounds (default 5, 3 for ≥10^6)")
    ap.add_argument(
        "--quick", action="store_true", help="10^4 events, one round, docs/benchmarks.md untouched"
    )
    ap.add_argument("--no-doc", action="store_true", help="print only, do not update docs/benchmarks.md")
    ap.add_argument(
        "--process",
        action="store_true",
        help="whole-process `tfdoctor analyze` vs XProf on small real traces",
    )
    ap.add_argument(
        "--render-only", action="store_true", help="rewrite the docs section from the last results, no runs"
    )
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.tracemalloc)))
        return
    if args.process:
        prows = measure_process(args.rounds or 7)
        (CACHE / "results").mkdir(parents=True, exist_ok=True)
        (CACHE / "results" / "analyze_process.json").write_text(json.dumps(prows, indent=2))
        if not args.no_doc:
            write_process_doc(prows, now_utc())
        return
    if args.render_only:
        write_doc(json.loads((CACHE / "results" / "trace_speed.json").read_text()))
        return
    exps = [4] if args.quick else [int(s) for s in args.sizes.split(",")]
    per_step = PER_STEP_GUESS
    rows = []
    for exp in sorted(exps):
        path = trace_file(exp, per_step)
        rounds = 1 if args.quick else (args.rounds or (5 if exp <= 5 else 3))
        row = measure(exp, path, rounds)
        if exp == min(exps) and row["tfdoctor"]["steps"]:  # calibrate the recorder for larger files
            per_step = row["events"] / row["tfdoctor"]["steps"]
        row["measured"] = now_utc()
        rows.append(row)
        say(
            f"10^{exp}: {row['events']:,} events, {row['file_mib']:.1f} MiB: tfdoctor {row['tfdoctor']['wall_s']:.2f} s"
            f" ({row['events'] / row['tfdoctor']['wall_s'] / 1e6:.2f} M events/s); XProf overview "
            f"{row['overview_page']['wall_s']:.2f} s, input {row['input_pipeline_analyzer']['wall_s']:.2f} s;"
            f" XProf÷tfdoctor {row['ratio_overview_page']:.2f} / {row['ratio_input_pipeline_analyzer']:.2f};"
            f" tfdoctor peak RSS {row['tfdoctor']['peak_rss_mib'] / row['file_mib']:.1f}× the file"
        )
    (CACHE / "results").mkdir(parents=True, exist_ok=True)
    (CACHE / "results" / "trace_speed.json").write_text(json.dumps(rows, indent=2))
    if args.quick or args.no_doc:
        return
    write_doc(rows)


def write_doc(rows: list[dict]) -> None:
    body = "\n\n".join(
        [
            "## 2. Trace analysis speed: tfdoctor vs XProf on the same xplane files",
            versions(rows[-1].get("measured")),
            "Inputs: xplane files recorded with the plain TensorFlow profiler (`benchmarks/record_trace.py`:"
            " an eager custom loop fed by tf.data, host tracer level 2, `train` step markers), kept out of git"
            " in `benchmarks/cache/`. tfdoctor = read + analyse + evaluate every rule (file → findings);"
            " XProf = `xspace_to_tool_data` for `overview_page` and `input_pipeline_analyzer`, cache off."
            " Each measurement is a fresh process; rounds interleave the three; medians shown, the ratio is"
            " the median of per-round ratios. Peak RSS is VmHWM above the worker's baseline after imports;"
            " XProf's conversion is C++ and uses a thread pool, tfdoctor is one Python thread.",
            render(rows),
            _verdict(rows),
            "History (same files, same machine): at first the reader built the whole upb tree and touched"
            " every event through a Python wrapper, and two analysis passes looped in Python per interval"
            " and per event: 10^6 events 3.52 s (1.88 s read), peak RSS 8.2× the file; 10^7 events 43 s,"
            " 8.0× (1.9 GiB); XProf ÷ tfdoctor 1.46 / 0.79 and 1.14 / 0.80. Then the columnar decoder"
            " (`tfdoctor/trace/_xplane_columnar.py`, 5cf0560): 10^6 in 1.74 s, 3.8×. Then"
            " `intervals.subtract` as one vectorised sweep (22c90b8) and the dispatch / tf.data-stage"
            " counts per distinct name instead of per event (bc9f753): the table above.",
            "Where the read time went (cProfile, 10^6 events): the protobuf parse (upb, C) was ~0.15 s of the"
            " ~1.5 s read; the rest was Python touching every event (one upb wrapper object per event to"
            " get offset, duration, metadata id), and upb kept the parsed tree (~4× the file) besides the"
            " file's bytes. Now the wire format is walked directly: event lengths come from upb through a"
            " shadow message (`repeated bytes events`), positions from a cumulative sum, and every event's"
            " fields from a vectorised varint decoder in numpy; upb only parses plane metadata and the few"
            " step-marker events. The Trace is identical (tests/unit/test_xplane_columnar.py), and anything"
            " unexpected falls back to the upb path.",
            "What is left of the memory: the file's bytes (1×, held while decoding), the Trace's columns"
            " (~1.3×: int64 start/duration, int32 names, and dense float64 columns for the step-marker"
            " stats), decode temporaries, then the analysis' own arrays. The ≤ 2× target would need the"
            " file memory-mapped and released line by line, and sparse marker-stat columns in the trace"
            " model; not done.",
            "Regenerate: `python benchmarks/trace_speed.py` (about 10 minutes, most of it recording and"
            " converting the 10^7-event file).",
        ]
    )
    update_section("trace_speed", body)
    say(f"updated {ROOT / 'docs' / 'benchmarks.md'}")


def _verdict(rows: list[dict]) -> str:
    lines = ["Targets: as fast as XProf or faster (ratio ≥ 1); peak memory ≤ 2× the file size."]
    for r in rows:
        fast = min(r["ratio_overview_page"], r["ratio_input_pipeline_analyzer"])
        mem = r["tfdoctor"]["peak_rss_mib"] / r["file_mib"]
        lines.append(
            f"- {r['events']:,} events: speed {'met' if fast >= 1 else 'NOT met'}"
            f" (worst ratio {fast:.2f}), memory {'met' if mem <= 2 else 'NOT met'} ({mem:.1f}×)."
            + (
                f" Both take under 0.1 s here ({r['tfdoctor']['wall_s'] * 1000:.0f} ms for tfdoctor): fixed"
                " per-run costs (rule catalogue, per-step Python), not the per-event work."
                if fast < 1 and r["tfdoctor"]["wall_s"] < 0.1
                else ""
            )
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
