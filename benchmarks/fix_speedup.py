"""Auto-fix speedup on the case study (CPU): what ``tfdoctor profile naive_loop.py --fix`` reaches,
each fix alone, and the hand-written expert version, measured side by side in one run.

    python benchmarks/fix_speedup.py            # naive_loop.py (the headline), writes docs/benchmarks.md
    python benchmarks/fix_speedup.py --quick    # fewer steps and rounds: checks that it runs
    python benchmarks/fix_speedup.py --also tfdata_loop.py keras_fit.py

Prints: the --fix loop's own table (each trial on top of the fixes kept before it), each fix alone vs
the baseline, the combined script vs expert.py (target: ≥ 0.9), and the whole --fix wall time. The
side-by-side figures are medians of interleaved rounds (baseline, fixed, expert, repeated), in
examples/s over each run's unprofiled timing window.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, md_table, median, say, update_section, versions

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.fixes import FixContext, Hardware, all_fixes
from tfdoctor.report.format import ratio_ci
from tfdoctor.session.build import finish_run
from tfdoctor.session.fix_loop import FixLoop, LoopConfig
from tfdoctor.store import RunStore

EXAMPLES = ROOT / "examples"


def rate(report) -> float | None:
    tp = report.throughput
    return tp.examples_per_s or tp.steps_per_s if tp else None


def study(name: str, store: RunStore, work: Path, steps: int, rounds: int, quick: bool = False) -> dict:
    """``quick``: one fix (tf-function) in the loop with one paired round, one fix alone: every code path
    of the study runs (CI checks that it executes), in a fraction of the time."""
    script = Path(shutil.copy(EXAMPLES / name, work / name))
    shutil.copy(EXAMPLES / "expert.py", work / "expert.py")
    say(f"== {name}: baseline profile ({steps} steps)")
    t0 = time.monotonic()
    run = store.new_run(str(script))
    res = run_capture(CaptureConfig(script=script, steps=steps, cwd=work), run)
    report = finish_run(store, run, res)
    if not res.ok:
        raise SystemExit(f"baseline failed: {res.message}")
    loop = FixLoop(
        store,
        run,
        report,
        LoopConfig(script=script, steps=steps, cwd=work)
        if not quick
        else LoopConfig(script=script, steps=steps, cwd=work, only=["tf-function"], confirm_rounds=1),
        on_event=lambda e: say("  ", e.message),
    )
    summary = loop.run()
    fix_wall = time.monotonic() - t0
    fixed = loop.final_source or script.read_text()

    # each fix alone on the unmodified script
    source = script.read_text()
    ctx = FixContext(facts=report.facts, hardware=Hardware.detect(report.facts), filename=name)
    alone = []
    for fix in all_fixes():
        out = fix.apply(source, dataclasses.replace(ctx, params=fix.variants(ctx)[0]))
        if not out.changed or (quick and alone):
            continue
        _, res_f, rep_f = loop.measure(f"alone: {fix.ID}", out.code, dict(out.switches))
        alone.append((fix.ID, rate(rep_f) if res_f.ok else None, res_f.message))
        say(f"   alone {fix.ID}: {rate(rep_f) if res_f.ok else res_f.message}")

    # side by side, interleaved: baseline, combined, expert (as written, and at the combined's batch)
    factor = batch_factor(summary.kept)
    experts = {"expert.py": []}
    if factor > 1:  # the fixer scaled the batch (and the learning rate): the expert at the same batch
        experts[f"expert.py --batch-size {32 * factor} --lr {0.05 * factor:g}"] = [
            "--batch-size",
            str(32 * factor),
            "--lr",
            f"{0.05 * factor:g}",
        ]
    side: dict[str, list[float | None]] = {"baseline": [], "combined (--fix)": [], **{k: [] for k in experts}}
    warmups: dict[str, list[int]] = {k: [] for k in side}
    for r in range(rounds):
        for label in side:
            if label in ("baseline", "combined (--fix)"):
                code = source if label == "baseline" else fixed
                _, res_s, rep_s = loop.measure(f"side-by-side {label} #{r + 1}", code, {})
            else:
                # expert.py caches its decode in the first epoch: measured warm, like the combined
                # script's generator-cache (the harness waits for that one by itself)
                args = experts[label]
                bs = int(args[1]) if args else 32
                exp_script = work / "expert.py"
                run_e = store.new_run(str(exp_script), args, kind="bench")
                res_s = run_capture(
                    CaptureConfig(
                        script=exp_script,
                        args=list(args),
                        steps=steps + EXAMPLES_PER_EPOCH // bs,
                        warmup=EXAMPLES_PER_EPOCH // bs + 4,
                        profile=False,
                        cwd=work,
                    ),
                    run_e,
                )
                rep_s = finish_run(store, run_e, res_s)
            v = rate(rep_s) if res_s.ok else None
            side[label].append(v or None)  # one entry per round, so rounds line up for the ratios
            if res_s.ok and rep_s.facts.warmup_steps:
                warmups[label].append(rep_s.facts.warmup_steps)
            say(f"   round {r + 1} {label}: {v} (warm-up {rep_s.facts.warmup_steps} steps)")
    return {
        "name": name,
        "summary": summary,
        "fix_wall": fix_wall,
        "alone": alone,
        "baseline_rate": rate(report),
        "side": {k: median([x for x in v if x]) if any(v) else float("nan") for k, v in side.items()},
        # ratio to each expert variant: the median of per-round ratios (both measured in the same round)
        "ratios": {
            k: {
                e: [a / b for a, b in zip(v, side[e], strict=True) if a and b]
                for e in side
                if e.startswith("expert.py")
            }
            for k, v in side.items()
        },
        "warmups": {k: median(v) if v else None for k, v in warmups.items()},
        "factor": factor,
    }


#: examples per epoch in the case-study scripts (naive_loop.py, expert.py: NUM_EXAMPLES)
EXAMPLES_PER_EPOCH = 4096


def batch_factor(kept: list[str]) -> int:
    """The batch factor the loop kept ("batch-scale ×2" → 2), 1 without batch scaling."""
    for k in kept:
        m = re.fullmatch(r"batch-scale ×(\d+)", k)
        if m:
            return int(m.group(1))
    return 1


def _why(reason: str) -> str:
    """The reason's first clause, without the noise-band detail (the table has the figures)."""
    reason = re.sub(r" \((\d+\.\d+x); noise band [^)]*\)", r" (\1)", reason)
    return reason.split("; ")[0][:110]


