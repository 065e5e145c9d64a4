from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
from pathlib import Path

from rich.console import Console

from tfdoctor.errors import TfdoctorError, TraceError
from tfdoctor.rundir import file_mode
from tfdoctor.store import RunStore

SUFFIX = {"chrome": ".trace.json", "perfetto": ".perfetto.json.gz"}


class OutputExists(TfdoctorError):
    exit_code = 6


def write_file(path: Path, data: bytes, *, force: bool) -> None:
    """Write atomically; an existing file is kept unless ``force``. The mode follows the umask."""
    if path.is_dir():
        raise OutputExists(f"{path} is a directory")
    if path.exists() and not force:
        raise OutputExists(f"{path} exists; pass --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ExportCommand:
    """Export a run's trace as Chrome trace-event JSON, with tfdoctor's step and category tracks.

    chrome://tracing, ui.perfetto.dev and TensorBoard's trace viewer open the file. Both formats are
    the same trace-event JSON: `chrome` writes RUN.trace.json, `perfetto` the gzipped
    RUN.perfetto.json.gz (smaller to open in the Perfetto web UI). A process named "tfdoctor" comes
    first: the steps tfdoctor counted, one track per category (input, dispatch, function, compute,
    copy, collective: the union of the trace's events of that kind) and the time ranges the findings
    point at. Existing files are not overwritten without --force.

    Examples:
      tfdoctor export 20261121-101500-train-ab12
      tfdoctor export 20261121-101500-train-ab12 --format perfetto -o /tmp/train.json.gz
    """

    name = "export"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run", help="run id or run directory")
        parser.add_argument(
            "--format", choices=tuple(SUFFIX), default="chrome", help="chrome (default) or perfetto"
        )
        parser.add_argument(
            "-o", "--output", metavar="FILE", help="where to write (default: ./RUN_ID + suffix)"
        )
        parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
        parser.add_argument("--home", help="run store directory (default: $TFDOCTOR_HOME or ~/.tfdoctor)")

    def run(self, args: argparse.Namespace) -> int:
        from tfdoctor.analysis.steps import find_steps
        from tfdoctor.report.export import chrome_trace
        from tfdoctor.rundir import load_steps
        from tfdoctor.trace import load

        store = RunStore(args.home)
        run = store.get(args.run)
        if not run.trace_files():
            raise TraceError(f"run {run.id} has no trace to export (the profile window was not reached)")
        trace = load(run.logdir)
        timings = load_steps(run)
        steps = find_steps(trace, timings)
        doc = chrome_trace(trace, run.report(), steps, timings)
        data = json.dumps(doc, separators=(",", ":")).encode("utf-8")
        if args.format == "perfetto":
            data = gzip.compress(data, mtime=0)
        out = Path(args.output) if args.output else Path(f"{run.id}{SUFFIX[args.format]}")
        write_file(out, data, force=args.force)
        n = len(doc["traceEvents"])
        Console(stderr=True, highlight=False).print(
            f"tfdoctor: wrote {out} ({n:,} events, {len(data) / 1e6:.1f} MB); open it in ui.perfetto.dev "
            "or chrome://tracing",
            markup=False,
            soft_wrap=True,
        )
        return 0


COMMAND = ExportCommand
