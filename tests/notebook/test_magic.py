"""``%load_ext tfdoctor`` in a real IPython InteractiveShell: training cells profiled in the kernel
(real TensorFlow, tiny models), the report displayed inline, the user's state left as it was."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from nb_cells import (
    CUSTOM_LOOP,
    CUSTOM_SETUP,
    EAGER_LOOP,
    FIT,
    INTERRUPTED_AT_6,
    PRINTING_LOOP,
    PRINTING_STEP,
    RAISES_AT_5,
    SETUP,
)

from tfdoctor.store import RunStore

pytestmark = pytest.mark.notebook
ROOT = Path(__file__).resolve().parents[2]


def srcdoc(fragment: str) -> str:
    """The report page inside the displayed iframe."""
    m = re.search(r'srcdoc="([^"]*)"', fragment)
    assert m, fragment[:300]
    return html.unescape(m.group(1))


def only_run(home: Path, kind: str = "notebook") -> dict:
    runs = [r for r in RunStore(home).list() if r["kind"] == kind]
    assert len(runs) == 1, runs
    return runs[0]


def timed_to_the_floor(store: RunStore, trial_run: str, base_run: str, steps: int = 12) -> None:
    """The fix trial's runs in the kernel are timed for at least MIN_TIMING_S, as the script loop's are:
    the ~ms steps of a compiled tiny step grow the ``steps`` plan's timing window to the floor or its cap;
    the baseline's profiled cell keeps its planned window (its profile window follows it)."""
    from tfdoctor.capture.child.clock import TIMING_GROWTH_MAX, Windows
    from tfdoctor.session.fix_loop import MIN_TIMING_S

    planned = Windows.split(steps, None, None).timing
    timed = [s for s in store.get(trial_run).steps() if s.window == "timing"]
    lasted = (timed[-1].end_ns - timed[0].start_ns) / 1e9
    assert len(timed) > planned, len(timed)
    assert lasted >= MIN_TIMING_S or len(timed) == TIMING_GROWTH_MAX * planned, (lasted, len(timed))
    assert sum(s.window == "timing" for s in store.get(base_run).steps()) == planned


def no_patches_left() -> None:
    import keras
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    from tfdoctor.capture.child import hooks

    assert hooks._PATCHES == []
    assert not getattr(keras.Model.fit, "__tfdoctor__", False)
    assert not getattr(polymorphic_function.Function.__call__, "__tfdoctor__", False)
    assert not any(isinstance(f, hooks.PostImportHooks) for f in sys.meta_path)


def test_fit_cell_is_profiled_in_the_kernel_and_shown_inline(shell):
    assert shell.run(SETUP).success
    shell.run("w0 = [w.copy() for w in model.get_weights()]; model_id = id(model)")
    res = shell.run(f"%%tfdoctor --steps 12\n{FIT}")
    assert res.success, res.error_in_exec

    row = only_run(shell.home)
    assert row["status"] == "complete"
    report = RunStore(shell.home).get(row["id"]).report()
    assert report is not None
    assert len(report.steps) == 12  # stopped after 12 of 20 epochs x 32 batches
    assert [s.window for s in report.steps].count("profile") == Windows_profile(12)
    assert report.facts.loop_kind == "keras_fit" and report.facts.batch_size == 16
    assert report.breakdown is not None and report.breakdown.steps
    assert report.trace_files

    (frag,) = shell.html()
    page = srcdoc(frag)
    assert f'data-run-id="{report.run_id}"' in frag
    assert 'id="sec-breakdown"' in page and 'id="sec-findings"' in page
    assert '"breakdown"' in page  # the plotly figure's data
    for f in report.findings:
        assert f.rule_id in page
    # plotly.js once per kernel: the first report carries its source, the page runs it in its frame
    assert frag.count('class="tfdoctor-plotly-js"') == 1 and "Plotly" in frag
    assert "tfdoctor-plotly-js" in page and "Plotly" not in page.split("tfdoctor-plotly-js")[0]
    (text,) = shell.plain()
    # the report is shown once (the HTML); text/plain is a summary for frontends without HTML
    assert report.run_id in text and "Throughput:" in text and "Step-time breakdown" not in text
    assert "restored to their values before the cell" in text
    assert "Model.fit was ended after 12 steps and returned normally" in text
    assert report.script == f"cell In[{res.execution_count}]"  # the cell's own In[] number

    # the user's objects: weights as before the cell, same model, Keras/TF unpatched
    assert shell.run(
        "import numpy as np\n"
        "assert id(model) == model_id\n"
        "assert all(np.array_equal(a, b) for a, b in zip(w0, model.get_weights()))"
    ).success
    no_patches_left()


