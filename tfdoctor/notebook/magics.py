"""The IPython extension: ``%load_ext tfdoctor``, then ``%%tfdoctor`` and ``%tfdoctor``.

* ``%%tfdoctor [--steps N] [--warmup N] [--fix]`` profiles the training cell *in the kernel*: the
  step hooks are installed for this cell only (:mod:`tfdoctor.capture.inproc`), the cell runs its
  warm-up, timing and profile windows and is stopped after N steps, the run is stored, and the report
  is shown inline (``text/html``: the same page as the web report, in an iframe; ``text/plain``: the
  terminal tables). The variables of the user's models and optimizers are put back to their values
  from before the cell. ``--fix`` measures the fixes that are reversible in a kernel (XLA, tf.function,
  steps_per_execution, a dtype policy), each undone after its measurement, and names the fixes that
  only a subprocess run of the script can measure.
* ``%tfdoctor profile SCRIPT [options] [-- ARGS]`` runs the CLI flow (the script in a child process).
* ``%tfdoctor show RUN`` shows a stored run; ``%tfdoctor -h`` the help.

Bad options raise IPython's ``UsageError`` with the help text; tfdoctor's own one-line errors are
shown the same way (no traceback). Nothing here imports TensorFlow until a cell is profiled.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import io
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from tfdoctor.errors import TfdoctorError

USAGE = """\
tfdoctor in a notebook (%load_ext tfdoctor):

  %%tfdoctor [--steps N] [--warmup N] [--profile-steps N] [--fix] [--only ID,...] [--allow-unchecked]
             [--run-id ID] [--force] [--home DIR]
      On a cell that trains (model.fit or a custom loop): profile it in this kernel for N steps
      (default 40, as `tfdoctor profile`: warm-up, timing window, profile window), then stop the
      training and show the report. Model.fit returns normally (its History is bound, the rest of
      the cell runs); a custom loop is stopped where it is and the output says which lines did not run.
      The variables of your models and optimizers are restored to their values before the cell.
      TensorFlow's own C++ log lines go to the run's stderr.log, not into the cell's output.
      --fix also measures the fixes that are reversible in the kernel (xla-jit, tf-function,
      steps-per-execution, mixed-precision), each judged in paired rounds against the state it
      must beat, and keeps those whose speed-up interval lies above 1.02x (1.05x for
      mixed-precision, which changes the training); --only picks which;
      --allow-unchecked keeps a precision change even when no loss can be read.

  %tfdoctor profile SCRIPT [--steps N] [--warmup N] [--fix] [...] [-- SCRIPT_ARGS]
      Run the script unmodified in a child process under the profiler (as `tfdoctor profile`).

  %tfdoctor show RUN [--home DIR]
      Show a stored run (run id or run directory).

  %tfdoctor -h
      This help.
"""

#: the CLI's default (``tfdoctor profile --steps``): one number everywhere
DEFAULT_CELL_STEPS = 40
IFRAME_HEIGHT = 900  # before the page says how tall it is

#: what each fix does, for the trial table (the fix ids are the rules' FIX_IDS)
FIX_TEXT: dict[str, str] = {
    "xla-jit": "compile the step with XLA (jit_compile=True)",
    "tf-function": "run the step as a tf.function graph instead of eagerly",
    "steps-per-execution": "run several steps per call into the graph (steps_per_execution)",
    "mixed-precision": "compute in 16 bit (a mixed dtype policy)",
    "tfdata-parallel-map": "parallel tf.data map (num_parallel_calls=AUTOTUNE)",
    "tfdata-prefetch": "prefetch the input pipeline (prefetch(AUTOTUNE))",
    "tfdata-cache": "cache the deterministic part of the input pipeline",
    "generator-prefetch": "produce the Python generator's batches in a background thread",
    "generator-cache": "cache the deterministic start of the generator's per-example work",
    "batch-scale": "a larger batch (learning rate scaled with it)",
}


def fix_description(fix_id: str) -> str:
    """The fix's own DESCRIPTION from the fix registry, else the short text above."""
    try:
        from tfdoctor.fixes import get_fix

        desc = get_fix(fix_id).DESCRIPTION
    except (ImportError, KeyError, AttributeError):
        desc = ""
    return desc or FIX_TEXT.get(fix_id, fix_id)


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting (a kernel must not exit)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(f"{message}\n\n{self.format_help()}")


