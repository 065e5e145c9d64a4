"""Auto-fix on the corpus of real-world script shapes (examples/corpus/): what ``--fix`` reaches on each
script against its hand-tuned ``*_expert.py`` twin (same batch size and learning rate), side by side.

    python benchmarks/corpus_fix.py                       # every corpus script, writes docs/benchmarks.md
    python benchmarks/corpus_fix.py eager_apply.py gan_fit.py --rounds 2
    python benchmarks/corpus_fix.py --quick class_trainer.py   # few steps, one round: checks that it runs
    python benchmarks/corpus_fix.py gan_fit.py --rounds 5 --no-doc --json more.json   # one row again
    python benchmarks/corpus_fix.py --render-from all.json more.json   # the section from saved rows
    python benchmarks/corpus_fix.py --add-rounds-to all.json --rounds 4 --json all2.json mirrored_ctl.py
        # 4 more side-by-side rounds for a saved row (its saved patches; no --fix run), appended to its rounds

For each script, in one run:
1. ``tfdoctor profile SCRIPT --fix --skip batch-scale,mixed-precision`` (the structural fixes only), and
   ``tfdoctor profile SCRIPT --fix`` (everything): each kept patch is applied to a copy of the corpus;
2. side by side, interleaved in rounds (the order rotates every round): the baseline, the structural
   result, the full result and the expert twin, each a timing-only run (no profiler) of ``--steps``
   steps with the adaptive warm-up, in examples/s;
3. each ratio to the expert is the judge's estimate (tfdoctor.fixes.judge.estimate) over the rounds,
   each round a pair (the expert the reference, the variant the trial, both measured in that round): the
   geometric mean of the per-round ratios with its 95 % interval.

Prints a table per script and the summary: structural / expert against the target 0.9, per row *met*
(the whole interval at or above it), *not met* (the whole interval below it) or *not decided* (the
interval straddles it: more rounds, ``--rounds``, may decide it).

The section written to docs/benchmarks.md keeps the hand-written ``**Reading it**`` paragraph it holds
(placed after the summary; ``--reading FILE`` replaces it). ``--json`` writes the rows (a list of dicts);
``--render-from`` renders the section again from such files, rows merged by script name (later files
override), so rows measured in separate runs make one table.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DOC, ROOT, md_table, median, now_utc, say, section_reading, update_section, versions

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.fixes.judge import Estimate, Pair, Sample, estimate
from tfdoctor.model import CACHE_FILL_SWITCH
from tfdoctor.session.build import finish_run
from tfdoctor.session.fix_loop import DEFAULT_ROUNDS, MIN_TIMING_S
from tfdoctor.store import RunStore

CORPUS = ROOT / "examples" / "corpus"
STRUCTURAL_SKIP = "batch-scale,mixed-precision"
VARIANTS = ("baseline", "structural", "full", "expert")
#: structural / expert at or above this on every script
TARGET = 0.9
SECTION = "corpus-fix"


def corpus_scripts() -> list[str]:
    """The corpus scripts that have an expert twin (paths relative to the corpus), in name order."""
    return sorted(
        p.relative_to(CORPUS).as_posix()
        for p in CORPUS.rglob("*.py")
        if not p.stem.endswith("_expert") and p.with_name(f"{p.stem}_expert.py").exists()
    )


def corpus_name(given: str, known: list[str]) -> str:
    """A script named on the command line as the corpus names it (``mirrored_ctl.py``,
    ``multifile/train.py``), also when given as a path (``examples/corpus/mirrored_ctl.py``)."""
    path = Path(given).resolve()
    name = path.relative_to(CORPUS).as_posix() if path.is_relative_to(CORPUS) else given
    if name not in known:
        raise SystemExit(
            f"corpus_fix.py: {given} is not a corpus script with an expert twin ({', '.join(known)})"
        )
    return name


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
    # expert twins cache; a kept tfdata-cache is judged so by the fix loop), as from the second epoch on;
    # timed for at least as long as the fix loop times its runs (MIN_TIMING_S, from 2026-11-26 20:00 UTC)
    cfg = CaptureConfig(
        script=script,
        steps=steps,
        profile=False,
        cwd=script.parent,
        switches=dict(STEADY),
        min_timing_s=MIN_TIMING_S,
    )
    res = run_capture(cfg, run)
    rep = finish_run(store, run, res)
    tp = rep.throughput if res.ok else None
    if tp is None:
        say(f"     {label}: no measurement ({res.message or res.status})")
        return None
    return tp.examples_per_s or tp.steps_per_s


def stem_of(name: str) -> str:
    """A corpus script's name for folders and run ids ("multifile/train.py" -> "multifile-train")."""
    return Path(name).stem if "/" not in name else name.replace("/", "-").removesuffix(".py")


