from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfdoctor.errors import TfdoctorError
from tfdoctor.model import Report
from tfdoctor.store import RunStore


def _report(store: RunStore, ref: str) -> Report:
    run = store.get(ref)
    report = run.report()
    if report is None:
        raise TfdoctorError(
            f"run {run.id} has no report yet (still running, or it failed before one was written)"
        )
    return report


class CompareCommand:
    """Compare two runs: throughput ratio and where the step time moved, category by category.

    A and B are run ids or run directories; B is compared against A (speed-up = B / A).

    Examples:
      tfdoctor compare 20261121-101500-train-ab12 20261121-103000-train-cd34
      tfdoctor compare RUN_A RUN_B --html compare.html
    """

    name = "compare"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("a", help="the reference run (id or directory)")
        parser.add_argument("b", help="the run compared against it")
        parser.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML comparison")
        parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
        parser.add_argument("--force", action="store_true", help="overwrite OUT.html if it exists")
        parser.add_argument("--home", help="run store directory (default: $TFDOCTOR_HOME or ~/.tfdoctor)")

    def run(self, args: argparse.Namespace) -> int:
        from tfdoctor.report.compare import compare
        from tfdoctor.report.html import OutputExists, compare_page, render_compare, write_output

        store = RunStore(args.home)
        a, b = _report(store, args.a), _report(store, args.b)
        c = compare(a, b)
        if args.html:
            out = Path(args.html)
            if out.exists() and not args.force:
                raise OutputExists(f"{out} exists; pass --force to overwrite it")
            write_output(out, render_compare(compare_page(c, a, b), standalone=True), force=args.force)
            Console(stderr=True, highlight=False).print(f"tfdoctor: wrote {out}", markup=False)
            return 0
        if args.json:
            sys.stdout.write(c.model_dump_json(indent=2) + "\n")
            return 0
        con = Console(highlight=False)
        page = compare_page(c, a, b)
        con.print(page.headline, markup=False, style="bold")
        con.print(f"  A {c.a.run_id}: {page.a_rate[0]} ({page.a_rate[1]})", markup=False)
        con.print(f"  B {c.b.run_id}: {page.b_rate[0]} ({page.b_rate[1]})", markup=False)
        if page.rows:
            t = Table(title="Mean step by category", title_justify="left")
            t.add_column("category")
            t.add_column("A", justify="right")
            t.add_column("B", justify="right")
            t.add_column("B − A", justify="right")
            for label, fa, fb, fd, cls in page.rows:
                style = "red" if cls == "delta-pos" else ("green" if cls == "delta-neg" else "")
                t.add_row(Text(label), Text(fa), Text(fb), Text(fd, style=style))
            con.print(t)
        if c.only_a:
            con.print(f"findings only in A: {', '.join(c.only_a)}", markup=False)
        if c.only_b:
            con.print(f"findings only in B: {', '.join(c.only_b)}", markup=False)
        return 0


COMMAND = CompareCommand