class _HelpShown(Exception):
    pass


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; ``-h`` prints the help and raises _HelpShown; SystemExit never escapes."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(argv)
    except SystemExit as e:
        if e.code in (0, None):
            raise _HelpShown() from None
        raise UsageError(f"{err.getvalue().strip()}\n\n{parser.format_help()}") from None


def cell_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%tfdoctor", description="Profile this training cell in the kernel.", add_help=True)
    p.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_CELL_STEPS,
        help=f"training steps to run (default {DEFAULT_CELL_STEPS})",
    )
    p.add_argument(
        "--warmup", type=int, default=None, help="warm-up steps, not measured (default ~15 %%, min 3)"
    )
    p.add_argument(
        "--profile-steps", type=int, default=None, help="steps in the profile window (default ≤ 10)"
    )
    p.add_argument("--fix", action="store_true", help="measure the fixes that are reversible in the kernel")
    p.add_argument("--only", default=None, metavar="ID,...", help="with --fix: try only these fixes")
    p.add_argument("--fixes", dest="only", default=None, help=argparse.SUPPRESS)  # the old name of --only
    p.add_argument(
        "--allow-unchecked",
        action="store_true",
        help="with --fix: keep fixes that change the training (precision) even when no loss can be read",
    )
    p.add_argument("--run-id", default=None, help="name of the run (default: time stamp + cell)")
    p.add_argument("--force", action="store_true", help="replace an existing run with the same id")
    p.add_argument("--home", default=None, help="run store (default: $TFDOCTOR_HOME or ~/.tfdoctor)")
    return p


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as e:
        raise UsageError(f"cannot parse the options ({e})\n\n{USAGE}") from None


@contextlib.contextmanager
def _user_errors(help_text: str = "") -> Iterator[None]:
    """tfdoctor's one-line errors become IPython UsageErrors (one line, no traceback)."""
    try:
        yield
    except TfdoctorError as e:
        from tfdoctor.errors import UsageError as TfdUsage

        msg = str(e) + (f"\n{e.hint}" if e.hint else "")
        if isinstance(e, TfdUsage) and help_text:
            msg += f"\n\n{help_text}"
        raise UsageError(msg) from None


# -- showing a report ----------------------------------------------------------------------------
def _load_report(store: Any, rid: str) -> Any:
    try:
        return store.get(rid).report()
    except TfdoctorError:
        return None


#: plotly.js has been sent to this kernel's notebook page (by the first report shown): later reports
#: take it from there instead of carrying their own 3.5 MB copy
_plotly_sent = False


def report_bundle(
    report: Any, run: Any, store: Any, notes: list[str] | None = None, *, plotly_once: bool = True
) -> dict[str, str]:
    """The display bundle of a report, shown once: ``text/html`` (the web report's page in an iframe)
    and ``text/plain`` (a few lines: verdict, throughput, the run id; for frontends without HTML).

    plotly.js is not inlined in every report: the first report of the kernel carries its source once
    (a ``text/plain`` script element the reports' frames run), later ones use it (``plotly_once``;
    False: the report carries its own copy, as ``tfdoctor report --html`` does)."""
    global _plotly_sent
    from tfdoctor.report.html import plotly_js, report_html
    from tfdoctor.report.terminal import fmt_throughput
    from tfdoctor.report.timeline import timeline_for_run

    timeline = None
    with contextlib.suppress(TfdoctorError):
        timeline = timeline_for_run(run)
    page = report_html(
        report,
        run_path=run.path,
        load_report=lambda rid: _load_report(store, rid),
        timeline=timeline,
        plotly="parent" if plotly_once else "inline",
    )
    carrier = ""
    if plotly_once and not _plotly_sent:
        carrier = f'<script type="text/plain" class="tfdoctor-plotly-js">{plotly_js()}</script>'
        _plotly_sent = True
    note_html = "".join(
        f'<div class="tfdoctor-note" style="margin:2px 0;color:#555">{html.escape(n)}</div>'
        for n in notes or []
    )
    frame = (
        f'<iframe class="tfdoctor-report" data-run-id="{html.escape(report.run_id)}" '
        f'title="tfdoctor report {html.escape(report.run_id)}" '
        f'style="width:100%;height:{IFRAME_HEIGHT}px;border:1px solid #d0d7de;border-radius:6px" '
        'onload="try{var d=this.contentDocument.documentElement;'
        "this.style.height=Math.max(420,d.scrollHeight+4)+'px'}catch(e){}\" "
        f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )
    lines = [f"tfdoctor: {report.script} [{report.status}] — run {report.run_id}"]
    if report.verdict:
        lines.append(report.verdict)
    lines.append(f"Throughput: {fmt_throughput(report.throughput)}")
    top = [f for f in report.findings if f.decided][:3]
    lines += [f"  {f.rule_id} {f.severity}: {f.claim}" for f in top]
    lines += [f"note: {n}" for n in notes or []]
    lines.append(f"(the full report: %tfdoctor show {report.run_id}, or tfdoctor report {report.run_id})")
    return {
        "text/html": f'<div class="tfdoctor">{carrier}{note_html}{frame}</div>',
        "text/plain": "\n".join(lines),
    }


