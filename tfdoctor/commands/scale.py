from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tfdoctor.capture.workers import from_tf_config
from tfdoctor.commands.profile import ProfileCommand, ProgressDisplay
from tfdoctor.errors import RunError, UsageError
from tfdoctor.rundir import now_iso
from tfdoctor.session.profile import profile_script
from tfdoctor.store import RunStore

#: the scaling efficiency data parallelism reaches on well-fed models (the seed talks: 80-95 % to 8 GPUs)
GOOD_EFFICIENCY = 0.8


class ScalePoint(BaseModel):
    replicas: int  # asked for
    ran_replicas: int  # what the script's strategy ran
    run_id: str
    status: str
    examples_per_s: float | None = None
    steps_per_s: float | None = None
    step_ms: float | None = None
    global_batch: int | None = None
    speedup: float | None = None  # throughput vs the first point
    efficiency: float | None = None  # speedup / (replicas / first replicas)
    note: str = ""


class ScaleResult(BaseModel):
    script: str
    args: list[str] = Field(default_factory=list)
    created: str
    unit: str  # "examples/s" or "replica-steps/s"
    points: list[ScalePoint] = Field(default_factory=list)
    verdict: str = ""


def uses_multiworker(script: Path) -> str | None:
    """What in the script's source says it is a multi-worker job (MultiWorkerMirroredStrategy, a
    TF_CONFIG read, a ParameterServerStrategy), or None."""
    try:
        source = script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for word in ("MultiWorkerMirroredStrategy", "ParameterServerStrategy", "TF_CONFIG"):
        if word in source:
            return word
    return None


