from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tfdoctor.capture.runner import CaptureProgress, check_tensorflow
from tfdoctor.capture.workers import from_tf_config
from tfdoctor.errors import RunExists, UsageError
from tfdoctor.fixes import all_fixes
from tfdoctor.model import Report
from tfdoctor.report.format import fix_headline
from tfdoctor.rundir import RunDir
from tfdoctor.session.fix_loop import DEFAULT_ROUNDS, EXTRA_ROUNDS, Event, FixLoop, LoopConfig
from tfdoctor.session.profile import (
    applied_text,
    apply_project,
    fix_config,
    fix_config_for_run,
    fix_options,
    not_verified_text,
)
from tfdoctor.session.profile import apply_fixes as apply_patch  # noqa: F401  (the one-file writer, as before)
from tfdoctor.store import RunStore
from tfdoctor.userfiles import check_writable, read_source


class FixProgress:
    """rich progress on stderr: which fix is being measured, and the run's steps."""

    def __init__(self, console: Console):
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("fixes", total=None, rate="")
        self.label = "baseline"

    def __enter__(self) -> FixProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def event(self, e: Event) -> None:
        if e.kind == "trial":
            self.label = e.label or e.message.split(":")[0]
            self.progress.update(self.task, description=f"[{e.index}/{e.total}] {self.label}", completed=0)
        elif e.kind == "final":
            self.label = "combined"
            self.progress.update(self.task, description="final state (kept fixes combined)", completed=0)
        if e.kind == "candidates":
            self.console.print(f"[dim]fixes to try ({e.total}): {escape(e.message)}[/]", soft_wrap=True)
        elif e.kind == "result":
            self.console.print(f"[dim]{escape(e.message)}[/]", soft_wrap=True)

    def capture(self, p: CaptureProgress) -> None:
        rate = f"{p.steps_per_s:.1f} steps/s" if p.steps_per_s else p.phase
        self.progress.update(self.task, completed=p.steps_done, total=p.total, rate=rate)