def Windows_profile(steps: int) -> int:
    from tfdoctor.capture.child.clock import Windows

    return Windows.split(steps).profile


def test_custom_tf_function_loop_cell(shell):
    assert shell.run(CUSTOM_SETUP).success
    res = shell.run(f"%%tfdoctor --steps 12 --warmup 3\n{CUSTOM_LOOP}")
    assert res.success, res.error_in_exec
    report = RunStore(shell.home).get(only_run(shell.home)["id"]).report()
    assert report.status == "complete"
    assert len(report.steps) == 12
    assert report.facts.loop_kind == "custom" and report.facts.step_kind == "tf.function"
    assert report.facts.input_kind == "tf.data"
    assert all(s.loss is not None for s in report.steps)
    assert report.breakdown is not None and report.breakdown.steps
    # the cell was stopped by the magic: its loop saw 12 steps, not 500
    assert shell.ip.user_ns["step"] == 11
    (text,) = shell.plain()
    assert "the training loop was stopped after 12 steps at line 4 of the cell" in text
    no_patches_left()


def test_the_next_cell_finds_what_a_profiled_fit_cell_assigned(shell):
    """The TF CNN tutorial's `history = model.fit(...)`, then `history.history` in the next cell."""
    assert shell.run(SETUP).success
    res = shell.run(f"%%tfdoctor --steps 12\nhistory = {FIT}after_fit = True\n")
    assert res.success, res.error_in_exec
    nxt = shell.run("n_epochs = len(history.history['loss'])\nassert after_fit")
    assert nxt.success, nxt.error_in_exec
    assert 1 <= shell.ip.user_ns["n_epochs"] < 20  # fit returned early: the remaining epochs were skipped
    no_patches_left()


def test_tf_native_log_lines_go_to_the_run_not_the_cell(shell, capfd):
    assert shell.run(SETUP).success
    capfd.readouterr()
    cell = "import os\nos.write(2, b'I0000 00:00 cpu_feature_guard.cc:227] native log line\\n')\n" + FIT
    assert shell.run(f"%%tfdoctor --steps 12\n{cell}").success
    assert "native log line" not in capfd.readouterr().err
    run = RunStore(shell.home).get(only_run(shell.home)["id"])
    assert "native log line" in run.file("stderr.log").read_text()


def test_help(shell, capsys):
    shell.ip.run_line_magic("tfdoctor", "-h")
    out = capsys.readouterr().out
    assert (
        "%%tfdoctor [--steps N]" in out and "%tfdoctor profile SCRIPT" in out and "%tfdoctor show RUN" in out
    )
    shell.ip.run_cell_magic("tfdoctor", "-h", "raise AssertionError('a help request must not run the cell')")
    out = capsys.readouterr().out
    assert "--fix" in out and "--steps" in out
    assert RunStore(shell.home).list() == []


