from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tfdoctor.errors import UsageError
from tfdoctor.rundir import is_run_dir
from tfdoctor.session.build import build_report, report_from_trace
from tfdoctor.store import RunStore

if TYPE_CHECKING:  # rich and the terminal renderer load only for text output: --json does not pay for them
    from rich.console import Console

    from tfdoctor.model import Finding, Report


class Printer(Protocol):
    """Where a one-line message goes: a rich Console, or :class:`Stderr` (no rich)."""

    def print(self, *objects: Any, markup: bool | None = None, soft_wrap: bool | None = None) -> None: ...


class Stderr:
    """Plain lines on stderr, printed as a ``Console(stderr=True, highlight=False)`` prints them with
    ``markup=False, soft_wrap=True`` (the only way this module prints), without importing rich."""

    def print(self, *objects: Any, markup: bool | None = None, soft_wrap: bool | None = None) -> None:
        print(*objects, file=sys.stderr, flush=True)


#: exit status when a finding at or above ``--fail-on`` was found (docs/cli.md: exit codes)
EXIT_FINDINGS = 8
#: lowest first; ``--fail-on low`` fails on low, medium and high findings
SEVERITIES = ("info", "low", "medium", "high")
FORMATS = ("text", "json", "sarif")


def add_output_options(parser: argparse.ArgumentParser, d: Callable[[Any], Any] = lambda v: v) -> None:
    """``--format`` and ``--fail-on``, shared by ``analyze`` and ``profile`` (``d``: the default's wrapper)."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=d(None),
        help="output: text (tables, the default), json (the report; schema: tfdoctor/schema/report.v1.json) "
        "or sarif (SARIF 2.1.0 for code scanning: findings at the script's lines)",
    )
    parser.add_argument(
        "--fail-on",
        choices=SEVERITIES,
        default=d(None),
        metavar="SEVERITY",
        help=f"exit with status {EXIT_FINDINGS} when a finding of this severity or higher is found "
        f"({', '.join(SEVERITIES)}; for CI)",
    )


def output_format(args: argparse.Namespace) -> str:
    fmt = getattr(args, "format", None)
    if getattr(args, "json", False):
        if fmt not in (None, "json"):
            raise UsageError(f"--json and --format {fmt} disagree: pass one of them")
        return "json"
    return fmt or "text"


def write_report(report: Report, fmt: str, console: Console | None, run_dir: str | None) -> None:
    """The report on stdout in ``fmt`` (text: the terminal tables on ``console``, a new stdout Console
    when None)."""
    if fmt == "json":
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    elif fmt == "sarif":
        from tfdoctor.report.sarif import to_sarif

        sys.stdout.write(json.dumps(to_sarif(report), indent=2) + "\n")
    else:
        from rich.console import Console

        from tfdoctor.report.terminal import render

        render(report, console if console is not None else Console(), run_dir=run_dir)


def failing(report: Report, fail_on: str | None) -> list[Finding]:
    """The decided findings at or above ``fail_on`` (none when it is None)."""
    if not fail_on:
        return []
    floor = SEVERITIES.index(fail_on)
    return [f for f in report.findings if f.decided and SEVERITIES.index(f.severity) >= floor]


def gate(report: Report, fail_on: str | None, err: Printer) -> int:
    """``--fail-on``: EXIT_FINDINGS (and one line on stderr) when a finding at or above it was found."""
    hits = failing(report, fail_on)
    if not hits:
        return 0
    ids = ", ".join(f"{f.rule_id} ({f.severity})" for f in hits)
    err.print(
        f"tfdoctor: {len(hits)} finding{'s' if len(hits) != 1 else ''} at or above --fail-on {fail_on}: {ids}",
        markup=False,
        soft_wrap=True,
    )
    return EXIT_FINDINGS


class AnalyzeCommand:
    """Re-analyse a saved run, or any TensorBoard profile, without re-running anything.

    TARGET is a run id from the store, a run directory, a TensorBoard logdir, a profile session
    directory, or one trace file (*.xplane.pb, *.trace.json.gz, TF1 timeline.json).

    Exit status: 0 diagnosed; 1 could not diagnose (no steps, no trace); 8 a finding at or above
    --fail-on; 2 usage; 3 unreadable trace (docs/cli.md lists every code).

    Examples:
      tfdoctor analyze 20261121-101500-train-ab12
      tfdoctor analyze ~/logs/fit/20231107-181856
      tfdoctor analyze run.xplane.pb --json
      tfdoctor analyze run.xplane.pb --format sarif --fail-on medium > tfdoctor.sarif
    """

    name = "analyze"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", help="run id, run directory, logdir, or trace file")
        parser.add_argument("--home", help="run store directory (default: $TFDOCTOR_HOME or ~/.tfdoctor)")
        parser.add_argument(
            "--json", action="store_true", help="print the report as JSON (same as --format json)"
        )
        add_output_options(parser)
        parser.add_argument(
            "--no-save",
            action="store_true",
            help="for a run: do not rewrite its report.json with the new analysis",
        )

    def run(self, args: argparse.Namespace) -> int:
        fmt = output_format(args)
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
        write_report(report, fmt, None, run_dir)
        err = Stderr()
        if report.breakdown is None or not report.breakdown.steps:
            why = "; ".join(report.breakdown.notes) if report.breakdown else "no trace"
            err.print(f"tfdoctor: could not diagnose {args.target}: {why}", markup=False, soft_wrap=True)
            return 1
        return gate(report, args.fail_on, err)


COMMAND = AnalyzeCommand