def add_fix_options(parser: argparse.ArgumentParser, defaults: bool = True) -> None:
    """Options shared by ``tfdoctor fix`` and ``tfdoctor profile --fix``."""

    def d(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    ids = ", ".join(f.ID for f in all_fixes())
    parser.add_argument(
        "--apply",
        action="store_true",
        default=d(False),
        help="write the kept fixes into the script, and into the modules beside it that they changed "
        "(a backup FILE.tfdoctor-bak of each is kept)",
    )
    parser.add_argument("--only", default=d(None), metavar="ID,...", help=f"try only these fixes ({ids})")
    parser.add_argument("--skip", default=d(None), metavar="ID,...", help="never try these fixes")
    parser.add_argument(
        "--fix-timeout",
        type=float,
        default=d(None),
        help="seconds before one fix run is stopped and rolled back (default: from the baseline's duration)",
    )
    parser.add_argument(
        "--fix-rounds",
        type=_rounds,
        default=d(DEFAULT_ROUNDS),
        metavar="N",
        help="paired rounds at most per fix: the fix and the state it must beat measured back to back "
        "(order alternating, each run timed for at least 1 s) until the 95 %% interval of their ratio "
        "lies above 1.02x (kept; 1.05x for a fix that changes the training, 1.15x for a bigger batch "
        "over a smaller one kept) or below "
        f"1.05x (rejected), a keep on 2 rounds at least; still straddling after N rounds with an "
        f"estimate at its bar or more: {EXTRA_ROUNDS} more rounds, once; then 'not decided (noisy "
        f"machine)', not kept unless the undecided fixes tried together (one pooled trial) are "
        f"kept (default {DEFAULT_ROUNDS}; 0: judge each fix on its one run)",
    )
    parser.add_argument(
        "--allow-unchecked",
        action="store_true",
        default=d(False),
        help="keep fixes that change the training (mixed precision, a bigger batch and learning rate) "
        "even when the script's loss could not be read to check them by",
    )


def _rounds(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of rounds, 0 or more: {text!r}")
    return n


def refuse_multiworker(env: Mapping[str, str] | None = None, strategy: str | None = None) -> None:
    """``--fix`` is refused on one worker of a multi-worker job (the workers train in lockstep: a fix
    tried on one alone waits for peers running other code), in one line saying what to do instead."""
    ident = from_tf_config(env)
    if ident is not None or strategy == "MultiWorkerMirroredStrategy":
        who = f"{ident.name} of a {ident.n_workers}-worker job (TF_CONFIG)" if ident else "a multi-worker run"
        raise UsageError(
            f"--fix is not supported on {who}: fixes cannot be tried on one worker alone; profile the job "
            "without --fix, then run --fix on a single-worker run of the script (TF_CONFIG unset) and "
            "apply its patch to every worker"
        )


def run_loop(
    store: RunStore,
    run: RunDir,
    report: Report,
    cfg: LoopConfig,
    args: argparse.Namespace,
    err: Console,
    out: Console,
) -> int:
    """The loop with progress, then the table, the patch and --apply. Used by ``fix`` and ``profile --fix``."""
    script = cfg.script
    original = read_source(script)
    if getattr(args, "apply", False):
        check_writable(script)  # before the loop: a read-only folder fails now, not after every fix ran
    with FixProgress(err) as progress:
        loop = FixLoop(store, run, report, cfg, on_event=progress.event, on_capture=progress.capture)
        summary = loop.run()
    report = run.report() or report.model_copy(update={"fix": summary})
    if getattr(args, "json", False):
        if getattr(args, "command", None) == "fix":
            sys.stdout.write(summary.model_dump_json(indent=2) + "\n")
    else:
        from tfdoctor.report.terminal import WIDE, fix_parts

        for part in fix_parts(report, narrow=out.width < WIDE):
            if part is not None:
                out.print(part)
        out.print(f"[bold]{escape(fix_headline(summary))}[/] (whole --fix run {summary.wall_s:.0f} s)")
        if summary.patch:
            out.print(
                f"Patch: {escape(str(run.file('fix.patch')))}  (apply with: git apply or patch -p1 in {escape(str(loop.base))})"
            )
    if getattr(args, "apply", False) and summary.patch and summary.combined_verdict != "faster":
        out.print(escape(f"Not applied: {not_verified_text(summary)}"))
    elif getattr(args, "apply", False) and summary.patch:
        final = loop.final_source or original.text
        out.print(escape(applied_text(apply_project(script, original, final, loop.module_changes()))))
    return 0


class FixCommand:
    """Apply the fixes to a profiled run's script, measure each, keep what measurably helps.

    TARGET is a run id or run directory from `tfdoctor profile`. Each candidate fix (best estimated
    gain first) is applied to a copy of the script's folder on top of the fixes kept so far and run
    for the same steps. It must stay sane: no error, its facts show the change in effect, the same
    examples per step unless the fix scales the batch, the same output (progress bars and timing
    lines aside), a finite loss not above the reference's beyond the reference's own run-to-run
    noise (a fix that changes the training, precision or batch, is not kept when no loss can be read,
    unless --allow-unchecked). Then it and the state it must beat are measured back to back in
    paired rounds (order alternating, --fix-rounds at most) until the 95 % interval of their ratio
    decides: kept above 1.02x (above 1.05x for a fix that changes the training: precision, batch;
    above 1.15x for a bigger batch over a smaller one kept), rejected below 1.05x (below its bar), else
    "not decided (noisy machine)"; each of these runs is timed for at least 1 s. Two or more
    undecided fixes that measured above 1.0x alone (none that changes the training) are then applied
    together and judged as one trial: kept together, each is kept. The final
    state is measured side by side against the best intermediate state (later fixes that lower it are
    dropped) and against the baseline: that ratio and its interval are the headline, with what the
    fixes change of the training. The combined patch is written to RUN/fix.patch; your files are not
    touched unless you pass --apply (applied only when the combined result verified faster).

    Examples:
      tfdoctor fix 20261121-101500-naive_loop-ab12
      tfdoctor fix ~/.tfdoctor/runs/20261121-101500-naive_loop-ab12 --only tf-function,xla-jit
      tfdoctor fix RUN --apply
    """

    name = "fix"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", help="run id or run directory (a profile run)")
        add_fix_options(parser)
        parser.add_argument("--home", help="run store directory (default: $TFDOCTOR_HOME or ~/.tfdoctor)")
        parser.add_argument("--json", action="store_true", help="print the fix summary as JSON")
        parser.add_argument(
            "--force", action="store_true", help="measure again when the run already has fix results"
        )

    def run(self, args: argparse.Namespace) -> int:
        store = RunStore(args.home)
        run = store.get(args.target)
        report = run.report()
        if report is None:
            raise UsageError(f"{args.target}: no report.json (not a finished profile run)")
        if report.fix is not None and not args.force:
            raise RunExists(
                f"run {run.id} already has fix results (fix.patch, report.json); pass --force to measure again"
            )
        refuse_multiworker(strategy=report.facts.strategy)
        if run.meta.get("kind") == "fix":
            raise UsageError(f"{run.id} is itself a fix run; pass its baseline {run.meta.get('parent')}")
        cfg = fix_config_for_run(run, fix_options(args))
        check_tensorflow()
        err = Console(stderr=True, highlight=False)
        out = Console(highlight=False)
        return run_loop(store, run, report, cfg, args, err, out)


COMMAND = FixCommand


def fix_after_profile(
    store: RunStore,
    run: RunDir,
    report: Report,
    cfg: Any,
    args: argparse.Namespace,
    err: Console,
    out: Console,
) -> int:
    """``tfdoctor profile SCRIPT --fix``: the loop on the run just captured (``cfg`` is its CaptureConfig)."""
    loop_cfg = fix_config(cfg, fix_options(args))
    rc = run_loop(
        store,
        run,
        report,
        loop_cfg,
        argparse.Namespace(**{**vars(args), "json": False}) if not args.json else args,
        err,
        out,
    )
    if args.json:
        final = run.report()
        if final is not None:
            sys.stdout.write(final.model_dump_json(indent=2) + "\n")
    return rc
