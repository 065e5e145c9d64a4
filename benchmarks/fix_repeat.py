"""Do two `--fix` runs of the same script on the same machine agree? (issue 14: "repeat --fix runs
agree: same kept set, overlapping intervals").

For each script (the examples and the corpus), ``tfdoctor profile SCRIPT --fix`` runs twice, back to
back, each in its own store; the two summaries are compared:

* the kept fixes (the same set, or not);
* the combined speed-up each run measured side by side against its baseline, with its 95 % interval
  (tfdoctor.fixes.judge), and whether the two intervals overlap;
* per fix tried in both: the same decision (kept / rejected / not decided), and overlapping intervals.

    python benchmarks/fix_repeat.py                       # examples + corpus, updates docs/benchmarks.md
    python benchmarks/fix_repeat.py --scripts examples/naive_loop.py --quick   # one script, docs untouched
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
from _common import CACHE, ROOT, md_table, now_utc, say, update_section, versions

from tfdoctor.report.format import ratio_ci

EXAMPLES = ["naive_loop.py", "tfdata_loop.py", "keras_fit.py", "function_loop.py", "mlp_loop.py"]


def corpus() -> list[tuple[Path, list[str]]]:
    manifest = json.loads((ROOT / "examples" / "corpus" / "manifest.json").read_text())
    return [
        (ROOT / "examples" / "corpus" / s["script"], list(s.get("quick_args") or s.get("args") or []))
        for s in manifest["scripts"]
    ]


def fix_once(script: Path, args: list[str], home: Path, steps: int, rounds: int) -> dict:
    """One ``tfdoctor profile --fix`` on a copy of the script's folder; the report's fix summary."""
    work = home / "src"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(script.parent, work, ignore=shutil.ignore_patterns("__pycache__", "*.tfdoctor-bak"))
    cmd = [
        sys.executable, "-m", "tfdoctor", "profile", str(work / script.name), "--steps", str(steps),
        "--home", str(home), "--fix", "--fix-rounds", str(rounds), "--json", "--", *args,
    ]  # fmt: skip
    t0 = time.monotonic()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-2000:], "wall_s": wall}
    fix = json.loads(proc.stdout).get("fix") or {}
    trials = {
        (t.get("label") or t["fix_id"]): {
            "status": t["status"],
            "verdict": t.get("verdict"),
            "speedup": t.get("speedup"),
            "ci": t.get("speedup_ci"),
        }
        for t in fix.get("trials", [])
    }
    return {
        "kept": fix.get("kept", []),
        "speedup": fix.get("combined_speedup"),
        "ci": fix.get("combined_ci"),
        "verdict": fix.get("combined_verdict"),
        "trials": trials,
        "wall_s": wall,
    }


def overlap(a: list[float] | None, b: list[float] | None) -> bool | None:
    if not a or not b:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def decision(t: dict) -> str:
    return "not decided" if t.get("verdict") == "undecided" else t["status"]


def compare(name: str, one: dict, two: dict) -> dict:
    if "error" in one or "error" in two:
        return {"script": name, "error": (one.get("error") or two.get("error") or "")[-300:]}
    both = sorted(set(one["trials"]) & set(two["trials"]))
    differ = [k for k in both if decision(one["trials"][k]) != decision(two["trials"][k])]
    disjoint = [k for k in both if overlap(one["trials"][k]["ci"], two["trials"][k]["ci"]) is False]
    return {
        "script": name,
        "kept": [one["kept"], two["kept"]],
        "same_kept": sorted(one["kept"]) == sorted(two["kept"]),
        "combined": [ratio_ci(one["speedup"], one["ci"]), ratio_ci(two["speedup"], two["ci"])],
        "overlap": overlap(one["ci"], two["ci"]),
        "decisions_differ": differ,
        "trial_intervals_disjoint": disjoint,
        "wall_s": [one["wall_s"], two["wall_s"]],
    }


def render(rows: list[dict]) -> str:
    table = []
    for r in rows:
        if "error" in r:
            table.append([f"`{r['script']}`", "error", "", "", "", r["error"].splitlines()[-1][:80]])
            continue
        kept = " / ".join(", ".join(k) or "none" for k in r["kept"])
        table.append(
            [
                f"`{r['script']}`",
                ("**same**" if r["same_kept"] else "**differ**") + f": {kept}",
                " / ".join(r["combined"]),
                {True: "yes", False: "**no**", None: "–"}[r["overlap"]],
                ", ".join(r["decisions_differ"]) or "none",
                ", ".join(r["trial_intervals_disjoint"]) or "none",
            ]
        )
    header = [
        "script",
        "kept fixes (run 1 / run 2)",
        "combined vs baseline, side by side (run 1 / run 2)",
        "intervals overlap",
        "trials decided differently",
        "trial intervals disjoint",
    ]
    return md_table(header, table)


def main() -> None:
    ap = argparse.ArgumentParser(description="two --fix runs of the same script agree?")
    ap.add_argument("--scripts", nargs="*", help="scripts to run (default: the examples and the corpus)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--fix-rounds", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="docs untouched")
    args = ap.parse_args()
    if args.scripts:
        targets = [(Path(s).resolve(), []) for s in args.scripts]
    else:
        targets = [(ROOT / "examples" / n, []) for n in EXAMPLES] + corpus()
    rows = []
    for script, sargs in targets:
        got = []
        for i in (1, 2):
            home = CACHE / "fix_repeat" / f"{script.stem}-{i}"
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            say(f"{script.name}: --fix run {i}/2 …")
            got.append(fix_once(script, sargs, home, args.steps, args.fix_rounds))
        row = compare(script.name, *got)
        say(json.dumps(row))
        rows.append(row)
    (CACHE / "results").mkdir(parents=True, exist_ok=True)
    (CACHE / "results" / "fix_repeat.json").write_text(
        json.dumps({"measured": now_utc(), "rows": rows}, indent=2)
    )
    say(render(rows))
    if args.quick:
        return
    ok = [r for r in rows if "error" not in r]
    body = "\n\n".join(
        [
            "## 6. Repeat `--fix` runs agree",
            versions(now_utc()),
            "Each script ran `tfdoctor profile SCRIPT --steps "
            f"{args.steps} --fix --fix-rounds {args.fix_rounds}` twice, back to back, each run in its own store "
            "and on its own copy of the folder. Agreement: the same kept set; the combined speed-ups (the final "
            "state measured side by side against the baseline, with the judge's 95 % interval) overlap.",
            render(rows),
            f"Same kept set: {sum(r['same_kept'] for r in ok)} of {len(ok)}; combined intervals overlapping: "
            f"{sum(bool(r['overlap']) for r in ok)} of {sum(r['overlap'] is not None for r in ok)}.",
            "Regenerate: `python benchmarks/fix_repeat.py` (long: two full `--fix` runs per script).",
        ]
    )
    update_section("fix_repeat", body, after="fix_cost")
    say(f"updated {ROOT / 'docs' / 'benchmarks.md'}")


if __name__ == "__main__":
    main()
