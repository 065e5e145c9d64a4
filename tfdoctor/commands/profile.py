from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tfdoctor.capture.runner import (
    BETWEEN_FITS_S,
    CaptureConfig,
    CaptureProgress,
    CaptureResult,
    check_script,
    check_tensorflow,
)
from tfdoctor.errors import RunError, TensorFlowMissing, TfdoctorError, UsageError
from tfdoctor.model import Report
from tfdoctor.rundir import RunDir
from tfdoctor.session.inscript import DEFAULT_STEPS
from tfdoctor.session.profile import profile_script
from tfdoctor.store import RunStore

EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130
#: ``-m MODULE`` as one word that argparse takes for the positional SCRIPT (it would read ``-m`` as an
#: unknown option of its own): :meth:`ProfileCommand.split_args` reads it back
MODULE_MARK = "\x00module:"


def module_argv(argv: list[str]) -> list[str]:
    """``argv`` (the words after the verb) with its leading ``-m MODULE`` / ``-mMODULE`` as one
    :data:`MODULE_MARK` word (a ``-m`` with no name after it: the mark alone, for the usage error);
    unchanged otherwise."""
    if argv and argv[0] == "-m":
        if len(argv) > 1 and not argv[1].startswith("-"):
            return [MODULE_MARK + argv[1], *argv[2:]]
        return [MODULE_MARK, *argv[1:]]
    if argv and argv[0].startswith("-m") and len(argv[0]) > 2 and argv[0][2] != "-":
        return [MODULE_MARK + argv[0][2:], *argv[1:]]
    return argv


