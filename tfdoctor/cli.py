"""``tfdoctor`` entry point: one sub-command per module in :mod:`tfdoctor.commands`."""

from __future__ import annotations

import argparse
import inspect
import sys
from typing import TYPE_CHECKING

from tfdoctor import __version__
from tfdoctor.commands import load, names
from tfdoctor.errors import TfdoctorError

if TYPE_CHECKING:
    from rich.console import Console

ORDER = ["profile", "analyze", "fix", "report", "serve", "compare", "capture", "scale", "runs"]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, that verb's module alone is imported and prepared (the others are listed
    by name): what a command that runs needs. Without it, every verb's help is built."""
    parser = argparse.ArgumentParser(
        prog="tfdoctor",
        description="Profile a TensorFlow 2 training script, find what bounds it, "
        "and apply the fixes that measurably help.",
    )
    parser.add_argument("--version", action="version", version=f"tfdoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    verbs = sorted(names(), key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    for name in verbs:
        cls = load(name) if only is None or name == only else None
        if cls is None:
            if only is not None:
                sub.add_parser(name)  # listed, not imported
            continue
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


def _verb(argv: list[str]) -> str | None:
    """The verb the command line names (its first word that is not an option), if it is one."""
    for a in argv:
        if a == "--" or a in ("-h", "--help"):  # the top-level help lists every verb with its help
            return None
        if not a.startswith("-"):
            return a if a in names() else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    verb = _verb(argv)
    if verb in ("profile", "scale"):  # ``-m MODULE`` where argparse expects the SCRIPT
        from tfdoctor.commands.profile import module_argv

        at = argv.index(verb) + 1
        argv = argv[:at] + module_argv(argv[at:])
    parser = build_parser(only=verb)
    args = parser.parse_args(argv)
    if getattr(args, "_command", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args._command.run(args) or 0)
    except TfdoctorError as e:
        err = _stderr()
        err.print(f"[bold red]tfdoctor:[/] {escape(str(e))}", markup=True, soft_wrap=True)
        if e.hint:
            err.print(f"  {e.hint}", markup=False, soft_wrap=True)
        return e.exit_code
    except KeyboardInterrupt:
        _stderr().print("[bold red]tfdoctor:[/] interrupted", markup=True)
        return 130


def _stderr() -> Console:
    """rich, imported only when there is an error to show (``analyze --json`` never loads it)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
