from __future__ import annotations

import argparse
import sys

from rich.console import Console

from tfdoctor.capture.workers import lacking_note, parse_addresses
from tfdoctor.session.distributed import capture_grpc
from tfdoctor.store import RunStore


class CaptureCommand:
    """Capture a trace from running profiler servers (several hosts into one run) and diagnose it.

    The job must have started the profiler server on each host, e.g.
    tf.profiler.experimental.server.start(6009). Each address is traced for --duration-ms with
    tf.profiler.experimental.client.trace; the hosts' traces form one profile session in one run,
    analysed as one merged run (per-worker timing, stragglers, collectives). A host whose trace is
    missing is traced again with the others (--attempts), then named in a warning.

    Caution: with TensorFlow 2.21, a trace of a MultiWorkerMirroredStrategy job can crash a worker when
    it stops (a TensorFlow profiler bug; about 1 trace in 2 at 1500 ms, 1 in 8 at 400 ms here). Keep
    --duration-ms short (docs/distributed.md).

    Examples:
      tfdoctor capture grpc://localhost:6009 --duration-ms 2000
      tfdoctor capture grpc://10.0.0.2:6009,grpc://10.0.0.3:6009 --duration-ms 3000 --run-id job1
    """

    name = "capture"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("addresses", help="grpc://HOST:PORT[,grpc://HOST2:PORT...] of profiler servers")
        parser.add_argument("--duration-ms", type=int, default=2000, help="how long to trace (default 2000)")
        parser.add_argument("--run-id", default=None, help="name of the run (default: time stamp)")
        parser.add_argument("--force", action="store_true", help="replace an existing run with the same id")
        parser.add_argument("--home", default=None, help="run store directory (default: $TFDOCTOR_HOME)")
        parser.add_argument(
            "--attempts",
            type=int,
            default=3,
            help="tries when no event was traced, and when a host's trace is missing (default 3)",
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")

    def run(self, args: argparse.Namespace) -> int:
        addresses = parse_addresses(args.addresses)
        store = RunStore(args.home)
        err = Console(stderr=True, highlight=False)
        err.print(f"tracing {len(addresses)} host(s) for {args.duration_ms} ms …", markup=False)
        run, report = capture_grpc(
            store, addresses, args.duration_ms, run_id=args.run_id, force=args.force, attempts=args.attempts
        )
        facts = report.facts
        if facts.hosts_without_trace:
            note = lacking_note(facts.hosts_without_trace, facts.hosts_not_answering, max(1, args.attempts))
            err.print("warning: " + note, markup=False, soft_wrap=True)
        if args.json:
            sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        else:
            from tfdoctor.report.terminal import render

            render(report, Console(highlight=False), run_dir=str(run.path))
        return 0 if report.breakdown is not None and report.breakdown.steps else 1


COMMAND = CaptureCommand