def variant_scripts(name: str, work: Path, base_dir: Path, fixed: dict[str, dict | None]) -> dict[str, Path]:
    """The script of each variant: the baseline and the expert twin in ``base_dir`` (a copy of the
    corpus), and each ``--fix`` result of ``fixed`` (variant -> its run's summary, None: not run) in a
    copy of the corpus with its patch applied."""
    scripts = {
        "baseline": base_dir / name,
        "expert": (base_dir / name).with_name(f"{Path(name).stem}_expert.py"),
    }
    for variant, result in fixed.items():
        if result is not None:
            copy = patched_copy(
                result["patch"], work / f"{stem_of(name)}-{variant}", Path(name).parent.as_posix()
            )
            scripts[variant] = copy / name
    return scripts


def study(name: str, work: Path, steps: int, rounds: int, fix_rounds: int, full_run: bool = True) -> dict:
    stem = stem_of(name)
    home = work / "home"
    store = RunStore(home)
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
    scripts = variant_scripts(name, work, base_dir, {"structural": structural, "full": full})
    variants = [v for v in VARIANTS if v in scripts]
    side, orders = side_by_side(store, scripts, variants, steps, rounds)
    row = {
        "name": name,
        "fix_rounds": fix_rounds,
        "structural": structural,
        "full": full,
        "per_round": side,  # every run's examples/s by round (None: no measurement)
        "round_order": orders,  # the order the variants ran in, by round
        "steps": steps,
        "measured": now_utc(),
    }
    return with_figures(row)


def side_by_side(
    store: RunStore,
    scripts: dict[str, Path],
    variants: list[str],
    steps: int,
    rounds: int,
    start: int = 0,
) -> tuple[dict[str, list[float | None]], list[list[str]]]:
    """``rounds`` interleaved rounds of every variant (round numbers from ``start``: the rotation goes on
    where earlier rounds left it): examples/s per variant by round (None: no measurement), and each
    round's order."""
    side: dict[str, list[float | None]] = {k: [] for k in variants}
    orders = []
    for r in range(start, start + rounds):
        order = rotation(variants, r)
        orders.append(order)
        for label in order:
            v = measure(store, scripts[label], steps, f"side by side {label} #{r + 1}")
            side[label].append(v)
            say(f"   round {r + 1} {label}: {v:.1f} examples/s" if v else f"   round {r + 1} {label}: -")
    return side, orders


def with_figures(row: dict) -> dict:
    """``row`` with the figures derived from its rounds (medians, per-round ratios, the judge's estimates
    to the expert) set from ``per_round``."""
    side = row["per_round"]
    variants = [v for v in VARIANTS if v in side]
    row["side"] = {k: median([x for x in v if x]) for k, v in side.items()}
    row["ratios"] = {
        k: [a / b for a, b in zip(side[k], side["expert"], strict=True) if a and b] for k in variants
    }
    row["to_expert"] = {  # the figures the table shows (render recomputes them from per_round)
        k: {"ratio": e.ratio, "ci": list(e.ci), "rounds": e.rounds, "verdict": verdict(e)}
        for k in variants
        if k != "expert" and (e := to_expert(row, k)) is not None
    }
    return row


def add_rounds(row: dict, work: Path, rounds: int) -> dict:
    """More side-by-side rounds for a saved row: the same variants (the baseline, the expert twin, and the
    ``--fix`` results the row kept, from their saved patches; no ``--fix`` run again), measured as
    :func:`study` measures them and appended to the row's rounds (the rotation continues)."""
    name = row["name"]
    store = RunStore(work / "home")
    base_dir = patched_copy("", work / f"{stem_of(name)}-base")
    fixed = {v: row.get(v) for v in ("structural", "full")}
    scripts = variant_scripts(name, work, base_dir, fixed)
    per = row["per_round"]
    variants = [v for v in VARIANTS if v in scripts and v in per]
    earlier = len(round_orders(row))
    say(f"== {name}: {rounds} more side-by-side rounds (after {earlier})")
    side, orders = side_by_side(store, scripts, variants, int(row.get("steps") or 30), rounds, earlier)
    out = dict(row)
    out["round_order"] = [*round_orders(row), *orders]
    out["per_round"] = {k: [*(per.get(k) or []), *side[k]] for k in variants}
    out["rounds_added"] = [*row.get("rounds_added", []), {"rounds": rounds, "measured": now_utc()}]
    return with_figures(out)


