"""Each fix's own gain on the example it is for, measured side by side (CPU).

    python benchmarks/fix_gains.py                       # every fix, writes docs/benchmarks.md
    python benchmarks/fix_gains.py --only xla-jit,mixed-precision --no-doc
    python benchmarks/fix_gains.py --quick               # few steps, one round: checks that it runs

For every fix: its example with the fixes the ``--fix`` loop would have kept before it (the reference,
A), and the same plus the fix (B), both produced by the real codemods. A and B run back to back through
tfdoctor's harness (unprofiled timing window, examples/s), in alternating order (AB, BA, AB, ...) so a
drift in the machine's load weighs on both; the gain is the median of the per-round B/A ratios. A fix
that does not apply on this machine (bf16 on a CPU without it) is listed with the reason.

This is the fix-by-fix figure; ``fix_speedup.py`` runs the whole ``--fix`` loop and compares the result
with the hand-written expert version.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, md_table, median, say, update_section, versions

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.fixes import FixContext, Hardware, get_fix
from tfdoctor.model import Facts
from tfdoctor.session.build import finish_run
from tfdoctor.store import RunStore

EXAMPLES = ROOT / "examples"
#: a gain smaller than this is not called one (the fix loop's own bar, tfdoctor.session.fix_loop.MIN_GAIN)
BAR = 1.02


@dataclass(frozen=True)
class Showcase:
    fix_id: str
    example: str
    before: tuple[str, ...] = ()  # fixes applied to both sides first (what the loop keeps before it)
    loop: str = "custom"  # Facts.loop_kind the fixes see
    warmup: int | None = None  # None: the harness's adaptive warm-up
    why: str = ""


SHOWCASES = [
    Showcase("tf-function", "naive_loop.py", why="eager op-by-op dispatch of the step"),
    Showcase(
        "generator-prefetch",
        "naive_loop.py",
        ("tf-function",),
        why="the numpy generator runs while the compiled step releases the GIL",
    ),
    Showcase(
        "generator-cache",
        "naive_loop.py",
        ("tf-function", "generator-prefetch"),
        why="the deterministic decode memoized (the harness warms up until the cache serves)",
    ),
    Showcase(
        "batch-scale",
        "naive_loop.py",
        ("tf-function", "generator-prefetch", "generator-cache"),
        why="batch ×2 (learning rate ×2, SGD): fixed per-step costs shared by twice the examples",
    ),
    Showcase(
        "tfdata-parallel-map",
        "tfdata_loop.py",
        ("tf-function",),
        why="the two sequential maps on both cores once the step is compiled",
    ),
    Showcase(
        "tfdata-prefetch",
        "tfdata_loop.py",
        ("tf-function", "tfdata-parallel-map"),
        why="batches produced while the step runs",
    ),
    Showcase(
        "tfdata-cache",
        "tfdata_loop.py",
        ("tf-function", "tfdata-parallel-map", "tfdata-prefetch"),
        warmup=4096 // 32 + 4,  # one epoch: the cache serves from the second
        why="the decode map done once; measured in the second epoch",
    ),
    Showcase(
        "steps-per-execution",
        "keras_fit.py",
        loop="keras_fit",
        why="8 batches per trip into the compiled function (batch 8)",
    ),
    Showcase("xla-jit", "mlp_loop.py", why="LayerNorm/GELU/residual element-wise ops fused between matmuls"),
    Showcase("mixed-precision", "mlp_loop.py", why="bfloat16 matmuls (AVX512_BF16/AMX CPUs only)"),
]


def sources(case: Showcase, hardware: Hardware) -> tuple[str, str | None, str]:
    """(reference code, code with the fix or None when it does not apply, what the fix did / why not)."""
    code = (EXAMPLES / case.example).read_text(encoding="utf-8")
    ctx = FixContext(facts=Facts(loop_kind=case.loop), hardware=hardware, filename=case.example)
    for fid in case.before:
        fix = get_fix(fid)
        out = fix.apply(code, dataclasses.replace(ctx, params=fix.variants(ctx)[0]))
        if not out.changed:
            raise SystemExit(f"{fid} does not apply to {case.example}: {out.reason}")
        code = out.code
    fix = get_fix(case.fix_id)
    out = fix.apply(code, dataclasses.replace(ctx, params=fix.variants(ctx)[0]))
    return code, (out.code if out.changed else None), out.reason


def measure(store: RunStore, work: Path, case: Showcase, label: str, code: str, steps: int) -> float | None:
    folder = work / label
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    script = folder / case.example
    script.write_text(code, encoding="utf-8")
    run = store.new_run(str(script), kind="bench")
    warmup = case.warmup
    total = steps + (warmup or 0)
    cfg = CaptureConfig(script=script, steps=total, warmup=warmup, profile=False, cwd=folder)
    res = run_capture(cfg, run)
    rep = finish_run(store, run, res)
    if not res.ok or rep.throughput is None:
        say(f"   {label}: {res.message or res.status}")
        return None
    tp = rep.throughput
    return tp.examples_per_s or tp.steps_per_s


def run_case(
    case: Showcase, made: tuple[str, str | None, str], store: RunStore, work: Path, steps: int, rounds: int
) -> dict:
    ref, fixed, what = made
    row = {"case": case, "what": what, "applies": fixed is not None, "rounds": [], "a": [], "b": []}
    if fixed is None:
        say(f"== {case.fix_id} on {case.example}: not applicable here ({what})")
        return row
    say(f"== {case.fix_id} on {case.example} (after {', '.join(case.before) or 'nothing'}): {what}")
    for r in range(rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        got = {}
        for side in order:
            got[side] = measure(
                store, work, case, f"{case.fix_id}-{side}", ref if side == "A" else fixed, steps
            )
        a, b = got["A"], got["B"]
        say(f"   round {r + 1} ({''.join(order)}): A {a} B {b}")
        if a and b:
            row["rounds"].append(b / a)
            row["a"].append(a)
            row["b"].append(b)
    return row


def render(rows: list[dict], steps: int, rounds: int, wall: float) -> str:
    table = []
    gains = 0
    tried = 0
    for r in rows:
        c: Showcase = r["case"]
        if not r["rounds"]:
            verdict = "not applicable here" if not r["applies"] else "no measurement"
            table.append(
                [f"`{c.fix_id}`", c.example, ", ".join(c.before) or "–", "", "", "", verdict, r["what"]]
            )
            continue
        tried += 1
        g = median(r["rounds"])
        gains += g >= BAR
        table.append(
            [
                f"`{c.fix_id}`",
                c.example,
                ", ".join(c.before) or "–",
                f"{median(r['a']):.1f} → {median(r['b']):.1f}",
                f"**{g:.2f}x**",
                ", ".join(f"{x:.2f}" for x in r["rounds"]),
                "gain" if g >= BAR else "no gain",
                c.why,
            ]
        )
    head = [
        "fix",
        "example",
        "applied first (both sides)",
        "examples/s A → B (medians)",
        "gain B/A (median)",
        "per round",
        "",
        "what it buys here",
    ]
    return "\n".join(
        [
            "## 1b. Each fix's gain on its example",
            "",
            f"`python benchmarks/fix_gains.py`: {versions()} Each fix measured on the example it is for, on "
            "top of the fixes the `--fix` loop keeps before it there (A: without the fix, B: with it, both "
            f"made by the real codemods), {steps} timed steps per run, {rounds} round{'s' if rounds != 1 else ''} in alternating order "
            "(AB, BA, ...); the gain is the median of the per-round B/A ratios in examples/s. "
            f"{gains} of {tried} fixes measured a gain of at least {BAR:.2f}x; the whole benchmark took "
            f"{wall:.0f} s.",
            "",
            md_table(head, table),
            "",
            "Examples: `naive_loop.py` (the case study's start: numpy generator, eager loop), `tfdata_loop.py` "
            "(sequential maps, no prefetch, eager step), `keras_fit.py` (Keras `fit`, batch 8), "
            "`mlp_loop.py` (a residual LayerNorm/GELU MLP whose input and step are already in good shape). "
            "On this CPU XLA slows the case study's convolutional network (oneDNN's convolutions beat "
            "XLA's: `fix_speedup.py`, where the loop rejects it); `mlp_loop.py` is where it can pay on a CPU "
            "(1.17x, rounds 1.10-1.28, on 2026-11-23).",
        ]
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few steps, one round, no docs update")
    p.add_argument("--steps", type=int, default=30, help="timed steps per run (after the warm-up)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--only", default="", help="comma-separated fix ids")
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    args = p.parse_args()
    steps, rounds = (8, 1) if args.quick else (args.steps, args.rounds)
    only = {x for x in args.only.split(",") if x}
    cases = [c for c in SHOWCASES if not only or c.fix_id in only]
    if args.quick:  # one case of each kind of run: CI checks that the script executes, not the figures
        cases = [c for c in cases if c.fix_id in ("tfdata-parallel-map", "xla-jit")] or cases[:1]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    hardware = Hardware.detect(None)
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="tfdoctor-bench-gains-"))
    try:
        store = RunStore(work / "home")
        made = [sources(c, hardware) for c in cases]  # every codemod first: fail before measuring
        rows = [run_case(c, m, store, work, steps, rounds) for c, m in zip(cases, made, strict=True)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = render(rows, steps, rounds, time.monotonic() - t0)
    say(text)
    if not args.quick and not args.no_doc and not only:
        say(f"wrote {update_section('fix-gains', text, after='fix-speedup')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