@pytest.mark.parametrize(
    ("line", "cell", "says"),
    [
        ("--bogus", "pass", "unrecognized arguments: --bogus"),
        ("--steps many", "pass", "invalid int value"),
        ("--steps 4", "pass", "leaves no timing window"),
        ("--only xla-jit", "pass", "--only needs --fix"),
        ("--fix --only warp-drive", "pass", "unknown fix id(s) warp-drive"),
        ("--fix --fixes warp-drive", "pass", "unknown fix id(s) warp-drive"),  # the old name still works
        ("frobnicate", None, "unknown subcommand 'frobnicate'"),
        ("profile", None, "no script given"),
        ("profile does/not/exist.py", None, "no such file"),
        ("show", None, "the following arguments are required: run"),
        ("show no-such-run", None, "no run 'no-such-run'"),
        ('profile "unterminated', None, "cannot parse the options"),
    ],
)
def test_bad_options_raise_usage_error_with_help(shell, line, cell, says):
    with pytest.raises(UsageError) as e:
        if cell is None:
            shell.ip.run_line_magic("tfdoctor", line)
        else:
            shell.ip.run_cell_magic("tfdoctor", line, cell)
    msg = str(e.value)
    assert says in msg
    if "no run" not in says and "no such file" not in says:
        assert "usage:" in msg or "%%tfdoctor" in msg  # the help text comes with it
    assert RunStore(shell.home).list() == []


def test_usage_error_through_run_cell_keeps_the_kernel(shell):
    res = shell.run("%%tfdoctor --steps\npass")
    assert isinstance(res.error_in_exec, UsageError)
    assert shell.run("1 + 1").result == 2


def test_cell_that_raises_shows_traceback_and_partial_profile(shell, capsys):
    assert shell.run(CUSTOM_SETUP).success
    res = shell.run(f"%%tfdoctor --steps 12 --warmup 3\n{RAISES_AT_5}")
    assert isinstance(res.error_in_exec, ValueError)
    err = capsys.readouterr()
    shown = err.out + err.err
    assert "bad batch at step 5" in shown and "ValueError" in shown
    assert "raise ValueError" in shown  # the user's line, from the cell's own traceback
    row = only_run(shell.home)
    assert row["status"] == "failed"
    report = RunStore(shell.home).get(row["id"]).report()
    assert len(report.steps) == 5 and report.error and "bad batch at step 5" in report.error
    (frag,) = shell.html()
    page = srcdoc(frag)
    assert "The run ended with an error" in page and "bad batch at step 5" in page
    (text,) = shell.plain()
    assert "the cell raised after 5 steps: ValueError: bad batch at step 5" in text
    no_patches_left()
    # the kernel lives on, and a later profile works
    assert shell.run("x.shape").result == (512, 8)
    shell.clear()
    assert shell.run(f"%%tfdoctor --steps 12 --warmup 3\n{CUSTOM_LOOP}").success


def test_interrupted_cell_keeps_its_partial_run(shell):
    assert shell.run(CUSTOM_SETUP).success
    res = shell.run(f"%%tfdoctor --steps 12 --warmup 3\n{INTERRUPTED_AT_6}")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    row = only_run(shell.home)
    assert row["status"] == "interrupted"
    report = RunStore(shell.home).get(row["id"]).report()
    assert len(report.steps) == 6 and report.error == "interrupted after 6 steps"
    assert shell.html() and "interrupted after 6 steps" in shell.plain()[0]
    no_patches_left()
    assert shell.run("1 + 1").result == 2


def test_nested_profile_is_refused(shell):
    assert shell.run(CUSTOM_SETUP).success
    res = shell.run(
        f"%%tfdoctor --steps 12\nget_ipython().run_cell_magic('tfdoctor', '--steps 12', {CUSTOM_LOOP!r})"
    )
    assert isinstance(res.error_in_exec, UsageError) and "already running" in str(res.error_in_exec)
    assert only_run(shell.home)["status"] == "failed"  # the outer run only: the inner one never started
    no_patches_left()


