"""Figure 4: the cost of ``tfdoctor profile SCRIPT --fix``: its total wall time relative to one
baseline window (a plain ``tfdoctor profile SCRIPT`` of the same steps), measured side by side.

Per example script: plain profile, ``--fix``, plain profile (P, F, P, … interleaved), each through
the real CLI in a fresh store, wall clock around the whole command (Python + TensorFlow start-up
included, as the user waits for it). The figure is F / median(P): how many baseline windows the
whole fix loop costs, next to the number of runs it made (baseline + one per fix tried + the final
combined run), so the cost per run is visible too.

    python benchmarks/fix_cost.py                    # naive_loop.py and keras_fit.py, updates the docs
    python benchmarks/fix_cost.py --quick            # a small workload, 12 steps, --only xla-jit, --fix-rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CACHE, ROOT, md_table, median, say, update_section, versions

EXAMPLES = ROOT / "examples"


def timed(cmd: list[str], home: Path, cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = dict(os.environ, TFDOCTOR_HOME=str(home), TF_CPP_MIN_LOG_LEVEL="2")
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc


def _stored_runs(home: Path) -> int:
    runs = home / "runs"
    return sum(1 for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else 0


def measure(name: str, steps: int, rounds: int, extra: list[str]) -> dict:
    work = CACHE / "fix_cost" / Path(name).stem
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    src = Path(name) if Path(name).is_absolute() else EXAMPLES / name
    script = Path(shutil.copy(src, work / src.name))  # fixes run on copies anyway; belt and braces
    home = work / "home"
    base = [sys.executable, "-m", "tfdoctor", "profile", str(script), "--steps", str(steps), "--json"]
    plain: list[float] = []
    fix: list[float] = []
    info: dict = {}
    for r in range(rounds):
        wall, _ = timed(base, home, work)
        plain.append(wall)
        say(f"  {name} round {r + 1}/{rounds}: profile {wall:.1f} s")
        before = _stored_runs(home)
        wall, proc = timed([*base, "--fix", *extra], home, work)
        fix.append(wall)
        report = json.loads(proc.stdout)
        summary = report.get("fix") or {}
        info = {
            # every run the --fix command stored: its baseline, each trial, each paired round's two runs,
            # the combined run and its rounds against the baseline
            "runs": _stored_runs(home) - before,
            "kept": summary.get("kept", []),
            "speedup": summary.get("combined_speedup"),
            "loop_s": summary.get("wall_s"),
        }
        say(f"  {name} round {r + 1}/{rounds}: profile --fix {wall:.1f} s ({info['runs']} runs)")
    wall, _ = timed(base, home, work)  # close the sandwich: P F P … P
    plain.append(wall)
    say(f"  {name}: profile {wall:.1f} s")
    ratios = [f / median(plain[i : i + 2]) for i, f in enumerate(fix)]
    return {
        "name": Path(name).name,
        "steps": steps,
        "plain_s": median(plain),
        "fix_s": median(fix),
        "ratio": median(ratios),
        **info,
    }


def render(rows: list[dict]) -> str:
    table = [
        [
            f"`{r['name']}`",
            str(r["steps"]),
            f"{r['plain_s']:.1f}",
            f"{r['fix_s']:.1f}",
            f"**{r['ratio']:.1f}×**",
            str(r["runs"]),
            f"{r['fix_s'] / r['runs']:.1f}",
            ", ".join(r["kept"]) or "none",
            f"{r['speedup']:.2f}×" if r["speedup"] else "—",
        ]
        for r in rows
    ]
    header = [
        "script",
        "steps per run",
        "one baseline window (`profile`) s",
        "`profile --fix` s",
        "--fix ÷ baseline",
        "runs made",
        "s per run",
        "kept",
        "speedup found",
    ]
    return md_table(header, table)


def main() -> None:
    ap = argparse.ArgumentParser(description="Figure 4: cost of profile --fix")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument(
        "--rounds", type=int, default=1, help="--fix runs per script (each between two plain runs)"
    )
    ap.add_argument("--scripts", nargs="*", default=["naive_loop.py", "keras_fit.py"])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="one small script, 12 steps, one fix, one paired round; docs untouched",
    )
    ap.add_argument(
        "--section", default="fix_cost", help="docs/benchmarks.md section to write (gpu.py: gpu_*)"
    )
    args = ap.parse_args()
    if args.quick:
        workload = Path(__file__).resolve().parent / "workloads" / "selftimed.py"
        rows = [measure(str(workload), 12, 1, ["--only", "xla-jit", "--fix-rounds", "1"])]
    else:
        rows = [measure(name, args.steps, args.rounds, []) for name in args.scripts]
    for r in rows:
        say(
            f"{r['name']}: profile {r['plain_s']:.1f} s, profile --fix {r['fix_s']:.1f} s = {r['ratio']:.1f}x one"
            f" baseline window ({r['runs']} runs; kept {', '.join(r['kept']) or 'none'})"
        )
    (CACHE / "results").mkdir(parents=True, exist_ok=True)
    (CACHE / "results" / "fix_cost.json").write_text(json.dumps(rows, indent=2))
    if args.quick:
        return
    body = "\n\n".join(
        [
            "## 4. Cost of `profile --fix`: total wall time relative to one baseline window",
            versions(),
            f"Each script runs through the real CLI in a fresh store: `tfdoctor profile SCRIPT --steps"
            f" {args.steps}` (one baseline window), then `… --fix`, then the plain profile again; wall clock"
            " around each whole command (interpreter and TensorFlow start-up included). The ratio divides"
            " the `--fix` time by the median of the plain runs on either side of it. Runs made = every run the"
            " `--fix` command stored: its baseline, one run per fix tried, the paired rounds that confirm"
            " or reject a trial (two runs each, up to `--fix-rounds`), and the final combined run with its"
            " rounds against the baseline.",
            render(rows),
            "Each run costs about one baseline window; what multiplies them is the judge: a trial that"
            " is not decisive on its first run is measured again in paired rounds (the state it must beat"
            " and the trial back to back) until its interval clears the bar or the round budget is spent."
            " Fixes that do not apply (the codemod finds nothing to change) cost no run. `--fix-rounds 1`"
            " or `--only` make a --fix run cheaper, at the price of more undecided trials.",
            "Regenerate: `python benchmarks/fix_cost.py` (about 10 minutes).",
        ]
    )
    if args.section != "fix_cost":  # the same figure on another device (gpu.py)
        body = body.replace("## 4.", "### GPU: ", 1)
    update_section(args.section, body)
    say(f"updated {ROOT / 'docs' / 'benchmarks.md'}")


if __name__ == "__main__":
    main()
