"""``tfdoctor profile <corpus script> --fix`` on a fast subset of examples/corpus/ (real TensorFlow runs,
copies of the scripts, few steps).

Asserted deterministically: which fixes are tried (their edit found where the shape puts it) and which
are skipped before any run with a true reason, that no trial crashed on an edit in the wrong place, and
that the user's files are untouched. Speed is asserted only where the margin is large (tf.function on
an eager Keras 3 ``optimizer.apply`` loop); the whole corpus is measured in benchmarks/corpus_fix.py.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tfdoctor.cli import main
from tfdoctor.store import RunStore

pytestmark = pytest.mark.integration
CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
#: few steps, a fixed warm-up (long enough for a tf.function's tracing), one paired round at most
OPTS = ["--steps", "24", "--warmup", "6", "--profile-steps", "3", "--fix-rounds", "1"]


def _copy(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "user"
    folder.mkdir(exist_ok=True)
    return Path(shutil.copy(CORPUS / name, folder / name))


def _hashes(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _fix(tfd_home: Path, tmp_path: Path, name: str, only: str) -> dict:
    script = _copy(tmp_path, name)
    before = _hashes(script.parent)
    rc = main(
        ["profile", str(script), *OPTS, "--run-id", "base", "--fix", "--only", only, "--", "--epochs", "1"]
    )
    assert rc == 0
    assert _hashes(script.parent) == before  # no --apply: the user's files are untouched
    fix = RunStore(tfd_home).get("base").report().fix
    assert fix is not None
    return {t.fix_id: t for t in fix.trials}


def test_eager_keras3_apply_loop_gets_tf_function_decided_by_what_ran(tfd_home, tmp_path):
    # the file also defines @tf.function versions of the step; the profiled loop is the eager one
    trials = _fix(tfd_home, tmp_path, "eager_apply.py", "tf-function,steps-per-execution")
    tf_fn = trials["tf-function"]
    assert tf_fn.status == "kept", tf_fn.reason
    assert tf_fn.speedup is not None and tf_fn.speedup > 1.3  # eager → graph: a large margin
    assert "+    optimizer.apply(grads, model.trainable_weights)" in tf_fn.patch  # the step ends at apply
    assert "return tape" not in tf_fn.patch and "+    return loss_value" in tf_fn.patch
    assert "+    train_acc_metric.update_state(y_batch_train, logits)" in tf_fn.patch  # the metric too
    spe = trials["steps-per-execution"]
    assert spe.status == "skipped" and "custom training loop" in spe.reason


def test_gan_with_an_overridden_compile_gets_steps_per_execution_in_super_compile(tfd_home, tmp_path):
    trials = _fix(tfd_home, tmp_path, "gan_fit.py", "tf-function,steps-per-execution")
    tf_fn = trials["tf-function"]
    assert tf_fn.status == "skipped" and "fit already compiles" in tf_fn.reason
    assert "steps-per-execution" in tf_fn.reason  # says which fixes apply instead
    spe = trials["steps-per-execution"]
    # measured, not crashed on compile()'s own signature (the bug: "unexpected keyword argument")
    assert spe.status in ("kept", "rejected"), (spe.status, spe.reason, spe.error)
    assert spe.throughput is not None
    assert "+        super().compile(steps_per_execution=8)" in spe.patch


def test_class_trainer_gets_its_step_method_compiled_and_its_generator_method_prefetched(tfd_home, tmp_path):
    trials = _fix(tfd_home, tmp_path, "class_trainer.py", "tf-function,generator-prefetch")
    for fix_id, edit in (
        ("tf-function", "+    @tf.function\n     def step(self, x, y):"),
        ("generator-prefetch", "enumerate(tfdoctor_prefetch(self.batches()))"),
    ):
        t = trials[fix_id]
        assert t.status in ("kept", "rejected"), (fix_id, t.status, t.reason, t.error)  # measured
        assert t.throughput is not None and edit in t.patch, (fix_id, t.patch)