def test_fix_restores_switches_objects_and_bindings(shell):
    import keras
    import tensorflow as tf

    assert shell.run(CUSTOM_SETUP).success
    assert shell.run(f"%%tfdoctor --steps 12\n{FIT}").success  # builds model.train_function
    shell.clear()
    ns = shell.ip.user_ns
    model, step = ns["model"], ns["train_step"]
    before = (model.jit_compile, model.steps_per_execution, model.train_function, model.run_eagerly)
    jit_before, policy_before = tf.config.optimizer.get_jit(), keras.mixed_precision.global_policy().name
    res = shell.run(
        "%%tfdoctor --steps 12 --fix --only xla-jit,steps-per-execution,mixed-precision,tfdata-prefetch\n"
        + FIT
    )
    assert res.success, res.error_in_exec
    assert ns["model"] is model and ns["train_step"] is step
    assert (model.jit_compile, model.steps_per_execution, model.train_function, model.run_eagerly) == before
    assert tf.config.optimizer.get_jit() == jit_before
    assert keras.mixed_precision.global_policy().name == policy_before
    no_patches_left()

    store = RunStore(shell.home)
    runs = [r for r in store.list() if r["kind"] == "notebook"]
    assert len(runs) == 2  # the first profile, and the one with --fix
    (base,) = [r for r in runs if store.get(r["id"]).report().fix is not None]
    report = store.get(base["id"]).report()
    trials = {t.fix_id: t for t in report.fix.trials}
    assert trials["xla-jit"].status in ("kept", "rejected") and trials["xla-jit"].run_id
    assert "jit_compile = True" in trials["xla-jit"].runtime_switch["kernel"]
    assert trials["steps-per-execution"].status in ("kept", "rejected")
    assert "steps_per_execution = 8" in trials["steps-per-execution"].runtime_switch["kernel"]
    # the model was built before the policy: measured, and said not to apply in the kernel
    assert trials["mixed-precision"].status == "skipped"
    # a source rewrite: skipped with what a notebook user can do (the notebook as a script), no script named
    prefetch = trials["tfdata-prefetch"]
    assert (
        prefetch.status == "skipped"
        and "nbconvert --to script" in prefetch.reason
        and "script.py" not in prefetch.reason
    )
    trial_runs = [r for r in store.list() if r["kind"] == "notebook-fix"]
    assert {r["parent"] for r in trial_runs} == {base["id"]}
    xla = store.get(trials["xla-jit"].run_id).report()
    assert xla.facts.jit_compile is True  # the trial really compiled with XLA
    # a kept fix checked against the baseline: its one-off cost is read from the same runs
    if report.fix.combined_speedup is not None:
        assert report.fix.combined_startup_s is not None
    (text,) = shell.plain()
    assert "measured only in a subprocess" in text and "tfdata-prefetch" in text
    page = srcdoc(shell.html()[0])
    assert 'id="sec-fixes"' in page and "xla-jit" in page


def test_fix_wraps_an_eager_step_function_on_a_copy(shell):
    assert shell.run(CUSTOM_SETUP).success
    ns = shell.ip.user_ns
    step = ns["eager_step"]
    res = shell.run(f"%%tfdoctor --steps 12 --fix --only tf-function\n{EAGER_LOOP}")
    assert res.success, res.error_in_exec
    assert ns["eager_step"] is step  # the name points at the user's function again
    store = RunStore(shell.home)
    (base,) = [r for r in store.list() if r["kind"] == "notebook"]
    report = store.get(base["id"]).report()
    assert report.facts.step_kind == "eager"
    (trial,) = report.fix.trials
    assert trial.fix_id == "tf-function" and trial.status in ("kept", "rejected")
    assert trial.runtime_switch["kernel"] == "eager_step = tf.function(eager_step)"
    assert store.get(trial.run_id).report().facts.step_kind == "tf.function"
    timed_to_the_floor(store, trial.run_id, base["id"])
    no_patches_left()


