from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from tfdoctor.errors import UsageError
from tfdoctor.report.terminal import render
from tfdoctor.rundir import is_run_dir
from tfdoctor.session.build import build_report, report_from_trace
from tfdoctor.store import RunStore


class AnalyzeCommand:
    """Re-analyse a saved run, or any TensorBoard profile, without re-running anything.

    TARGET is a run id from the store, a run directory, a TensorBoard logdir, a profile session
    directory, or one trace file (*.xplane.pb, *.trace.json.gz, TF1 timeline.json).

    Examples:
      tfdoctor analyze 20261121-101500-train-ab12
      tfdoctor analyze ~/logs/fit/20231107-181856
      tfdoctor analyze run.xplane.pb --json
    """

    name = "analyze"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", help="run id, run directory, logdir, or trace file")
        parser.add_argument("--home", help="run store directory (default: $TFDOCTOR_HOME or ~/.tfdoctor)")
        parser.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
        parser.add_argument(
            "--no-save",
            action="store_true",
            help="for a run: do not rewrite its report.json with the new analysis",
        )

    def run(self, args: argparse.Namespace) -> int:
        store = RunStore(args.home)
        target = Path(args.target)
        is_run = is_run_dir(target) or (not target.exists() and store.runs_dir.joinpath(args.target).is_dir())
        if is_run:
            run = store.get(args.target)
            report = build_report(run)
            if not args.no_save:
                run.write_report(report)
            run_dir = str(run.path)
        elif target.exists():
            report = report_from_trace(target)
            run_dir = None
        else:
            raise UsageError(f"{args.target}: no such run, directory or trace file")
        if args.json:
            sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        else:
            render(report, Console(), run_dir=run_dir)
        if report.breakdown is None or not report.breakdown.steps:
            why = "; ".join(report.breakdown.notes) if report.breakdown else "no trace"
            Console(stderr=True).print(f"tfdoctor: could not diagnose {args.target}: {why}", markup=False)
            return 1
        return 0


COMMAND = AnalyzeCommand
