"""Generate docs/rules.md from the rule catalog: each rule's docstring and its hit/miss examples.

    python scripts/document_rules.py           # write docs/rules.md
    python scripts/document_rules.py --check   # exit 1 if docs/rules.md is out of date

The page is a pure function of the rule classes (no trace is read), so it is reproducible anywhere.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

from tfdoctor.model import rule_family
from tfdoctor.rules import all_rules
from tfdoctor.rules._base import Rule

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "rules.md"
FAMILIES = {
    "meta": "Diagnosis coverage",
    "input": "Input pipeline",
    "dispatch": "Dispatch and kernel launch",
    "copy": "Host ↔ device",
    "precision": "Precision and batch",
    "compilation": "Compilation",
    "distribution": "Distribution",
}
HEADINGS = ("What it detects", "Why it costs throughput", "Evidence", "Fix", "Fix safety")


def _sections(rule: Rule) -> tuple[str, dict[str, str]]:
    doc = inspect.cleandoc(type(rule).__doc__ or "")
    summary, _, body = doc.partition("\n\n")
    sections: dict[str, str] = {}
    current = None
    for line in body.splitlines():
        if line.rstrip().endswith(":") and line.rstrip()[:-1] in HEADINGS and not line.startswith(" "):
            current = line.rstrip()[:-1]
            sections[current] = ""
        elif current is not None:
            sections[current] += line.strip() + "\n"
    return summary.replace("\n", " "), {k: " ".join(v.split()) for k, v in sections.items()}


VERDICT_AND_XPROF = """
## The verdict

The one-sentence verdict names what the **highest-saving finding** names, with its figures and its estimated
saving: `Launch-bound: 66 % of step time is spent launching kernels while the GPU idles 86 %; ... (TFD202,
est. saving 33 %).` When the breakdown's largest category is another one than the label names (or than
the finding's family covers), it is added (`; largest share: 57 % of step time is device compute`), so the
headline and the breakdown never contradict each other silently (`Dispatch-bound: 1536 op kernels per step
... XLA is off (TFD501, est. saving 10 %); largest share: 76 % of step time is TF op kernels on the CPU`);
input wait at 20 % or more is always the largest share named (XProf's *HIGHLY input-bound*). A finding that
would save under 10 % does not name the bound of a step that is half or more another category: that
category leads and the finding is cited (`Host-bound: 86 % of step time is Python and host work outside TF
ops; top finding: ... (TFD402, est. saving 1.3 %)`, an H100 step staging 64 MiB of numpy). Without a
finding that estimates a saving, the largest category is the verdict. A GPU run whose trace holds no device
events says that first (`No device trace: ...`, with what to do about CUPTI). The label comes from the rule
(`HEADLINE`) or its family: 1xx Input-bound, 2xx Launch-bound (Dispatch-bound on a CPU), 3xx Copy-bound,
4xx Compute-bound, 5xx Launch-bound, 6xx Scaling-bound.

A custom loop whose steps come in bursts (TFD207 with the script's own work between them, keras-io's PPO)
compares savings on the loop's time: a step finding's saving counts for the steps' share of the loop (30 %
of a step is 1.2 % of a loop that spends 96 % of its time collecting), so TFD207 heads the verdict there.
The findings list (terminal, HTML, web, `report.json`) comes in the verdict's order: decided findings first,
by that saving.

## Where we differ from XProf

Checked on every trace in `../shared/traces` with an XProf verdict (`PROFILER_VERDICTS.jsonl`) and on the
Keras profiles recorded here (`tests/unit/test_rules_verdicts.py`, `test_xprof_agreement.py`):

- **Keras 3 `TensorBoard(profile_batch=2)` on TF 2.21** (`sample_traces/keras-*`): XProf 2.24 says "No step
  time measured" (its step grouping does not know Keras 3's `Profiled batch` marker). We take that marker
  as the one step and diagnose it (with the note that one step is little evidence).
- **SageMaker TF 2.3 CPU profile** (one `train_function` call): XProf says HIGHLY input-bound, 61 %; we say
  Input-bound, 42 %. XProf's step starts at the function's first op; ours is the whole call, including the
  37 ms before its first op (function instantiation on the first profiled call). Same level, same cause.
