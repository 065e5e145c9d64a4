"""``tfdoctor`` entry point: one sub-command per module in :mod:`tfdoctor.commands`."""

from __future__ import annotations

import argparse
import inspect
import sys

from rich.console import Console
from rich.markup import escape

from tfdoctor import __version__
from tfdoctor.commands import discover
from tfdoctor.errors import TfdoctorError

ORDER = ["profile", "analyze", "fix", "report", "serve", "compare", "capture", "scale", "runs"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdoctor",
        description="Profile a TensorFlow 2 training script, find what bounds it, "
        "and apply the fixes that measurably help.",
    )
    parser.add_argument("--version", action="version", version=f"tfdoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    cmds = discover()
    cmds.sort(key=lambda c: (ORDER.index(c.name) if c.name in ORDER else len(ORDER), c.name))
    for cls in cmds:
        doc = inspect.getdoc(cls) or ""
        p = sub.add_parser(
            cls.name,
            help=doc.splitlines()[0] if doc else None,
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        cmd = cls()
        cmd.prepare_parser(p)
        p.set_defaults(_command=cmd)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_command", None) is None:
        parser.print_help()
        return 2
    err = Console(stderr=True, highlight=False)
    try:
        return int(args._command.run(args) or 0)
    except TfdoctorError as e:
        err.print(f"[bold red]tfdoctor:[/] {escape(str(e))}", markup=True, soft_wrap=True)
        if e.hint:
            err.print(f"  {e.hint}", markup=False, soft_wrap=True)
        return e.exit_code
    except KeyboardInterrupt:
        err.print("[bold red]tfdoctor:[/] interrupted", markup=True)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