def display_report(report: Any, run: Any, store: Any, notes: list[str] | None = None) -> None:
    from IPython.display import display

    display(report_bundle(report, run, store, notes), raw=True)


# -- the magics ----------------------------------------------------------------------------------
@magics_class
class TfdoctorMagics(Magics):
    @line_cell_magic
    def tfdoctor(self, line: str, cell: str | None = None) -> None:
        """Profile a training cell (%%tfdoctor), a script (%tfdoctor profile) or show a run.

        See ``%tfdoctor -h``.
        """
        __tracebackhide__ = True
        if cell is not None:
            self.profile_cell(line, cell)
        else:
            self.line(line)

    # -- %tfdoctor ---------------------------------------------------------------------------------
    def line(self, line: str) -> None:
        argv = _split(line)
        if not argv or argv[0] in ("-h", "--help", "help"):
            print(USAGE)
            return
        verb, rest = argv[0], argv[1:]
        if verb == "profile":
            self.profile_script(rest)
        elif verb == "show":
            self.show(rest)
        else:
            raise UsageError(f"unknown subcommand {verb!r} (a cell to profile needs %%tfdoctor)\n\n{USAGE}")

    def show(self, argv: list[str]) -> None:
        p = _Parser(prog="%tfdoctor show", description="Show a stored run.")
        p.add_argument("run", help="run id or run directory")
        p.add_argument("--home", default=None, help="run store (default: $TFDOCTOR_HOME or ~/.tfdoctor)")
        try:
            args = _parse(p, argv)
        except _HelpShown:
            print(p.format_help())
            return
        from tfdoctor.store import RunStore

        with _user_errors():
            store = RunStore(args.home)
            run = store.get(args.run)
            report = run.report()
            if report is None:
                from tfdoctor.session.build import build_report

                report = build_report(run)
            display_report(report, run, store)

    def profile_script(self, argv: list[str]) -> None:
        from tfdoctor.commands.profile import ProfileCommand, module_argv

        argv = module_argv(argv)  # %tfdoctor profile -m pkg.train
        cmd = ProfileCommand()
        parser = _Parser(prog="%tfdoctor profile", description=(ProfileCommand.__doc__ or "").split("\n")[0])
        cmd.prepare_parser(parser)
        ours = argv[: argv.index("--")] if "--" in argv else argv
        fix = "--fix" in ours
        if fix and "--fix" not in parser._option_string_actions:
            raise UsageError(
                "--fix for a script needs the fix loop of `tfdoctor profile --fix`, which this tfdoctor "
                "does not have yet; %%tfdoctor --fix measures the fixes that run in the kernel"
            )
        try:
            args = _parse(parser, argv)
            with _user_errors(parser.format_help()):
                cfg = cmd.config(args)
        except (_HelpShown, SystemExit):
            return  # -h: the help was printed
        from tfdoctor.session.profile import profile_script
        from tfdoctor.store import RunStore

        with _user_errors():
            store = RunStore(args.home)
            run, result, _ = profile_script(
                store, cfg, run_id=args.run_id, force=args.force, display=_progress
            )
            if fix and result.status == "complete":
                self._fix_script(store, run, cfg, args)
            report = run.report()
            if report is None:
                from tfdoctor.session.build import build_report

                report = build_report(run)
        notes = []
        if result is not None and result.message:
            notes.append(result.message)
        if result is not None and result.status != "complete":
            tail = result.error if result.error and "Traceback" in result.error else result.stdout_tail
            if tail:
                print(tail.rstrip(), file=sys.stderr)
        display_report(report, run, store, notes)

    def _fix_script(self, store: Any, run: Any, cfg: Any, args: argparse.Namespace) -> None:
        """``--fix`` on the script just profiled: the CLI's fix loop (session), progress in the cell;
        ``--apply`` writes the script as ``tfdoctor fix --apply`` does."""
        import os

        from tfdoctor.session.fix_loop import FixLoop
        from tfdoctor.session.profile import (
            applied_text,
            apply_project,
            fix_config,
            fix_options,
            not_verified_text,
        )
        from tfdoctor.userfiles import check_writable, read_source

        report = run.report()
        if report is None or report.throughput is None:
            print("tfdoctor: no throughput measured, so no fix can be judged", file=sys.stderr)
            return
        loop_cfg = fix_config(cfg, fix_options(args))
        original = read_source(loop_cfg.script)
        if args.apply:
            check_writable(loop_cfg.script)
        with _fix_progress(os.path.basename(str(cfg.script))) as on_event:
            loop = FixLoop(store, run, report, loop_cfg, on_event=on_event)
            summary = loop.run()
        if args.apply and summary.patch and summary.combined_verdict != "faster":
            # as `tfdoctor profile --fix --apply`: only a combined result verified faster side by side
            print(f"tfdoctor: not applied: {not_verified_text(summary)}", file=sys.stderr)
        elif args.apply and summary.patch:
            final = loop.final_source or original.text
            written = apply_project(loop_cfg.script, original, final, loop.module_changes())
            print(f"tfdoctor: {applied_text(written)}", file=sys.stderr)

    # -- %%tfdoctor --------------------------------------------------------------------------------
    def profile_cell(self, line: str, cell: str) -> None:
        __tracebackhide__ = True
        parser = cell_parser()
        try:
            args = _parse(parser, _split(line))
        except _HelpShown:
            print(parser.format_help())
            return
        from tfdoctor.capture.child.clock import Windows

        try:
            windows = Windows.split(args.steps, args.warmup, args.profile_steps)
        except ValueError as e:
            raise UsageError(f"{e}\n\n{parser.format_help()}") from None
        requested = [f.strip() for f in (args.only or "").split(",") if f.strip()]
        if requested and not args.fix:
            raise UsageError(f"--only needs --fix\n\n{parser.format_help()}")
        if requested:
            from tfdoctor.rules import FIX_IDS

            unknown = [f for f in requested if f not in FIX_IDS]
            if unknown:
                raise UsageError(
                    f"unknown fix id(s) {', '.join(unknown)}; known: {', '.join(sorted(FIX_IDS))}\n\n"
                    f"{parser.format_help()}"
                )
        shell = self.shell
        assert shell is not None
        execute = self._compile_cell(cell)  # a SyntaxError is the user's, raised before anything runs
        label = f"cell In[{self._cell_number}]"
        from tfdoctor.capture import inproc
        from tfdoctor.capture.inproc import StateSnapshot, capture_in_process
        from tfdoctor.session.build import finish_run
        from tfdoctor.store import RunStore

        if inproc.busy():
            raise UsageError("a tfdoctor capture is already running in this interpreter (nested %%tfdoctor?)")

        with _user_errors():
            store = RunStore(args.home)
            from tfdoctor.capture.runner import check_tensorflow

            check_tensorflow()
            snapshot = StateSnapshot(shell.user_ns)
            run = store.new_run(label, [], kind="notebook", run_id=args.run_id, force=args.force)
        run.file("cell.py").write_text(cell, encoding="utf-8")
        notes: list[str] = []
        stopped_at: list[int] = []  # the cell's line where a custom loop was stopped

        def execute_noting_stop() -> None:
            __tracebackhide__ = True
            from tfdoctor.capture.child.clock import StopCapture

            try:
                execute()
            except StopCapture as e:
                # +1: the line numbers the user sees count the %%tfdoctor line too
                stopped_at.extend(n + 1 for n in cell_lines(e, self._cell_filename))
                raise

        try:
            with _user_errors(), native_stderr_to(run.file("stderr.log")):
                res = capture_in_process(execute_noting_stop, run, windows, label=label, soft_stop=True)
                res.capture.facts = name_cells_in_facts(run, self._cell_names(), res.capture.facts)
            report = finish_run(store, run, res.capture)
            if res.capture.message:
                notes.append(res.capture.message)
            if stopped_at:
                notes.append(
                    f"the training loop was stopped after {windows.total} steps at line {stopped_at[-1]} of "
                    "the cell: the rest of the cell did not run (names it assigns are not defined)"
                )
            elif res.models and res.exception is None and len(res.capture.steps) >= windows.total:
                notes.append(
                    f"Model.fit was ended after {res.capture.windows.total} steps and returned normally "
                    "(its History is bound); the rest of the cell ran"
                )
            if args.fix and res.exception is None and res.capture.status == "complete":
                report = self._fix_in_kernel(
                    store,
                    run,
                    report,
                    res,
                    execute,
                    windows,
                    snapshot,
                    requested,
                    label,
                    notes,
                    allow_unchecked=args.allow_unchecked,
                    called=_names_used(cell),
                )
        finally:
            restored = snapshot.restore()
        if restored:
            notes.append(
                f"{restored} variable{'s' if restored != 1 else ''} (model weights, optimizer state) "
                "restored to their values before the cell"
            )
        display_report(report, run, store, notes)
        if res.exception is not None:
            exc = res.exception
            tb = exc.__traceback__
            while (
                tb is not None
                and tb.tb_next is not None
                and tb.tb_frame.f_code.co_filename != self._cell_filename
            ):
                tb = tb.tb_next  # our frames calling the cell's code are not the user's
            raise exc.with_traceback(tb)

    @property
    def _cell_number(self) -> int:
        """The In[] number of the running cell (IPython counts it up after the cell has run)."""
        assert self.shell is not None
        return int(self.shell.execution_count)

    def _cell_names(self) -> dict[str, str]:
        """Compiled cells' file names (``/tmp/ipykernel_…/….py``, ``<ipython-input-…>``) → ``In[N]``."""
        shell = self.shell
        out: dict[str, str] = {}
        fmap = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
        for fname, number in dict(fmap).items():
            out[str(fname)] = f"In[{number}]"
        if self._cell_filename:
            out[self._cell_filename] = f"In[{self._cell_number}]"
        return out

    _cell_filename = ""

    def _compile_cell(self, cell: str) -> Callable[[], None]:
        shell = self.shell
        assert shell is not None
        code = shell.transform_cell(cell)
        name = shell.compile.cache(code, shell.execution_count, raw_code=cell)
        self._cell_filename = name
        compiled = shell.compile(code, name, "exec")
        ns = shell.user_ns

        def execute() -> None:
            __tracebackhide__ = True
            exec(compiled, ns)

        return execute

    def _fix_in_kernel(
        self,
        store: Any,
        base_run: Any,
        base: Any,
        base_res: Any,
        execute: Callable[[], None],
        windows: Any,
        snapshot: Any,
        requested: list[str],
        label: str,
        notes: list[str],
        allow_unchecked: bool = False,
        called: frozenset[str] = frozenset(),
    ) -> Any:
        """The kernel's fix loop (:func:`tfdoctor.session.kernel.kernel_fix_loop`): the same sanity
        checks and paired-round judge as ``tfdoctor profile --fix``."""
        from tfdoctor.rules import FIX_IDS
        from tfdoctor.session.kernel import KernelCell, kernel_fix_loop

        assert self.shell is not None
        if requested:
            candidates = list(dict.fromkeys(requested))
        else:
            ranked = sorted(base.findings, key=lambda f: -f.est_saving)
            candidates = list(dict.fromkeys(fid for f in ranked for fid in f.fix_ids if fid in FIX_IDS))
        cell = KernelCell(
            ns=self.shell.user_ns,
            execute=execute,
            windows=windows,
            snapshot=snapshot,
            step_fn=base_res.step_fn,
            models=list(base_res.models),
            facts=base.facts,
            label=label,
            called=called,
        )
        return kernel_fix_loop(
            store,
            base_run,
            base,
            cell,
            candidates,
            allow_unchecked=allow_unchecked,
            notes=notes,
            describe=fix_description,
        )


