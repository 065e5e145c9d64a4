"""Do two `--fix` runs of the same script on the same machine agree? (issue 14: "repeat --fix runs
agree: same kept set, overlapping intervals").

For each script (the examples and the corpus), ``tfdoctor profile SCRIPT --fix`` runs twice, back to
back, each in its own store; the two summaries are compared:

* the kept fixes (the same set, or not);
* the combined speed-up each run measured side by side against its baseline, with its 95 % interval
  (tfdoctor.fixes.judge), and whether the two intervals overlap;
* per fix tried in both: the same decision (kept / rejected / not decided), and overlapping intervals;
  for every trial decided differently, both runs' figures and reasons.

The results (benchmarks/cache/results/fix_repeat.json) keep, per run, every trial of the report's
``fix.trials`` (name, status, speed-up and interval, verdict, reason) and the combined figure and note.

    python benchmarks/fix_repeat.py                       # examples + corpus, updates docs/benchmarks.md
    python benchmarks/fix_repeat.py --scripts examples/naive_loop.py --quick   # one script, docs untouched
    python benchmarks/fix_repeat.py --scripts examples/corpus/gan_fit.py --quick  # a corpus script (its
                                                          # manifest arguments, as in the default run)
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


CORPUS = ROOT / "examples" / "corpus"


def corpus() -> list[tuple[Path, list[str]]]:
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    return [
        (CORPUS / s["script"], list(s.get("quick_args") or s.get("args") or [])) for s in manifest["scripts"]
    ]


def targets(scripts: list[str] | None) -> list[tuple[Path, list[str]]]:
    """(script, its arguments): the named scripts (a corpus script gets its manifest arguments, as in
    the default run), else the examples and the corpus."""
    if not scripts:
        return [(ROOT / "examples" / n, []) for n in EXAMPLES] + corpus()
    known = {path.resolve(): args for path, args in corpus()}
    return [(Path(s).resolve(), known.get(Path(s).resolve(), [])) for s in scripts]


def display(script: Path) -> str:
    """The script's name in the table: its path in the corpus (multifile/train.py), else its file name."""
    return script.relative_to(CORPUS).as_posix() if script.is_relative_to(CORPUS) else script.name


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
    return summarize(json.loads(proc.stdout), wall)


def summarize(report: dict, wall: float) -> dict:
    """The fix summary of a ``tfdoctor profile --fix --json`` report: the kept set, the combined figure
    and its note, and every trial (``trials``: by name, the name a second try of the same fix gets a
    "#2"), each with its status, speed-up and interval, verdict, reason and per-round ratios."""
    fix = report.get("fix") or {}
    trials: dict[str, dict] = {}
    for t in fix.get("trials", []):
        name = base = t.get("label") or t["fix_id"]
        k = 1
        while name in trials:
            k += 1
            name = f"{base} #{k}"
        trials[name] = {
            "name": name,
            "fix_id": t["fix_id"],
            "label": t.get("label") or "",
            "status": t["status"],
            "verdict": t.get("verdict"),
            "speedup": t.get("speedup"),
            "speedup_ci": t.get("speedup_ci"),
            "reason": t.get("reason") or "",
            # per round, its ratio (both runs back to back): the judge's paired spread, read again here
            "paired_ratios": t.get("paired_ratios") or [],
        }
    return {
        "kept": fix.get("kept", []),
        "speedup": fix.get("combined_speedup"),
        "ci": fix.get("combined_ci"),
        "verdict": fix.get("combined_verdict"),
        "note": fix.get("combined_note") or "",
        "dropped": fix.get("dropped") or [],
        "trials": trials,
        "wall_s": wall,
    }


def overlap(a: list[float] | None, b: list[float] | None) -> bool | None:
    if not a or not b:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def fix_ids(kept: list[str]) -> list[str]:
    """The fixes of a kept set without their values: ``batch-scale ×4`` and ``batch-scale ×8`` are one fix
    (batch scaling kept) at two factors."""
    return sorted({k.split(" ×")[0].split(" (")[0] for k in kept})


def decision(t: dict) -> str:
    return "not decided" if t.get("verdict") == "undecided" else t["status"]