def parse_replicas(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--replicas {text!r}: use a comma-separated list of counts, e.g. 1,2") from None
    if not counts or any(c < 1 for c in counts) or len(set(counts)) != len(counts):
        raise UsageError(f"--replicas {text!r}: distinct positive counts, e.g. 1,2,4")
    return sorted(counts)


def _display(err: Console, label: str, _default_label: str) -> ProgressDisplay:
    return ProgressDisplay(err, label)


def score(points: list[ScalePoint]) -> tuple[str, str]:
    """Fill speedup/efficiency in place (vs the smallest count); returns (unit, verdict)."""
    done = [p for p in points if p.status == "complete" and (p.examples_per_s or p.steps_per_s)]
    unit = "examples/s" if done and all(p.examples_per_s for p in done) else "replica-steps/s"

    def rate(p: ScalePoint) -> float:
        return (p.examples_per_s or 0.0) if unit == "examples/s" else (p.steps_per_s or 0.0) * p.ran_replicas

    if len(done) < 2:
        return unit, "not enough complete runs to compare"
    base = done[0]
    for p in done:
        p.speedup = round(rate(p) / rate(base), 4) if rate(base) else None
        p.efficiency = round(p.speedup / (p.ran_replicas / base.ran_replicas), 4) if p.speedup else None
    last = done[-1]
    eff = last.efficiency or 0.0
    verdict = (
        f"{base.ran_replicas} -> {last.ran_replicas} replicas: {last.speedup:.2f}x throughput, "
        f"scaling efficiency {100 * eff:.0f} %"
    )
    if eff >= GOOD_EFFICIENCY:
        verdict += " (at the 80-95 % data parallelism reaches on a well-fed model)"
    else:
        verdict += " (below the 80-95 % bar: see the findings of the larger run, TFD60x)"
    if any(p.ran_replicas != p.replicas for p in done):
        verdict += "; the script did not run the replicas asked for on every point"
    return unit, verdict


class ScaleCommand(ProfileCommand):
    """Run a tf.distribute script at several replica counts and report its scaling efficiency.

    Each count is a full tfdoctor profile run with that many devices: the first N GPUs, or (without
    GPUs) the CPU split into N logical devices before the script starts. The script's strategy must use
    the devices it sees (e.g. MirroredStrategy over tf.config.list_logical_devices()). Throughput is
    measured in each run's unprofiled timing window; efficiency = speedup / (N / N_first).

    Examples:
      tfdoctor scale examples/mirrored.py --replicas 1,2
      tfdoctor scale train.py --replicas 1,2,4,8 --steps 60 -- --epochs 3
    """

    name = "scale"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        super().prepare_parser(parser)
        for p in (parser, self._options):
            p.add_argument(
                "--replicas",
                default="1,2" if p is parser else argparse.SUPPRESS,
                help="replica counts to run (default 1,2)",
            )

    def run(self, args: argparse.Namespace) -> int:
        err = Console(stderr=True, highlight=False)
        cfg = self.config(args)
        ident = from_tf_config({**os.environ, **cfg.env})
        if ident is not None:
            raise UsageError(
                f"tfdoctor scale is for one-machine strategies (MirroredStrategy over this machine's devices); "
                f"TF_CONFIG makes this process {ident.name} of a {ident.n_workers}-worker cluster",
                hint="profile each worker with `tfdoctor profile` under its own TF_CONFIG (docs/distributed.md)",
            )
        multiworker = uses_multiworker(Path(str(cfg.script)))
        counts = parse_replicas(args.replicas)
        store = RunStore(args.home)
        stem = Path(str(cfg.script)).stem
        base = store.new_run(str(cfg.script), cfg.args, kind="scale", run_id=args.run_id, force=args.force)
        points: list[ScalePoint] = []
        for n in counts:
            cfg.switches = {**cfg.switches, "logical_devices": str(n)}
            run, result, report = profile_script(
                store,
                cfg,
                kind="profile",
                parent=base.id,
                run_id=f"{base.id}-r{n}",
                force=args.force,
                display=partial(_display, err, f"{stem} ×{n}"),
            )
            tp = report.throughput
            ran = report.facts.num_replicas if report.facts.strategy else 1
            points.append(
                ScalePoint(
                    replicas=n,
                    ran_replicas=ran,
                    run_id=run.id,
                    status=result.status,
                    examples_per_s=tp.examples_per_s if tp else None,
                    steps_per_s=tp.steps_per_s if tp else None,
                    step_ms=tp.step_ms_median if tp else None,
                    global_batch=report.facts.batch_size,
                    note=(result.message or "")
                    + (f"; {n} replicas asked, the script ran {ran}" if ran != n and result.ok else ""),
                )
            )
        unit, verdict = score(points)
        res = ScaleResult(
            script=str(cfg.script),
            args=cfg.args,
            created=now_iso(),
            unit=unit,
            points=points,
            verdict=verdict,
        )
        base.write_json("scale.json", res.model_dump(mode="json"))
        best = max((p.speedup or 0.0 for p in points), default=0.0)
        store.update(base, status="complete", speedup=best or None, note=verdict)
        if args.json:
            sys.stdout.write(res.model_dump_json(indent=2) + "\n")
        else:
            self.show_scale(res, Console(highlight=False), str(base.path))
        failed = [p for p in points if p.status != "complete"]
        if failed:
            e = RunError(
                f"{len(failed)} of {len(points)} runs did not complete: "
                + "; ".join(f"×{p.replicas}: {p.note or p.status}" for p in failed),
                run_dir=str(base.path),
            )
            if multiworker:
                e.hint = (
                    f"{Path(str(cfg.script)).name} uses {multiworker}: tfdoctor scale is for one-machine "
                    "strategies (MirroredStrategy); profile each worker of a multi-worker job with "
                    "`tfdoctor profile` under its TF_CONFIG (docs/distributed.md)"
                )
            raise e
        return 0

    @staticmethod
    def show_scale(res: ScaleResult, out: Console, run_dir: str) -> None:
        table = Table(title="Scaling", title_justify="left", caption=res.verdict, expand=False)
        for col in ("replicas", "ran", res.unit, "step ms", "batch", "speedup", "efficiency", "run"):
            table.add_column(col, justify="right" if col != "run" else "left")
        for p in res.points:
            rate = p.examples_per_s if res.unit == "examples/s" else (p.steps_per_s or 0) * p.ran_replicas
            table.add_row(
                str(p.replicas),
                str(p.ran_replicas),
                f"{rate:,.0f}" if rate else p.status,
                f"{p.step_ms:.2f}" if p.step_ms else "",
                str(p.global_batch or ""),
                f"{p.speedup:.2f}x" if p.speedup else "",
                f"{100 * p.efficiency:.0f} %" if p.efficiency else "",
                escape(p.run_id),
            )
        out.print(table)
        out.print(f"Scale runs: {escape(run_dir)}/scale.json")


COMMAND = ScaleCommand