def _names_used(cell: str) -> frozenset[str]:
    """The names a cell's code reads (the functions it calls among them); empty if it does not parse."""
    import ast

    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return frozenset()
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


@contextlib.contextmanager
def _fix_progress(name: str) -> Iterator[Callable[[Any], None]]:
    """The fix loop's progress, one line updated in place: which fix, which of how many, what happened."""
    from IPython.display import display

    handle = display({"text/plain": f"tfdoctor: fix loop on {name}…"}, raw=True, display_id=True)

    def update(e: Any) -> None:
        at = f" [{e.index}/{e.total}]" if e.total else ""
        if handle is not None:
            handle.update({"text/plain": f"tfdoctor: fix loop on {name}{at} · {e.message}"}, raw=True)

    yield update


@contextlib.contextmanager
def _progress(name: str) -> Iterator[Callable[[Any], None]]:
    """A one-line progress display for a script run, updated in place."""
    from IPython.display import display

    handle = display({"text/plain": f"tfdoctor: starting {name}…"}, raw=True, display_id=True)

    def update(p: Any) -> None:
        rate = f" · {p.steps_per_s:.1f} steps/s" if p.steps_per_s else ""
        window = f" · {p.window} window" if p.window and p.steps_done else ""
        text = f"tfdoctor: {name} · {p.phase} · {p.steps_done}/{p.total} steps{window}{rate} · {p.elapsed_s:.0f} s"
        if handle is not None:
            handle.update({"text/plain": text}, raw=True)

    yield update