def compare(name: str, one: dict, two: dict) -> dict:
    """The row of one script: do the two runs agree (kept set, combined intervals, each trial's decision
    and interval)? ``runs`` holds both runs' summaries; ``differ_detail`` both runs' trial for each trial
    decided differently (tried in one run only: None on the other side)."""
    if "error" in one or "error" in two:
        return {
            "script": name,
            "error": (one.get("error") or two.get("error") or "")[-300:],
            "runs": [one, two],
        }
    both = sorted(set(one["trials"]) & set(two["trials"]))
    differ = [k for k in both if decision(one["trials"][k]) != decision(two["trials"][k])]
    disjoint = [
        k for k in both if overlap(one["trials"][k]["speedup_ci"], two["trials"][k]["speedup_ci"]) is False
    ]
    only = sorted(set(one["trials"]) ^ set(two["trials"]))
    return {
        "script": name,
        "kept": [one["kept"], two["kept"]],
        "same_kept": sorted(one["kept"]) == sorted(two["kept"]),
        "same_fixes": fix_ids(one["kept"]) == fix_ids(two["kept"]),
        "combined": [ratio_ci(one["speedup"], one["ci"]), ratio_ci(two["speedup"], two["ci"])],
        "overlap": overlap(one["ci"], two["ci"]),
        "decisions_differ": differ,
        "trial_intervals_disjoint": disjoint,
        "wall_s": [one["wall_s"], two["wall_s"]],
        "notes": [one.get("note", ""), two.get("note", "")],
        "tried_in_one_run": only,
        "differ_detail": [
            {"trial": k, "runs": [one["trials"].get(k), two["trials"].get(k)]} for k in differ + only
        ],
        "runs": [one, two],
    }


def trial_text(t: dict | None, width: int = 110) -> str:
    """One run's trial, short: ``kept 1.23x [1.10x, 1.35x]: faster: …`` (``not tried``: None)."""
    if t is None:
        return "not tried"
    fig = ratio_ci(t.get("speedup"), t.get("speedup_ci")) if t.get("speedup") else ""
    reason = " ".join((t.get("reason") or "").split()).replace("|", "/")
    if len(reason) > width:
        reason = reason[: width - 1].rstrip() + "…"
    return f"{decision(t)}" + (f" {fig}" if fig else "") + (f": {reason}" if reason else "")


def render_differences(rows: list[dict]) -> str:
    """For every trial decided differently (or tried in one run only), both runs' figures and reasons."""
    lines = []
    for r in rows:
        for d in r.get("differ_detail", []):
            one, two = d["runs"]
            lines.append(
                f"- `{r['script']}` **{d['trial']}**: run 1 {trial_text(one)}; run 2 {trial_text(two)}"
            )
    return "\n".join(lines)


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
                (
                    "**same**"
                    if r["same_kept"]
                    else "**same fixes, other factor**"
                    if r.get("same_fixes")
                    else "**differ**"
                )
                + f": {kept}",
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
    text = md_table(header, table)
    diff = render_differences(rows)
    if diff:
        text += "\n\nTrials decided differently (or tried in one run only), run 1 / run 2:\n\n" + diff
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description="two --fix runs of the same script agree?")
    ap.add_argument(
        "--scripts",
        nargs="*",
        help="script paths (a corpus script, examples/corpus/gan_fit.py, runs with its manifest "
        "arguments); default: the examples and the corpus",
    )
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--fix-rounds", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="docs untouched")
    args = ap.parse_args()
    rows = []
    for script, sargs in targets(args.scripts):
        got = []
        for i in (1, 2):
            home = CACHE / "fix_repeat" / f"{display(script).replace('/', '-').removesuffix('.py')}-{i}"
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            say(f"{script.name}: --fix run {i}/2 …")
            got.append(fix_once(script, sargs, home, args.steps, args.fix_rounds))
        row = compare(display(script), *got)
        say(json.dumps({k: v for k, v in row.items() if k != "runs"}))
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
            f"Same kept set: {sum(r['same_kept'] for r in ok)} of {len(ok)} (the same fixes, whatever the batch "
            f"factor: {sum(bool(r.get('same_fixes')) for r in ok)} of {len(ok)}); combined intervals overlapping: "
            f"{sum(bool(r['overlap']) for r in ok)} of {sum(r['overlap'] is not None for r in ok)}.",
            "Regenerate: `python benchmarks/fix_repeat.py` (long: two full `--fix` runs per script).",
        ]
    )
    update_section("fix_repeat", body, after="fix_cost")
    say(f"updated {ROOT / 'docs' / 'benchmarks.md'}")


if __name__ == "__main__":
    main()
