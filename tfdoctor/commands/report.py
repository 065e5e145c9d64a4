from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from tfdoctor.errors import TfdoctorError
from tfdoctor.model import Report
from tfdoctor.store import RunStore


class ReportCommand:
    """Show a saved run's report, or write it as one self-contained HTML file.

    RUN is a run id from the store or a run directory. The HTML file has plotly, the styles and the
    timeline inlined: it opens offline and can be mailed or attached to an issue. Existing files are
    not overwritten without --force.

    Examples:
      tfdoctor report 20261121-101500-train-ab12
      tfdoctor report 20261121-101500-train-ab12 --html report.html
      tfdoctor report ~/.tfdoctor/runs/20261121-101500-train-ab12 --json
    """

    name = "report"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run", help="run id or run directory")
        parser.add_argument("--html", metavar="OUT.html", help="write the self-contained HTML report here")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--force", action="store_true", help="overwrite OUT.html if it exists")
        parser.add_argument("--home", help="run store directory (default: $TFDOCTOR_HOME or ~/.tfdoctor)")

    def run(self, args: argparse.Namespace) -> int:
        from tfdoctor.report.html import OutputExists, report_html, write_output
        from tfdoctor.report.timeline import timeline_for_run

        store = RunStore(args.home)
        run = store.get(args.run)
        report = run.report()
        if report is None:
            # no report.json yet (a run that is going, or crashed early): build one from what is there
            from tfdoctor.session.build import build_report

            report = build_report(run)
        if args.html:
            out = Path(args.html)
            if out.exists() and not args.force:
                raise OutputExists(f"{out} exists; pass --force to overwrite it")

            def load(rid: str) -> Report | None:
                try:
                    return store.get(rid).report()
                except TfdoctorError:
                    return None

            html = report_html(report, run_path=run.path, load_report=load, timeline=timeline_for_run(run))
            write_output(out, html, force=args.force)
            Console(stderr=True, highlight=False).print(
                f"tfdoctor: wrote {out} ({out.stat().st_size / 1e6:.1f} MB, works offline)", markup=False
            )
            return 0
        if args.json:
            sys.stdout.write(report.model_dump_json(indent=2) + "\n")
            return 0
        from tfdoctor.report.terminal import render

        render(report, Console(), run_dir=str(run.path))
        return 0


COMMAND = ReportCommand