def test_fix_turns_off_run_functions_eagerly_for_the_trial_and_back(shell):
    """tf.config.run_functions_eagerly(True) left on in an earlier cell: the decorated step runs op by
    op. The run's facts say so; the tf-function trial switches it off and puts it back after."""
    import tensorflow as tf

    assert shell.run(CUSTOM_SETUP + "\ntf.config.run_functions_eagerly(True)\n").success
    try:
        res = shell.run(f"%%tfdoctor --steps 12 --fix --only tf-function\n{CUSTOM_LOOP}")
        assert res.success, res.error_in_exec
        store = RunStore(shell.home)
        (base,) = [r for r in store.list() if r["kind"] == "notebook"]
        report = store.get(base["id"]).report()
        assert report.facts.functions_run_eagerly is True and report.facts.step_kind == "eager"
        (trial,) = report.fix.trials
        assert trial.fix_id == "tf-function" and trial.status in ("kept", "rejected"), trial.reason
        assert trial.runtime_switch["kernel"] == "tf.config.run_functions_eagerly(False)"
        assert store.get(trial.run_id).report().facts.step_kind == "tf.function"
        assert tf.config.functions_run_eagerly() is True  # the user's setting, back as it was
        no_patches_left()
    finally:
        tf.config.run_functions_eagerly(False)


def test_fix_in_the_kernel_checks_the_cells_output_like_the_script_loop(shell):
    """The notebook's fix loop compares what the cell printed with its reference, as the script loop
    does: a step whose print runs only while tracing under tf.function is rejected, not measured."""
    assert shell.run(CUSTOM_SETUP + PRINTING_STEP).success
    res = shell.run(f"%%tfdoctor --steps 12 --fix --only tf-function\n{PRINTING_LOOP}")
    assert res.success, res.error_in_exec
    store = RunStore(shell.home)
    (base,) = [r for r in store.list() if r["kind"] == "notebook"]
    base_run = store.get(base["id"])
    assert base_run.file("stdout.log").read_text().count("one step done") >= 10  # the cell's output, kept
    (trial,) = base_run.report().fix.trials
    assert trial.fix_id == "tf-function" and trial.status == "rejected", trial.reason
    assert "output changed" in trial.reason and "one step done" in trial.reason
    assert trial.speedup is None  # rejected before any speed was judged
    assert store.get(trial.run_id).file("stdout.log").read_text().count("one step done") <= 2
    no_patches_left()


def test_show_a_stored_run(shell):
    assert shell.run(SETUP).success
    assert shell.run(f"%%tfdoctor --steps 12 --run-id nb-show\n{FIT}").success
    shell.clear()
    shell.ip.run_line_magic("tfdoctor", "show nb-show")
    (frag,) = shell.html()
    assert 'data-run-id="nb-show"' in frag and 'id="sec-findings"' in srcdoc(frag)
    # an explicit run id that exists is refused without --force
    with pytest.raises(UsageError, match="already exists"):
        shell.ip.run_cell_magic("tfdoctor", "--steps 12 --run-id nb-show", FIT)


def test_profile_a_script_from_the_notebook(shell):
    script = ROOT / "tests" / "scripts" / "tiny_train.py"
    shell.ip.run_line_magic(
        "tfdoctor", f"profile {script} --steps 12 --run-id nb-script -- --loop function --input tfdata"
    )
    report = RunStore(shell.home).get("nb-script").report()
    # --steps 12 reached the harness: 3 planned warm-up steps (adaptive: it may take more while step
    # times settle, Facts.warmup_steps says how many it took), then 9 timed and profiled ones
    assert report.status == "complete" and report.facts.warmup_steps >= 3
    assert len(report.steps) == report.facts.warmup_steps + 9
    assert report.args == ["--loop", "function", "--input", "tfdata"]
    assert report.facts.step_kind == "tf.function"
    frags = shell.html()
    assert frags and 'data-run-id="nb-script"' in frags[-1]
    assert any("steps" in t for t in shell.plain()[:-1])  # the progress line, updated in place