def render(results: list[dict], steps: int, rounds: int) -> str:
    parts = [
        "## 1. Auto-fix speedup",
        "",
        f"`python benchmarks/fix_speedup.py`: {versions()} {steps} steps per run (warm-up, timing window, "
        f"profile window for the baseline), side-by-side medians of {rounds} interleaved rounds, examples/s.",
    ]
    for r in results:
        s = r["summary"]
        side = r["side"]
        per_round = r["ratios"]["combined (--fix)"]
        ratio = median(per_round["expert.py"]) if per_round["expert.py"] else float("nan")
        same = [k for k in side if k.startswith("expert.py --batch-size")]
        ratio_same = median(per_round[same[0]]) if same and per_round[same[0]] else None
        parts += ["", f"### {r['name']}", ""]
        rows = [
            [t.name, t.status, ratio_ci(t.speedup, t.speedup_ci) if t.speedup else "", _why(t.reason)]
            for t in s.trials
        ]
        parts.append(
            "The `--fix` loop (each trial on top of the fixes kept before it; speedup: the trial's own ratio over "
            "that state, with its 95 % interval):"
        )
        parts += ["", md_table(["fix", "result", "speedup", "why"], rows), ""]
        base = r["baseline_rate"] or float("nan")
        rows = [
            [fid, f"{v:.1f}" if v else msg, f"{v / base:.2f}x" if v else ""] for fid, v, msg in r["alone"]
        ]
        parts.append(f"Each fix alone on the unmodified script (baseline {base:.1f} examples/s):")
        parts += ["", md_table(["fix", "examples/s", "vs baseline"], rows), ""]
        rows = [
            [
                k,
                f"{v:.1f}",
                f"{median(r['ratios'][k]['expert.py']):.2f}" if r["ratios"][k]["expert.py"] else "",
                ", ".join(f"{x:.2f}" for x in r["ratios"][k]["expert.py"]),
                str(r["warmups"].get(k) or ""),
            ]
            for k, v in side.items()
        ]
        parts.append(
            "Side by side (expert.py warmed up for one epoch so its `cache()` serves; the combined script's "
            "warm-up is the harness's adaptive one, which waits for a generator-cache to serve):"
        )
        parts += [
            "",
            md_table(
                [
                    "script",
                    "examples/s (median)",
                    "ratio to expert.py (median)",
                    "per round",
                    "warm-up steps",
                ],
                rows,
            ),
            "",
        ]
        parts.append(
            f"**combined / expert = {ratio:.2f}** (target ≥ 0.9)"
            + (
                f"; against expert.py at the same batch size and learning rate: **{ratio_same:.2f}** "
                f"(per round: {', '.join(f'{x:.2f}' for x in per_round[same[0]])})"
                if ratio_same
                else ""
            )
            + f"; kept: {', '.join(s.kept) or 'none'}; "
            f"whole `--fix` run (baseline profile + trials + final run): {r['fix_wall']:.0f} s."
        )
    return "\n".join(parts)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few steps, one round, no docs update")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--also", nargs="*", default=[], help="more examples to run the loop on")
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    args = p.parse_args()
    steps, rounds = (16, 1) if args.quick else (args.steps, args.rounds)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    work = Path(tempfile.mkdtemp(prefix="tfdoctor-bench-fix-"))
    try:
        store = RunStore(work / "home")
        results = [study(n, store, work, steps, rounds, args.quick) for n in ["naive_loop.py", *args.also]]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = render(results, steps, rounds)
    say(text)
    if not args.quick and not args.no_doc:
        say(f"wrote {update_section('fix-speedup', text)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
