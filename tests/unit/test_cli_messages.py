"""Messages a user meets: a failure's one-line summary, a worker's report, scale on a multi-worker job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfdoctor.capture.child.clock import Windows
from tfdoctor.capture.runner import CaptureResult, failure_summary
from tfdoctor.cli import main
from tfdoctor.rundir import RunDir
from tfdoctor.session.distributed import _worker_report

ROOT = Path(__file__).resolve().parents[2]

#: what Keras 3 prints for a shape mismatch: a multi-line message whose last line is an argument dump
KERAS_TB = """Traceback (most recent call last):
  File "/home/u/proj/train.py", line 41, in <module>
    main()
  File "/home/u/proj/train.py", line 33, in main
    preds = model(batch)
            ^^^^^^^^^^^^
  File "/usr/lib/python3.11/site-packages/keras/src/utils/traceback_utils.py", line 122, in error_handler
    raise e.with_traceback(filtered_tb) from None
  File "/usr/lib/python3.11/site-packages/keras/src/layers/input_spec.py", line 227, in assert_input_compatibility
    raise ValueError(
ValueError: Exception encountered when calling Sequential.call().

Input 0 of layer "dense" is incompatible with the layer: expected axis -1 of input shape to have value 4

Arguments received by Sequential.call():
  • inputs=tf.Tensor(shape=(2, 5), dtype=float32)
  • training=None
"""


def test_failure_summary_is_type_first_line_and_the_users_frame() -> None:
    fs = failure_summary(KERAS_TB)
    assert fs.exception == "ValueError: Exception encountered when calling Sequential.call()."
    assert fs.where == "train.py:33 in main"
    assert fs.code == "preds = model(batch)"


#: what TensorFlow prints for an error while a tf.function is traced (recorded here, TF 2.21): the last
#: frame is autograph's generated file, the user's frame and the real exception are in the message
AUTOGRAPH_TB = """Traceback (most recent call last):
  File "/tmp/pt/om.py", line 25, in <module>
    train_step(x[i : i + 32])
  File "/usr/lib/python3.11/site-packages/tensorflow/python/util/traceback_utils.py", line 167, in error_handler
    raise e.with_traceback(filtered_tb) from None
  File "/tmp/__autograph_generated_fileo4xsurnp.py", line 13, in tf__train_step
    loss = ag__.converted_call(ag__.ld(tf).reduce_sum, (ag__.ld(hidden) ** 2,), None, fscope) / ag__.ld(n)
           ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~^~~~~~~~~~~~
TypeError: in user code:

    File "/tmp/pt/om.py", line 18, in train_step  *
        loss = tf.reduce_sum(hidden**2) / n

    TypeError: `x` and `y` must have the same dtype, got tf.bfloat16 != tf.float32.

"""


def test_failure_summary_of_a_traced_function_is_the_users_line_not_autographs() -> None:
    fs = failure_summary(AUTOGRAPH_TB)
    assert fs.exception == "TypeError: `x` and `y` must have the same dtype, got tf.bfloat16 != tf.float32."
    assert fs.where == "om.py:18 in train_step"
    assert fs.code == "loss = tf.reduce_sum(hidden**2) / n"


def test_failure_summary_of_a_chained_exception_takes_the_last_one() -> None:
    text = (
        'Traceback (most recent call last):\n  File "/p/a.py", line 1, in <module>\n    x()\nKeyError: 1\n\n'
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "/p/a.py", line 3, in <module>\n    y()\n'
        "RuntimeError: second\nmore\n"
    )
    fs = failure_summary(text)
    assert (fs.exception, fs.where, fs.code) == ("RuntimeError: second", "a.py:3 in <module>", "y()")


#: keras-io's OCR captcha compiled with XLA (recorded here, TF 2.21, frames trimmed): the exception's
#: first line says only "Graph execution error:"; the cause and the op's making follow in the message
GRAPH_TB = """Traceback (most recent call last):
  File "/tmp/tfdoctor-fix-2au8anu0/src/ocr_captcha.py", line 271, in <module>
    history = model.fit(
              ^^^^^^^^^^
  File "/usr/lib/python3.11/site-packages/keras/src/utils/traceback_utils.py", line 122, in error_handler
    raise e.with_traceback(filtered_tb) from None
tensorflow.python.framework.errors_impl.InvalidArgumentError: Graph execution error:

Detected at node ocr_model_v1_1/ctc_loss_1/CTCLoss defined at (most recent call last):
<stack traces unavailable>
Detected unsupported operations when trying to compile graph __inference_one_step_on_data_9330[] on \
XLA_CPU_JIT: CTCLoss (No registered 'CTCLoss' OpKernel for XLA_CPU_JIT devices compatible with node \
{{node ocr_model_v1_1/ctc_loss_1/CTCLoss}}){{node ocr_model_v1_1/ctc_loss_1/CTCLoss}}
The op is created at:
File "<frozen runpy>", line 88, in _run_code
File "/tmp/tfdoctor-fix-2au8anu0/src/ocr_captcha.py", line 271, in <module>
File "/usr/lib/python3.11/site-packages/keras/src/backend/tensorflow/trainer.py", line 59, in train_step
File "/usr/lib/python3.11/site-packages/keras/src/layers/layer.py", line 1002, in __call__
File "/tmp/tfdoctor-fix-2au8anu0/src/ocr_captcha.py", line 191, in call
File "/tmp/tfdoctor-fix-2au8anu0/src/ocr_captcha.py", line 128, in ctc_batch_cost
\ttf2xla conversion failed while converting __inference_one_step_on_data_9330[]. Run with TF_DUMP_GRAPH_PREFIX=/d
\t [[StatefulPartitionedCall]] [Op:__inference_multi_step_on_iterator_9472]
"""


def test_failure_summary_of_a_graph_execution_error_says_its_cause_and_the_ops_line() -> None:
    """A trial of xla-jit failed as "InvalidArgumentError: Graph execution error: (at ocr_captcha.py:271
    in <module>)": the fit call, and nothing of why. The cause is in the message, and where the op was
    made: now both."""
    fs = failure_summary(GRAPH_TB)
    assert fs.exception == (
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: Graph execution error: Detected "
        "unsupported operations when trying to compile graph __inference_one_step_on_data_9330[] on "
        "XLA_CPU_JIT: CTCLoss (No registered 'CTCLoss' OpKernel for XLA_CPU_JIT devices compatible with node)"
    )
    assert fs.where == "ocr_captcha.py:128 in ctc_batch_cost"
    # the usual shape: indented node stacks with their source lines, the cause, then [[node]] lines
    usual = (
        'Traceback (most recent call last):\n  File "/p/train.py", line 9, in <module>\n    model.fit(x, y)\n'
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: Graph execution error:\n\n"
        "Detected at node sub defined at (most recent call last):\n"
        '  File "/p/train.py", line 5, in loss_fn\n    return y - p\n\n'
        "Incompatible shapes: [32,10] vs. [16,10]\n\t [[{{node sub}}]] [Op:__inference_train_function_99]\n"
    )
    fs = failure_summary(usual)
    assert fs.exception.endswith("Graph execution error: Incompatible shapes: [32,10] vs. [16,10]")
    assert (fs.where, fs.code) == ("train.py:5 in loss_fn", "return y - p")


def test_failure_summary_without_a_traceback_is_the_last_line() -> None:
    assert failure_summary("some output\nKilled\n").exception == "Killed"
    assert failure_summary(None).exception == ""


def test_a_non_chief_workers_report_names_the_script(tmp_path: Path) -> None:
    mine = RunDir(tmp_path / "job1" / "workers" / "worker-1")
    mine.path.mkdir(parents=True)
    result = CaptureResult(status="complete", returncode=0, windows=Windows(3, 5, 2))
    report = _worker_report(mine, result, "/home/u/proj/train.py", ["--epochs", "1"])
    assert report.script == "/home/u/proj/train.py" and report.args == ["--epochs", "1"]
    assert json.loads(mine.file("report.json").read_text())["script"] == "/home/u/proj/train.py"


def test_scale_refuses_a_multi_worker_tf_config_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cluster = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
    rc = main(["scale", str(ROOT / "examples" / "multiworker.py"), "--home", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "tfdoctor scale is for one-machine strategies" in err and "2-worker cluster" in err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_uses_multiworker_reads_the_source(tmp_path: Path) -> None:
    from tfdoctor.commands.scale import uses_multiworker

    assert uses_multiworker(ROOT / "examples" / "multiworker.py") == "MultiWorkerMirroredStrategy"
    assert uses_multiworker(ROOT / "examples" / "mirrored.py") is None


# -- -m MODULE: a package's script, run as python -m runs it -------------------------------------------
def test_resolve_module_finds_the_file_python_m_runs_without_importing(tmp_path: Path) -> None:
    from tfdoctor.capture.runner import resolve_module
    from tfdoctor.errors import UsageError

    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("raise RuntimeError('imported')\n")  # never run here
    (tmp_path / "pkg" / "train.py").write_text("print(1)\n")
    (tmp_path / "pkg" / "sub" / "__main__.py").write_text("print(2)\n")  # a namespace package's __main__
    (tmp_path / "pkg" / "bare").mkdir()
    assert resolve_module("pkg.train", tmp_path) == (tmp_path / "pkg" / "train.py").resolve()
    assert resolve_module("pkg.sub", tmp_path) == (tmp_path / "pkg" / "sub" / "__main__.py").resolve()
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere.py"
    elsewhere.write_text("print(3)\n")
    (tmp_path / "pkg" / "linked.py").symlink_to(elsewhere)
    for name, said in (
        ("pkg.linked", "leads out of"),
        ("pkg.nothere", "no pkg/nothere.py under"),
        ("pkg.bare", "is a package without __main__.py"),
        ("pkg/train.py", "not a module name"),
        ("", "not a module name"),
    ):
        with pytest.raises(UsageError, match=said):
            resolve_module(name, tmp_path)


def test_profile_takes_dash_m_where_the_script_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from tfdoctor.commands.profile import MODULE_MARK, ProfileCommand, module_argv

    assert module_argv(["-m", "pkg.train", "--steps", "5"]) == [MODULE_MARK + "pkg.train", "--steps", "5"]
    assert module_argv(["-mpkg.train", "--", "-m", "x"]) == [MODULE_MARK + "pkg.train", "--", "-m", "x"]
    assert module_argv(["train.py", "-m", "x"]) == ["train.py", "-m", "x"]  # only where the script goes
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text("print(1)\n")
    cmd = ProfileCommand()
    parser = argparse.ArgumentParser()
    cmd.prepare_parser(parser)
    args = parser.parse_args(
        [*module_argv(["-m", "pkg.train", "--steps", "9", "--cwd", str(tmp_path), "--", "--epochs", "2"])]
    )
    cfg = cmd.config(args)
    assert cfg.module == "pkg.train" and cfg.script == (tmp_path / "pkg" / "train.py").resolve()
    assert cfg.steps == 9 and cfg.args == ["--epochs", "2"]
    # through the entry point: a module that is not there, and -m without a name, in one line each
    assert main(["profile", "-m", "pkg.missing", "--cwd", str(tmp_path), "--home", str(tmp_path / "h")]) == 2
    assert main(["profile", "-m", "--steps", "5", "--home", str(tmp_path / "h")]) == 2
    err = capsys.readouterr().err
    assert "-m pkg.missing: no pkg/missing.py under" in err and "-m needs a module name" in err
    assert "Traceback" not in err


def test_fix_of_a_module_refuses_to_copy_a_folder_too_big_or_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfdoctor.errors import UsageError
    from tfdoctor.fixes import workspace

    (tmp_path / "pkg").mkdir()
    for i in range(4):
        (tmp_path / "pkg" / f"m{i}.py").write_text("")
    workspace.check_module_root(tmp_path)  # a project's folder: fine
    monkeypatch.setattr(workspace, "MAX_ROOT_FILES", 3)
    with pytest.raises(UsageError, match="more than 3 files there"):
        workspace.check_module_root(tmp_path)
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path))
    with pytest.raises(UsageError, match="your home folder"):
        workspace.check_module_root(tmp_path)