def test_fix_a_script_from_the_notebook_through_the_fix_loop(shell, tmp_path):
    """%tfdoctor profile SCRIPT --fix runs the CLI's fix loop in the kernel (no `python -m tfdoctor`
    subprocess): the run gets fix results, the progress shows in the cell, the script is untouched."""
    import shutil

    script = tmp_path / "tiny_train.py"
    shutil.copy(ROOT / "tests" / "scripts" / "tiny_train.py", script)
    before = script.read_bytes()
    shell.clear()
    shell.ip.run_line_magic(
        "tfdoctor",
        f"profile {script} --steps 12 --run-id nb-fix --fix --only tf-function --fix-rounds 0 -- --loop eager",
    )
    report = RunStore(shell.home).get("nb-fix").report()
    assert report is not None and report.fix is not None
    [trial] = [t for t in report.fix.trials if t.fix_id == "tf-function"]
    assert trial.status in ("kept", "rejected", "skipped") and trial.reason
    assert any("fix loop on tiny_train.py" in t for t in shell.plain())  # the loop's progress line
    assert script.read_bytes() == before  # measured on a copy; --apply was not given


def test_apply_from_the_notebook_writes_only_a_result_verified_faster(shell, tmp_path, capfd):
    """%tfdoctor profile SCRIPT --fix --apply decides as `tfdoctor profile --fix --apply` does: the script is
    written (with its backup) only when the combined result was verified faster side by side."""
    import shutil

    script = tmp_path / "tiny_train.py"
    shutil.copy(ROOT / "tests" / "scripts" / "tiny_train.py", script)
    before = script.read_bytes()
    shell.ip.run_line_magic(
        "tfdoctor",
        f"profile {script} --steps 12 --run-id nb-apply --fix --only tf-function --fix-rounds 1 --apply "
        "-- --loop eager",
    )
    fix = RunStore(shell.home).get("nb-apply").report().fix
    assert fix is not None and fix.patch
    err = capfd.readouterr().err
    backup = tmp_path / "tiny_train.py.tfdoctor-bak"
    if fix.combined_verdict == "faster":
        assert "Applied to" in err and backup.read_bytes() == before
        assert script.read_bytes() != before and b"@tf.function" in script.read_bytes()
    else:  # kept on its trial, not verified faster on the whole: nothing written, and said so
        assert "not applied: the combined result is not verified faster" in err
        assert script.read_bytes() == before and not backup.exists()


WALKTHROUGH_GRAD = """
def loss_fn(model, x, y, training):
    return tf.reduce_mean((model(x, training=training) - y) ** 2)

def grad(model, inputs, targets):
    with tf.GradientTape() as tape:
        loss_value = loss_fn(model, inputs, targets, training=True)
    return loss_value, tape.gradient(loss_value, model.trainable_variables)
"""

WALKTHROUGH_LOOP = """
for step, (xb, yb) in enumerate(ds.take(500)):
    loss_value, grads = grad(model, xb, yb)
    opt.apply_gradients(zip(grads, model.trainable_variables))
"""


def test_fix_compiles_the_gradient_function_of_an_earlier_cell(shell):
    """The TensorFlow custom-training walkthrough's shape: grad() defined in an earlier cell, the
    optimizer update inline in the profiled cell. tf-function is tried on grad (it was 'not a function
    of the notebook' before), and the name is the user's function again afterwards."""
    assert shell.run(CUSTOM_SETUP).success
    assert shell.run(WALKTHROUGH_GRAD).success
    ns = shell.ip.user_ns
    grad = ns["grad"]
    res = shell.run(f"%%tfdoctor --steps 12 --fix --only tf-function\n{WALKTHROUGH_LOOP}")
    assert res.success, res.error_in_exec
    assert ns["grad"] is grad
    store = RunStore(shell.home)
    base = max((r for r in store.list() if r["kind"] == "notebook"), key=lambda r: r["created"])
    report = store.get(base["id"]).report()
    assert report.facts.step_kind == "eager"
    (trial,) = report.fix.trials
    assert trial.fix_id == "tf-function" and trial.status != "skipped", trial.reason
    assert trial.runtime_switch["kernel"].startswith("grad = tf.function(grad)")
    assert store.get(trial.run_id).report().facts.step_kind == "tf.function"
    timed_to_the_floor(store, trial.run_id, base["id"])
    no_patches_left()
