from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfdoctor.errors import UsageError
from tfdoctor.report import format as fmt
from tfdoctor.store import RunStore

STATUSES = ("running", "complete", "failed", "interrupted", "timeout", "no_steps")
_STATUS_STYLE = {"complete": "green", "running": "cyan", "no_steps": "yellow"}
#: below this width the table is laid out as one block per run (an 80-column terminal, a CI log)
WIDE = 110


def is_trial(row: dict[str, Any]) -> bool:
    """A fix trial (``fix`` / ``notebook-fix``): listed under its ``--fix`` run, not as a run of its own."""
    return bool(row.get("parent")) and str(row.get("kind", "")).endswith("fix")


def select(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if args.status and r.get("status") not in args.status:
            continue
        if args.kind and r.get("kind") not in args.kind:
            continue
        if args.script and args.script not in str(r.get("script") or ""):
            continue
        if args.since and str(r.get("created") or "") < args.since:
            continue
        out.append(r)
    return out


def group(rows: list[dict[str, Any]], all_rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list]]:
    """(run, its trials) in the order of ``rows``; trials whose parent is listed are nested under it."""
    listed = {r["id"] for r in rows if not is_trial(r)}
    trials: dict[str, list[dict[str, Any]]] = {}
    for r in all_rows:
        if is_trial(r) and r["parent"] in listed:
            trials.setdefault(r["parent"], []).append(r)
    out = []
    for r in rows:
        if is_trial(r) and r["parent"] in listed:
            continue
        out.append((r, sorted(trials.get(r["id"], []), key=lambda t: (t.get("created") or "", t["id"]))))
    return out


def _rate(r: dict[str, Any]) -> str:
    if r.get("examples_per_s"):
        return f"{r['examples_per_s']:,.1f} ex/s"
    if r.get("steps_per_s"):
        return f"{r['steps_per_s']:,.2f} steps/s"
    return "—"


def _speedup(r: dict[str, Any]) -> str:
    return fmt.ratio(r["speedup"]) if r.get("speedup") else ""


def _when(r: dict[str, Any]) -> str:
    c = str(r.get("created") or "")
    return c[:16].replace("T", " ")


def _script(r: dict[str, Any]) -> str:
    s = str(r.get("script") or "")
    return Path(s).name if "/" in s else s


def _status(r: dict[str, Any]) -> Text:
    s = str(r.get("status") or "")
    return Text(s, style=_STATUS_STYLE.get(s, "red"))


def render_table(groups: list[tuple[dict[str, Any], list]], console: Console, show_trials: bool) -> None:
    table = Table(title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("run id", no_wrap=True, overflow="fold")
    table.add_column("created", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("script", overflow="fold")
    table.add_column("device", overflow="fold")
    table.add_column("throughput", justify="right", no_wrap=True)
    table.add_column("speedup", justify="right", no_wrap=True)
    for r, trials in groups:
        kind = str(r.get("kind") or "")
        if trials and not show_trials:
            kind += f" (+{len(trials)} trials)"
        table.add_row(
            r["id"], _when(r), kind, _status(r), _script(r), r.get("device") or "", _rate(r), _speedup(r)
        )
        if show_trials:
            for t in trials:
                table.add_row(
                    f"  └ {t['id']}", _when(t), str(t.get("kind") or ""), _status(t), "", "", _rate(t), ""
                )
    console.print(table)


def _packed(first: Text, bits: list[str], width: int, indent: str) -> list[Text]:
    """``first`` then ``bits`` joined by " · ", broken into lines of at most ``width`` between bits."""
    lines = [Text(indent) + first]
    for b in (b for b in bits if b):
        if len(lines[-1].plain) + 3 + len(b) > width:
            lines.append(Text(indent + b))
        else:
            lines[-1].append(" · " + b)
    return lines


def render_blocks(groups: list[tuple[dict[str, Any], list]], console: Console, show_trials: bool) -> None:
    """One block per run: the id alone on its line (never wrapped: it is what you copy), then facts."""
    width = console.width
    for r, trials in groups:
        console.print(Text(r["id"], style="bold"), soft_wrap=True)
        bits = [_when(r), str(r.get("kind") or ""), _script(r), r.get("device") or "", _rate(r), _speedup(r)]
        for line in _packed(_status(r), bits, width, "  "):
            console.print(line, soft_wrap=True)
        if trials and not show_trials:
            console.print(f"  {len(trials)} fix trials (--trials lists them)", style="dim")
        if show_trials:
            for t in trials:
                console.print(Text(f"  └ {t['id']}"), soft_wrap=True)
                for line in _packed(_status(t), [_rate(t)], width, "      "):
                    console.print(line, soft_wrap=True)


class RunsCommand:
    """List the runs in the store, newest first: id, when, kind, status, script, throughput, speedup.

    Fix trials are grouped under the ``--fix`` run that made them (``--trials`` lists them). Filters
    combine. Below 110 columns each run is a block of two lines, the run id alone on the first.

    Examples:
      tfdoctor runs
      tfdoctor runs --status failed --script train.py
      tfdoctor runs --since 2026-11-20 --json
    """

    name = "runs"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--status", action="append", choices=STATUSES, help="only runs with this status")
        parser.add_argument(
            "--kind", action="append", help="only runs of this kind (profile, fix, notebook...)"
        )
        parser.add_argument("--script", help="only runs whose script path contains this text")
        parser.add_argument(
            "--since", metavar="YYYY-MM-DD[THH:MM]", help="only runs created at or after this"
        )
        parser.add_argument("--limit", type=int, default=50, help="at most this many runs (default 50)")
        parser.add_argument("--trials", action="store_true", help="list the fix trials under their run")
        parser.add_argument(
            "--json", action="store_true", help="print the runs as a JSON list (trials included)"
        )
        parser.add_argument("--home", help="run store directory (default: $TFDOCTOR_HOME or ~/.tfdoctor)")

    def run(self, args: argparse.Namespace) -> int:
        if args.limit < 1:
            raise UsageError("--limit must be at least 1")
        store = RunStore(args.home)
        all_rows = store.list(limit=100_000)
        rows = select(all_rows, args)
        if args.json:
            sys.stdout.write(json.dumps(rows[: args.limit] if args.limit else rows, indent=2) + "\n")
            return 0
        groups = group(rows, all_rows)
        shown = groups[: args.limit]
        console = Console(highlight=False)
        if not shown:
            filtered = any((args.status, args.kind, args.script, args.since))
            console.print(
                f"no runs{' match these filters' if filtered else ''} in {store.home}",
                markup=False,
                soft_wrap=True,
            )
            return 0
        if console.width >= WIDE:
            render_table(shown, console, args.trials)
        else:
            render_blocks(shown, console, args.trials)
        more = len(groups) - len(shown)
        if more > 0:
            console.print(f"… {more} older runs (--limit {len(groups)} lists them)", style="dim")
        return 0


COMMAND = RunsCommand