def rotation(variants: list[str], r: int) -> list[str]:
    """The order of round ``r`` (from 0): rotated every round, so load drifting over a round weighs on all."""
    n = len(variants)
    return variants[r % n :] + variants[: r % n]


def round_orders(r: dict) -> list[list[str]]:
    """The order the variants ran in, by round: as recorded (``round_order``), else (rows saved before it
    was recorded) the rotation :func:`study` has always used over the variants it measured."""
    if r.get("round_order"):
        return r["round_order"]
    per = r.get("per_round") or {}
    variants = [v for v in VARIANTS if v in per]
    n_rounds = max((len(v) for v in per.values()), default=0)
    return [rotation(variants, i) for i in range(n_rounds)]


def expert_pairs(r: dict, variant: str) -> list[Pair]:
    """One judge pair per round in which both the expert (the reference) and ``variant`` (the trial) were
    measured; its order: "AB" when the expert ran first in that round."""
    per = r.get("per_round") or {}
    orders = round_orders(r)
    pairs = []
    rounds = zip(per.get(variant) or [], per.get("expert") or [], strict=False)
    for i, (trial, ref) in enumerate(rounds):
        if not trial or not ref:
            continue  # a failed run: the round has no pair
        order = orders[i] if i < len(orders) else []
        ab = variant in order and "expert" in order and order.index("expert") < order.index(variant)
        pairs.append(Pair(ref=Sample(ref), trial=Sample(trial), order="AB" if ab else "BA"))
    return pairs


def to_expert(r: dict, variant: str) -> Estimate | None:
    """``variant`` / expert over the row's rounds: the judge's geometric mean and 95 % interval (None:
    no round measured both)."""
    pairs = expert_pairs(r, variant)
    return estimate(pairs) if pairs else None


def verdict(est: Estimate | None, target: float = TARGET) -> str:
    """ "met" (the whole interval ≥ target), "not met" (the whole interval below it), else "not decided
    (N rounds)"; one round has no interval (no run-to-run spread known): never decided."""
    if est is None:
        return "not measured"
    rounds = f"{est.rounds} round{'s' if est.rounds != 1 else ''}"
    if est.rounds >= 2 and est.low >= target:
        return "met"
    if est.rounds >= 2 and est.high < target:
        return "not met"
    return f"not decided ({rounds})"


def _num(x: float, target: float = TARGET) -> str:
    """2 decimals; 3 where 2 would round onto the target and hide which side of it ``x`` lies."""
    return f"{x:.3f}" if f"{x:.2f}" == f"{target:.2f}" and abs(x - target) > 1e-9 else f"{x:.2f}"


def ratio_text(est: Estimate | None, bold: bool = False) -> str:
    """``0.89 [0.78, 1.02]`` (the point in bold with ``bold``); one round: the ratio alone."""
    if est is None:
        return "–"
    point = f"**{_num(est.ratio)}**" if bold else _num(est.ratio)
    if est.rounds < 2:
        return f"{point} (1 round)"
    return f"{point} [{_num(est.low)}, {_num(est.high)}]"


def n_rounds(r: dict) -> int:
    """Side-by-side rounds in which the expert was measured."""
    return sum(1 for x in (r.get("per_round") or {}).get("expert") or [] if x)


def reproduced(r: dict, variant: str = "structural") -> str:
    """A --fix run's headline (its combined speed-up and interval; ``variant``: the structural or the
    full run) against the same ratio measured here side by side (variant / baseline, median of the
    rounds)."""
    f = r.get(variant)
    if not f:
        return "not run"
    # round by round (the per-variant ratio lists drop failed runs, so they need not line up)
    runs = r.get("per_round", {})
    pairs = zip(runs.get(variant, []), runs.get("baseline", []), strict=False)
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