- **Kernel launch** (PFE RTX 5000 runs, T4 run): ours is 1.7-7.5 points above XProf's *Kernel Launch* (20 vs
  18.6, 40 vs 36.9, 66 vs 61.5, 75 vs 71.3, T4 21 vs 13.7 %): every instant the GPU idles while the host
  dispatches is launch for us; XProf splits part of it into *All Others*. The input sends
  (`IteratorGetNext/_N:_Send`) are input transfer (H2D), not launch: counted as launch they added 1-4.5
  points.
- **"POTENTIALLY input-bound"** (PFE, T4): XProf's *All Others* time, not time waiting for input. Our input
  wait there is under 5 %; the unexplained share is TFD205 (T4: 16 % unexplained, XProf 24.3 % All Others).
- **GPU step time on an H100** (`sample_traces/gpu-jax-*`, recorded with JAX's profiler: same XPlane format):
  XProf's GPU step is the span of the step's device work (2.4 ms of a 2.93 ms step, 3.8 of 4.41); ours is
  the loop's step, the GPU's idle time between steps included, and matches the loop's own clock (2.95,
  4.42 ms). A step that waits on the host shows as idle GPU for us, not as a shorter step.
- **Empty GPU plane** (PFE `log_prefetch`): XProf gives no verdict; ours is `No device trace: ...`.
- **Tool protos only** (tensorflow/profiler demo `GPU-input-bound`, `GPU-compute-bound`): no trace to read;
  we refuse with a TraceError that says so; XProf's verdicts there come from its stored overview page.
- **TF1 `timeline.json`** (dlperf AlexNet inference) and a profile of a few eager ops: no training steps;
  `Not diagnosed` (TFD001), XProf likewise measures no step time.
- **sagemaker-debugger's trimmed TF 2.2 trace of an 8-GPU host** (the GPU processes named but empty, one
  python3 thread, one `train_function` call, no op events): no XProf verdict; ours finds the one step and
  heads with `No device trace: ...`; on a CPU trace like it, `Not split: ...` (its ops are not in the trace).
- **Our own harness runs** (tfdoctor markers, profile and timing windows): XProf's step time is the profiled
  step; where the profiler slowed the step by 10 % or more, our findings read the shares of the unprofiled
  step (`tracer_cost`, `unprofiled_share`; the breakdown's own shares stay the profiled step's). In a custom loop our input wait is the batch
  fetch (tf.data `next`, as XProf's is the GetNext time); the rest between two steps is host work. With no
  fetch in the trace (a Python generator, numpy slicing, a full-batch loop) the wait is what follows the
  last TensorFlow op the loop runs between the steps (an `assign_sub` update, a loss evaluated each epoch).
"""


def render() -> str:
    rules = all_rules()
    out = [
        "# tfdoctor rules",
        "",
        "<!-- generated by scripts/document_rules.py from the rule docstrings and examples; do not edit -->",
        "",
        "Each rule reads the step-time breakdown of a profiled run (and what the harness recorded about it)",
        "and returns at most one finding: a one-line claim with numbers, evidence, the estimated share of",
        "step time a fix could save, and the fix ids `tfdoctor fix` understands. A rule that cannot decide",
        "says why. GPU rules say nothing on CPU-only runs (TFD003 notes it once).",
        "",
        "| ID | name | family | GPU only |",
        "|---|---|---|---|",
    ]
    for r in rules:
        out.append(
            f"| [{r.ID}](#{r.ID.lower()}-{r.NAME}) | {r.NAME} | {FAMILIES.get(rule_family(r.ID), '?')} | "
            f"{'yes' if r.DEVICE else ''} |"
        )
    out += ["", *VERDICT_AND_XPROF.strip().splitlines()]
    family = None
    for r in rules:
        if rule_family(r.ID) != family:
            family = rule_family(r.ID)
            out += ["", f"## {FAMILIES.get(family, family)}"]
        summary, sections = _sections(r)
        out += ["", f"### {r.ID} {r.NAME}", "", summary, ""]
        for h in HEADINGS:
            if h in sections:
                out += [f"**{h}.** {sections[h]}", ""]
        if r.EXAMPLES:
            out += ["**Examples** (tested: the rule must fire on each hit and stay silent on each miss):", ""]
            out += ["| fixture | fires | what it is |", "|---|---|---|"]
            for ex in r.EXAMPLES:
                facts = f" (facts: {', '.join(sorted(ex.facts))})" if ex.facts else ""
                out.append(f"| `{ex.path}` | {'hit' if ex.fires else 'miss'} | {ex.note}{facts} |")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if docs/rules.md is out of date")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print("docs/rules.md is out of date: run python scripts/document_rules.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(all_rules())} rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
