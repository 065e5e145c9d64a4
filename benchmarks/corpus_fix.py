"""Auto-fix on the corpus of real-world script shapes (examples/corpus/): what ``--fix`` reaches on each
script against its hand-tuned ``*_expert.py`` twin (same batch size and learning rate), side by side.

    python benchmarks/corpus_fix.py                       # every corpus script, writes docs/benchmarks.md
    python benchmarks/corpus_fix.py eager_apply.py gan_fit.py --rounds 2
    python benchmarks/corpus_fix.py --quick class_trainer.py   # few steps, one round: checks that it runs

For each script, in one run:
1. ``tfdoctor profile SCRIPT --fix --skip batch-scale,mixed-precision`` (the structural fixes only), and
   ``tfdoctor profile SCRIPT --fix`` (everything): each kept patch is applied to a copy of the corpus;
2. side by side, interleaved in rounds (the order rotates every round): the baseline, the structural
   result, the full result and the expert twin, each a timing-only run (no profiler) of ``--steps``
   steps with the adaptive warm-up, in examples/s;
3. the ratios to the expert are medians of per-round ratios (both measured in the same round).

Prints a table per script and the summary (target: structural / expert ≥ 0.9 on every script).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, md_table, median, say, update_section, versions

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.model import CACHE_FILL_SWITCH
from tfdoctor.session.build import finish_run
from tfdoctor.session.fix_loop import DEFAULT_ROUNDS
from tfdoctor.store import RunStore

CORPUS = ROOT / "examples" / "corpus"
STRUCTURAL_SKIP = "batch-scale,mixed-precision"
VARIANTS = ("baseline", "structural", "full", "expert")


def corpus_scripts() -> list[str]:
    """The corpus scripts that have an expert twin (paths relative to the corpus), in name order."""
    return sorted(
        p.relative_to(CORPUS).as_posix()
        for p in CORPUS.rglob("*.py")
        if not p.stem.endswith("_expert") and p.with_name(f"{p.stem}_expert.py").exists()
    )


def fix_run(script: Path, home: Path, run_id: str, steps: int, skip: str | None, rounds: int) -> dict:
    """``tfdoctor profile SCRIPT --fix`` in a subprocess (the command a user runs): the summary and patch."""
    cmd = [sys.executable, "-m", "tfdoctor", "profile", str(script), "--steps", str(steps), "--fix"]
    cmd += ["--fix-rounds", str(rounds), "--home", str(home), "--run-id", run_id, "--json"]
    if skip:
        cmd += ["--skip", skip]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=script.parent, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    run = RunStore(home).get(run_id)
    report = run.report()
    patch_file = run.path / "fix.patch"
    patch = patch_file.read_text(encoding="utf-8") if patch_file.exists() else ""
    fix = report.fix if report is not None else None
    return {
        "rc": proc.returncode,
        "stderr": proc.stderr[-2000:],
        "patch": patch,
        "kept": list(fix.kept) if fix else [],
        "trials": [(t.name, t.status, t.speedup, t.reason) for t in fix.trials] if fix else [],
        "speedup": fix.combined_speedup if fix else None,
        "ci": list(fix.combined_ci) if fix and fix.combined_ci else None,
        "wall": wall,
    }


def patched_copy(patch: str, dest: Path, folder: str = ".") -> Path:
    """A copy of the corpus with ``patch`` applied (``patch -p1`` in the script's ``folder``)."""
    shutil.copytree(CORPUS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    if patch.strip():
        subprocess.run(["patch", "-s", "-p1", "-d", str(dest / folder)], input=patch, text=True, check=True)
    return dest


#: the harness switch of the tfdata-cache trial (tfdoctor/capture/child/hooks.py): fill every in-memory
#: tf.data cache before the first step
STEADY = {CACHE_FILL_SWITCH: "1"}


def measure(store: RunStore, script: Path, steps: int, label: str) -> float | None:
    run = store.new_run(str(script), [], kind="bench")
    store.update(run, fix=label)
    # every variant in its steady state: in-memory tf.data caches filled before the timed steps (the
    # expert twins cache; a kept tfdata-cache is judged so by the fix loop), as from the second epoch on
    cfg = CaptureConfig(script=script, steps=steps, profile=False, cwd=script.parent, switches=dict(STEADY))
    res = run_capture(cfg, run)
    rep = finish_run(store, run, res)
    tp = rep.throughput if res.ok else None
    if tp is None:
        say(f"     {label}: no measurement ({res.message or res.status})")
        return None
    return tp.examples_per_s or tp.steps_per_s


def study(name: str, work: Path, steps: int, rounds: int, fix_rounds: int, full_run: bool = True) -> dict:
    stem = Path(name).stem if "/" not in name else name.replace("/", "-").removesuffix(".py")
    home = work / "home"
    store = RunStore(home)
    folder = Path(name).parent.as_posix()
    base_dir = patched_copy("", work / f"{stem}-base")
    say(f"== {name}: --fix, structural fixes only (--skip {STRUCTURAL_SKIP})")
    structural = fix_run(base_dir / name, home, f"{stem}-structural", steps, STRUCTURAL_SKIP, fix_rounds)
    say(
        f"   kept: {', '.join(structural['kept']) or 'none'} ({structural['wall']:.0f} s, rc {structural['rc']})"
    )
    if structural["rc"] not in (0, 8):
        say(structural["stderr"])
    for t in structural["trials"]:
        say(f"     {t[0]}: {t[1]} {f'{t[2]:.2f}x ' if t[2] else ''}({t[3][:160]})")
    full = None
    if full_run:
        say(f"== {name}: --fix, every fix")
        full = fix_run(base_dir / name, home, f"{stem}-full", steps, None, fix_rounds)
        say(f"   kept: {', '.join(full['kept']) or 'none'} ({full['wall']:.0f} s, rc {full['rc']})")
        if full["rc"] not in (0, 8):
            say(full["stderr"])
        for t in full["trials"]:
            say(f"     {t[0]}: {t[1]} {f'{t[2]:.2f}x ' if t[2] else ''}({t[3][:160]})")
    scripts = {
        "baseline": base_dir / name,
        "structural": patched_copy(structural["patch"], work / f"{stem}-structural", folder) / name,
        "expert": (base_dir / name).with_name(f"{Path(name).stem}_expert.py"),
    }
    if full is not None:
        scripts["full"] = patched_copy(full["patch"], work / f"{stem}-full", folder) / name
    variants = [v for v in VARIANTS if v in scripts]
    side: dict[str, list[float | None]] = {k: [] for k in variants}
    for r in range(rounds):
        n = len(variants)
        order = variants[r % n :] + variants[: r % n]  # rotate: load drifting over a round weighs on all
        for label in order:
            v = measure(store, scripts[label], steps, f"side by side {label} #{r + 1}")
            side[label].append(v)
            say(f"   round {r + 1} {label}: {v:.1f} examples/s" if v else f"   round {r + 1} {label}: -")
    ratios = {k: [a / b for a, b in zip(side[k], side["expert"], strict=True) if a and b] for k in variants}
    return {
        "name": name,
        "fix_rounds": fix_rounds,
        "structural": structural,
        "full": full,
        "side": {k: median([x for x in v if x]) for k, v in side.items()},
        "per_round": side,  # every run's examples/s by round (None: no measurement)
        "ratios": ratios,
    }


def reproduced(r: dict) -> str:
    """The structural --fix run's headline (its combined speed-up and interval) against the same ratio
    measured here side by side (structural / baseline, median of the rounds)."""
    f = r["structural"]
    # round by round (the per-variant ratio lists drop failed runs, so they need not line up)
    runs = r.get("per_round", {})
    pairs = zip(runs.get("structural", []), runs.get("baseline", []), strict=False)
    side = [a / b for a, b in pairs if a and b]
    if not f.get("speedup") or not side:
        return "–"
    m = median(side)
    claim = f"{f['speedup']:.2f}x"
    if not f.get("ci"):
        return f"{claim} → {m:.2f}x"
    lo, hi = f["ci"]
    inside = "within" if lo <= m <= hi else "outside"
    return f"{claim} [{lo:.2f}, {hi:.2f}] → {m:.2f}x ({inside})"


def render(results: list[dict], steps: int, rounds: int) -> str:
    parts = [
        "## Auto-fix on the corpus (examples/corpus/)",
        "",
        f"`python benchmarks/corpus_fix.py`: {versions()} Each script: `tfdoctor profile SCRIPT --fix "
        f"--skip {STRUCTURAL_SKIP}` (structural) and `tfdoctor profile SCRIPT --fix` (full), {steps} steps "
        f"per run; then the baseline, both results and the expert twin side by side in {rounds} "
        "interleaved rounds (order rotating), timing-only runs, examples/s, every variant in its steady "
        "state (in-memory tf.data caches filled before the timed steps, as the tfdata-cache trial is "
        "judged: the expert twins cache too); ratios are medians of per-round ratios to the expert. "
        "Target: structural / expert ≥ 0.9.",
        "",
    ]
    rows = []
    for r in results:
        ratio = {k: median(v) if v else float("nan") for k, v in r["ratios"].items()}
        rows.append(
            [
                r["name"],
                f"{r['side']['baseline']:.1f}",
                f"{r['side']['expert']:.1f}",
                f"{ratio['baseline']:.2f}",
                f"**{ratio['structural']:.2f}**",
                f"{ratio['full']:.2f}" if r.get("full") else "not run",
                str(r.get("fix_rounds", "?")),
                reproduced(r),
                ", ".join(r["structural"]["kept"]) or "none",
                ", ".join(r["full"]["kept"]) or "none" if r.get("full") else "not run",
            ]
        )
    parts.append(
        md_table(
            [
                "script",
                "baseline ex/s",
                "expert ex/s",
                "baseline / expert",
                "structural / expert",
                "full / expert",
                "--fix-rounds",
                "structural headline → side by side",
                "kept (structural)",
                "kept (full)",
            ],
            rows,
        )
    )
    for r in results:
        parts += ["", f"### {r['name']}", ""]
        for which in ("structural", "full"):
            f = r.get(which)
            if not f:
                continue
            parts.append(f"`--fix` ({which}, {f['wall']:.0f} s):")
            parts.append("")
            parts.append(
                md_table(
                    ["fix", "result", "speedup", "why"],
                    [
                        [n, s, f"{x:.2f}x" if x else "", reason.replace("|", "/")[:140]]
                        for n, s, x, reason in f["trials"]
                    ],
                )
            )
            parts.append("")
        per = {k: ", ".join(f"{x:.2f}" for x in v) for k, v in r["ratios"].items()}
        parts.append(
            "Per-round ratios to the expert: "
            + "; ".join(f"{k} {per[k]}" for k in ("structural", "full", "baseline") if k in per)
            + "."
        )
    return "\n".join(parts)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scripts", nargs="*", help="corpus scripts (default: every one with an expert twin)")
    p.add_argument("--quick", action="store_true", help="few steps, one round, no docs update")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--fix-rounds",
        type=int,
        default=None,
        help=f"--fix-rounds of the fix loops (default {DEFAULT_ROUNDS}, what a user gets; 1 with --quick)",
    )
    p.add_argument(
        "--structural-only", action="store_true", help="skip the full --fix run (no 'full' column)"
    )
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    p.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = p.parse_args()
    steps, rounds = (16, 1) if args.quick else (args.steps, args.rounds)
    if args.fix_rounds is None:
        args.fix_rounds = 1 if args.quick else DEFAULT_ROUNDS
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    names = args.scripts or corpus_scripts()
    results = []
    for name in names:
        work = Path(tempfile.mkdtemp(prefix="tfdoctor-bench-corpus-"))
        try:
            results.append(study(name, work, steps, rounds, args.fix_rounds, not args.structural_only))
        except (subprocess.CalledProcessError, OSError) as e:
            say(f"== {name}: benchmark failed: {type(e).__name__}: {e}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        text = render(results, steps, rounds)  # after every script: a partial table survives a stop
        say(text)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        if not args.quick and not args.no_doc:
            say(f"wrote {update_section('corpus-fix', text)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