def summary(results: list[dict], variant: str = "structural") -> str:
    """The count of rows met / not decided / not met against the target, each row named."""
    by: dict[str, list[str]] = {"met": [], "not decided": [], "not met": [], "not measured": []}
    at_point = 0
    for r in results:
        est = to_expert(r, variant)
        v = verdict(est)
        by["not decided" if v.startswith("not decided") else v].append(
            f"{r['name'].removesuffix('.py')} {ratio_text(est)}" if est else r["name"].removesuffix(".py")
        )
        at_point += bool(est and est.ratio >= TARGET)
    parts = [
        f"{k} on **{len(by[k])}**" + (f" ({'; '.join(by[k])})" if by[k] else "")
        for k in ("met", "not decided", "not met", "not measured")
        if by[k] or k != "not measured"
    ]
    return (
        f"{variant.capitalize()} / expert against the target {TARGET} (the 95 % interval): "
        + ", ".join(parts)
        + f", of {len(results)}. Point estimate ≥ {TARGET} on {at_point} of {len(results)}."
    )


def _span(values: list[int]) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def render(
    results: list[dict],
    steps: int,
    *,
    when: str | None = None,
    note: str | None = None,
    reading: str | None = None,
) -> str:
    """The docs section. ``steps``: the steps per run of rows that do not record theirs (saved before
    they did); ``when``: the measurement time when the rows do not all record theirs; ``note``: a sentence
    appended to the introduction; ``reading``: the hand-written "Reading it" paragraph, after the summary."""
    times = [r["measured"] for r in results if r.get("measured")]
    if times and len(times) == len(results):
        when = min(times) if min(times) == max(times) else f"{min(times)} – {max(times)}"
    rounds = [n_rounds(r) for r in results] or [0]
    all_steps = [r.get("steps") or steps for r in results] or [steps]
    parts = [
        "## Auto-fix on the corpus (examples/corpus/)",
        "",
        f"`python benchmarks/corpus_fix.py`: {versions(when)} Each script: `tfdoctor profile SCRIPT --fix "
        f"--skip {STRUCTURAL_SKIP}` (structural) and `tfdoctor profile SCRIPT --fix` (full), "
        f"{_span(all_steps)} steps per run; then the baseline, both results and the expert twin side by side "
        f"in interleaved rounds (order rotating; {_span(rounds)} per row, the *rounds* column), timing-only "
        "runs, examples/s, every variant in its steady state (in-memory tf.data caches filled before the "
        "timed steps, as the tfdata-cache trial is judged: the expert twins cache too). Each ratio to the "
        "expert is the fix judge's estimate over the rounds (`tfdoctor.fixes.judge.estimate`, each round a "
        "pair measured in it, the expert the reference): the **geometric mean** of the per-round ratios "
        "(before 2026-11-26 this table printed their median; medians below each script) and its 95 % "
        f"interval. Target: structural / expert ≥ {TARGET}: *met* when the whole interval is at or above "
        f"it, *not met* when it is all below, else *not decided* (more rounds, `--rounds`, may decide it)."
        + (f" {note.strip()}" if note else ""),
        "",
    ]
    rows = []
    for r in results:
        est = {k: to_expert(r, k) for k in ("baseline", "structural", "full")}
        rows.append(
            [
                r["name"],
                f"{r['side']['baseline']:.1f}",
                f"{r['side']['expert']:.1f}",
                ratio_text(est["baseline"]),
                ratio_text(est["structural"], bold=True),
                verdict(est["structural"]),
                ratio_text(est["full"]) if r.get("full") else "not run",
                str(n_rounds(r)),
                str(r.get("fix_rounds", "?")),
                reproduced(r),
                reproduced(r, "full"),
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
                f"≥ {TARGET}?",
                "full / expert",
                "rounds",
                "--fix-rounds",
                "structural headline → side by side (median)",
                "full headline → side by side (median)",
                "kept (structural)",
                "kept (full)",
            ],
            rows,
        )
    )
    parts += ["", summary(results)]
    if any(r.get("full") for r in results):
        parts += ["", summary([r for r in results if r.get("full")], "full")]
    if reading and reading.strip():
        parts += ["", reading.strip()]
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
        per = {
            k: ", ".join(f"{x:.2f}" for x in v) + f" (median {median(v):.2f})"
            for k, v in r["ratios"].items()
            if v and k != "expert"
        }
        order = " ".join("/".join(v[0] for v in o) for o in round_orders(r))
        parts.append(
            "Per-round ratios to the expert: "
            + "; ".join(f"{k} {per[k]}" for k in ("structural", "full", "baseline") if k in per)
            + f". Round orders (b/s/f/e): {order}."
        )
    return "\n".join(parts)


