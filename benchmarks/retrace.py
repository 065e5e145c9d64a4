"""Section 7: a tf-function trial's window against the whole training, on a step that reads the epoch.

``examples/corpus/epoch_counter.py`` computes its noise level inside the step from the epoch counter.
tf-function extracts the step; passed as a Python int, ``epoch`` makes tf.function trace the step again
every epoch, which a fix trial's timing window (a few dozen steps inside one epoch) never sees. This
script runs the whole training (``--epochs N``) of four variants, interleaved in rounds (order rotating):

* ``baseline``: the script as it is (eager step);
* ``python epoch``: tf-function's edit with the counter as a Python number (its fallback variant);
* ``tensor epoch``: tf-function's edit as it is made (``tf.constant(epoch, tf.float32)``);
* ``expert``: ``epoch_counter_expert.py`` (tf.function + prefetch, the noise level as a tensor).

Each run's figure is its own printout: the mean ms/step over epochs 1..N-1 (epoch 0 holds the first
trace in every variant), so retraces are in it and process start-up is not. Ratios are per round
(baseline / variant), medians over rounds.

    python benchmarks/retrace.py             # 8 epochs, 3 rounds, writes docs/benchmarks.md
    python benchmarks/retrace.py --quick     # 3 epochs, 1 round, docs untouched
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, md_table, median, say, section_reading, update_section, versions

SCRIPT = ROOT / "examples" / "corpus" / "epoch_counter.py"
EXPERT = ROOT / "examples" / "corpus" / "epoch_counter_expert.py"
MS = re.compile(r"^epoch (\d+):.*\(([\d.]+) ms/step\)$", re.M)


def variants(folder: Path) -> dict[str, Path]:
    """The four scripts: the corpus script, tf-function's two edits of it, the expert twin."""
    sys.path.insert(0, str(ROOT))
    from tfdoctor.fixes import FixContext, get_fix
    from tfdoctor.model import Facts

    src = SCRIPT.read_text()
    line = next(i for i, t in enumerate(src.splitlines(), 1) if ".apply_gradients(" in t)
    facts = Facts(loop_kind="custom", step_kind="eager", source={"apply_gradients": f"{SCRIPT}:{line}"})
    fix = get_fix("tf-function")
    out: dict[str, Path] = {"baseline": SCRIPT}
    for label, params in (("python epoch", {"python_args": "1"}), ("tensor epoch", {})):
        res = fix.apply(src, FixContext(filename=SCRIPT.name, facts=facts, params=params))
        assert res.changed, res.reason
        path = folder / f"{label.replace(' ', '_')}.py"
        path.write_text(res.code)
        out[label] = path
    out["expert"] = EXPERT
    return out


def run(script: Path, epochs: int) -> float:
    p = subprocess.run(
        [sys.executable, str(script), "--epochs", str(epochs)],
        capture_output=True,
        text=True,
        check=True,
        env={"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ},
    )
    ms = [float(m.group(2)) for m in MS.finditer(p.stdout) if int(m.group(1)) > 0]
    if not ms:
        raise RuntimeError(f"{script.name}: no epoch lines after epoch 0 in its output")
    return sum(ms) / len(ms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="3 epochs, 1 round, docs untouched")
    a = ap.parse_args(argv)
    epochs, rounds = (3, 1) if a.quick else (a.epochs, a.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        scripts = variants(Path(tmp))
        names = list(scripts)
        ms: dict[str, list[float]] = {n: [] for n in names}
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                ms[n].append(run(scripts[n], epochs))
                say(f"round {r + 1}/{rounds} {n}: {ms[n][-1]:.2f} ms/step")
    rows = []
    for n in names:
        ratios = [b / v for b, v in zip(ms["baseline"], ms[n], strict=True)]
        rows.append(
            [
                n,
                f"{median(ms[n]):.2f}",
                " · ".join(f"{x:.2f}" for x in ms[n]),
                f"{median(ratios):.2f}x",
            ]
        )
    table = md_table(["variant", "ms/step (median)", "each round", "vs baseline"], rows)
    say(table)
    if a.quick:
        return 0
    reading = section_reading("retrace", "<!--") or (
        "**Reading it**: the tf-function trial's window (a few dozen steps of one epoch) sees the "
        "python-epoch edit at its steady speed; the whole training pays a trace every epoch."
    )
    body = (
        "## 7. A trial's window against the whole training: a step reading the epoch counter\n\n"
        f"`python benchmarks/retrace.py`. {versions()} Whole trainings of "
        f"`examples/corpus/epoch_counter.py --epochs {epochs}`, each variant's mean ms/step over epochs 1..{epochs - 1} from its own "
        f"printout (retraces included, start-up not), {rounds} rounds interleaved, order rotating.\n\n"
        f"{table}\n\n{reading}\n"
    )
    update_section("retrace", body, after="fix_repeat")
    say("docs/benchmarks.md updated (section 7)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