@contextlib.contextmanager
def native_stderr_to(path: Any) -> Iterator[None]:
    """Native writes to file descriptor 2 (TensorFlow's C++ log lines) go to ``path`` meanwhile, not
    into the cell's output (ipykernel forwards fd 2 to it); Python's sys.stderr is left alone."""
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 (an embedded interpreter): nothing to redirect
        yield
        return
    try:
        with open(path, "ab") as f:
            sys.stderr.flush()
            os.dup2(f.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def cell_lines(exc: BaseException, filename: str) -> list[int]:
    """Line numbers of ``exc``'s traceback frames that are in the cell compiled as ``filename``."""
    out = []
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            out.append(tb.tb_lineno)
        tb = tb.tb_next
    return out


def name_cells_in_facts(run: Any, names: dict[str, str], facts: Any = None) -> Any:
    """Source locations in the run's facts name the notebook cell (``In[12]:3``) instead of the
    kernel's temporary file for it: in facts.json and in ``facts`` (a Facts, returned updated)."""

    def renamed(source: dict[str, str]) -> dict[str, str]:
        out = {}
        for role, where in source.items():
            path, _, line = str(where).rpartition(":")
            out[role] = f"{names[path]}:{line}" if path in names else where
        return out

    data = run.read_json("facts.json", None)
    if isinstance(data, dict) and isinstance(data.get("source"), dict):
        new = renamed(data["source"])
        if new != data["source"]:
            run.write_json("facts.json", {**data, "source": new})
    if facts is not None and getattr(facts, "source", None):
        facts = facts.model_copy(update={"source": renamed(dict(facts.source))})
    return facts


def ensure_kernelspec(name: str = "python3") -> str:
    """The Jupyter kernelspec ``name``, installed for this Python (into ``sys.prefix``) if missing.

    Returns the kernelspec's directory. Needs ipykernel (the ``notebook`` extra).
    """
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        return str(KernelSpecManager().get_kernel_spec(name).resource_dir)
    except NoSuchKernel:
        from ipykernel.kernelspec import install

        return str(install(kernel_name=name, prefix=sys.prefix))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tfdoctor``: registers ``%tfdoctor`` and ``%%tfdoctor``."""
    ipython.register_magics(TfdoctorMagics)


def unload_ipython_extension(ipython: Any) -> None:
    magics = ipython.magics_manager.magics
    for kind in ("line", "cell"):
        magics[kind].pop("tfdoctor", None)