def current_reading(doc: Path = DOC) -> str | None:
    """The hand-written "Reading it" paragraph of the section in ``doc`` (up to the first per-script
    heading or the section's end), so that a re-render keeps it."""
    return section_reading(SECTION, "### ", doc)


def merge(files: list[Path]) -> list[dict]:
    """Rows of ``--json`` files, merged by script name (a later file's row replaces an earlier one), in
    name order (the order of a full run)."""
    rows: dict[str, dict] = {}
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        for r in data if isinstance(data, list) else [data]:
            rows[r["name"]] = r
    return [rows[k] for k in sorted(rows)]


def write_doc(text: str) -> None:
    say(f"wrote {update_section(SECTION, text)}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "scripts",
        nargs="*",
        help="corpus scripts (default: every one with an expert twin; with --render-from: the rows to render)",
    )
    p.add_argument(
        "--quick", action="store_true", help="few steps, one round (unless --rounds), no docs update"
    )
    p.add_argument("--steps", type=int, default=30)
    p.add_argument(
        "--rounds", type=int, default=None, help="side-by-side rounds per script (default 3; 1 with --quick)"
    )
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
    p.add_argument("--json", type=Path, help="also write the results as JSON here (a list of row dicts)")
    p.add_argument(
        "--render-from",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="run nothing: render the section from saved --json files (rows merged by script name, later "
        "files override; --steps: the steps of rows that do not record theirs)",
    )
    p.add_argument(
        "--when",
        help="with --render-from: the measurement time to print when the rows do not record theirs "
        "(default: the newest file's modification time)",
    )
    p.add_argument("--note", help="a sentence appended to the section's introduction")
    p.add_argument(
        "--reading",
        type=Path,
        help="a file whose text replaces the hand-written 'Reading it' paragraph (default: keep the one "
        "in docs/benchmarks.md; an empty file drops it)",
    )
    p.add_argument(
        "--add-rounds-to",
        type=Path,
        metavar="JSON",
        help="no --fix runs: --rounds more side-by-side rounds for the rows of this saved --json file (the "
        "scripts named, default all), appended to their rounds; the merged rows go to --json",
    )
    args = p.parse_args()
    reading = args.reading.read_text(encoding="utf-8") if args.reading else current_reading()
    if args.render_from:
        results = merge(args.render_from)
        if args.scripts:
            results = [r for r in results if r["name"] in args.scripts]
        when = args.when or max(
            _dt.datetime.fromtimestamp(f.stat().st_mtime, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            for f in args.render_from
        )
        text = render(results, args.steps, when=when, note=args.note, reading=reading)
        say(text)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        if not args.no_doc:
            write_doc(text)
        return 0
    steps = 16 if args.quick else args.steps
    rounds = args.rounds or (1 if args.quick else 3)
    if args.add_rounds_to:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        saved = merge([args.add_rounds_to])
        results = []
        for row in saved:
            if not args.scripts or row["name"] in args.scripts:
                work = Path(tempfile.mkdtemp(prefix="tfdoctor-bench-corpus-"))
                try:
                    row = add_rounds(row, work, rounds)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
            results.append(row)
            if args.json:  # after every script: a stop keeps what was measured
                args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        text = render(results, steps, note=args.note, reading=reading)
        say(text)
        if not args.quick and not args.no_doc:
            write_doc(text)
        return 0
    if args.fix_rounds is None:
        args.fix_rounds = 1 if args.quick else DEFAULT_ROUNDS
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    known = corpus_scripts()
    names = [corpus_name(n, known) for n in args.scripts] or known
    results = []
    for name in names:
        work = Path(tempfile.mkdtemp(prefix="tfdoctor-bench-corpus-"))
        try:
            results.append(study(name, work, steps, rounds, args.fix_rounds, not args.structural_only))
        except (subprocess.CalledProcessError, OSError) as e:
            say(f"== {name}: benchmark failed: {type(e).__name__}: {e}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        text = render(results, steps, note=args.note, reading=reading)  # after every script: a partial
        say(text)  # table survives a stop
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        if not args.quick and not args.no_doc:
            write_doc(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