class ProgressDisplay:
    """rich progress on stderr while the script runs: steps done / total, window, steps/s."""

    def __init__(self, console: Console, script: str):
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            TextColumn("{task.fields[window]}"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task(script, total=None, window="starting", rate="")

    def __enter__(self) -> ProgressDisplay:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def __call__(self, p: CaptureProgress) -> None:
        window = {
            "starting": "starting Python + TensorFlow",
            "stopping": "stopping",
            "between_fits": f"timing the script's own work between its training (≤ {BETWEEN_FITS_S:g} s)",
        }.get(p.phase)
        if window is None:
            window = f"{p.window} window" if p.steps_done else "waiting for the first step"
        rate = f"{p.steps_per_s:.1f} steps/s" if p.steps_per_s else ""
        self.progress.update(self.task, completed=p.steps_done, total=p.total, window=window, rate=rate)


class ProfileCommand:
    """Profile a training script: run it unmodified under the TensorFlow profiler and diagnose it.

    The script runs in a child process for --steps training steps: a warm-up (not measured), a
    timing window with the profiler off (throughput is measured here), then a short profile window
    (the trace). Then it is stopped, and the step-time breakdown and findings are shown. Steps are
    found by hooks on Model.fit, optimizer.apply_gradients and GradientTape: no changes to the script.
    Where the steps end inside a fit() called from a loop, that fit() is ended early instead and the
    script's own work until its next fit() is timed (30 s at most; a file write stops it first).

    A script of a package (one using relative imports, started as `python -m pkg.train`) is given
    the same way: `tfdoctor profile -m pkg.train`, from the folder python -m would start in.

    Examples:
      tfdoctor profile examples/naive_loop.py
      tfdoctor profile train.py --steps 60 -- --epochs 3 --data /path
      tfdoctor profile train.py --run-id baseline --force --json
      tfdoctor profile -m mypkg.train --fix -- --epochs 3
    """

    name = "profile"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "argv",
            nargs=argparse.REMAINDER,
            metavar="SCRIPT | -m MODULE [options] [-- SCRIPT_ARGS ...]",
            help="the training script (a .py file) or -m and a module run as python -m runs it (from the "
            "working directory, or --cwd), options, and after -- the script's own arguments",
        )
        self.add_options(parser)
        # argparse drops a "--" right after a positional SCRIPT, so "SCRIPT -- --steps 5" could not
        # be told from "SCRIPT --steps 5": everything from SCRIPT on is taken raw and split here
        self._parser = parser
        self._options = argparse.ArgumentParser(prog=f"{parser.prog} SCRIPT", add_help=False)
        self.add_options(self._options, defaults=False)

    @staticmethod
    def add_options(parser: argparse.ArgumentParser, defaults: bool = True) -> None:
        def d(value: Any) -> Any:
            return value if defaults else argparse.SUPPRESS

        parser.add_argument(
            "--steps",
            type=int,
            default=d(None),
            help=f"total training steps to run (default {DEFAULT_STEPS}; a script that ends before its profile "
            "window without --steps is profiled again, planned to the steps it has)",
        )
        parser.add_argument(
            "--warmup",
            type=int,
            default=d(None),
            help="warm-up steps, not measured: exactly N when given. Default: adaptive, at least ~15 %% of "
            "--steps (min 3), then longer while a step still traces a tf.function or step times have not "
            "settled (up to max(planned, 10) more) and while a memo cache of tfdoctor's generator-cache fix "
            "is still cold (up to 2000 steps or 150 s), never past half of --timeout; --steps is then the "
            "planned total and the run is longer by the extension (see docs/architecture.md)",
        )
        parser.add_argument(
            "--profile-steps", type=int, default=d(None), help="steps in the profile window (default ≤ 10)"
        )
        parser.add_argument(
            "--fit",
            type=int,
            default=d(None),
            metavar="N",
            help="time phase N of the script's fit() training (default 1, the first): a fit() of another "
            "model, of a model compiled again, or from another line begins a new phase (a fit() per epoch "
            "from one line does not); the earlier phases run as the script wrote them, uncounted. For a "
            "script that fits several models (a baseline, then pre-training, then fine-tuning)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=d(600.0),
            help="seconds before the script is stopped (default 600)",
        )
        parser.add_argument(
            "--run-id", default=d(None), help="name of the run (default: time stamp + script name)"
        )
        parser.add_argument(
            "--force", action="store_true", default=d(False), help="replace an existing run with the same id"
        )
        parser.add_argument(
            "--home", default=d(None), help="run store directory (default: $TFDOCTOR_HOME or ~/.tfdoctor)"
        )
        parser.add_argument(
            "--json", action="store_true", default=d(False), help="print the report as JSON instead of tables"
        )
        parser.add_argument(
            "--cwd", default=d(None), help="working directory for the script (default: the current one)"
        )
        parser.add_argument(
            "--fix",
            action="store_true",
            default=d(False),
            help="then apply the fixes, measure each and keep what helps (see tfdoctor fix --help); "
            "refused on a worker of a multi-worker job (TF_CONFIG with 2+ workers)",
        )
        parser.add_argument(
            "--open",
            action="store_true",
            default=d(False),
            help="then open the run in the web UI (starts `tfdoctor serve` on 127.0.0.1 until ^C)",
        )
        parser.add_argument("--port", type=int, default=d(8765), help="port for --open (default 8765)")
        from tfdoctor.commands.fix import add_fix_options

        add_fix_options(parser, defaults)
        from tfdoctor.commands.analyze import add_output_options

        add_output_options(parser, d)

    def split_args(self, args: argparse.Namespace) -> list[str]:
        """Set ``args.script``, parse our options given after it, return the script's own arguments."""
        rest = list(getattr(args, "argv", None) or [])
        if rest and rest[0] == "--":
            rest = rest[1:]
        if not rest:
            raise UsageError(
                "no script given", hint="usage: tfdoctor profile SCRIPT [options] [-- SCRIPT_ARGS]"
            )
        args.module = None
        if rest[0].startswith(MODULE_MARK):  # -m pkg.train (module_argv): the module's file is the script
            args.module = rest[0][len(MODULE_MARK) :]
            if not args.module:
                raise UsageError("-m needs a module name", hint=f"e.g. tfdoctor {self.name} -m mypkg.train")
        args.script, rest = rest[0], rest[1:]
        ours, theirs = (
            (rest[: rest.index("--")], rest[rest.index("--") + 1 :]) if "--" in rest else (rest, [])
        )
        if "-h" in ours or "--help" in ours:
            self._parser.print_help()
            raise SystemExit(0)
        if ours:
            _, unknown = self._options.parse_known_args(ours, namespace=args)
            if unknown:
                raise UsageError(
                    f"unknown option(s) {' '.join(unknown)}; pass the script's own arguments after --",
                    hint=f"e.g. tfdoctor {self.name} {f'-m {args.module}' if args.module else args.script} -- "
                    f"{' '.join(unknown)}",
                )
        if args.module:
            from tfdoctor.capture.runner import resolve_module

            args.script = str(resolve_module(args.module, args.cwd or os.getcwd()))
        args.script_args = theirs
        return theirs

    def config(self, args: argparse.Namespace) -> CaptureConfig:
        script_args = self.split_args(args)
        cfg = CaptureConfig(
            script=check_script(args.script),
            args=script_args,
            steps=args.steps if args.steps is not None else DEFAULT_STEPS,
            warmup=args.warmup,
            profile_steps=args.profile_steps,
            timeout_s=args.timeout,
            cwd=args.cwd,
            fit=args.fit,
            module=args.module,
            between_fits_s=BETWEEN_FITS_S if self.name == "profile" else 0.0,
        )
        if args.fit is not None and args.fit < 1:
            raise UsageError(f"--fit {args.fit}: phases of fit() training count from 1")
        cfg.windows()  # impossible step counts fail here, before a run directory exists
        check_tensorflow()
        return cfg

    @staticmethod
    def steps_given(args: argparse.Namespace) -> bool:
        return getattr(args, "steps", None) is not None

    def capture(
        self, store: RunStore, cfg: CaptureConfig, args: argparse.Namespace, err: Console
    ) -> tuple[RunDir, CaptureResult, Report]:
        return profile_script(
            store,
            cfg,
            run_id=args.run_id,
            force=args.force,
            display=lambda label: ProgressDisplay(err, label),
            # a script shorter than the planned steps is profiled again to its length, unless --steps
            # was given (the user chose the count)
            rerun_short=self.name == "profile" and not self.steps_given(args),
        )

    def show(self, report: Report, run: RunDir, args: argparse.Namespace, out: Console) -> None:
        if getattr(args, "format", None) == "sarif":
            from tfdoctor.commands.analyze import write_report

            write_report(report, "sarif", out, str(run.path))
            return
        if args.json:
            sys.stdout.write(report.model_dump_json(indent=2) + "\n")
            return
        from tfdoctor.report.terminal import render

        render(report, out, run_dir=str(run.path))

    def outcome(self, run: RunDir, result: CaptureResult, err: Console) -> int:
        """0 for a complete run; otherwise show what the script said and raise the one-line error."""
        if result.status == "complete":
            if result.message:
                err.print(f"[yellow]note:[/] {escape(result.message)}")
            return 0
        if result.tf_missing:
            raise TensorFlowMissing(result.message or "")
        tail = ""
        if result.status == "failed" and result.error and "Traceback" in result.error:
            from tfdoctor.capture.runner import failure_summary

            fs = failure_summary(result.error)
            if fs.where:  # where the user's code raised it, not the last lines of a long message
                err.print("[dim]── where the script failed (full traceback in the run directory) ──[/]")
                err.print(f"  {escape(fs.where)}", soft_wrap=True, highlight=False)
                if fs.code:
                    err.print(f"    {escape(fs.code)}", soft_wrap=True, highlight=False)
                err.print(f"  {escape(fs.exception)}", soft_wrap=True, highlight=False)
            tail = "" if fs.where else result.error
        else:
            tail = result.stdout_tail or result.stderr_tail
        lines = [ln for ln in tail.rstrip().splitlines() if ln.strip()][-8:]
        if lines:
            err.print("[dim]── the script's last words (full output in the run directory) ──[/]")
            for ln in lines:
                err.print(escape(ln), soft_wrap=True, highlight=False)
        code = {"timeout": EXIT_TIMEOUT, "interrupted": EXIT_INTERRUPTED}.get(result.status)
        e = RunError(result.message or result.status, run_dir=str(run.path), exit_code=code)
        e.hint = f"partial run kept: {run.path}"
        raise e

    def run(self, args: argparse.Namespace) -> int:
        err = Console(stderr=True, highlight=False)
        out = Console(highlight=False)
        from tfdoctor.commands.analyze import gate, output_format

        args.json = output_format(args) == "json"
        cfg = self.config(args)
        fix = getattr(args, "fix", False)
        if fix and getattr(args, "format", None) == "sarif":
            raise UsageError(
                "--format sarif reports one run: profile with --fix, then `tfdoctor analyze RUN --format sarif`"
            )
        if fix:
            from tfdoctor.commands.fix import refuse_multiworker

            refuse_multiworker({**os.environ, **cfg.env})
            if cfg.module:  # before the baseline runs: what each trial would copy
                from pathlib import Path

                from tfdoctor.fixes.workspace import check_module_root

                check_module_root(Path(cfg.cwd or os.getcwd()))
            if getattr(args, "apply", False):  # a read-only script fails now, not after the baseline ran
                from tfdoctor.userfiles import check_writable

                check_writable(cfg.script)
        store = RunStore(args.home)
        run, result, report = self.capture(store, cfg, args, err)
        if (result.status == "complete" and not (fix and args.json)) or (
            # a machine reader gets its document even for a failed run (SARIF: executionSuccessful false)
            (args.json or getattr(args, "format", None) == "sarif") and result.status != "complete"
        ):
            self.show(report, run, args, out)
        rc = self.outcome(run, result, err)
        if fix and rc == 0:
            from tfdoctor.commands.fix import fix_after_profile

            rc = fix_after_profile(store, run, report, cfg, args, err, out)
        if rc == 0 and getattr(args, "fail_on", None):
            rc = gate(run.report() or report, args.fail_on, err)
        if getattr(args, "open", False):
            try:
                from tfdoctor.web.main import open_in_browser, run_url
            except ImportError as e:
                raise TfdoctorError(
                    f"--open needs the web UI, which is not installed ({e}): pip install 'tfdoctor[web]'"
                ) from None
            err.print(f"Run page: {run_url(run.id, '127.0.0.1', args.port)}  (serving until ^C)")
            try:
                open_in_browser(run, home=store.home, port=args.port, block=True)
            except KeyboardInterrupt:
                pass
        return rc


COMMAND = ProfileCommand
