"""Each codemod on the code shapes real users write (issue 13): before/after per shape, and the unchanged
case with its reason. No TensorFlow is imported: these are source transforms. The corpus scripts
themselves (examples/corpus/) are checked at the end: which fixes find their pattern in each."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tfdoctor.fixes import FixContext, Hardware, all_fixes, get_fix
from tfdoctor.model import BetweenFits, Facts, Finding, GapPredict, HostCall, KerasBatchCall
from tfdoctor.session.fix_loop import user_lines

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
BF16 = Hardware(cpu_bf16=True)


def d(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def run(fix_id: str, before: str, **ctx: object):
    return get_fix(fix_id).apply(d(before), FixContext(**ctx))  # type: ignore[arg-type]


def assert_codemod(fix_id: str, before: str, after: str, **ctx: object) -> str:
    out = run(fix_id, before, **ctx)
    assert out.status == "changed", out.reason
    assert out.code == d(after)
    ast.parse(out.code)
    return out.reason


def assert_skipped(fix_id: str, before: str, why: str, **ctx: object) -> str:
    """The fix leaves ``before`` as it is, saying ``why``; returns its whole reason."""
    out = run(fix_id, before, **ctx)
    assert out.status == "skipped", out.reason
    assert out.code == d(before)
    assert why in out.reason, out.reason
    return out.reason


# -- tf-function -----------------------------------------------------------------------------------
TRAINER = """
import tensorflow as tf


class Trainer:
    def step(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=True))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    def fit(self):
        for x, y in self.batches():
            self.step(x, y)
"""


def test_tf_function_decorates_a_step_method_of_a_class() -> None:
    reason = assert_codemod(
        "tf-function",
        TRAINER,
        TRAINER.replace("    def step(self", "    @tf.function\n    def step(self"),
        facts=Facts(step_kind="eager", loop_kind="custom"),
    )
    assert "Trainer.step()" in reason


DERIVATIVES = """
import tensorflow as tf


class PINN:
    def residual(self):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(self.x)
            u = self.model(self.x)
            u_x = tape.gradient(u, self.x)
        return u_x - tape.gradient(u_x, self.x)

    def penalty(self):
        return tf.reduce_mean(tf.square(self.residual()))

    def grad(self):
        with tf.GradientTape() as tape:
            loss = self.penalty()
        return loss, tape.gradient(loss, self.model.trainable_variables)

    def fit(self, epochs):
        for epoch in range(epochs):
            loss, grads = self.grad()
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
"""


def test_tf_function_compiles_the_step_not_a_derivative_tape_it_calls() -> None:
    # residual() holds a tape too (derivatives of u with respect to the inputs), called by grad() through
    # penalty(): it is part of the step; compiled alone it left the step eager (0.60x measured on a PINN)
    reason = assert_codemod(
        "tf-function",
        DERIVATIVES,
        DERIVATIVES.replace(
            """        for epoch in range(epochs):
            loss, grads = self.grad()
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
""",
            """        @tf.function
        def train_step():
            loss, grads = self.grad()
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
            return loss

        for epoch in range(epochs):
            loss = train_step()
""",
        ),
        facts=Facts(step_kind="eager", loop_kind="custom"),
    )
    assert "grad() and the optimizer update after it" in reason


SEVERAL_STEPS = """
import tensorflow as tf

for epoch in range(2):
    for x, y in train_dataset:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss_value = loss_fn(y, logits)
        grads = tape.gradient(loss_value, model.trainable_weights)
        optimizer.apply(grads, model.trainable_weights)
        train_acc_metric.update_state(y, logits)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply(grads, model.trainable_weights)
    return loss_value
"""


def test_tf_function_decides_from_what_ran_when_the_file_has_several_steps() -> None:
    # the run's facts: the profiled step was eager, its optimizer update at line 10 (the eager loop);
    # the metric update right after it goes into the step (a global metric: TF state, no retrace); the
    # loss is returned although the loop does not read it: the run's hooks read the loss there
    ran = Facts(step_kind="eager", loop_kind="custom", source={"apply_gradients": "/tmp/w/train.py:10"})
    assert_codemod(
        "tf-function",
        SEVERAL_STEPS,
        """
        import tensorflow as tf

        @tf.function
        def train_step_2(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss_value = loss_fn(y, logits)
            grads = tape.gradient(loss_value, model.trainable_weights)
            optimizer.apply(grads, model.trainable_weights)
            train_acc_metric.update_state(y, logits)
            return loss_value

        for epoch in range(2):
            for x, y in train_dataset:
                loss_value = train_step_2(x, y)


        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss_value = loss_fn(y, logits)
            grads = tape.gradient(loss_value, model.trainable_weights)
            optimizer.apply(grads, model.trainable_weights)
            return loss_value
        """,
        facts=ran,
        filename="train.py",
    )
    # without the run's facts the file alone says the step is compiled
    assert_skipped("tf-function", SEVERAL_STEPS, "already a tf.function (train_step)")
    # the facts say the profiled step was a tf.function: not tried at all
    assert_skipped(
        "tf-function",
        SEVERAL_STEPS,
        "already runs as a tf.function (train.py:14)",
        facts=Facts(step_kind="tf.function", loop_kind="custom", source={"step_fn": "/w/train.py:14"}),
    )


COMPILE_FLAG = """
import tensorflow as tf

def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

if not args.eager:
    train_step = tf.function(train_step)

for x, y in ds:
    loss = train_step(x, y)
"""


def test_tf_function_decorates_a_step_the_script_wraps_only_when_a_flag_says_so() -> None:
    # user repositories keep a debugging flag: `if not args.eager: train_step = tf.function(train_step)`
    # (or `compiled = tf.function(step)` used by another loop); run with the flag on, the facts say the
    # step ran eagerly at the def: "no training step found" was said before, the step being "wrapped"
    ran = Facts(step_kind="eager", loop_kind="custom", source={"step_fn": "/w/train.py:4"})
    out = get_fix("tf-function").apply(COMPILE_FLAG, FixContext(facts=ran, filename="train.py"))
    assert out.changed, out.reason
    assert "@tf.function\ndef train_step(x, y):" in out.code
    assert "train_step = tf.function(train_step)" in out.code  # left: a tf.function of one still works
    assert "the run called it eagerly, not through the tf.function(train_step)" in out.reason
    # the run went through the wrapper (a tf.function step): nothing to do
    compiled = Facts(step_kind="tf.function", loop_kind="custom", source={"step_fn": "/w/train.py:4"})
    assert get_fix("tf-function").apply(
        COMPILE_FLAG, FixContext(facts=compiled, filename="train.py")
    ).status == ("skipped")


def test_tf_function_never_returns_the_tape_with_keras3_apply() -> None:
    # the extracted step ends at optimizer.apply (Keras 3), not at the tape block
    out = run(
        "tf-function",
        """
        import tensorflow as tf
        for x, y in ds:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_weights)
            optimizer.apply(grads, model.trainable_weights)
            print(float(loss))
        """,
    )
    assert out.status == "changed", out.reason
    step = out.code.split("def train_step")[1].split("\n\n")[0]
    assert "optimizer.apply(grads" in step and "return loss" in step and "tape\n" not in step
    # the tape used after the update: the step cannot be cut there, said before any run
    assert_skipped(
        "tf-function",
        """
        import tensorflow as tf
        for x, y in ds:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_weights)
            optimizer.apply(grads, model.trainable_weights)
            more = tape.gradient(loss, extra)
        """,
        "the gradient tape 'tape'",
    )


def test_dataset_apply_is_not_an_optimizer_update() -> None:
    assert_skipped(
        "tf-function",
        """
        import tensorflow as tf
        for batch in ds:
            ds2 = ds.apply(tf.data.experimental.ignore_errors())
        """,
        "no training step found",
    )


GAN = """
import keras
import tensorflow as tf


class GAN(keras.Model):
    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.loss_fn = loss_fn

    def train_step(self, real):
        with tf.GradientTape() as tape:
            predictions = self.discriminator(real)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        return {"d_loss": d_loss}


gan = GAN()
gan.compile(d_optimizer=keras.optimizers.Adam(2e-4), g_optimizer=keras.optimizers.Adam(2e-4), loss_fn=bce)
gan.fit(dataset, epochs=1)
"""


def test_tf_function_skips_a_keras_train_step_override_saying_what_applies() -> None:
    assert_skipped("tf-function", GAN, "fit already compiles it into a tf.function")
    assert_skipped("tf-function", GAN, "xla-jit and steps-per-execution are the fixes that apply")
    assert_skipped(
        "tf-function", GAN, "Keras fit already compiles the training step", facts=Facts(loop_kind="keras_fit")
    )
    # what applies is what the other fixes' own checks let apply: XLA already on, then neither
    assert_skipped(
        "tf-function",
        GAN,
        "xla-jit does not: the step is already XLA-compiled",
        facts=Facts(loop_kind="keras_fit", jit_compile=True),
    )
    assert_skipped(
        "tf-function",
        GAN,
        "tf.function: xla-jit and steps-per-execution do not apply here either: xla-jit: the step is already "
        "XLA-compiled; steps-per-execution: steps_per_execution is already 8",
        facts=Facts(loop_kind="keras_fit", jit_compile=True, steps_per_execution=8),
    )


def test_tf_function_turns_off_the_scripts_own_eager_switches() -> None:
    """Debugging settings left in: fit with compile(run_eagerly=True) runs its step op by op, and
    tf.config.run_functions_eagerly(True) makes every @tf.function eager. The run's facts say so (an
    eager fit step; functions_run_eagerly), and the fix switches them off where they are written."""
    fit = """
        import tensorflow as tf
        model.compile(optimizer="adam", loss="mse", run_eagerly=True)
        model.run_eagerly = True
        model.fit(x, y)
        """
    assert_codemod(
        "tf-function",
        fit,
        fit.replace("run_eagerly=True", "run_eagerly=False").replace("= True", "= False"),
        facts=Facts(loop_kind="keras_fit", step_kind="eager"),
    )
    loop = """
        import tensorflow as tf
        tf.config.run_functions_eagerly(True)

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        """
    out = run(
        "tf-function", loop, facts=Facts(loop_kind="custom", step_kind="eager", functions_run_eagerly=True)
    )
    assert out.status == "changed" and "tf.config.run_functions_eagerly(False)" in out.code
    assert out.reason == (
        "tf.config.run_functions_eagerly(True) → False (line 2): the script's own switch to eager execution, turned off"
    )
    # an eager custom loop in a file that also compiles a model with run_eagerly=True (not the step's
    # cause): the step is compiled, the switch left alone
    mixed = (
        loop.replace("tf.config.run_functions_eagerly(True)\n", "")
        .replace("        @tf.function\n", "")
        .replace(
            "import tensorflow as tf\n",
            'import tensorflow as tf\n        probe.compile(loss="mse", run_eagerly=True)\n',
        )
    )
    out = run("tf-function", mixed, facts=Facts(loop_kind="custom", step_kind="eager"))
    assert out.status == "changed" and "run_eagerly=True" in out.code, out.reason
    assert out.reason.startswith("@tf.function on train_step()")
    # fit compiled as usual, or a switch the script computes (run_eagerly=args.debug): not touched
    assert_skipped(
        "tf-function",
        fit,
        "Keras fit already compiles",
        facts=Facts(loop_kind="keras_fit", step_kind="tf.function"),
    )
    debug = fit.replace("run_eagerly=True", "run_eagerly=args.debug").replace(
        "model.run_eagerly = True\n", ""
    )
    out = run("tf-function", debug, facts=Facts(loop_kind="keras_fit", step_kind="eager"))
    assert out.status == "skipped" and out.code == d(debug)


# a plain class (not a keras.Model) whose step method is *named* train_step, Keras 3 optimizer.apply,
# driven by the user's own loop: nothing compiles it but the user
PLAIN_TRAIN_STEP = """
import tensorflow as tf


class Trainer:
    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=True))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply(grads, self.model.trainable_variables)
        return loss


trainer = Trainer()
for x, y in dataset:
    loss = trainer.train_step(x, y)
"""


def test_tf_function_decorates_a_plain_class_method_named_train_step() -> None:
    after = PLAIN_TRAIN_STEP.replace("    def train_step(self", "    @tf.function\n    def train_step(self")
    for facts in (Facts(step_kind="eager", loop_kind="custom"), Facts()):
        reason = assert_codemod("tf-function", PLAIN_TRAIN_STEP, after, facts=facts)
        assert "Trainer.train_step()" in reason


def test_tf_function_decorates_a_keras_train_step_that_ran_eagerly_in_a_custom_loop() -> None:
    # a keras.Model subclass whose train_step the user's loop calls itself: the run's hooks saw it
    # run eagerly (its optimizer update at line 16), so fit is not what compiles it
    code = GAN.replace("gan.fit(dataset, epochs=1)", "for real in dataset:\n    gan.train_step(real)")
    ran = Facts(step_kind="eager", loop_kind="custom", source={"apply_gradients": "/w/gan.py:16"})
    after = code.replace("    def train_step(self", "    @tf.function\n    def train_step(self")
    reason = assert_codemod("tf-function", code, after, facts=ran, filename="gan.py")
    assert "GAN.train_step()" in reason
    # without those facts, a keras.Model's train_step is fit's to compile
    assert_skipped("tf-function", code, "fit already compiles it into a tf.function")


MIRRORED = """
import tensorflow as tf


def step_fn(inputs):
    x, y = inputs
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def train_step(inputs):
    per_replica = strategy.run(step_fn, args=(inputs,))
    return strategy.reduce("SUM", per_replica, axis=None)
"""


def test_tf_function_leaves_a_step_fn_that_strategy_run_calls_inside_a_tf_function() -> None:
    assert_skipped(
        "tf-function", MIRRORED, "step_fn() runs through strategy.run inside the tf.function train_step()"
    )
    out = run("xla-jit", MIRRORED)  # XLA goes on the tf.function that runs strategy.run
    assert out.status == "changed" and "@tf.function(jit_compile=True)\ndef train_step" in out.code
    # strategy.run from an eager function: that function is the one to compile
    eager = MIRRORED.replace("@tf.function\ndef train_step", "def train_step")
    reason = assert_codemod(
        "tf-function", eager, eager.replace("def train_step", "@tf.function\ndef train_step")
    )
    assert "which runs step_fn() through strategy.run" in reason


# -- generator-prefetch ----------------------------------------------------------------------------
def test_generator_prefetch_wraps_a_generator_method_and_a_nested_generator() -> None:
    out = run(
        "generator-prefetch",
        TRAINER.replace(
            "    def fit(self):", "    def batches(self):\n        yield 1\n\n    def fit(self):"
        ),
    )
    assert out.status == "changed", out.reason
    assert "for x, y in tfdoctor_prefetch(self.batches()):" in out.code
    nested = """
    import tensorflow as tf

    def main():
        def train_batches(n):
            for i in range(n):
                yield i, i

        for images, labels in train_batches(8):
            train_step(images, labels)
    """
    out = run("generator-prefetch", nested)
    assert out.status == "changed", out.reason
    assert "for images, labels in tfdoctor_prefetch(train_batches(8)):" in out.code


PYDATASET = """
import keras


class Seq(keras.utils.PyDataset):
    def __init__(self, x, y, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.x = x

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


train = Seq(x, y, 64)
model.fit(train, epochs=3)
"""


def test_generator_prefetch_sets_workers_on_a_pydataset_fed_to_fit() -> None:
    reason = assert_codemod(
        "generator-prefetch",
        PYDATASET,
        PYDATASET.replace("super().__init__(**kwargs)", "super().__init__(**kwargs, workers=4)"),
    )
    assert "workers=4 in Seq's super().__init__()" in reason
    assert_skipped(
        "generator-prefetch",
        PYDATASET.replace("train = Seq(x, y, 64)", "train = Seq(x, y, 64, workers=2)"),
        "Seq already sets workers",
    )
    # made with **opts: workers may be in there, and a second workers= would be a TypeError
    assert_skipped(
        "generator-prefetch",
        PYDATASET.replace("train = Seq(x, y, 64)", "train = Seq(x, y, 64, **loader_opts)"),
        "Seq is made with ** keyword arguments (line 13), which may set workers already",
    )


def test_generator_prefetch_sets_workers_on_a_pydataset_without_kwargs_or_without_init() -> None:
    # __init__ without **kwargs: super().__init__() takes the keyword itself
    no_kwargs = PYDATASET.replace("batch_size, **kwargs)", "batch_size)").replace(
        "super().__init__(**kwargs)", "super().__init__()"
    )
    assert_codemod(
        "generator-prefetch",
        no_kwargs,
        no_kwargs.replace("super().__init__()", "super().__init__(workers=4)"),
    )
    # no __init__ of its own: PyDataset.__init__ takes workers= where the instance is made
    no_init = """
    import keras


    class Seq(keras.utils.PyDataset):
        def __len__(self):
            return 10

        def __getitem__(self, idx):
            return X[idx], Y[idx]


    model.fit(Seq(), epochs=3)
    """
    reason = assert_codemod("generator-prefetch", no_init, no_init.replace("Seq()", "Seq(workers=4)"))
    assert "workers=4 where Seq is made (line 12; it has no __init__ of its own)" in reason
    # an __init__ that never calls super().__init__(): left alone, with the reason
    assert_skipped(
        "generator-prefetch",
        PYDATASET.replace("        super().__init__(**kwargs)\n", ""),
        "Seq.__init__ does not call super().__init__(): nowhere to set workers",
    )


TRAIN_ON_BATCH = """
import keras


def batch_generator(x, y, batch_size):
    while True:
        idx = rng.integers(0, len(x), batch_size)
        yield x[idx] / 255.0, y[idx]


gen = batch_generator(x_train, y_train, 64)
for epoch in range(3):
    for step in range(100):
        xb, yb = next(gen)
        loss, acc = model.train_on_batch(xb, yb)
"""


def test_generator_prefetch_wraps_a_generator_the_loop_takes_next_of() -> None:
    """``gen = batches(...)`` once, ``next(gen)`` in a ``train_on_batch`` loop (older Keras repositories):
    the assignment is wrapped, so ``next`` takes from the prefetcher."""
    out = run("generator-prefetch", TRAIN_ON_BATCH)
    assert out.status == "changed", out.reason
    helper_at = out.code.index("def tfdoctor_prefetch(")
    assert helper_at < out.code.index("def batch_generator(")
    assert out.code.replace(out.code[helper_at : out.code.index("def batch_generator(")], "") == d(
        TRAIN_ON_BATCH.replace(
            "gen = batch_generator(x_train, y_train, 64)",
            "gen = tfdoctor_prefetch(batch_generator(x_train, y_train, 64))",
        )
    )
    assert "batch_generator() at line 10 (as gen) runs in a background thread" in out.reason
    # next(gen) in a while loop that calls a step function, and a for loop iterating the name: the same
    loop_body = (
        "for epoch in range(3):\n    for step in range(100):\n        xb, yb = next(gen)\n"
        "        loss, acc = model.train_on_batch(xb, yb)"
    )
    for loop in (
        "it = 0\nwhile it < 300:\n    xb, yb = next(gen)\n    train_step(xb, yb)\n    it += 1",
        "for xb, yb in gen:\n    train_step(xb, yb)",
    ):
        src = TRAIN_ON_BATCH.replace(loop_body, loop)
        assert loop in src
        out = run("generator-prefetch", src)
        assert out.status == "changed", (loop, out.reason)
        assert "gen = tfdoctor_prefetch(batch_generator(" in out.code
    # a generator made once and handed to fit by name (the old fit_generator shape)
    fit = TRAIN_ON_BATCH.split("for epoch")[0] + "model.fit(gen, steps_per_epoch=100, epochs=3)\n"
    out = run("generator-prefetch", fit)
    assert out.status == "changed" and "gen = tfdoctor_prefetch(batch_generator(" in out.code
    assert "model.fit(gen, steps_per_epoch=100, epochs=3)" in out.code
    # next(gen) outside any training loop (a batch drawn to look at): nothing feeds training
    assert_skipped(
        "generator-prefetch",
        TRAIN_ON_BATCH.split("for epoch")[0] + "sample = next(gen)\nprint(sample[0].shape)\n",
        "no Python generator feeds the training loop",
    )


def test_generator_prefetch_unchanged_without_a_generator() -> None:
    assert_skipped(
        "generator-prefetch", "import tensorflow as tf\nmodel.fit(x, y)\n", "no Python generator function"
    )


def test_generator_cache_says_why_a_generator_method_is_not_cached() -> None:
    assert_skipped(
        "generator-cache",
        TRAINER.replace(
            "    def fit(self):", "    def batches(self):\n        yield 1\n\n    def fit(self):"
        ),
        "the generator(s) Trainer.batches() call no function of the script",
    )


KFOLD = """
import numpy as np
from tensorflow import keras
from tensorflow.keras import backend as K


def kfold_split(n, n_splits):
    folds = np.array_split(np.random.permutation(n), n_splits)
    for k in range(n_splits):
        yield np.concatenate([f for j, f in enumerate(folds) if j != k]), folds[k]


def batches(x, y, size):
    for i in range(0, len(x), size):
        yield normalise(x[i : i + size]), y[i : i + size]


def normalise(x):
    return (x - x.mean()) / x.std()


for fold, (tr, va) in enumerate(kfold_split(len(X), 5)):
    K.clear_session()
    model = build_model()
    model.fit(X[tr], y[tr], validation_data=(X[va], y[va]), batch_size=256)
"""


def test_generator_cache_tells_a_fold_splitter_from_a_batch_generator() -> None:
    """Kaggle's K-fold notebooks: ``for fold, (tr, va) in enumerate(kfold_split(...)):`` around a whole
    ``fit()``: the generator hands out folds. generator-cache said "the generator(s) kfold_split() call no
    function of the script ... per-example work written inline in the generator is not cached", as if it
    made batches. A generator a loop over batches iterates (the step in its body) is still a source."""
    assert_skipped(
        "generator-cache",
        KFOLD.replace(KFOLD[KFOLD.index("def batches") : KFOLD.index("for fold")], ""),
        "no Python generator of batches in the script: kfold_split() (the loop at line 12) hands out what a "
        "loop around a whole training iterates (folds, epochs)",
    )
    custom = KFOLD.replace(
        "    model.fit(X[tr], y[tr], validation_data=(X[va], y[va]), batch_size=256)\n",
        "    for xb, yb in batches(X[tr], y[tr], 256):\n        train_step(xb, yb)\n",
    )
    out = run("generator-cache", custom)
    assert out.changed, out.reason  # normalise(), the work batches() calls, is cached
    assert "normalise()" in out.reason and "kfold_split" not in out.reason, out.reason


def test_mixed_precision_sets_the_policy_again_after_clear_session() -> None:
    """Keras's ``clear_session()`` resets the global dtype policy to float32 (checked, Keras 3.15): a K-fold
    notebook calls it before each fold's ``build_model()``, so the policy set after the imports never
    reached a model; the trial's facts said "not applied: the dtype policy float32". It is now set again
    after each clear_session() statement."""
    out = run("mixed-precision", KFOLD, hardware=BF16)
    assert out.changed, out.reason
    assert (
        '    K.clear_session()\n    keras.mixed_precision.set_global_policy("mixed_bfloat16")\n    model = build_model()'
        in out.code
    ), out.code
    assert "set again after clear_session() (line 22), which resets it to float32" in out.reason


# -- mixed-precision -------------------------------------------------------------------------------
NOTEBOOK = '''
"""# A notebook export"""
import numpy as np

"""
## Load the data
"""
x = np.zeros((8, 4))

# %%
import tensorflow as tf
from tensorflow import keras

inputs = keras.Input(shape=(4,))
outputs = keras.layers.Dense(1)(keras.layers.Dense(8)(inputs))
model = keras.Model(inputs, outputs)
with tf.GradientTape() as tape:
    loss = loss_fn(y, model(x))

"""
## Plot
"""
import matplotlib.pyplot as plt
'''


def test_mixed_precision_policy_goes_before_the_model_in_a_notebook_export() -> None:
    reason = assert_codemod(
        "mixed-precision",
        NOTEBOOK,
        NOTEBOOK.replace(
            "from tensorflow import keras\n",
            'from tensorflow import keras\n\nkeras.mixed_precision.set_global_policy("mixed_bfloat16")\n',
        ).replace("outputs = keras.layers.Dense(1)(", 'outputs = keras.layers.Dense(1, dtype="float32")('),
        hardware=BF16,
    )
    assert "output layer of the model computing the loss: model" in reason


def test_mixed_precision_keeps_a_softmax_activation_after_the_last_dense_float32() -> None:
    src = """
    from tensorflow.keras.layers import Activation, Dense
    from tensorflow.keras.models import Sequential
    import tensorflow as tf

    model = Sequential()
    model.add(Dense(64))
    model.add(Dense(5))
    model.add(Activation("softmax"))
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    """
    out = run("mixed-precision", src, hardware=BF16)
    assert out.status == "changed", out.reason
    assert 'model.add(Activation("softmax", dtype="float32"))' in out.code
    assert "model.add(Dense(5))" in out.code


ENDPOINT = """
import keras
from keras import layers


class CTCLayer(layers.Layer):
    def __init__(self, name=None):
        super().__init__(name=name)

    def call(self, y_true, y_pred):
        self.add_loss(ctc_batch_cost(y_true, y_pred))
        return y_pred


def build_model():
    input_img = layers.Input(shape=(200, 50, 1), name="image")
    labels = layers.Input(name="label", shape=(None,))
    x = layers.Conv2D(32, 3, padding="same")(input_img)
    x = layers.Dense(
        21, activation="softmax", name="dense2"
    )(x)
    output = CTCLayer(name="ctc_loss")(labels, x)
    model = keras.models.Model(inputs=[input_img, labels], outputs=output)
    model.compile(optimizer=keras.optimizers.Adam())
    return model


model = build_model()
model.fit(train_dataset, epochs=1)
"""


def test_mixed_precision_keeps_the_prediction_fed_to_an_endpoint_layer_float32() -> None:
    """keras-io's OCR captcha: the model's output is ``CTCLayer(name="ctc_loss")(labels, x)``, a layer of
    the script's that adds the CTC loss and takes no dtype. It was "output layer not found ... make sure
    it computes in float32" and the softmax it is given stayed bf16; now that softmax ``Dense`` keeps
    float32 (the labels' ``Input`` is no layer to change), the call laid out over lines keeping its
    closing parenthesis where it was."""
    out = run("mixed-precision", ENDPOINT, hardware=BF16)
    assert out.status == "changed", out.reason
    assert (
        '    x = layers.Dense(\n        21, activation="softmax", name="dense2", dtype="float32"\n    )(x)\n'
        in out.code
    ), out.code
    assert 'CTCLayer(name="ctc_loss")(labels, x)' in out.code  # the endpoint itself left as written
    assert out.code.count("float32") == 1
    assert (
        "kept float32: Dense at line 18 (model, fed to its output CTCLayer, which takes no dtype)"
        in out.reason
    )
    # an endpoint whose inputs are all Inputs: nothing to keep, said as it is
    bare = ENDPOINT.replace("(labels, x)", "(labels, input_img)")
    out = run("mixed-precision", bare, hardware=BF16)
    assert (
        "output layer not found" in out.reason
        and "CTCLayer (defined in the script) takes no dtype" in out.reason
    )


OP_OUTPUT = """
import keras
from keras import layers, ops


class Scorer(keras.Model):
    def __init__(self):
        super().__init__()
        self.user = layers.Embedding(100, 8)
        self.item = layers.Embedding(50, 8)

    def call(self, inputs):
        x = ops.sum(self.user(inputs[:, 0]) * self.item(inputs[:, 1]), axis=1)
        return ops.sigmoid(x)


model = Scorer()
model.compile(optimizer="adam", loss="binary_crossentropy")
model.fit(x, y, batch_size=64)
"""


def test_mixed_precision_casts_the_input_of_the_op_a_subclassed_models_call_returns() -> None:
    """keras-io's collaborative filtering: ``RecommenderNet.call()`` ends in ``tf.nn.sigmoid(x)``, no
    output layer to give ``dtype="float32"``; it was "output layer not found ... make sure it computes in
    float32" and the sigmoid ran in bf16. The activation's input is now cast (``keras.ops.cast`` where
    tensorflow is not imported); a value returned as it is (``return x, state``) is cast itself; a dict
    of outputs is left alone, said as it is."""
    reason = assert_codemod(
        "mixed-precision",
        OP_OUTPUT,
        OP_OUTPUT.replace(
            "return ops.sigmoid(x)", 'return ops.sigmoid(keras.ops.cast(x, "float32"))'
        ).replace(
            "\n\nclass Scorer",
            '\nkeras.mixed_precision.set_global_policy("mixed_bfloat16")\n\n\nclass Scorer',
        ),
        hardware=BF16,
    )
    assert (
        "kept float32: ops.sigmoid's input x at line 13 cast (Scorer.call() returns an op, not a layer)"
        in reason
    )
    plain = OP_OUTPUT.replace("import keras\n", "import keras\nimport tensorflow as tf\n").replace(
        "return ops.sigmoid(x)", "return x + 1.0, x"
    )
    out = run("mixed-precision", plain, hardware=BF16)
    assert 'return tf.cast(x + 1.0, "float32"), x' in out.code, out.code
    assert "the value returned, x + 1.0, at line 14 cast" in out.reason
    outputs = OP_OUTPUT.replace("return ops.sigmoid(x)", 'return {"score": ops.sigmoid(x)}')
    out = run("mixed-precision", outputs, hardware=BF16)
    assert "cast(" not in out.code
    assert "Scorer.call() does not return a layer built in __init__" in out.reason


def test_mixed_precision_keeps_normalization_layers_float32_but_not_batch_or_layer_norm() -> None:
    """TensorFlow's regression and structured-data tutorials: ``Normalization`` adapted on the data.
    Under a bf16 policy its ``adapt()`` on a dataset fails; BatchNormalization / LayerNormalization are
    model layers the policy is for."""
    src = """
    import numpy as np
    import tensorflow as tf

    normalizer = tf.keras.layers.Normalization(axis=-1)
    normalizer.adapt(np.array(train_features))
    scaled = tf.keras.layers.Normalization(axis=None, dtype="float64")
    model = tf.keras.Sequential([normalizer, tf.keras.layers.Dense(64), tf.keras.layers.BatchNormalization(),
                                 tf.keras.layers.LayerNormalization(), tf.keras.layers.Dense(1)])
    model.compile(loss="mean_absolute_error", optimizer=tf.keras.optimizers.Adam(0.001))
    """
    out = run("mixed-precision", src, hardware=BF16)
    assert out.status == "changed", out.reason
    assert 'normalizer = tf.keras.layers.Normalization(axis=-1, dtype="float32")' in out.code
    assert 'Normalization(axis=None, dtype="float64")' in out.code  # the script's own dtype stays
    assert "tf.keras.layers.BatchNormalization()," in out.code
    assert "tf.keras.layers.LayerNormalization()," in out.code
    assert 'tf.keras.layers.Dense(1, dtype="float32")' in out.code
    assert "kept float32: Normalization at line 4 (a preprocessing layer" in out.reason


def test_mixed_precision_keeps_a_normalization_layer_float32_in_the_module_that_builds_the_model() -> None:
    """The model and its Normalization layer built in ``model.py`` beside the script: both edits land
    there, and the reason names both."""
    project = {
        "model.py": (
            "import keras\n\n\ndef build(data):\n    norm = keras.layers.Normalization()\n"
            "    norm.adapt(data)\n    return keras.Sequential([norm, keras.layers.Dense(8), keras.layers.Dense(1)])\n"
        )
    }
    src = "import keras\nimport model\n\nm = model.build(x)\nm.compile(loss='mse', optimizer='adam')\nm.fit(x, y)\n"
    out = get_fix("mixed-precision").apply(
        src, FixContext(hardware=BF16, project=project, filename="train.py")
    )
    assert out.changed, out.reason
    assert 'keras.layers.Normalization(dtype="float32")' in out.files["model.py"]
    assert 'keras.layers.Dense(1, dtype="float32")' in out.files["model.py"]
    assert "kept float32: Normalization at line 5" in out.reason


def test_tfdata_parallel_map_says_a_map_on_a_helpers_parameter_is_not_known_to_be_a_pipeline() -> None:
    reason = assert_skipped(
        "tfdata-parallel-map",
        """
        def get_normalization_layer(name, dataset):
            normalizer = layers.Normalization(axis=None)
            normalizer.adapt(dataset.map(lambda x, y: x[name]))
            return normalizer
        """,
        "no map/interleave on a tf.data pipeline the script builds (.map() at line 3: on a name not known",
    )
    assert "no tf.data map/interleave found" not in reason


def test_mixed_precision_with_only_from_imports_adds_import_keras() -> None:
    """A blog's Transformer: ``from keras import Model, layers`` and ``from tensorflow import ...``, no
    name bound to keras or tensorflow (it had been "the script imports neither tensorflow nor keras")."""
    assert_codemod(
        "mixed-precision",
        """
        \"\"\"Train.\"\"\"
        from keras import Model, layers
        from tensorflow import GradientTape

        inputs = layers.Input((8,))
        model = Model(inputs, layers.Dense(4)(inputs))
        """,
        """
        \"\"\"Train.\"\"\"
        from keras import Model, layers
        from tensorflow import GradientTape
        import keras

        keras.mixed_precision.set_global_policy("mixed_bfloat16")

        inputs = layers.Input((8,))
        model = Model(inputs, layers.Dense(4, dtype="float32")(inputs))
        """,
        hardware=BF16,
    )


def test_mixed_precision_finds_each_builder_functions_own_output_layer() -> None:
    """The pix2pix tutorial: Generator() and Discriminator() both write ``x = layer(...)(x)``; each
    model's output is the last ``x`` of its own function (Generator's had been Discriminator's LeakyReLU)."""
    src = """
    import tensorflow as tf

    def Generator():
        inputs = tf.keras.layers.Input(shape=[32, 32, 3])
        x = tf.keras.layers.Conv2D(16, 4, strides=2, padding="same")(inputs)
        x = tf.keras.layers.Conv2DTranspose(3, 4, strides=2, padding="same", activation="tanh")(x)
        return tf.keras.Model(inputs=inputs, outputs=x)

    def Discriminator():
        inp = tf.keras.layers.Input(shape=[32, 32, 3])
        x = tf.keras.layers.Conv2D(16, 4, strides=2, padding="same")(inp)
        x = tf.keras.layers.LeakyReLU()(x)
        last = tf.keras.layers.Conv2D(1, 4, strides=1, padding="same")(x)
        return tf.keras.Model(inputs=inp, outputs=last)

    generator = Generator()
    discriminator = Discriminator()
    """
    out = run("mixed-precision", src, hardware=BF16)
    assert out.status == "changed", out.reason
    assert 'activation="tanh", dtype="float32")(x)' in out.code
    assert 'Conv2D(1, 4, strides=1, padding="same", dtype="float32")(x)' in out.code
    assert "tf.keras.layers.LeakyReLU()(x)" in out.code
    assert "Conv2DTranspose at line 6 (Generator())" in out.reason


def test_mixed_precision_keeps_the_gan_discriminator_logits_float32_not_the_generator() -> None:
    src = """
    import keras
    import tensorflow as tf

    discriminator = keras.Sequential([keras.layers.Dense(64), keras.layers.Dense(1)])
    generator = keras.Sequential([keras.layers.Dense(64), keras.layers.Dense(784, activation="tanh")])


    class GAN(keras.Model):
        def train_step(self, real):
            fake = self.generator(noise)
            combined = ops.concatenate([fake, real])
            with tf.GradientTape() as tape:
                predictions = self.discriminator(combined)
                d_loss = self.loss_fn(labels, predictions)
            return {"d_loss": d_loss}
    """
    out = run("mixed-precision", src, hardware=BF16)
    assert out.status == "changed", out.reason
    assert 'keras.layers.Dense(1, dtype="float32")' in out.code
    assert 'keras.layers.Dense(784, activation="tanh")' in out.code  # the generator's output stays bf16
    assert "discriminator: its output reaches" in out.reason


def test_mixed_precision_unchanged_when_keras_is_only_imported_inside_a_function() -> None:
    assert_skipped(
        "mixed-precision",
        "def main():\n    import keras\n    model = keras.Sequential([keras.layers.Dense(1)])\n",
        "is not imported at the top level",
        hardware=BF16,
    )


# -- an overridden compile(): steps-per-execution, xla-jit ---------------------------------------------
def test_compile_settings_go_into_super_compile_of_an_overridden_compile() -> None:
    for fix_id, kw in (("steps-per-execution", "steps_per_execution=8"), ("xla-jit", "jit_compile=True")):
        reason = assert_codemod(fix_id, GAN, GAN.replace("super().compile()", f"super().compile({kw})"))
        assert "super().compile() in GAN.compile(), which gan.compile() calls" in reason


def test_compile_settings_skipped_where_they_would_crash() -> None:
    no_super = GAN.replace("        super().compile()\n", "")
    assert_skipped("steps-per-execution", no_super, "without calling super().compile()")
    assert_skipped(
        "xla-jit", no_super.replace("def train_step", "def other"), "without calling super().compile()"
    )
    imported = "import keras\nfrom gans import GAN\ngan = GAN()\ngan.compile(d_optimizer=a, g_optimizer=b, loss_fn=c)\n"
    assert_skipped("steps-per-execution", imported, "takes d_optimizer, g_optimizer, loss_fn")


# -- batch-scale -----------------------------------------------------------------------------------
def test_batch_scale_scales_every_optimizer_and_makes_a_default_rate_explicit() -> None:
    reason = assert_codemod(
        "batch-scale",
        """
        import keras
        batch_size = 64
        d_opt = keras.optimizers.Adam(learning_rate=0.0002, beta_1=0.5)
        g_opt = keras.optimizers.SGD()
        """,
        """
        import keras
        batch_size = 256
        d_opt = keras.optimizers.Adam(learning_rate=0.0004, beta_1=0.5)
        g_opt = keras.optimizers.SGD(learning_rate=0.04)
        """,
        params={"factor": "4"},
    )
    assert "Adam at line 3: 0.0002 → 0.0004 (square-root scaling for Adam)" in reason
    assert "SGD at line 4: default 0.01 made explicit, → 0.04 (linear scaling for SGD)" in reason


def test_batch_scale_scales_an_optimizer_class_of_the_scripts_own() -> None:
    # keras-io's gradient centralization (copied into many repositories): class GCRMSprop(RMSprop), built
    # with a rate and fitted second; before, only the plain RMSprop was scaled, the subclass left silently
    reason = assert_codemod(
        "batch-scale",
        """
        import keras
        from keras.optimizers import RMSprop, SGD
        batch_size = 32
        class GCRMSprop(RMSprop):
            def get_gradients(self, loss, params):
                return super().get_gradients()
        class Nesterov(keras.optimizers.SGD):
            pass
        class Warm(Nesterov):
            pass
        first = RMSprop(learning_rate=1e-4)
        optimizer = GCRMSprop(1e-4)
        sgd = Warm()
        """,
        """
        import keras
        from keras.optimizers import RMSprop, SGD
        batch_size = 128
        class GCRMSprop(RMSprop):
            def get_gradients(self, loss, params):
                return super().get_gradients()
        class Nesterov(keras.optimizers.SGD):
            pass
        class Warm(Nesterov):
            pass
        first = RMSprop(learning_rate=0.0002)
        optimizer = GCRMSprop(0.0002)
        sgd = Warm(learning_rate=0.04)
        """,
        params={"factor": "4"},
    )
    assert (
        "GCRMSprop (a subclass of RMSprop) at line 12: 0.0001 → 0.0002 (square-root scaling for RMSprop)"
        in (reason)
    )
    assert "Warm (a subclass of SGD) at line 13: default 0.01 made explicit, → 0.04 (linear scaling" in reason


def test_batch_scale_does_not_guess_the_rate_of_an_optimizer_subclass_with_its_own_init() -> None:
    # its __init__ may take other arguments first (WarmupAdam(warmup_steps, ...)) or set a rate itself:
    # only a learning_rate= keyword is followed; anything else is said, and the patch says it too
    src = """
    import keras
    batch_size = 32
    class WarmupAdam(keras.optimizers.Adam):
        def __init__(self, warmup_steps, **kwargs):
            super().__init__(**kwargs)
            self.warmup_steps = warmup_steps
    a = WarmupAdam(1000)
    b = WarmupAdam(1000, learning_rate=3e-4)
    """
    out = run("batch-scale", src)
    assert out.changed
    assert "LEARNING RATE NOT SCALED" in out.reason
    assert "WarmupAdam (a subclass of Adam) at line 8: 0.0003 → 0.0004243" in out.reason
    # the patch's comment above the batch edit names the one left
    assert "WarmupAdam (a subclass of Adam) at line 7: its own __init__ takes the rate" in out.code
    assert "WarmupAdam(1000, learning_rate=0.000424264)" in out.code
    assert "a = WarmupAdam(1000)\n" in out.code


def test_batch_scale_follows_a_module_constant_and_a_string_optimizer() -> None:
    assert_codemod(
        "batch-scale",
        """
        from tensorflow.keras.optimizers import Adam
        INIT_LR = 1e-3
        BS = 32
        opt = Adam(learning_rate=INIT_LR)
        """,
        """
        from tensorflow.keras.optimizers import Adam
        INIT_LR = 0.002
        BS = 128
        opt = Adam(learning_rate=INIT_LR)
        """,
        params={"factor": "4"},
    )
    assert_codemod(
        "batch-scale",
        """
        import keras
        model.compile(optimizer="adam", loss="mse")
        model.fit(x, y, batch_size=32)
        """,
        """
        import keras
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.002), loss="mse")
        model.fit(x, y, batch_size=128)
        """,
        params={"factor": "4"},
    )


def test_batch_scale_follows_a_config_dict() -> None:
    """config = {"batch_size": 32, "lr": 1e-3} read as config["batch_size"] / config["lr"] (it had been
    "no batch size found to scale"); dict(...) the same."""
    assert_codemod(
        "batch-scale",
        """
        import tensorflow as tf
        config = {"batch_size": 32, "lr": 1e-3, "epochs": 3}
        opt = tf.keras.optimizers.Adam(config["lr"])
        model.fit(x, y, batch_size=config["batch_size"], epochs=config["epochs"])
        """,
        """
        import tensorflow as tf
        config = {"batch_size": 64, "lr": 0.00141421, "epochs": 3}
        opt = tf.keras.optimizers.Adam(config["lr"])
        model.fit(x, y, batch_size=config["batch_size"], epochs=config["epochs"])
        """,
        params={"factor": "2"},
    )
    out = run(
        "batch-scale",
        """
        import tensorflow as tf
        CFG = dict(batch_size=64, learning_rate=0.1)
        opt = tf.keras.optimizers.SGD(learning_rate=CFG["learning_rate"], momentum=0.9)
        """,
        params={"factor": "4"},
    )
    assert out.status == "changed" and "CFG = dict(batch_size=256, learning_rate=0.4)" in out.code
    assert 'CFG["learning_rate"] (line 2) 0.1 → 0.4 (linear scaling for SGD)' in out.reason


def test_batch_scale_follows_a_config_passed_to_main_and_a_config_dataclass() -> None:
    """Two ways user scripts keep their settings: ``CONFIG = {...}`` handed to ``main(config)``, read as
    ``config["learning_rate"]`` (the batch was scaled in the dict, the rate "not followed to a number":
    no dict is assigned to ``config``), and a ``@dataclass TrainConfig`` read as ``cfg.batch_size`` ("no
    batch size found to scale"); an ``ml_collections.ConfigDict`` filled attribute by attribute. The one
    dict of the script with the key, the one class field or attribute given a number under the name."""
    assert_codemod(
        "batch-scale",
        """
        import keras
        CONFIG = {"batch_size": 64, "learning_rate": 1e-3}
        def main(config):
            ds = make_dataset(config["batch_size"])
            model.compile(optimizer=keras.optimizers.Adam(learning_rate=config["learning_rate"]), loss="mse")
        main(CONFIG)
        """,
        """
        import keras
        CONFIG = {"batch_size": 128, "learning_rate": 0.00141421}
        def main(config):
            ds = make_dataset(config["batch_size"])
            model.compile(optimizer=keras.optimizers.Adam(learning_rate=config["learning_rate"]), loss="mse")
        main(CONFIG)
        """,
        params={"factor": "2"},
    )
    dataclass_cfg = """
        from dataclasses import dataclass
        import tensorflow as tf
        import keras
        @dataclass
        class TrainConfig:
            batch_size: int = 64
            learning_rate: float = 0.1
        def main(cfg: TrainConfig):
            ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(cfg.batch_size)
            opt = keras.optimizers.SGD(learning_rate=cfg.learning_rate, momentum=0.9)
        main(TrainConfig())
        """
    reason = assert_codemod(
        "batch-scale",
        dataclass_cfg,
        dataclass_cfg.replace("= 64", "= 256").replace("= 0.1", "= 0.4"),
        params={"factor": "4"},
    )
    assert "TrainConfig.batch_size = 256, line 6" in reason
    assert "TrainConfig.learning_rate (line 7) 0.1 → 0.4 (linear scaling for SGD)" in reason
    # an ml_collections ConfigDict filled in get_config(); a trainer copying it (self.bs = cfg.batch_size)
    mlc = """
        import ml_collections
        import keras
        def get_config():
            config = ml_collections.ConfigDict()
            config.batch_size = 128
            config.learning_rate = 0.1
            return config
        class Trainer:
            def __init__(self, config):
                self.batch_size = config.batch_size
                self.opt = keras.optimizers.SGD(config.learning_rate, momentum=0.9)
        """
    reason = assert_codemod(
        "batch-scale", mlc, mlc.replace("= 128", "= 256").replace("= 0.1", "= 0.2"), params={"factor": "2"}
    )
    assert "config.batch_size = 256, line 5" in reason and "config.learning_rate (line 6) 0.1 → 0.2" in reason
    # two dicts with the key: which one main() is given is not followed
    two = "import keras\nA = {'lr': 1e-3}\nB = {'lr': 1e-2}\nBATCH_SIZE = 32\nf(BATCH_SIZE)\nopt = keras.optimizers.Adam(c['lr'])\n"
    out = run("batch-scale", two, params={"factor": "2"})
    assert "LEARNING RATE NOT SCALED" in out.reason
    assert any("c['lr'] not followed to a number" in w for w in out.warnings), out.warnings


def test_batch_scale_scales_the_default_of_a_setting_read_from_the_environment(monkeypatch) -> None:
    """Scripts run in containers read their settings from the environment with a default: "no batch
    size found to scale". The default is scaled (a string default stays a string); a variable that is
    set decides the batch itself: skipped, as a batch size on the command line is."""
    src = """
    import os
    import keras
    BATCH_SIZE = int(os.environ.get("BATCH_SIZE", 64))
    LR = float(os.getenv("LR", "1e-3"))
    model.compile(optimizer=keras.optimizers.Adam(LR), loss="mse")
    model.fit(x, y, batch_size=BATCH_SIZE, epochs=3)
    """
    monkeypatch.delenv("BATCH_SIZE", raising=False)
    monkeypatch.delenv("LR", raising=False)
    reason = assert_codemod(
        "batch-scale",
        src,
        src.replace('"BATCH_SIZE", 64', '"BATCH_SIZE", 128').replace('"1e-3"', '"0.00141421"'),
        params={"factor": "2"},
    )
    assert "BATCH_SIZE: $BATCH_SIZE's default 64 → 128, line 3" in reason
    assert "LR: $LR's default (line 4) 0.001 → 0.001414" in reason
    monkeypatch.setenv("BATCH_SIZE", "32")
    assert_skipped(
        "batch-scale", src, "the batch size is given in the environment (BATCH_SIZE=32): scale it there"
    )


def test_batch_scale_scales_what_a_learning_rate_scheduler_returns() -> None:
    """TensorFlow's distributed training tutorial: LearningRateScheduler(decay) sets 1e-3 / 1e-4 / 1e-5
    every epoch, so scaling the optimizer's own rate alone changed nothing that trained."""
    src = """
    import tensorflow as tf
    BATCH_SIZE = 64
    model.compile(loss="mse", optimizer=tf.keras.optimizers.SGD(0.1))

    def decay(epoch):
        if epoch < 3:
            return 1e-3
        return 1e-4

    def follow(epoch, lr):
        return lr if epoch < 10 else lr * tf.math.exp(-0.1)

    model.fit(ds.batch(BATCH_SIZE), callbacks=[tf.keras.callbacks.LearningRateScheduler(decay)])
    """
    out = run("batch-scale", src, params={"factor": "2"})
    assert out.status == "changed" and "return 0.002" in out.code and "return 0.0002" in out.code, out.code
    assert "LearningRateScheduler at line 13: decay() returns 0.001 → 0.002, 0.0001 → 0.0002" in out.reason
    out = run("batch-scale", src.replace("Scheduler(decay)", "Scheduler(follow)"), params={"factor": "2"})
    assert out.status == "changed" and "NOT SCALED" not in out.reason and "return 1e-3" in out.code
    out = run(
        "batch-scale", src.replace("Scheduler(decay)", "Scheduler(schedules[0])"), params={"factor": "2"}
    )
    assert "LEARNING RATE NOT SCALED" in out.reason


def test_batch_scale_follows_a_schedule_that_multiplies_a_rate_of_its_own() -> None:
    """Keras's cifar10_resnet.py, copied into countless repositories: ``lr_schedule(epoch)`` sets
    ``lr = 1e-3`` and multiplies it down past epochs 80/120/160/180, ``Adam(learning_rate=lr_schedule(0))``
    and ``LearningRateScheduler(lr_schedule)``. Batch-scale said "LEARNING RATE NOT SCALED" (the optimizer's
    rate "not followed to a number", the function's return "not computed from the one it is given"); the
    base rate is scaled now, and the optimizer built from the function follows it."""
    src = """
    import numpy as np
    from tensorflow.keras.callbacks import LearningRateScheduler, ReduceLROnPlateau
    from tensorflow.keras.optimizers import Adam
    batch_size = 32

    def lr_schedule(epoch):
        lr = 1e-3
        if epoch > 180:
            lr *= 0.5e-3
        elif epoch > 80:
            lr *= 1e-1
        print("Learning rate: ", lr)
        return lr

    model.compile(loss="categorical_crossentropy", optimizer=Adam(learning_rate=lr_schedule(0)))
    lr_scheduler = LearningRateScheduler(lr_schedule)
    lr_reducer = ReduceLROnPlateau(factor=np.sqrt(0.1), cooldown=0, patience=5, min_lr=0.5e-6)
    model.fit(x_train, y_train, batch_size=batch_size, callbacks=[lr_reducer, lr_scheduler])
    """
    out = run("batch-scale", src, params={"factor": "2"})
    assert out.status == "changed" and "NOT SCALED" not in out.reason, out.reason
    assert "    lr = 0.00141421\n" in out.code and "lr *= 0.5e-3" in out.code and "lr *= 1e-1" in out.code
    assert "Adam at line 15: learning_rate=lr_schedule(0), from lr_schedule() scaled" in out.reason
    assert "LearningRateScheduler at line 16: lr_schedule() returns lr = 0.001 → 0.001414" in out.reason
    # an added constant, or a rate from elsewhere: what it returns cannot be told to follow
    for other in ("lr += 1e-4", "lr = BASE_LR"):
        out = run("batch-scale", src.replace("lr *= 1e-1", other), params={"factor": "2"})
        assert "LEARNING RATE NOT SCALED" in out.reason, (other, out.reason)
        said = " ".join(out.warnings)
        assert "lr_schedule() returns a rate not computed from the one it is given" in said, said
        assert "learning_rate=lr_schedule(0) not followed to a number" in said, said
        assert "    lr = 1e-3\n" in out.code  # nothing scaled halfway


def test_batch_scale_follows_a_schedule_proportional_to_a_number_of_its_own() -> None:
    """machinelearningmastery's drop-based decay (step_decay.py): ``lrate = initial_lrate * math.pow(drop,
    math.floor((1 + epoch) / epochs_drop))`` with ``initial_lrate = 0.1``: the rate of every epoch is
    proportional to that number, so it is the one scaled (``drop`` and ``epochs_drop`` are not), and the
    optimizer's ``learning_rate=0.0``, which the scheduler replaces every epoch, is left and said so. A
    number written in the product (``return 0.1 * drop ** ...``) is scaled in place; a rate that is not a
    product of a number (``0.1 - 0.001 * epoch``), or a number used elsewhere too, still says NOT SCALED
    with nothing scaled halfway."""
    src = shape("step_decay.py").read_text()
    out = run("batch-scale", src, params={"factor": "2"})
    assert out.status == "changed" and "NOT SCALED" not in out.reason, out.reason
    changed = [(a, b) for a, b in zip(src.splitlines(), out.code.splitlines(), strict=True) if a != b]
    assert changed == [
        ("    initial_lrate = 0.1", "    initial_lrate = 0.2"),
        (
            "model.fit(X, Y, validation_split=0.33, epochs=50, batch_size=28, callbacks=callbacks_list, verbose=2)",
            "model.fit(X, Y, validation_split=0.33, epochs=50, batch_size=56, callbacks=callbacks_list, verbose=2)",
        ),
    ]
    rate = "    lrate = initial_lrate * math.pow(drop, math.floor((1 + epoch) / epochs_drop))\n    return lrate\n"
    assert rate in src
    inline = src.replace(rate, "    return 0.1 * drop ** math.floor((1 + epoch) / epochs_drop)\n")
    out = run("batch-scale", inline, params={"factor": "4"})
    assert "    return 0.4 * drop ** math.floor" in out.code and "drop = 0.5" in out.code, out.code
    assert "step_decay() returns 0.1 × … → 0.4 × …" in out.reason, out.reason
    for other in (
        "    lrate = initial_lrate - 0.001 * epoch\n    return lrate\n",  # not proportional to a number
        rate + "    print(initial_lrate)\n",  # unreachable, but the number is used elsewhere
        "    lrate = initial_lrate * math.pow(drop, epoch)\n    lrate += 1e-4\n    return lrate\n",
    ):
        out = run("batch-scale", src.replace(rate, other), params={"factor": "2"})
        assert "LEARNING RATE NOT SCALED" in out.reason, (other, out.reason)
        assert "step_decay() returns a rate not computed from the one it is given" in " ".join(out.warnings)
        assert "    initial_lrate = 0.1\n" in out.code  # nothing scaled halfway


@pytest.mark.parametrize(
    ("schedule", "edited", "said"),
    [
        (  # the Coursera / TF time-series learning-rate sweep
            "lr_schedule = tf.keras.callbacks.LearningRateScheduler(lambda epoch: 1e-8 * 10**(epoch / 20))",
            "LearningRateScheduler(lambda epoch: 2e-08 * 10**(epoch / 20))",
            "its lambda returns 1e-08 → 2e-08",
        ),
        (  # the LearningRateScheduler docs' example: computed from the rate it is given
            "lr_schedule = tf.keras.callbacks.LearningRateScheduler("
            "lambda epoch, lr: lr if epoch < 10 else lr * tf.math.exp(-0.1))",
            "lambda epoch, lr: lr if epoch < 10 else lr * tf.math.exp(-0.1))",
            "its lambda returns the rate it is given, which follows",
        ),
        (
            "lr_schedule = tf.keras.callbacks.LearningRateScheduler(lambda epoch: 1e-3 if epoch < 10 else 1e-4)",
            "lambda epoch: 0.002 if epoch < 10 else 0.0002)",
            "its lambda returns 0.001 → 0.002, 0.0001 → 0.0002",
        ),
        (  # a lambda bound to a name first
            "sched = lambda epoch: 1e-3 * 0.95 ** epoch\n"
            "lr_schedule = tf.keras.callbacks.LearningRateScheduler(sched)",
            "sched = lambda epoch: 0.002 * 0.95 ** epoch",
            "its lambda returns 0.001 → 0.002",
        ),
    ],
)
def test_batch_scale_follows_a_lambda_schedule(schedule: str, edited: str, said: str) -> None:
    """``LearningRateScheduler(lambda epoch: ...)``, as TensorFlow's time-series course and the callback's
    own docs write it, was "its schedule is not a function of the script": LEARNING RATE NOT SCALED. A
    lambda's numbers (alone, in a product, in each branch of an ``if`` expression) are scaled now, and
    one computed from the rate it is given follows it; a rate that is neither still says so, unedited."""
    src = textwrap.dedent(
        """
        import tensorflow as tf
        model.compile(loss="mse", optimizer=tf.keras.optimizers.SGD(learning_rate=1e-3, momentum=0.9))
        {schedule}
        model.fit(train_set, epochs=100, callbacks=[lr_schedule], batch_size=32)
        """
    )
    out = run("batch-scale", src.format(schedule=schedule), params={"factor": "2"})
    assert "NOT SCALED" not in out.reason and said in out.reason, out.reason
    assert edited in out.code and "batch_size=64" in out.code, out.code
    opaque = "lr_schedule = tf.keras.callbacks.LearningRateScheduler(lambda epoch: BASE - 1e-5 * epoch)"
    out = run("batch-scale", src.format(schedule=opaque), params={"factor": "2"})
    assert "LEARNING RATE NOT SCALED" in out.reason and "BASE - 1e-5 * epoch" in out.code
    assert "its lambda returns a rate not computed from the one it is given" in " ".join(out.warnings)


def test_batch_scale_scales_no_return_of_a_schedule_when_another_cannot_follow() -> None:
    """A schedule function with one number returned and another return it cannot follow (``return
    BASE_LR``, a rate from elsewhere): the number was scaled while the summary said NOT SCALED, a patch
    with half a schedule. Now nothing of it is edited, and the summary says why."""
    src = textwrap.dedent(
        """
        import tensorflow as tf
        BASE_LR = 3e-4
        def schedule(epoch):
            if epoch < 10:
                return 1e-3
            return BASE_LR
        model.compile(loss="mse", optimizer=tf.keras.optimizers.SGD(learning_rate=1e-3))
        model.fit(x, y, batch_size=32, callbacks=[tf.keras.callbacks.LearningRateScheduler(schedule)])
        """
    )
    out = run("batch-scale", src, params={"factor": "2"})
    assert "LEARNING RATE NOT SCALED" in out.reason, out.reason
    assert "schedule() returns a rate not computed from the one it is given" in " ".join(out.warnings)
    assert "        return 1e-3\n" in out.code and "schedule() returns 0.001" not in out.reason
    assert "batch_size=64" in out.code and "learning_rate=0.002" in out.code  # the rest is scaled


def test_batch_scale_scales_the_constants_a_schedule_computes_its_rate_from() -> None:
    """Kaggle's TPU starters: ``lrfn(epoch)`` ramps from LR_START to LR_MAX (itself a number times the
    replicas) and decays to LR_MIN, every rate computed from those module constants (and from
    LR_RAMPUP_EPOCHS, LR_EXP_DECAY, which are not rates): "returns a rate not computed from the one it is
    given", nothing scaled. Now the one set of constants every return is proportional to is scaled, and
    the batch, written as a number times the replicas, is found."""
    src = textwrap.dedent(
        """
        import tensorflow as tf
        strategy = tf.distribute.get_strategy()
        BATCH_SIZE = 16 * strategy.num_replicas_in_sync
        LR_START = 0.00001
        LR_MAX = 0.00005 * strategy.num_replicas_in_sync
        LR_MIN = 0.00001
        LR_RAMPUP_EPOCHS = 5
        LR_SUSTAIN_EPOCHS = 0
        LR_EXP_DECAY = 0.8
        def lrfn(epoch):
            if epoch < LR_RAMPUP_EPOCHS:
                lr = (LR_MAX - LR_START) / LR_RAMPUP_EPOCHS * epoch + LR_START
            elif epoch < LR_RAMPUP_EPOCHS + LR_SUSTAIN_EPOCHS:
                lr = LR_MAX
            else:
                lr = (LR_MAX - LR_MIN) * LR_EXP_DECAY ** (epoch - LR_RAMPUP_EPOCHS - LR_SUSTAIN_EPOCHS) + LR_MIN
            return lr
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH_SIZE)
        model.compile(loss="mse", optimizer="sgd")
        model.fit(ds, callbacks=[tf.keras.callbacks.LearningRateScheduler(lrfn, verbose=True)])
        """
    )
    out = run("batch-scale", src, params={"factor": "4"})
    assert out.changed and "NOT SCALED" not in out.reason, out.reason
    assert "BATCH_SIZE = 64 * strategy.num_replicas_in_sync\n" in out.code
    for line in (
        "LR_START = 4e-05\n",
        "LR_MAX = 0.0002 * strategy.num_replicas_in_sync\n",
        "LR_MIN = 4e-05\n",
    ):
        assert line in out.code, out.code
    for line in ("LR_RAMPUP_EPOCHS = 5\n", "LR_EXP_DECAY = 0.8\n"):  # not rates: unchanged
        assert line in out.code
    assert "lrfn() returns a rate computed from LR_MAX, LR_START, LR_MIN" in out.reason


@pytest.mark.parametrize(
    "body",
    [
        "return LR_MAX + 1e-4 * epoch",  # not proportional to any rate
        "return LR_MAX * LR_DECAY",  # two constants, either could be the rate
        "return LR_MAX ** 2",
    ],
)
def test_batch_scale_scales_no_constant_of_a_schedule_not_proportional_to_one_set(body: str) -> None:
    src = textwrap.dedent(
        f"""
        import tensorflow as tf
        LR_MAX = 1e-3
        LR_DECAY = 0.9
        def lrfn(epoch):
            {body}
        model.compile(loss="mse", optimizer="sgd")
        model.fit(x, y, batch_size=32, callbacks=[tf.keras.callbacks.LearningRateScheduler(lrfn)])
        """
    )
    out = run("batch-scale", src, params={"factor": "2"})
    assert "LEARNING RATE NOT SCALED" in out.reason, out.reason
    assert "LR_MAX = 1e-3\n" in out.code and "LR_DECAY = 0.9\n" in out.code


def test_batch_scale_keeps_a_step_counted_schedule_per_example() -> None:
    """ExponentialDecay(decay_steps=10000) counts optimizer steps: with the batch ×2 an epoch has half
    the steps, so decay_steps is halved with the initial rate scaled (the same schedule per example)."""
    assert_codemod(
        "batch-scale",
        """
        import keras
        BATCH_SIZE = 64
        lr_schedule = keras.optimizers.schedules.ExponentialDecay(initial_learning_rate=1e-2, decay_steps=10000, decay_rate=0.9)
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr_schedule), loss="mse")
        """,
        """
        import keras
        BATCH_SIZE = 128
        lr_schedule = keras.optimizers.schedules.ExponentialDecay(initial_learning_rate=0.02, decay_steps=5000, decay_rate=0.9)
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr_schedule), loss="mse")
        """,
        params={"factor": "2"},
    )


def test_batch_scale_reads_a_schedules_positional_arguments_and_steps_counted_from_the_batch() -> None:
    """TensorFlow's "Overfit and underfit": ``InverseTimeDecay(0.001, decay_steps=STEPS_PER_EPOCH * 1000)``
    with ``STEPS_PER_EPOCH = N_TRAIN // BATCH_SIZE``: the positional initial rate is scaled (it had been
    "not followed to a number"), and the decay steps already follow the batch (divided again, the
    schedule would run twice as fast per example); positional ``ExponentialDecay(1e-3, 10000, 0.96)``
    has its steps halved; a step count that does not follow the batch is said, not guessed."""
    src = """
    import tensorflow as tf
    BATCH_SIZE = 500
    STEPS_PER_EPOCH = 10000 // BATCH_SIZE
    lr_schedule = tf.keras.optimizers.schedules.InverseTimeDecay(0.001, decay_steps=STEPS_PER_EPOCH * 1000, decay_rate=1)
    def get_optimizer():
        return tf.keras.optimizers.Adam(lr_schedule)
    """
    out = run("batch-scale", textwrap.dedent(src), params={"factor": "2"})
    assert (
        "BATCH_SIZE = 1000" in out.code
        and "InverseTimeDecay(0.00141421, decay_steps=STEPS_PER_EPOCH * 1000" in out.code
    )
    assert "decay_steps=STEPS_PER_EPOCH * 1000 follows the batch size through STEPS_PER_EPOCH" in out.reason
    assert "NOT SCALED" not in out.reason
    positional = src.replace(
        "InverseTimeDecay(0.001, decay_steps=STEPS_PER_EPOCH * 1000, decay_rate=1)",
        "ExponentialDecay(1e-3, 10000, 0.96)",
    )
    out = run("batch-scale", textwrap.dedent(positional), params={"factor": "2"})
    assert "ExponentialDecay(0.00141421, 5000, 0.96)" in out.code, out.code
    fixed = src.replace("decay_steps=STEPS_PER_EPOCH * 1000", "decay_steps=EPOCHS * 20")
    out = run("batch-scale", textwrap.dedent(fixed), params={"factor": "2"})
    assert "decay_steps=EPOCHS * 20 NOT divided by 2" in out.reason and "decay_steps=EPOCHS * 20" in out.code


def test_batch_scale_scales_a_warm_up_schedules_peak_and_follows_steps_through_the_dataset() -> None:
    """keras-io's Keras 3 warm-up: ``CosineDecay(initial_learning_rate=0.0, ..., warmup_target=1e-3)``: the
    peak is the rate that matters (it had been "0 → 0", the peak unscaled), and steps counted as
    ``EPOCHS * len(train_ds)`` of a dataset batched by the batch size already follow it (they had been
    reported "NOT divided by 2"). ``PolynomialDecay``'s end rate scales with its start."""
    src = """
    import keras
    BATCH_SIZE = 64
    train_ds = dataset.shuffle(4096).batch(BATCH_SIZE)
    total_steps = EPOCHS * len(train_ds)
    warmup_steps = int(0.1 * total_steps)
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0, decay_steps=total_steps - warmup_steps, warmup_target=1e-3, warmup_steps=warmup_steps
    )
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=schedule), loss="mse")
    """
    out = run("batch-scale", textwrap.dedent(src), params={"factor": "2"})
    assert "warmup_target=0.00141421" in out.code and "decay_steps=total_steps - warmup_steps" in out.code
    assert "warmup_target 0.001 → 0.001414" in out.reason, out.reason
    assert "decay_steps=total_steps - warmup_steps follows the batch size through total_steps" in out.reason
    assert "NOT" not in out.reason
    poly = src.replace(
        "CosineDecay(\n        initial_learning_rate=0.0, decay_steps=total_steps - warmup_steps, warmup_target=1e-3, warmup_steps=warmup_steps\n    )",
        "PolynomialDecay(1e-3, total_steps, 1e-5)",
    )
    out = run("batch-scale", textwrap.dedent(poly), params={"factor": "2"})
    assert "PolynomialDecay(0.00141421, total_steps, 1.41421e-05)" in out.code, out.code
    named = "PEAK = {}\n" + textwrap.dedent(src).replace("warmup_target=1e-3", "warmup_target=PEAK")
    out = run("batch-scale", named.format("1e-3"), params={"factor": "2"})
    assert "PEAK = 0.00141421" in out.code and "warmup_target=PEAK (line 1) 0.001 → 0.001414" in out.reason
    out = run("batch-scale", named.format("get_peak()"), params={"factor": "2"})
    assert "LEARNING RATE NOT SCALED" in out.reason and "warmup_target=PEAK of the schedule" in out.code


def test_batch_scale_scales_a_piecewise_constant_schedule() -> None:
    """ResNet-on-CIFAR style ``PiecewiseConstantDecay(boundaries=[32000, 48000], values=[0.1, 0.01,
    0.001])`` (had been "LEARNING RATE NOT SCALED: not followed to a number"): every rate scaled, every
    step boundary divided (the same schedule per example), boundaries computed from the batch left."""
    src = """
    import tensorflow as tf
    BATCH_SIZE = 128
    steps_per_epoch = len(x_train) // BATCH_SIZE
    lr_schedule = tf.keras.optimizers.schedules.PiecewiseConstantDecay(
        boundaries=[32000, 48000], values=[0.1, 0.01, 0.001]
    )
    model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=lr_schedule, momentum=0.9), loss="mse")
    """
    out = run("batch-scale", textwrap.dedent(src), params={"factor": "2"})
    assert "boundaries=[16000, 24000], values=[0.2, 0.02, 0.002]" in out.code, out.code
    assert "values 0.1, 0.01, 0.001 ×2, boundaries 32000 → 16000, 48000 → 24000" in out.reason
    follows = src.replace("[32000, 48000]", "[steps_per_epoch * 80, steps_per_epoch * 120]")
    out = run("batch-scale", textwrap.dedent(follows), params={"factor": "2"})
    assert "boundaries=[steps_per_epoch * 80, steps_per_epoch * 120], values=[0.2, 0.02, 0.002]" in out.code
    assert (
        "boundaries follow the batch size through steps_per_epoch" in out.reason and "NOT" not in out.reason
    )
    opaque = src.replace("[32000, 48000]", "[EPOCHS * 80, EPOCHS * 120]")
    out = run("batch-scale", textwrap.dedent(opaque), params={"factor": "2"})
    assert "values=[0.2, 0.02, 0.002]" in out.code and "LEARNING RATE NOT SCALED" not in out.reason
    assert "boundaries EPOCHS * 80, EPOCHS * 120 NOT divided by 2" in out.reason


def test_batch_scale_says_where_a_loop_sets_the_rate_itself() -> None:
    """A custom loop (or a callback's ``on_*`` method) that sets the rate by hand every step (a warm-up: ``optimizer.learning_rate = lr``,
    ``optimizer.lr.assign(lr)``, ``K.set_value(optimizer.lr, ...)``) replaces the optimizer's scaled rate:
    computed from a constant that was scaled, the summary says its step counts are not divided; from
    numbers of its own, the rate is not scaled at all, and the summary says so (it had said "0.1 → 0.2")."""
    src = """
    import tensorflow as tf
    BATCH_SIZE = 64
    BASE_LR = 0.1
    optimizer = tf.keras.optimizers.SGD(BASE_LR)
    for step, (x, y) in enumerate(ds.batch(BATCH_SIZE)):
        lr = {lr}
        {stmt}
        train_step(x, y)
    """
    for stmt in (
        "optimizer.learning_rate = lr",
        "optimizer.lr.assign(lr)",
        "tf.keras.backend.set_value(optimizer.lr, lr)",
    ):
        out = run(
            "batch-scale",
            textwrap.dedent(src.format(lr="BASE_LR * min(1.0, step / 100)", stmt=stmt)),
            params={"factor": "2"},
        )
        assert f"the loop sets the rate itself at line 7 ({stmt}) from BASE_LR, scaled" in out.reason, (
            out.reason
        )
        assert "NOT SCALED" not in out.reason and "BASE_LR = 0.2" in out.code
    own = textwrap.dedent(src.format(lr="0.1 * min(1.0, step / 100)", stmt="optimizer.learning_rate = lr"))
    out = run("batch-scale", own, params={"factor": "2"})
    assert "LEARNING RATE NOT SCALED" in out.reason
    assert (
        "the loop sets the rate itself at line 7 (optimizer.learning_rate = lr), from no rate scaled here"
        in out.code
    )
    out = run(
        "batch-scale", textwrap.dedent(src.format(lr="BASE_LR", stmt="x.assign(lr)")), params={"factor": "2"}
    )
    assert "the loop sets" not in out.reason
    # a warm-up callback: the rate it sets comes from what its class is built with
    callback = """
    import keras
    BATCH_SIZE = 64
    LR = 1e-3

    class WarmUp(keras.callbacks.Callback):
        def __init__(self, target, warmup_steps=100):
            super().__init__()
            self.target, self.warmup_steps, self.step = target, warmup_steps, 0

        def on_train_batch_begin(self, batch, logs=None):
            self.step += 1
            if self.step <= self.warmup_steps:
                self.model.optimizer.learning_rate = self.target * self.step / self.warmup_steps

    model.compile(optimizer=keras.optimizers.Adam(LR), loss="mse")
    model.fit(x, y, batch_size=BATCH_SIZE, callbacks=[WarmUp(TARGET)])
    """
    out = run("batch-scale", textwrap.dedent(callback).replace("TARGET", "LR"), params={"factor": "2"})
    assert "WarmUp.on_train_batch_begin() sets the rate itself at line 13" in out.reason
    assert "from LR, scaled" in out.reason and "NOT SCALED" not in out.reason
    out = run("batch-scale", textwrap.dedent(callback).replace("TARGET", "1e-3"), params={"factor": "2"})
    assert "LEARNING RATE NOT SCALED" in out.reason
    # built with a step count computed from the batch size: the batch is no rate (it said "from
    # BATCH_SIZE, scaled")
    out = run(
        "batch-scale",
        textwrap.dedent(callback).replace("TARGET", "1e-3, warmup_steps=6400 // BATCH_SIZE"),
        params={"factor": "2"},
    )
    assert "LEARNING RATE NOT SCALED" in out.reason and "from BATCH_SIZE" not in out.reason


def test_batch_scale_scales_the_rates_a_rate_setting_callback_is_built_with() -> None:
    # ageron/handson-ml2 chapter 11: the 1cycle callback sets the rate every batch from max_rate (its
    # start and last rates are fractions of it); the optimizer's own rate is overwritten at once
    src = """
    import math
    from tensorflow import keras

    class OneCycleScheduler(keras.callbacks.Callback):
        def __init__(self, iterations, max_rate, start_rate=None, last_rate=None):
            self.iterations, self.max_rate, self.iteration = iterations, max_rate, 0
            self.start_rate = start_rate or max_rate / 10

        def on_batch_begin(self, batch, logs):
            self.iteration += 1
            self.model.optimizer.learning_rate = self.start_rate + (self.max_rate - self.start_rate) * 0.5

    class StepDecay(keras.callbacks.Callback):
        def __init__(self, initial_lr, decay_rate, every):
            self.initial_lr, self.decay_rate, self.every = initial_lr, decay_rate, every

        def on_epoch_begin(self, epoch, logs=None):
            self.model.optimizer.learning_rate = self.initial_lr * self.decay_rate ** (epoch // self.every)

    model.compile(loss="mse", optimizer=keras.optimizers.SGD(learning_rate=1e-3))
    batch_size = 128
    onecycle = OneCycleScheduler(math.ceil(18000 / batch_size) * 25, max_rate=0.05)
    model.fit(x, y, epochs=25, batch_size=batch_size, callbacks=[onecycle, StepDecay(0.01, 0.5, 10)])
    """
    out = run("batch-scale", src, params={"factor": "2"})
    assert out.status == "changed", out.reason
    assert "max_rate=0.05 → 0.1 (line 22)" in out.reason, out.reason
    assert "initial_lr=0.01 → 0.02 (line 23)" in out.reason, out.reason
    assert "NOT SCALED" not in out.reason
    assert "max_rate=0.1)" in out.code and "StepDecay(0.02, 0.5, 10)" in out.code  # decay_rate is no rate


def test_a_model_built_for_every_fit_of_a_loop_gets_no_larger_function() -> None:
    """A federated-averaging loop builds, compiles and fits a new local model per client (38 batches a
    call, the first 0.43 s): steps_per_execution=8 measured 1.53x on the steps and ran the script
    0.86-0.92x, its larger function traced again in every call; XLA would compile in every call."""
    src = (SHAPES / "fedavg.py").read_text()
    gap = BetweenFits(
        seconds=0.2,
        ended_by="next_fit",
        limit_s=30.0,
        fit_site="fedavg.py:161",
        fit_steps=38,
        next_fit_model="new",
        next_fit_first_batch_s=0.43,
    )
    tfd207 = Finding(rule_id="TFD207", name="between-fits", severity="high", claim="...", est_saving=0.6)
    facts = Facts(loop_kind="keras_fit", step_kind="tf.function", between_fits=gap)
    for fix_id, what in (("steps-per-execution", "steps_per_execution would"), ("xla-jit", "XLA would")):
        out = run(fix_id, src, facts=facts, findings=(tfd207,))
        assert out.status == "skipped", out.reason
        assert (
            "each fit() at fedavg.py:161 trains a model built in the loop (38 batches a call)" in out.reason
        )
        assert "0.43 s" in out.reason and what in out.reason and "60%" in out.reason, out.reason
        # the same model fitted again (a fit() per epoch), or tracing a small share: tried as before
        same = facts.model_copy(update={"between_fits": gap.model_copy(update={"next_fit_model": "same"})})
        assert run(fix_id, src, facts=same, findings=(tfd207,)).status == "changed"
        small = tfd207.model_copy(update={"est_saving": 0.1})
        assert run(fix_id, src, facts=facts, findings=(small,)).status == "changed"


def test_pipelines_kept_in_a_dict_and_evaluated_in_a_loop_are_read() -> None:
    """fit(clients_batched[client]) trains on what batch_data() returns, stored item by item in a dict, and
    ``for X_test, Y_test in test_batched: test_model(X_test, ...)`` evaluates on the test pipeline: neither
    is a pipeline "no training or evaluation reads" (both were said so)."""
    src = (SHAPES / "fedavg.py").read_text()
    out = run("tfdata-cache", src, facts=_FIT)
    assert out.status == "skipped" and "left alone" not in out.reason, out.reason
    assert "dataset (line 55)" in out.reason and "test_batched (line 125)" in out.reason, out.reason
    # a loop only looking at the batches (printing them) is still a look, not an evaluation
    peek = src.replace(
        "global_acc, global_loss = test_model(X_test, Y_test, global_model, comm_round)", "print(X_test)"
    )
    assert "left alone: test_batched" in run("tfdata-cache", peek, facts=_FIT).reason


def test_batch_scale_scales_the_batch_a_call_passes_not_the_default_it_overrides() -> None:
    """keras-io's DDPG: ``def __init__(self, buffer_capacity=100000, batch_size=64)`` built as
    ``Buffer(50000, 64)``: doubling the default changed nothing."""
    src = """
    import tensorflow as tf

    class Buffer:
        def __init__(self, buffer_capacity=100000, batch_size=64):
            self.batch_size = batch_size

    opt = tf.keras.optimizers.SGD(0.01)
    buffer = Buffer(50000, 64)
    """
    out = run("batch-scale", src, params={"factor": "2"})
    assert "batch_size 64 → 128 given at line 8" in out.reason, out.reason
    assert "Buffer(50000, 128)" in out.code and "batch_size=64)" in out.code  # the default left as it is
    out = run(
        "batch-scale", src.replace("Buffer(50000, 64)", "Buffer(batch_size=32)"), params={"factor": "2"}
    )
    assert "32 → 64, line 8" in out.reason and "Buffer(batch_size=64)" in out.code  # a batch_size= keyword
    out = run("batch-scale", src.replace("Buffer(50000, 64)", "Buffer()"), params={"factor": "2"})
    assert "default of parameter batch_size 64 → 128" in out.reason  # not passed: the default is the batch
    out = run("batch-scale", src.replace("Buffer(50000, 64)", "Buffer(50000, BS)"), params={"factor": "2"})
    assert "batch_size=128" not in out.code  # a name passed: not the default's to scale


def test_batch_scale_leaves_a_batch_drawn_at_random_each_step() -> None:
    """A replay buffer's batch: as many updates whatever its size (keras-io's DDPG was kept at x8, 5.12x in
    examples/s, while each of its updates did 8 times the work)."""
    src = """
    import numpy as np
    import tensorflow as tf

    BATCH_SIZE = 64
    opt = tf.keras.optimizers.Adam(1e-3)
    for step in range(1000):
        idx = np.random.choice(len(memory), size=BATCH_SIZE)
        update(memory[idx])
    """
    reason = assert_skipped(
        "batch-scale", src, "the batch is drawn at random each step (line 7", params={"factor": "2"}
    )
    assert "np.random.choice(len(memory), size=BATCH_SIZE)" in reason and "hyperparameter" in reason
    # a batch of a pass over the data is scaled as before
    out = run(
        "batch-scale",
        src.replace("np.random.choice(len(memory), size=BATCH_SIZE)", "np.arange(BATCH_SIZE)"),
        params={"factor": "2"},
    )
    assert out.status == "changed" and "BATCH_SIZE = 128" in out.code, out.reason


def test_batch_scale_follows_absl_flags() -> None:
    """Model-garden style: flags.DEFINE_integer("batch_size", 32, ...) read as FLAGS.batch_size."""
    src = """
    from absl import app, flags
    import tensorflow as tf
    FLAGS = flags.FLAGS
    flags.DEFINE_integer("batch_size", 32, "Batch size.")
    flags.DEFINE_float("learning_rate", 0.01, "Learning rate.")

    def main(argv):
        opt = tf.keras.optimizers.SGD(FLAGS.learning_rate)
        model.fit(make_ds().batch(FLAGS.batch_size))
    """
    out = run("batch-scale", src, params={"factor": "2"})
    assert out.status == "changed", out.reason
    assert 'flags.DEFINE_integer("batch_size", 64, "Batch size.")' in out.code
    assert 'flags.DEFINE_float("learning_rate", 0.02, "Learning rate.")' in out.code
    assert_skipped(
        "batch-scale", src, "given on the command line (--batch_size=64)", script_args=("--batch_size=64",)
    )


def test_batch_scale_says_so_in_the_result_and_the_patch_when_the_rate_cannot_be_scaled() -> None:
    out = run(
        "batch-scale",
        """
        import keras
        BATCH_SIZE = 32
        opt = keras.optimizers.Adam(learning_rate=schedule_from_config())
        """,
        params={"factor": "2"},
    )
    assert out.status == "changed", out.reason
    assert "LEARNING RATE NOT SCALED" in out.reason
    assert "# tfdoctor batch-scale: batch ×2; learning rate NOT scaled" in out.code
    assert any("learning rate not scaled" in w for w in out.warnings)


# -- tf.data shapes --------------------------------------------------------------------------------
def test_tfdata_cache_follows_a_pipeline_reassigned_to_its_own_name() -> None:
    assert_codemod(
        "tfdata-cache",
        """
        import tensorflow as tf
        def decode(x, y):
            return tf.cast(x, tf.float32) / 255.0, y
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        ds = (
            ds.shuffle(1000)
            .map(decode)
            .batch(32)
        )
        """,
        """
        import tensorflow as tf
        def decode(x, y):
            return tf.cast(x, tf.float32) / 255.0, y
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        ds = (
            ds.map(decode)
            .cache()
            .shuffle(1000)
            .batch(32)
        )
        """,
    )


NESTED_MAP = """
import tensorflow as tf


def get_dataset(paths, img_size):
    def load(path):
        img = tf.io.decode_png(tf.io.read_file(path), channels=3)
        return tf.image.resize(img, img_size)

    dataset = tf.data.Dataset.from_tensor_slices(paths)
    dataset = dataset.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(32)
"""


def test_tfdata_cache_reads_a_map_function_nested_in_the_helper_that_builds_the_pipeline() -> None:
    """keras-io's segmentation example defines ``load_img_masks`` inside ``get_dataset()``: "map() calls a
    function tfdoctor cannot inspect", and the PNGs were read and decoded again every epoch. A nested
    function is read where its name is defined once in the module; one that draws random numbers is
    still left out, and a name defined twice is not guessed at."""
    assert_codemod(
        "tfdata-cache",
        NESTED_MAP,
        NESTED_MAP.replace("AUTOTUNE)\n    return", "AUTOTUNE).cache()\n    return"),
    )
    random = NESTED_MAP.replace(
        "return tf.image.resize(img, img_size)", "return tf.image.random_flip_left_right(img)"
    )
    assert_skipped("tfdata-cache", random, "random_flip_left_right")
    twice = NESTED_MAP + "\n\ndef other():\n    def load(path):\n        return tf.random.uniform(())\n"
    assert_skipped("tfdata-cache", twice, "cannot inspect")


LOOKUP_MAP = """
import tensorflow as tf
from keras import layers

char_to_num = layers.StringLookup(vocabulary=list(characters), mask_token=None)


def encode_single_sample(img_path, label):
    img = tf.io.decode_png(tf.io.read_file(img_path), channels=1)
    label = char_to_num(tf.strings.unicode_split(label, input_encoding="UTF-8"))
    return {"image": img, "label": label}


ds = tf.data.Dataset.from_tensor_slices((x, y))
ds = ds.shuffle(1000).map(encode_single_sample).batch(16)
"""


def test_tfdata_cache_follows_a_map_through_a_module_level_lookup_layer() -> None:
    """keras-io's OCR captcha decodes each PNG and maps its label through ``char_to_num``, a
    ``StringLookup`` made at module level: "map() calls a function tfdoctor cannot inspect", so the PNGs
    were decoded again every epoch. A lookup layer bound once, with nothing adapting it after a map may
    have traced it, is deterministic and element-wise: the cache goes after the map (before the
    shuffle). A layer that draws random numbers, one adapted after the map, or a name bound twice is
    still not followed."""
    out = run("tfdata-cache", LOOKUP_MAP)
    assert out.status == "changed", out.reason
    assert "ds = ds.map(encode_single_sample).cache().shuffle(1000).batch(16)" in out.code, out.code
    adapted_late = LOOKUP_MAP + "char_to_num.adapt(more_labels)\n"
    assert_skipped("tfdata-cache", adapted_late, "map() calls a function tfdoctor cannot inspect")
    adapted_first = LOOKUP_MAP.replace("\n\n\ndef encode", "\nchar_to_num.adapt(labels)\n\n\ndef encode")
    assert run("tfdata-cache", adapted_first).status == "changed"
    rebound = LOOKUP_MAP.replace("\n\n\ndef encode", "\nchar_to_num = other\n\n\ndef encode")
    assert_skipped("tfdata-cache", rebound, "map() calls a function tfdoctor cannot inspect")
    flip = LOOKUP_MAP.replace(
        "layers.StringLookup(vocabulary=list(characters), mask_token=None)", "layers.RandomFlip()"
    )
    assert_skipped("tfdata-cache", flip, "map() calls a function tfdoctor cannot inspect")


def test_tfds_load_results_are_pipelines() -> None:
    """TensorFlow Datasets: (ds_train, ds_test), ds_info = tfds.load(..., with_info=True) (the TFDS
    Keras guide's shape, without its tuning): the datasets are pipelines (it had been "no tf.data map
    found"), ds_info is not; what tfds reads from disk is not cached on a guess."""
    src = """
    import tensorflow as tf
    import tensorflow_datasets as tfds
    (ds_train, ds_test), ds_info = tfds.load("mnist", split=["train", "test"], as_supervised=True, with_info=True)

    def normalize_img(image, label):
        return tf.cast(image, tf.float32) / 255.0, label

    ds_train = ds_train.map(normalize_img)
    ds_train = ds_train.shuffle(ds_info.splits["train"].num_examples)
    ds_train = ds_train.batch(128)
    model.fit(ds_train, epochs=6, validation_data=ds_test)
    """
    out = run("tfdata-parallel-map", src)
    assert (
        out.status == "changed"
        and "ds_train.map(normalize_img, num_parallel_calls=tf.data.AUTOTUNE)" in out.code
    )
    out = run("tfdata-prefetch", src)
    assert out.status == "changed" and "ds_train = ds_train.batch(128).prefetch(tf.data.AUTOTUNE)" in out.code
    assert "ds_info.prefetch" not in out.code
    assert_skipped("tfdata-cache", src, "no tf.data pipeline with an in-memory source")
    # Hugging Face's datasets.load_dataset is not tf.data: its map(batched=True) is not touched
    hf = "from datasets import load_dataset\nimdb = load_dataset('imdb')\nimdb = imdb.map(tokenize, batched=True)\n"
    assert_skipped(
        "tfdata-parallel-map", hf, "(.map() at line 3: on a name not known to be a tf.data dataset"
    )


def test_keras_dataset_utilities_are_pipelines_that_prefetch_themselves() -> None:
    """keras-io's weather forecasting: timeseries_dataset_from_array is a tf.data source (it had been
    "no tf.data pipeline"); like image_dataset_from_directory it ends with prefetch(AUTOTUNE) itself."""
    src = """
    import keras
    dataset_train = keras.preprocessing.timeseries_dataset_from_array(
        x_train, y_train, sequence_length=120, sampling_rate=6, batch_size=256
    )
    model.fit(dataset_train, epochs=10)
    """
    assert_skipped("tfdata-prefetch", src, "dataset_train: timeseries_dataset_from_array() prefetches itself")
    # its windows are gathered by a map of its own, the same every epoch when it does not shuffle them
    out = run("tfdata-cache", src)
    assert out.status == "changed", out.reason
    assert "batch_size=256\n).cache()\nmodel.fit" in out.code
    assert out.reason == "cache() after timeseries_dataset_from_array() of dataset_train (line 2)"
    assert any("each window a copy of its rows" in w for w in out.warnings)
    out = run("tfdata-cache", src.replace("batch_size=256", "batch_size=256, shuffle=False"))
    assert out.status == "changed" and "shuffle=False\n).cache()" in out.code
    # shuffled windows: Keras reshuffles them within batch_size × 8 every epoch, before it batches; a
    # cache after its batches, or after a map of them, would replay one order. The way to cache them
    # changes the data order: advice, not applied
    shuffled = src.replace("batch_size=256", "batch_size=256, shuffle=True").replace(
        "    model.fit", "    dataset_train = dataset_train.map(scale)\n    model.fit"
    )
    reason = assert_skipped(
        "tfdata-cache", shuffled, "reshuffles its windows every epoch (within batch_size × 8 of them"
    )
    assert reason.endswith("(a change of the data order: not applied)") and reason.count("; advice:") == 1
    assert_skipped(
        "tfdata-cache",
        src.replace("sequence_length=120, sampling_rate=6, batch_size=256", "120, 1, 6, 256, True"),
        "reshuffles its windows",
    )
    csv = 'import tensorflow as tf\nds = tf.data.experimental.make_csv_dataset(path, batch_size=5, label_name="y")\n'
    assert_skipped("tfdata-prefetch", csv, "ds: make_csv_dataset() prefetches itself")
    assert_skipped(
        "tfdata-cache", csv, "reads make_csv_dataset(): tfdoctor cannot tell whether the decoded data fits"
    )
    mapped = src.replace("    model.fit", "    dataset_train = dataset_train.map(scale)\n    model.fit")
    out = run("tfdata-prefetch", mapped)
    assert out.status == "changed" and "dataset_train.map(scale).prefetch(tf.data.AUTOTUNE)" in out.code


TWO_BUILDERS = """
import tensorflow as tf

AUTO = tf.data.AUTOTUNE


def decode(image, label):
    return tf.cast(image, tf.float32) / 255.0, label


def augment(image, label):
    return tf.image.random_flip_left_right(image), label


def get_validation_dataset():
    dataset = tf.data.Dataset.from_tensor_slices((val_images, val_labels))
    dataset = dataset.map(decode, num_parallel_calls=AUTO)
    dataset = dataset.batch(BATCH_SIZE)
    dataset = dataset.cache()
    dataset = dataset.prefetch(AUTO)
    return dataset


def get_training_dataset():
    dataset = tf.data.Dataset.from_tensor_slices((train_images, train_labels))
    dataset = dataset.map(decode)
    dataset = dataset.map(augment, num_parallel_calls=AUTO)
    dataset = dataset.repeat()
    dataset = dataset.shuffle(2048)
    dataset = dataset.batch(BATCH_SIZE)
    return dataset


model.fit(get_training_dataset(), steps_per_epoch=100, validation_data=get_validation_dataset())
"""


def test_tfdata_cache_and_prefetch_tell_the_same_name_in_two_functions_apart() -> None:
    """Kaggle's TPU starters build ``dataset`` in get_training_dataset() and get_validation_dataset(): the
    cache fix said "dataset already caches (line 11)" (the validation function's) and left the training
    pipeline, whose decode TFD102 saw redone every epoch; the prefetch fix would have called it prefetched
    (the validation function's prefetch). Each function's assignments are now their own pipeline, and a
    pipeline's earlier stages are read in its own function (the validation one comes first here)."""
    cache = run("tfdata-cache", TWO_BUILDERS, facts=Facts(loop_kind="keras_fit", input_kind="tf.data"))
    assert cache.changed, cache.reason
    assert "    dataset = dataset.map(decode).cache()\n" in cache.code, cache.code
    assert cache.code.count(".cache()") == 2, cache.code  # the validation one, as it was
    prefetch = run("tfdata-prefetch", TWO_BUILDERS)
    assert prefetch.changed, prefetch.reason
    assert "    return dataset.prefetch(tf.data.AUTOTUNE)\n" in prefetch.code
    assert prefetch.code.count("prefetch(") == 2
    both = TWO_BUILDERS.replace(
        "    dataset = dataset.batch(BATCH_SIZE)\n    return dataset",
        "    dataset = dataset.batch(BATCH_SIZE)\n    dataset = dataset.prefetch(AUTO)\n    return dataset",
    )
    assert_skipped(
        "tfdata-prefetch",
        both,
        "already prefetches (dataset in get_validation_dataset(), dataset in get_training_dataset())",
    )
    # the DeepLearning.AI course's windowed_dataset(): ``dataset`` in the function ends in prefetch(1), and
    # the module's ``dataset = windowed_dataset(...)`` is that pipeline, read in the function it returns from
    course = d(
        """
        import tensorflow as tf
        def windowed_dataset(series, window_size, batch_size):
            dataset = tf.data.Dataset.from_tensor_slices(series)
            dataset = dataset.window(window_size + 1, shift=1, drop_remainder=True)
            dataset = dataset.flat_map(lambda window: window.batch(window_size + 1))
            dataset = dataset.batch(batch_size).prefetch(1)
            return dataset
        dataset = windowed_dataset(x_train, 20, 32)
        model.fit(dataset, epochs=20)
        """
    )
    assert_skipped(
        "tfdata-prefetch", course, "already prefetches (dataset in windowed_dataset(), dataset (module))"
    )


def test_tfdata_cache_follows_a_pipeline_through_several_names() -> None:
    """The TensorFlow text-generation tutorial: ids -> sequences (batch) -> dataset (map) -> dataset
    (shuffle, batch). The map's source is two names up; a deterministic batch before it may be cached."""
    assert_codemod(
        "tfdata-cache",
        """
        import tensorflow as tf
        ids_dataset = tf.data.Dataset.from_tensor_slices(all_ids)
        sequences = ids_dataset.batch(51, drop_remainder=True)
        def split_input_target(sequence):
            return sequence[:-1], sequence[1:]
        dataset = sequences.map(split_input_target)
        dataset = dataset.shuffle(10000).batch(64, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
        """,
        """
        import tensorflow as tf
        ids_dataset = tf.data.Dataset.from_tensor_slices(all_ids)
        sequences = ids_dataset.batch(51, drop_remainder=True)
        def split_input_target(sequence):
            return sequence[:-1], sequence[1:]
        dataset = sequences.map(split_input_target).cache()
        dataset = dataset.shuffle(10000).batch(64, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
        """,
    )
    # a shuffle two names up: the batches it makes differ every epoch, a cache would freeze them
    reason = assert_skipped(
        "tfdata-cache",
        """
        import tensorflow as tf
        ids_dataset = tf.data.Dataset.from_tensor_slices(all_ids).shuffle(100)
        sequences = ids_dataset.batch(51, drop_remainder=True)
        def split_input_target(sequence):
            return sequence[:-1], sequence[1:]
        dataset = sequences.map(split_input_target)
        """,
        "dataset (line 6): the pipeline already ran shuffle() at line 2: a cache after it would replay it",
    )
    assert "advice" not in reason  # the shuffled ids were batched into sequences: no load to move first


def test_the_split_map_is_parallelised_whichever_fix_comes_first() -> None:
    """mirrored_ctl.py: tfdata-cache splits preprocess; the split maps keep the map's own arguments, so
    tfdata-parallel-map before or after it gives the same two parallel maps around the cache."""
    src = (CORPUS / "mirrored_ctl.py").read_text()
    cache, par = get_fix("tfdata-cache"), get_fix("tfdata-parallel-map")
    cache_first = par.apply(cache.apply(src, FixContext()).code, FixContext())
    par_first = cache.apply(par.apply(src, FixContext()).code, FixContext())
    assert cache_first.changed and par_first.changed
    assert cache_first.code == par_first.code
    assert (
        "dataset.map(preprocess_prefix, num_parallel_calls=tf.data.AUTOTUNE).cache().shuffle(BUFFER_SIZE)"
        ".map(preprocess_rest, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)" in cache_first.code
    )
    assert "def preprocess(" not in cache_first.code  # its only use was the map


def test_a_distribute_datasets_from_function_pipeline_is_a_pipeline() -> None:
    src = """
    import tensorflow as tf

    def dataset_fn(input_context):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).map(decode).batch(64)
        return ds

    dist = strategy.distribute_datasets_from_function(dataset_fn)
    """
    out = run("tfdata-parallel-map", src)
    assert out.status == "changed" and "map(decode, num_parallel_calls=tf.data.AUTOTUNE)" in out.code


# -- --fix on a multi-worker job --------------------------------------------------------------------
def test_fix_is_refused_on_a_worker_of_a_multi_worker_job() -> None:
    from tfdoctor.commands.fix import refuse_multiworker
    from tfdoctor.errors import UsageError

    two = '{"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 0}}'
    with pytest.raises(UsageError, match="not supported on worker-0 of a 2-worker job"):
        refuse_multiworker({"TF_CONFIG": two})
    with pytest.raises(UsageError, match="multi-worker run"):
        refuse_multiworker({}, strategy="MultiWorkerMirroredStrategy")
    refuse_multiworker(
        {"TF_CONFIG": '{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 0}}'}
    )
    refuse_multiworker({}, strategy="MirroredStrategy")


# -- the corpus --------------------------------------------------------------------------------------
#: per corpus script: the fixes whose transform finds its pattern (on a bf16 CPU, with the facts a run
#: of the script records: fit, a tf.function custom loop or an eager one)
CORPUS_CHANGED = {
    "class_trainer.py": {
        "tf-function",
        "generator-prefetch",
        "generator-cache",
        "mixed-precision",
        "batch-scale",
    },
    "eager_apply.py": {"tf-function", "tfdata-prefetch", "mixed-precision", "batch-scale"},
    "epoch_counter.py": {"tf-function", "tfdata-prefetch", "mixed-precision", "batch-scale"},
    "plain_trainer.py": {
        "tf-function",
        "tfdata-parallel-map",
        "tfdata-cache",
        "tfdata-prefetch",
        "mixed-precision",
        "batch-scale",
    },
    "gan_fit.py": {
        "steps-per-execution",
        "xla-jit",
        "tfdata-parallel-map",
        "tfdata-prefetch",
        "mixed-precision",
        "batch-scale",
    },
    "mirrored_ctl.py": {
        "tfdata-parallel-map",
        "tfdata-cache",
        "tfdata-prefetch",
        "xla-jit",
        "mixed-precision",
        "batch-scale",
    },
    "vae_fit.py": {"steps-per-execution", "xla-jit", "mixed-precision", "batch-scale"},
    "pydataset_fit.py": {
        "steps-per-execution",
        "generator-prefetch",
        "generator-cache",
        "xla-jit",
        "mixed-precision",
        "batch-scale",
    },
    "quickstart_closure.py": {"generator-prefetch", "xla-jit", "mixed-precision", "batch-scale"},
    # random batches (rng.integers(0, len(x), batch_size)) for a fixed steps_per_epoch: no batch-scale
    "train_on_batch.py": {"generator-prefetch", "xla-jit", "mixed-precision"},
    "notebook_style.py": {"tf-function", "tfdata-prefetch", "mixed-precision", "batch-scale"},
    "walkthrough.py": {
        "tf-function",
        "tfdata-parallel-map",
        "tfdata-prefetch",
        "mixed-precision",
        "batch-scale",
    },
    "tfdata_progbar_fit.py": {
        "steps-per-execution",
        "tfdata-parallel-map",
        "tfdata-prefetch",
        "tfdata-cache",
        "xla-jit",
        "mixed-precision",
        "batch-scale",
    },
}


@pytest.mark.parametrize("script", sorted(CORPUS_CHANGED))
def test_which_fixes_find_their_pattern_in_each_corpus_script(script: str) -> None:
    path = CORPUS / script
    if not path.exists():
        pytest.skip(f"{script} is not in the corpus")
    src = path.read_text()
    if script.endswith("_fit.py"):
        facts = Facts(loop_kind="keras_fit", step_kind="tf.function")
    elif script in ("quickstart_closure.py", "mirrored_ctl.py", "train_on_batch.py"):
        facts = Facts(loop_kind="custom", step_kind="tf.function")
    else:  # an eager custom loop: the hooks record where its optimizer update ran
        line = next(
            i for i, t in enumerate(src.splitlines(), 1) if ".apply(" in t or ".apply_gradients(" in t
        )
        facts = Facts(
            loop_kind="custom", step_kind="eager", source={"apply_gradients": f"/w/{script}:{line}"}
        )
    ctx = FixContext(hardware=BF16, filename=script, facts=facts)
    got = set()
    for fix in all_fixes():
        out = fix.apply(src, ctx)
        assert out.status != "failed", (fix.ID, out.reason)
        assert out.reason, fix.ID
        if out.changed:
            ast.parse(out.code)
            got.add(fix.ID)
    assert got == CORPUS_CHANGED[script]


# -- projects of several files ------------------------------------------------------------------------
def test_local_modules_follow_the_scripts_own_imports(tmp_path: Path) -> None:
    from tfdoctor.fixes.project import local_modules

    (tmp_path / "pkg").mkdir()
    (tmp_path / "train.py").write_text("import os\nimport model as m\nfrom pkg import data\n")
    (tmp_path / "model.py").write_text("from . import layers_util\nimport numpy\n")
    (tmp_path / "layers_util.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "data.py").write_text("Y = 2\n")
    (tmp_path / "unused.py").write_text("Z = 3\n")
    got = local_modules(tmp_path / "train.py")
    assert sorted(got) == ["layers_util.py", "model.py", "pkg/__init__.py", "pkg/data.py"]
    assert got["model.py"].startswith("from . import layers_util")


def test_fixes_edit_the_module_where_the_model_optimizer_and_pipeline_are_built() -> None:
    from tfdoctor.fixes.project import local_modules

    script = CORPUS / "multifile" / "train.py"
    if not script.exists():
        pytest.skip("the two-file corpus project is not there")
    src, project = script.read_text(), local_modules(script)
    assert list(project) == ["model.py"]
    ctx = FixContext(hardware=BF16, project=project, filename="train.py")
    mp = get_fix("mixed-precision").apply(src, ctx)
    assert mp.changed and 'tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")' in mp.code
    assert 'tf.keras.layers.Dense(NUM_CLASSES, dtype="float32")' in mp.files["model.py"]
    assert "model.py: kept float32: Dense at line" in mp.reason and not mp.warnings
    bs = get_fix("batch-scale").apply(src, FixContext(project=project, params={"factor": "2"}))
    assert bs.changed and 'add_argument("--batch-size", type=int, default=128)' in bs.code
    assert "LEARNING_RATE = 0.002" in bs.files["model.py"]  # SGD(LEARNING_RATE * 10): linear rule
    assert "NOT SCALED" not in bs.reason and "tfdoctor batch-scale" not in bs.code
    # a pipeline built in a module beside the script: the fix edits it there, the script stays as is
    pipeline = {"data.py": "import tensorflow as tf\nds = tf.data.Dataset.range(8).map(f).batch(2)\n"}
    out = get_fix("tfdata-parallel-map").apply(
        "import data\nfor x in data.ds:\n    step(x)\n", FixContext(project=pipeline)
    )
    assert out.changed and out.code == "import data\nfor x in data.ds:\n    step(x)\n"
    assert "num_parallel_calls=tf.data.AUTOTUNE" in out.files["data.py"] and out.reason.startswith(
        "data.py: "
    )
    # without the project the script alone is searched: the reason says what is missing there
    assert not get_fix("tfdata-parallel-map").apply("import data\n", FixContext()).changed


def test_the_patch_covers_every_module_the_fix_changed(tmp_path: Path) -> None:
    from tfdoctor.fixes.workspace import modules_diff, write_modules

    before = {"model.py": "A = 1\n", "pkg/data.py": "B = 2\n"}
    after = {"model.py": "A = 2\n"}
    patch = modules_diff(before, after)
    assert patch.startswith("diff --git a/model.py b/model.py\n") and "-A = 1\n+A = 2\n" in patch
    (tmp_path / "pkg").mkdir()
    write_modules(tmp_path, after)
    assert (tmp_path / "model.py").read_text() == "A = 2\n"
    with pytest.raises(ValueError, match="not inside"):
        write_modules(tmp_path, {"../evil.py": "x"})


def test_a_function_holding_a_nested_generator_is_not_a_generator() -> None:
    src = """
    import numpy as np

    def load(n):
        rng = np.random.default_rng(0)
        return rng.random((n, 4))

    def main():
        x = load(8)

        def train_batches(k):
            for i in range(0, len(x), k):
                yield x[i : i + k]

        for xb in train_batches(2):
            train_step(xb)
    """
    assert_skipped(
        "generator-cache",
        src,
        "the generator(s) main.<locals>.train_batches() call no function of the script",
    )
    out = run("generator-prefetch", src)
    assert out.changed and "for xb in tfdoctor_prefetch(train_batches(2)):" in out.code


PER_EPOCH_METRIC = """
import tensorflow as tf
for epoch in range(3):
    epoch_loss = keras.metrics.Mean()
    for xb, yb in ds:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        epoch_loss.update_state(loss)
    print(epoch, float(epoch_loss.result()))
"""


def test_a_metric_created_per_epoch_is_created_once_and_reset_to_go_into_the_step() -> None:
    """A traced step holding a metric the loop replaces every epoch would update the first epoch's
    object for ever: the metric is created once before the loop and reset where it was created, and
    its update goes into the step (TF ops: an eager update a step cost as much as the step's own
    dispatch on TensorFlow's walkthrough). The loss is still returned: the run reads it there."""
    out = run("tf-function", PER_EPOCH_METRIC)
    assert out.changed, out.reason
    assert "epoch_loss created once before the loop and reset where it was created" in out.reason
    assert (
        "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
        "    epoch_loss.update_state(loss)\n    return loss\n\n"
        "epoch_loss = keras.metrics.Mean()\nfor epoch in range(3):\n    epoch_loss.reset_state()\n"
        "    for xb, yb in ds:\n        loss = train_step(xb, yb)\n"
    ) in out.code
    ast.parse(out.code)


def test_a_metric_the_script_keeps_per_epoch_stays_outside_the_extracted_step() -> None:
    """The script keeps each epoch's metric object (a history of them): creating it once would change
    what it keeps, so the update stays outside the step and the loop creates it as before."""
    src = PER_EPOCH_METRIC.replace("    print(epoch,", "    history.append(epoch_loss)\n    print(epoch,")
    out = run("tf-function", src)
    assert out.changed, out.reason
    assert "        loss = train_step(xb, yb)\n        epoch_loss.update_state(loss)\n" in out.code
    assert "    epoch_loss = keras.metrics.Mean()\n" in out.code and "reset_state" not in out.code


WALKTHROUGH = """
import tensorflow as tf


def grad(model, inputs, targets):
    with tf.GradientTape() as tape:
        loss_value = loss(model, inputs, targets, training=True)
    return loss_value, tape.gradient(loss_value, model.trainable_variables)


for epoch in range(num_epochs):
    epoch_loss_avg = keras.metrics.Mean()
    for x, y in train_dataset:
        loss_value, grads = grad(model, x, y)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        epoch_loss_avg.update_state(loss_value)
"""


def test_tf_function_extracts_a_gradient_function_and_the_update_after_its_call() -> None:
    """TensorFlow's "Custom training: walkthrough": ``grad()`` holds the tape and returns the gradients,
    the loop applies them. The call and the update are compiled together (decorating ``grad`` alone
    left the optimizer's update eager), the metric update with them (the metric created once)."""
    out = run("tf-function", WALKTHROUGH)
    assert out.changed, out.reason
    assert out.reason.startswith(
        "extracted the training step (line 13: grad() and the optimizer update after it) into "
        "@tf.function train_step(x, y)"
    )
    assert (
        "@tf.function\ndef train_step(x, y):\n"
        "    loss_value, grads = grad(model, x, y)\n"
        "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
        "    epoch_loss_avg.update_state(loss_value)\n"
        "    return loss_value\n"
    ) in out.code
    assert (
        "    epoch_loss_avg.reset_state()\n    for x, y in train_dataset:\n        loss_value = train_step(x, y)\n"
        in (out.code)
    )
    assert "@tf.function\ndef grad(" not in out.code
    ast.parse(out.code)


def test_a_gradient_function_is_decorated_alone_when_the_loop_reads_values_before_the_update() -> None:
    """What lies between the call and the update would run once under tf.function (a print, a Python
    read of the loss): the gradient function is compiled alone, the loop left as it is."""
    src = WALKTHROUGH.replace(
        "        optimizer.apply_gradients",
        "        print(float(loss_value))\n        optimizer.apply_gradients",
    )
    out = run("tf-function", src)
    assert out.changed, out.reason
    assert out.reason.startswith("@tf.function on grad() (line 4)"), out.reason
    assert "@tf.function\ndef grad(" in out.code and "train_step" not in out.code


EPOCH_FUNCTION = """
import tensorflow as tf


def train_one_epoch(model, ds, loss_function, optimizer, steps_per_epoch):
    for batch in ds.take(steps_per_epoch):
        with tf.GradientTape() as tape:
            loss = loss_function(batch[1], model(batch[0]))
        if not tf.math.is_nan(loss):
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        metric.update_state(loss)


for epoch in range(5):
    train_one_epoch(model, ds, loss_fn, opt, 100)
"""


def test_a_step_inside_a_function_called_once_an_epoch_is_defined_once_beside_it() -> None:
    """A per-epoch function holding the loop (a shape from user repositories): a tf.function defined
    inside it would be a new one every epoch, traced (and with XLA compiled) again each time (measured:
    5 epochs with XLA 3.4 s nested vs 1.5 s defined once). The step goes to module level, the names of
    the function's frame it reads passed in (``gradients``, set inside the step, is not one of them; the
    metric update after the optimizer's goes in with it)."""
    out = run("tf-function", EPOCH_FUNCTION)
    assert out.changed, out.reason
    assert "train_step(batch, loss_function, model, optimizer)" in out.reason
    assert out.code.startswith(
        "import tensorflow as tf\n\n\n@tf.function\ndef train_step(batch, loss_function, model, optimizer):\n"
        "    with tf.GradientTape() as tape:\n"
    )
    assert "    metric.update_state(loss)\n    return loss\n\n\ndef train_one_epoch(" in out.code
    assert (
        "    for batch in ds.take(steps_per_epoch):\n        loss = train_step(batch, loss_function, model, optimizer)\n"
        in out.code
    )
    ast.parse(out.code)
    # called once (a main()), the step stays inside it, its closure intact
    once = run(
        "tf-function",
        EPOCH_FUNCTION.replace("for epoch in range(5):\n    train_one_epoch", "train_one_epoch"),
    )
    assert once.changed and "    @tf.function\n    def train_step(batch):\n" in once.code


def test_a_step_inside_a_method_called_once_an_epoch_becomes_a_method() -> None:
    src = """
    import tensorflow as tf


    class Trainer:
        def train_epoch(self, scale):
            for x, y in self.ds:
                with tf.GradientTape() as tape:
                    loss = scale * self.loss_fn(y, self.model(x))
                grads = tape.gradient(loss, self.model.trainable_variables)
                self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
            return loss


    for epoch in range(3):
        trainer.train_epoch(2.0)
    """
    out = run("tf-function", src)
    assert out.changed, out.reason
    assert (
        "class Trainer:\n    @tf.function\n    def train_step(self, x, y, scale):\n"
        "        with tf.GradientTape() as tape:\n"
    ) in out.code
    assert "        return loss\n\n    def train_epoch(self, scale):\n" in out.code
    assert "            loss = self.train_step(x, y, scale)\n        return loss\n" in out.code
    ast.parse(out.code)


# -- scripts in the shapes of public tutorials and examples (tests/data/shapes/) --------------------
SHAPES = Path(__file__).resolve().parents[1] / "data" / "shapes"
#: shapes whose script lives beside its recorded trace (sample_traces/), not in SHAPES
SHAPE_ELSEWHERE = {
    "basic_training_loops.py": Path(__file__).resolve().parents[2]
    / "sample_traces"
    / "full-batch-loop"
    / "train.py"
}


def shape(script: str) -> Path:
    return SHAPE_ELSEWHERE.get(script, SHAPES / script)


_FN = Facts(loop_kind="custom", step_kind="tf.function")
_FIT = Facts(loop_kind="keras_fit", step_kind="tf.function")
#: script -> (what its run's facts say, the fixes that change it, a phrase of each fix's reason)
SHAPE_CASES: dict[str, tuple[Facts, dict[str, str]]] = {
    # TF "Text generation with an RNN": a Model subclass's tf.function train_step called by the loop;
    # ids -> sequences -> dataset pipeline; call() returns x, states
    "text_generation.py": (
        _FN,
        {
            "tfdata-parallel-map": "on 1 map/interleave (line 23)",
            "tfdata-cache": "cache() after map() of dataset (line 23)",
            "xla-jit": "@tf.function on train_step() (line 55)",
            "mixed-precision": "kept float32: Dense at line 38 (MyModel)",
            "batch-scale": "Adam at line 66: default 0.001 made explicit",
        },
    ),
    # a blog's Transformer: from tensorflow import function, GradientTape; from keras import ...; the
    # step returns nothing (train_loss(loss)); a LearningRateSchedule subclass
    "transformer_blog.py": (
        _FN,
        {
            "tfdata-prefetch": "at the end of the pipeline (line 50)",
            "xla-jit": "@function on train_step() (line 96)",
            "mixed-precision": "keras.mixed_precision.set_global_policy('mixed_bfloat16') before line 14",
            "batch-scale": "LRScheduler(...) (line 44) run 2x as far per step (the same schedule per example), "
            "its rate ×1.414",
        },
    ),
    # TF pix2pix: two builder functions writing x = ...(x); two tapes; tf.summary in the step; batch 1
    "pix2pix.py": (
        _FN,
        {
            "tfdata-prefetch": "(line 25)",
            "tfdata-cache": "cache() after map() of train_dataset (line 23)",
            "mixed-precision": "Conv2DTranspose at line 32 (Generator()), Conv2D at line 42 (Discriminator())",
            "batch-scale": "Adam at line 64: 0.0002 → 0.0002828 (square-root scaling for Adam); Adam at line 65",
        },
    ),
    # keras-io's character-level LSTM: fit(epochs=1) in a Python loop, then 4 x 400 characters generated with
    # one predict() of one row each: minutes between epochs of seconds, outside every timed step. The profile
    # run now watches that gap (TFD207, tests/integration/test_between_fits.py); the fixes are the fit()'s
    "char_lstm.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 65)",
            "xla-jit": "jit_compile=True on model.compile() (line 65)",
            "mixed-precision": "kept float32: Dense at line 61 (model)",
            "batch-scale": "batch size ×2 (batch_size = 256, line 87); learning rate RMSprop at line 64: 0.01 → "
            "0.01414 (square-root scaling for RMSprop)",
        },
    ),
    # TF CycleGAN: four models from pix2pix-style builders (an InstanceNormalization layer of the script's),
    # four Adam optimizers stepped in one persistent-tape @tf.function step returning nothing, BATCH_SIZE = 1,
    # two cached, jittered pipelines zipped in the loop. Right the first time; end to end (2026-11-30) xla-jit
    # 1.25x and batch x2 1.67x kept, combined 1.89x [1.47, 2.41], side by side 1.98-2.33x
    "cyclegan.py": (
        _FN,
        {
            "tfdata-prefetch": "at the end of the pipeline (line 71, 75, 79)",
            "xla-jit": "jit_compile=True on @tf.function on train_step() (line 245)",
            "mixed-precision": "kept float32: Conv2DTranspose at line 149 (unet_generator()), Conv2D at line 178 "
            "(discriminator())",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 2, line 17); learning rate Adam at line 212: 0.0002 → "
            "0.0002828 (square-root scaling for Adam); Adam at line 213: 0.0002 → 0.0002828 (square-root scaling "
            "for Adam); Adam at line 215: 0.0002 → 0.0002828 (square-root scaling for Adam); Adam at line 216",
        },
    ),
    # TF DCGAN: a tf.function step with two tapes returning nothing; BATCH_SIZE also sizes the noise
    "dcgan.py": (
        _FN,
        {
            "tfdata-prefetch": "at the end of the pipeline (line 19)",
            "xla-jit": "@tf.function on train_step() (line 109)",
            "mixed-precision": "kept float32: Dense at line 62 (make_discriminator_model())",
            "batch-scale": "BATCH_SIZE = 128, line 16); learning rate Adam at line 85: 0.0001 → 0.0001414 "
            "(square-root scaling for Adam); Adam at line 86",
        },
    ),
    # TF neural style transfer: the image is the variable trained (no batch), a frozen extractor whose
    # call() returns a dict, a @tf.function() step returning nothing
    "style_transfer.py": (
        _FN,
        {
            "xla-jit": "@tf.function(...) on train_step() (line 94)",
            "mixed-precision": "output layer not found (StyleContentModel: StyleContentModel.call() does not "
            "return a layer built in __init__)",
        },
    ),
    # TF "Overfit and underfit": CsvDataset decoded in batches and unbatched; compile_and_fit() for
    # several models; InverseTimeDecay(0.001, decay_steps=STEPS_PER_EPOCH * 1000)
    "overfit.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function"),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 71)",
            "tfdata-parallel-map": "on 1 map/interleave (line 37)",
            "tfdata-prefetch": "at the end of the pipeline (line 49)",
            "xla-jit": "model.compile() (line 71)",
            "mixed-precision": "kept float32: Dense at line 90 (tiny_model), Dense at line 99 (l2_model)",
            "batch-scale": "lr_schedule's initial_learning_rate (line 51) (its decay_steps=STEPS_PER_EPOCH * 1000 "
            "follows the batch size through STEPS_PER_EPOCH",
        },
    ),
    # user repositories: gradients accumulated over ACCUM_STEPS batches, the update under an if
    "grad_accum.py": (
        Facts(loop_kind="custom", step_kind="eager"),
        {
            "tf-function": "train_step(x, y, accum); the optimizer update under the if at line 36 (some steps "
            "only) stays in the loop",
            "tfdata-prefetch": "at the end of the pipeline (line 14)",
            "mixed-precision": "kept float32: Dense at line 21 (model)",
            "batch-scale": "BATCH_SIZE = 64, line 8); learning rate Adam at line 25: 0.001 → 0.001414",
        },
    ),
    # the Keras mixed precision guide run on a CPU
    "fp16_guide_on_cpu.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", dtype_policy="mixed_float16"),
        {
            "steps-per-execution": "steps_per_execution=8",
            "xla-jit": "model.compile() (line 17)",
            "mixed-precision": "dtype policy 'mixed_float16' → 'mixed_bfloat16' (line 6)",
            "batch-scale": "RMSprop at line 17: default 0.001 made explicit",
        },
    ),
    # debugging settings left in
    "fit_run_eagerly.py": (
        Facts(loop_kind="keras_fit", step_kind="eager"),
        {
            "tf-function": "model.compile(run_eagerly=True) → False (line 16)",
            "steps-per-execution": "steps_per_execution=8",
            "xla-jit": "model.compile() (line 12)",
            "mixed-precision": "Dense at line 10",
            "batch-scale": "32 → 64",
        },
    ),
    "run_functions_eagerly.py": (
        Facts(loop_kind="custom", step_kind="eager", functions_run_eagerly=True),
        {
            "tf-function": "tf.config.run_functions_eagerly(True) → False (line 5)",
            "tfdata-prefetch": "(line 9)",
            "mixed-precision": "Dense at line 11",
            "batch-scale": "32 → 64",
        },
    ),
    # keras-io's Keras 3 warm-up: CosineDecay(0.0 → warmup_target), steps from EPOCHS * len(train_ds)
    "keras_io_warmup.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 25)",
            "tfdata-prefetch": "at the end of the pipeline (line 14)",
            "xla-jit": "model.compile() (line 25)",
            "mixed-precision": "kept float32: Dense at line 24 (model)",
            "batch-scale": "decay_steps=total_steps - warmup_steps follows the batch size through total_steps, "
            "warmup_steps=warmup_steps follows the batch size through warmup_steps: the same schedule per "
            "example) 0, warmup_target 0.001 → 0.001414 (square-root scaling for AdamW)",
        },
    ),
    # CIFAR ResNet scripts: PiecewiseConstantDecay with boundaries in steps of the batch, SGD momentum
    "resnet_piecewise.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 21)",
            "xla-jit": "model.compile() (line 21)",
            "mixed-precision": "kept float32: Dense at line 19 (model)",
            "batch-scale": "PiecewiseConstantDecay at line 14: values 0.1, 0.01, 0.001 ×2, boundaries follow the "
            "batch size through steps_per_epoch (linear scaling for SGD)",
        },
    ),
    # TF transfer learning: the head's Dense made first and called later (outputs = prediction_layer(x)),
    # a frozen application base; a second compile at base_learning_rate / 10
    "transfer_learning.py": (
        _FIT,
        {
            "steps-per-execution": "model.compile() (line 43); model.compile() (line 55)",
            "xla-jit": "model.compile() (line 43); model.compile() (line 55)",
            "mixed-precision": "kept float32: Dense at line 31 (model)",
            "batch-scale": "base_learning_rate (line 42) 0.0001 → 0.0001414 (square-root scaling for Adam); "
            "RMSprop at line 56: base_learning_rate (line 42) (already scaled)",
        },
    ),
    # keras-io knowledge distillation: Distiller.call returns the student it was given; fit on arrays at
    # Keras's default batch, an unused batch_size = 64; Adam() twice
    "distiller.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="numpy"),
        {
            "steps-per-execution": "super().compile() in Distiller.compile()",
            "xla-jit": "super().compile() in Distiller.compile()",
            "mixed-precision": "Dense at line 45 (teacher), Dense at line 57 (Distiller, student's)",
            "batch-scale": "fit()'s default 32 made explicit, → 64 (fit at line 73, 85)",
        },
    ),
    # keras-io weather forecasting: timeseries_dataset_from_array (a gather map of its own, not shuffled),
    # an LSTM; ModelCheckpoint and EarlyStopping; a take(1) loop before fit reads the input shape
    "weather_forecasting.py": (
        _FIT,
        {
            "steps-per-execution": "model.compile() (line 76)",
            "tfdata-cache": "cache() after timeseries_dataset_from_array() of dataset_train (line 41); "
            "cache() after timeseries_dataset_from_array() of dataset_val (line 56)",
            "xla-jit": "model.compile() (line 76)",
            "mixed-precision": "Dense at line 73 (model)",
            "batch-scale": "batch_size = 512, line 19); learning rate Adam at line 76: learning_rate (line 18)",
        },
    ),
    # TF "Image classification": image_dataset_from_directory, cache().shuffle().prefetch(), a Sequential
    # fitted, then a second model assigned to the same name (augmentation, Dropout) fitted again
    "image_classification.py": (
        _FIT,
        {
            "steps-per-execution": "model.compile() (line 77); model.compile() (line 117)",
            "xla-jit": "model.compile() (line 77); model.compile() (line 117)",
            "mixed-precision": "Dense at line 73 (model), Dense at line 113 (model)",
            "batch-scale": "batch_size = 64, line 23",
        },
    ),
    # TF "Basic text classification": text_dataset_from_directory, TextVectorization in a map, an export
    # model compiled only to evaluate
    "text_classification.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 97)",
            # line 58's map only feeds vectorize_layer.adapt(): left alone
            "tfdata-parallel-map": "num_parallel_calls=tf.data.AUTOTUNE on 3 map/interleave (line 73, line 74, line 75)",
            "xla-jit": "jit_compile=True on model.compile() (line 97)",
            "mixed-precision": "Dense at line 91 (model), Activation at line 111 (export_model)",
            "batch-scale": "batch_size = 64, line 30",
        },
    ),
    # TF "Intro to Autoencoders": a Model subclass whose decoder is a Sequential attribute, fitted on
    # arrays at Keras's default batch; then ``autoencoder = Denoise()``, a second subclass, fitted. The
    # decoder Sequential itself got dtype="float32" (Keras 3's Sequential takes no dtype: a TypeError)
    # and the first model, the one the run profiles, kept its output bf16 (the name held only the last)
    "autoencoder.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="numpy"),
        {
            "steps-per-execution": "autoencoder.compile() (line 58); autoencoder.compile() (line 103)",
            "xla-jit": "jit_compile=True on autoencoder.compile() (line 58); autoencoder.compile() (line 103)",
            "mixed-precision": "Reshape at line 45 (Autoencoder), Conv2D at line 93 (Denoise)",
            "batch-scale": "fit()'s default 32 made explicit, → 64 (fit at line 60, 105)",
        },
    ),
    # keras-io "Customizing what happens in fit()" (Keras 3): CustomModel overrides only train_step
    # (``self.optimizer.apply``, ``self.compute_loss``) and is built as ``CustomModel(inputs, outputs)``;
    # a second CustomModel, with its own loss and trackers, compiled without a loss. Mixed precision
    # found "no model in the script" and left both outputs bf16
    "custom_fit.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="numpy"),
        {
            "steps-per-execution": "model.compile() (line 52); model.compile() (line 106)",
            "xla-jit": "jit_compile=True on model.compile() (line 52); model.compile() (line 106)",
            "mixed-precision": "Dense at line 50 (model), Dense at line 102 (model)",
            "batch-scale": "fit()'s default 32 made explicit, → 64 (fit at line 57, 111)",
        },
    ),
    # TF "Time series forecasting": WindowGenerator's train/val/test properties (methods attached after
    # the class) make shuffled timeseries_dataset_from_array datasets mapped through split_window;
    # compile_and_fit(model, window) compiles and fits each Sequential it is given. Handled as it is
    "time_series.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="tf.data"),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 157)",
            "tfdata-parallel-map": "num_parallel_calls=tf.data.AUTOTUNE on 1 map/interleave (line 106)",
            "tfdata-prefetch": ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline (line 108)",
            "xla-jit": "jit_compile=True on model.compile() (line 157)",
            "mixed-precision": "Reshape at line 185 (multi_step_dense), Dense at line 201 (lstm_model)",
            "batch-scale": "batch size ×2 (32 → 64, line 98)",
        },
    ),
    # CIFAR repositories: ImageDataGenerator(rotation_range=...).flow(x, y, batch_size=batch_size) fed
    # to fit with steps_per_epoch computed from the batch. generator-prefetch said "no Python generator
    # ... in the script", true but no help; now it says why the loader is left alone, with advice
    "image_data_generator.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="python_generator"),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 31)",
            "xla-jit": "jit_compile=True on model.compile() (line 31)",
            "mixed-precision": "Dense at line 29 (model)",
            "batch-scale": "batch_size = 128, line 9",
        },
    ),
    # TF "Classify structured data using Keras preprocessing layers": the batch a helper's parameter
    # given a module constant by keyword, Normalization / StringLookup layers adapted on the dataset. The
    # mixed-precision trial died in Normalization.adapt() ("expected to be a float tensor but is a
    # bfloat16 tensor"), hinted as the script's own float32 math; XLA is refused from the run's facts
    "structured_data.py": (
        Facts(
            loop_kind="keras_fit",
            step_kind="tf.function",
            input_kind="tf.data",
            xla_unsupported=["IntegerLookup", "StringLookup"],
        ),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 137)",
            "mixed-precision": "kept float32: Normalization at line 54",
            "batch-scale": "batch size ×2 (batch_size = 512, line 87); learning rate Adam at line 137: default",
        },
    ),
    # keras-io "Timeseries classification from scratch" (Keras 3): Conv1D + BatchNormalization, a softmax
    # Dense as output, optimizer="adam", ModelCheckpoint / ReduceLROnPlateau / EarlyStopping callbacks,
    # validation_split, the best model loaded back after fit
    "timeseries_classification.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="numpy"),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 55)",
            "xla-jit": "jit_compile=True on model.compile() (line 55)",
            "mixed-precision": "kept float32: Dense at line 40 (make_model())",
            "batch-scale": "batch size ×2 (batch_size = 64, line 48); learning rate Adam at line 55: default",
        },
    ),
    # keras-io "Sequence to sequence learning for performing number addition" (Keras 3): data made in a
    # Python loop with np.random unseeded, a Sequential built with model.add, fit(epochs=1) called once
    # per iteration of a Python loop, each followed by predictions printed with a check mark
    "addition_rnn.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="numpy"),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 149)",
            "xla-jit": "jit_compile=True on model.compile() (line 149)",
            "mixed-precision": "kept float32: Dense at line 148 (model)",
            "batch-scale": "batch size ×2 (batch_size = 64, line 153); learning rate Adam at line 149: default",
        },
    ),
    # keras-io "OCR model for reading Captchas" (Keras 3): PNGs decoded in a map that calls a module-level
    # StringLookup (tfdata-cache: "calls a function tfdoctor cannot inspect"); the model's output is a
    # CTCLayer of the script's, taking no dtype, fed the softmax (which stayed bf16)
    "ocr_captcha.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 255)",
            "tfdata-cache": "cache() after map() of train_dataset (line 104); cache() after map() of "
            "validation_dataset (line 111)",
            "xla-jit": "jit_compile=True on model.compile() (line 255)",
            "mixed-precision": "kept float32: Dense at line 241 (model, fed to its output CTCLayer, which takes "
            "no dtype)",
            "batch-scale": "batch size ×2 (batch_size = 32, line 40); learning rate Adam at line 253: default "
            "0.001 made explicit",
        },
    ),
    # keras-io "Image similarity estimation using a Siamese Network with a triplet loss" (Keras 3): three
    # zipped file-name datasets, the negatives shuffled, a shuffle before the decoding map (no cache may
    # go anywhere: each would replay a shuffle or freeze the negatives' pairing); a DistanceLayer of the
    # script's (**kwargs) returning two distances; a SiameseModel whose train_step computes the loss
    "siamese_network.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in siamese_model.compile() (line 274)",
            "tfdata-parallel-map": "num_parallel_calls=tf.data.AUTOTUNE on 1 map/interleave (line 110)",
            "xla-jit": "jit_compile=True on siamese_model.compile() (line 274)",
            "mixed-precision": "kept float32: DistanceLayer at line 188 (siamese_network)",
            "batch-scale": "batch size ×2 (32 → 64, line 116); learning rate Adam at line 274: 0.0001 → 0.0001414",
        },
    ),
    # user repositories' @dataclass TrainConfig read as cfg.batch_size / cfg.learning_rate through
    # build_model(cfg) and make_datasets(cfg): "no batch size found to scale"
    "config_dataclass.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 69)",
            "tfdata-prefetch": "at the end of the pipeline (line 49)",
            "xla-jit": "jit_compile=True on model.compile() (line 69)",
            "mixed-precision": "kept float32: Dense at line 60 (build_model())",
            "batch-scale": "batch size ×2 (TrainConfig.batch_size = 128, line 14); learning rate AdamW at line 70: "
            "TrainConfig.learning_rate (line 15) 0.0003 → 0.0004243",
        },
    ),
    # keras-io collaborative filtering: a Model subclass whose call() ends in tf.nn.sigmoid(x), no
    # output layer: "output layer not found", and the sigmoid computed in bf16
    "collaborative_filtering.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 113)",
            "xla-jit": "jit_compile=True on model.compile() (line 113)",
            "mixed-precision": "kept float32: tf.nn.sigmoid's input x at line 109 cast (RecommenderNet.call() "
            "returns an op, not a layer)",
            "batch-scale": "batch size ×2 (64 → 128, line 121); learning rate Adam at line 115: 0.001 → 0.001414",
        },
    ),
    # keras.io's functional API guide: three named inputs, two named outputs (a dict of losses and loss
    # weights), fit on a dict of arrays; both outputs stay float32
    "multi_io.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 40)",
            "xla-jit": "jit_compile=True on model.compile() (line 40)",
            "mixed-precision": "kept float32: Dense at line 30 (model), Dense at line 32 (model)",
            "batch-scale": "batch size ×2 (32 → 64, line 58); learning rate RMSprop at line 41: 0.001 → 0.001414",
        },
    ),
    # user repositories feeding fit from tf.data.Dataset.from_generator over a callable class yielding one
    # example at a time: "no Python generator feeds the training loop" (tf.data runs it, one Python call
    # per item: 26 ms a batch of 64); now read in chunks of 64
    "from_generator_fit.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 83)",
            "tfdata-prefetch": "at the end of the pipeline (line 79)",
            "generator-prefetch": "from_generator() at line 78, line 80 takes the generator's items 64 at a time",
            "xla-jit": "jit_compile=True on model.compile() (line 83)",
            "mixed-precision": "kept float32: Dense at line 57 (get_model())",
            "batch-scale": "batch size ×2 (--batch_size default 64 → 128, line 64); learning rate Adam at line 84: "
            "--lr default (line 66) 0.001 → 0.001414",
        },
    ),
    # keon/deep-q-learning's dqn.py: act with model.predict(state), replay sample by sample with two
    # predict() and a fit(state, target_f, epochs=1, verbose=0) of one row each (120-130 ms a call here:
    # each builds a dataset and an iterator); the facts are its run's (the act line seen outside the
    # timing window). batch-scale finds the replay's minibatch size (32 samples, one fit each): its
    # trial is rejected by its examples per step (1 -> 1), not by the codemod
    "dqn_agent.py": (
        _FIT.model_copy(
            update={
                "input_kind": "numpy",
                "batch_size": 1,
                "keras_batch_calls": [
                    KerasBatchCall(
                        api="predict",
                        site="dqn_agent.py:72",
                        code="act_values = self.model.predict(state)",
                        calls=0,
                        rows=1,
                    ),
                    KerasBatchCall(
                        api="predict",
                        site="dqn_agent.py:80",
                        code="target = reward + self.gamma * np.amax(self.model.predict(next_state)[0])",
                        calls=24,
                        rows=1,
                    ),
                    KerasBatchCall(
                        api="predict",
                        site="dqn_agent.py:81",
                        code="target_f = self.model.predict(state)",
                        calls=24,
                        rows=1,
                    ),
                    KerasBatchCall(
                        api="fit",
                        site="dqn_agent.py:83",
                        code="self.model.fit(state, target_f, epochs=1, verbose=0)",
                        calls=24,
                        rows=1,
                    ),
                ],
            }
        ),
        {
            "keras-on-batch": "predict() -> predict_on_batch() at line 72 (1 row(s) a call); predict() -> "
            "predict_on_batch() at line 80 (1 row(s) a call); predict() -> predict_on_batch() at line 81 (1 row(s) "
            "a call); fit() -> train_on_batch() at line 83 (1 row(s) a call)",
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 63)",
            "xla-jit": "jit_compile=True on model.compile() (line 63)",
            "mixed-precision": "kept float32: Dense at line 62 (model)",
            # random.sample(self.memory, batch_size): a replay batch, a hyperparameter (batch-scale skips)
        },
    ),
    # keras-io "End-to-end Masked Language Modeling with BERT" (Keras 3): settings as class attributes of a
    # @dataclass Config without fields, a compute_loss override summing an unreduced loss, a softmax Dense
    # over the vocabulary, then a saved model reloaded into a classifier compiled twice with Adam()
    "mlm_bert.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in mlm_model.compile() (line 296); "
            "classifer_model.compile() (line 380); classifer_model.compile() (line 399)",
            "tfdata-prefetch": "at the end of the pipeline (line 170, 191)",
            "xla-jit": "jit_compile=True on mlm_model.compile() (line 296)",
            "mixed-precision": "kept float32: Dense at line 377 (classifer_model), Dense at line 290 "
            "(create_masked_language_bert_model())",
            "batch-scale": "batch size ×2 (Config.BATCH_SIZE = 64, line 38); learning rate Adam at line 295: "
            "Config.LR (line 39) 0.001 → 0.001414",
        },
    ),
    # keras-io ViT: KERAS_BACKEND set before import keras, an augmentation Sequential whose Normalization is
    # adapted on the images, Patches / PatchEncoder layers, logits from the last Dense, AdamW, fit on arrays
    "vit_classifier.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 237)",
            "xla-jit": "jit_compile=True on model.compile() (line 237)",
            "mixed-precision": "kept float32: Dense at line 221 (model) (output layer of the model computing "
            "the loss: model: compiled with a loss); kept float32: Normalization at line 78",
            "batch-scale": "batch size ×2 (batch_size = 128, line 55); learning rate AdamW at line 233: "
            "learning_rate (line 53) 0.001 → 0.001414 (square-root scaling for AdamW)",
        },
    ),
    # keras-io WGAN-GP: compile(d_optimizer, g_optimizer, d_loss_fn, g_loss_fn) over super().compile(),
    # the models handed to WGAN(discriminator=d_model, ...): "which model computes the loss is not visible"
    # keras-io gradient centralization (Keras 3): class GCRMSprop(RMSprop) built with a rate and fitted
    # second, after a plain RMSprop: batch-scale scaled only the plain one, the subclass left silently
    "gradient_centralization.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 168); model.compile() (line 183)",
            "xla-jit": "jit_compile=True on model.compile() (line 168); model.compile() (line 183)",
            "mixed-precision": "kept float32: Dense at line 119 (model)",
            "batch-scale": "GCRMSprop (a subclass of RMSprop) at line 145: 0.0001 → 0.0001414 (square-root "
            "scaling for RMSprop); RMSprop at line 170: 0.0001 → 0.0001414",
        },
    ),
    # TensorFlow's tf.function guide: a whole epoch in one tf.function (``for x, y in dataset:``), the
    # pipeline returned by make_dataset() and handed to it; the run counted 64 updates a call. XLA on that
    # function failed (no XLA kernel for ScanDataset); prefetch saw "no pipeline assigned to a name"
    "tf_function_epoch.py": (
        Facts(loop_kind="custom", step_kind="tf.function", steps_per_execution=64),
        {
            "tfdata-prefetch": "at the end of the pipeline (line 21)",
            "xla-jit": "train_one_step() (line 36) as @tf.function(jit_compile=True): the step the loop of "
            "train() runs each batch",
            "mixed-precision": "kept float32: Dense at line 29 (model)",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 128, line 12)",
        },
    ),
    # the distributed-training tutorial / Orbit: ``for _ in tf.range(steps): step_fn(next(iterator))``
    "multi_step_range.py": (
        Facts(loop_kind="custom", step_kind="tf.function", steps_per_execution=16),
        {
            "tfdata-prefetch": "at the end of the pipeline (line 20)",
            "xla-jit": "step_fn() (line 37) as @tf.function(jit_compile=True): the step the loop of "
            "train_multiple_steps() runs each batch",
            "mixed-precision": "kept float32: Dense at line 29 (model)",
            "batch-scale": "batch size ×2 (GLOBAL_BATCH_SIZE = 128, line 12)",
        },
    ),
    # a fit with the callbacks people add (a ModelCheckpoint every 10 batches, TensorBoard each batch, an
    # evaluate() every 25 batches in a callback of its own): TFD209 names them; the fixes are fit's
    "heavy_callbacks.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 56)",
            "xla-jit": "jit_compile=True on model.compile() (line 56)",
            "mixed-precision": "kept float32: Dense at line 53 (model)",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 128, line 14); learning rate Adam at line 57: 0.001 → "
            "0.001414 (square-root scaling for Adam)",
        },
    ),
    "wgan_gp.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in super().compile() in WGAN.compile(), which "
            "wgan.compile() calls (line 222)",
            "xla-jit": "jit_compile=True on super().compile() in WGAN.compile()",
            "mixed-precision": "kept float32: Dense at line 121 (d_model), Cropping2D at line 191 (g_model) "
            "(output layer of the model computing the loss: d_model: its output reaches self.d_loss_fn(); "
            "g_model: its output reaches d_loss)",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 128, line 27); learning rate Adam at line 327: 0.0002 → "
            "0.0002828 (square-root scaling for Adam); Adam at line 328: 0.0002 → 0.0002828",
        },
    ),
    # TF "Distributed training with Keras": MirroredStrategy, BATCH_SIZE_PER_REPLICA * replicas, a decay()
    # fed to LearningRateScheduler, compile() under strategy.scope()
    "distributed_keras.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 65)",
            "tfdata-parallel-map": "num_parallel_calls=tf.data.AUTOTUNE on 2 map/interleave (line 50, line 51)",
            "tfdata-prefetch": ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline (line 50)",
            "tfdata-cache": "cache() after map() of eval_dataset (line 51)",
            "xla-jit": "jit_compile=True on model.compile() (line 65)",
            "mixed-precision": "kept float32: Dense at line 61 (model)",
            "batch-scale": "batch size ×2 (BATCH_SIZE_PER_REPLICA = 128, line 39); learning rate Adam at line 67: "
            "default 0.001 made explicit, → 0.001414 (square-root scaling for Adam); LearningRateScheduler at "
            "line 99: decay() returns 0.001 → 0.001414, 0.0001 → 0.0001414, 1e-05 → 1.414e-05",
        },
    ),
    # TF "Basic regression": fit() on numpy arrays with no batch size, 8 steps an epoch, validation_split
    "basic_regression.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="numpy"),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 40)",
            "xla-jit": "jit_compile=True on model.compile() (line 40)",
            "mixed-precision": "kept float32: Dense at line 37 (model)",
            "batch-scale": "batch size ×2 (fit()'s default 32 made explicit, → 64 (fit at line 47)); learning "
            "rate Adam at line 40: 0.001 → 0.001414",
        },
    ),
    # keras-io imbalanced classification (Keras 3): CSV rows read line by line into lists, class_weight of
    # 1 / count (a loss of the order of 1e-5), Adam(1e-2) positional, batch_size=2048, verbose=2, a
    # ModelCheckpoint each epoch; works as it should (batch ×2 kept end to end, the tiny loss checked)
    "imbalanced_classification.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="numpy"),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 115)",
            "xla-jit": "jit_compile=True on model.compile() (line 115)",
            "mixed-precision": "before line 19; kept float32: Dense at line 97 (model)",
            "batch-scale": "batch size ×2 (2048 → 4096, line 124); learning rate Adam at line 116: 0.01 → "
            "0.01414 (square-root scaling for Adam)",
        },
    ),
    # user repositories decoding PNGs with PIL inside tf.py_function (Image.open(...).convert("L")), the
    # path pairs shuffled under `if shuffle:` before the load: the shuffle moves below the load, a cache
    # after it (the element-wise test follows the Python py_function runs and allows PIL's readers)
    "pil_py_function_loader.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="tf.data"),
        {
            "tfdata-cache": "cache() after map(tf_load_pair) of dataset (line 64), the shuffle of line 63 moved "
            "below it",
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 91)",
            "tfdata-parallel-map": "num_parallel_calls=tf.data.AUTOTUNE on 2 map/interleave (line 64, line 66)",
            "xla-jit": "jit_compile=True on model.compile() (line 91)",
            "mixed-precision": "kept float32: Conv2D at line 77 (build_model())",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 32, line 20); learning rate Adam at line 91: default "
            "0.001 made explicit, → 0.001414",
        },
    ),
    # user repositories reading one .npy file per example through tf.numpy_function in a sequential map,
    # after a shuffle of the paths under `if training:`; a set_shape map, a random flip map, no prefetch.
    # tfdata-cache only advised the reorder that allows its cache (TFD102: 21 % of the CPU re-loading the
    # same files); it now makes it: the shuffle statement moves below the loads, a cache after them
    "numpy_function_loader.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="tf.data"),
        {
            "tfdata-cache": "cache() after map(load_data_fn), map(set_shapes) of ds (line 63), the shuffle of "
            "line 61 moved below it",
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 93)",
            "tfdata-parallel-map": "num_parallel_calls=tf.data.AUTOTUNE on 3 map/interleave (line 62, line 63, "
            "line 65)",
            "tfdata-prefetch": ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline (line 67)",
            "xla-jit": "jit_compile=True on model.compile() (line 93)",
            "mixed-precision": "kept float32: Dense at line 79 (build_model())",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 32, line 19); learning rate Adam at line 93: 0.001 → "
            "0.001414",
        },
    ),
    # TF "Basic training loops": a tf.Module of two tf.Variables, assign_sub after the tape, no batch
    "basic_training_loops.py": (
        Facts(loop_kind="custom", step_kind="eager", input_kind="numpy"),
        {"tf-function": "@tf.function on train() (line 34)"},
    ),
    # TF "Convolutional Variational Autoencoder": a Model subclass with no call(), its encoder / decoder
    # Sequential attributes run by encode() / decode(), called by compute_loss(model, x)
    "cvae.py": (
        _FN,
        {
            "tfdata-prefetch": "(line 42, 43)",
            "xla-jit": "@tf.function on train_step() (line 121)",
            "mixed-precision": "kept float32: Dense at line 59 (CVAE.encoder), Conv2DTranspose at line 75 "
            "(CVAE.decoder)",
            "batch-scale": "batch_size = 64, line 39); learning rate Adam at line 101: 0.0001 → 0.0001414",
        },
    ),
    # keras-io U-Net segmentation (Keras 3): get_dataset() maps its nested load_img_masks (files read and
    # decoded) and returns dataset.batch(); a per-pixel Conv2D softmax output; Adam(1e-4) positional
    "segmentation_unet.py": (
        _FIT,
        {
            "steps-per-execution": "model.compile() (line 180)",
            "tfdata-prefetch": ".prefetch(tf_data.AUTOTUNE) at the end of the pipeline (line 88)",
            "tfdata-cache": "cache() after map() of dataset (line 87)",
            "xla-jit": "model.compile() (line 180)",
            "mixed-precision": "kept float32: Conv2D at line 143 (model)",
            "batch-scale": "batch_size = 64, line 21); learning rate Adam at line 180: 0.0001 → 0.0001414",
        },
    ),
    # keras-io DDIM (Keras 3): a Model subclass with its own __init__ and no call(), compile(**kwargs)
    # overridden, get_network() builds the U-Net, batch_size read again in train_step; a pipeline that
    # prepare_dataset() returns, cached and prefetched already
    "ddim.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in super().compile() in DiffusionModel.compile()",
            "xla-jit": "jit_compile=True on super().compile() in DiffusionModel.compile()",
            "mixed-precision": "kept float32: Conv2D at line 225 (get_network()), GlobalAveragePooling2D at line 110 "
            "(KID.encoder)",
            "batch-scale": "batch size ×2 (batch_size = 64, line 45); learning rate AdamW at line 378: "
            "learning_rate (line 47) 0.001 → 0.001414",
        },
    ),
    # TF "Load and preprocess images": a Keras utility's pipeline fitted, then list_files + a parallel
    # decoding map + ``configure_for_performance(ds)`` (cache, shuffle, batch, prefetch its parameter)
    # fitted. tfdata-prefetch appended a prefetch to ``normalized_ds`` (only looked at with
    # ``next(iter(...))``) and to ``list_ds = list_ds.shuffle(...)`` mid-pipeline (looked at in a
    # ``take(5)`` loop); tfdata-parallel-map parallelised the looked-at map only
    "load_images.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 77)",
            "xla-jit": "jit_compile=True on model.compile() (line 77)",
            "mixed-precision": "kept float32: Dense at line 73 (model)",
            "batch-scale": "batch size ×2 (batch_size = 64, line 24)",
        },
    ),
    # keras-io's MixUp: two shuffled pipelines zipped and a random map mixing each pair; the model fitted
    # on the mixed pipeline, then again on one plain one (two compile() lines, optimizer="adam" in both).
    # tfdata-cache said "train_ds reads zip(): cannot tell whether the decoded data fits in memory" (the
    # inputs are arrays; what forbids a cache is their shuffle and the random mix)
    "mixup.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 151); model.compile() (line 162)",
            "tfdata-prefetch": ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline (line 55, 107)",
            "xla-jit": "jit_compile=True on model.compile() (line 151); model.compile() (line 162)",
            "mixed-precision": "kept float32: Dense at line 131 (model)",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 128, line 43); learning rate Adam at line 151: default "
            "0.001 made explicit, → 0.001414 (square-root scaling for Adam); Adam at line 162",
        },
    ),
    # keras-io's "Text classification with Transformer" (Keras 3: TransformerBlock and
    # TokenAndPositionEmbedding layers of the script's, a softmax Dense(2) output, optimizer="adam",
    # fit on padded arrays): every codemod right the first time; end to end on an avx512_bf16 CPU
    # (2026-11-30) steps-per-execution kept 1.127x, mixed-precision 1.048x not decided
    "transformer_text_classifier.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 131)",
            "xla-jit": "jit_compile=True on model.compile() (line 131)",
            "mixed-precision": "set_global_policy('mixed_bfloat16') before line 23; kept float32: Dense at line 122 "
            "(model)",
            "batch-scale": "batch size ×2 (32 → 64, line 134); learning rate Adam at line 131: default 0.001 made "
            "explicit, → 0.001414 (square-root scaling for Adam)",
        },
    ),
    # TensorFlow's "word2vec" (Keras 3): a Word2Vec subclass whose call(pair) returns an einsum (the
    # logits: no output layer), skip-grams made in numpy, a TextVectorization pipeline no training reads,
    # fit on a cached, prefetched dataset at BATCH_SIZE = 1024: every codemod right the first time; end to
    # end (2026-11-30) xla-jit 1.52x and batch ×2 1.42x kept, combined 3.05x [2.11, 4.40], side by side 2.4-3.4x
    "word2vec.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in word2vec.compile() (line 143)",
            "xla-jit": "jit_compile=True on word2vec.compile() (line 143)",
            "mixed-precision": "kept float32: the value returned, dots, at line 138 cast (Word2Vec.call() returns an "
            "op, not a layer)",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 2048, line 105); learning rate Adam at line 143: default "
            "0.001 made explicit, → 0.001414 (square-root scaling for Adam)",
        },
    ),
    # keras-io's SimSiam (its backbone from a module beside it): SimSiam(get_encoder(), get_predictor()) with
    # a train_step computing the loss on both models' outputs; one CosineDecay driving two SGD optimizers.
    # mixed-precision kept float32 only on the linear classifier's Dense (the two models handed in as
    # builder calls were not followed into self.encoder / self.predictor: the loss was computed in bf16);
    # tfdata-prefetch appended a prefetch to the zip of two pipelines that each prefetch
    "simsiam/simsiam.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in simsiam.compile() (line 253); linear_model.compile() "
            "(line 288)",
            "tfdata-cache": "cache() after map(custom_augment_prefix) of ssl_ds_one (line 107); cache() after "
            "map(custom_augment_prefix) of ssl_ds_two (line 115)",
            "xla-jit": "jit_compile=True on simsiam.compile() (line 253); linear_model.compile() (line 288)",
            "mixed-precision": "kept float32: Dense at line 284 (linear_model), BatchNormalization at line 159 "
            "(get_encoder()), Dense at line 175 (get_predictor()) (output layer of the model computing the loss: "
            "linear_model: compiled with a loss; get_encoder(): its output reaches loss; get_predictor(): its "
            "output reaches loss)",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 256, line 26); learning rate SGD at line 253: "
            "lr_decayed_fn's initial_learning_rate (line 242) (its decay_steps=steps follows the batch size "
            "through steps: the same schedule per example) 0.03 → 0.06 (linear scaling for SGD)",
        },
    ),
    # a user repository's custom loop: @tf.function train_step writing tf.summary scalars, keras Progbar
    # updated with float(loss) every step, CheckpointManager, argparse defaults for batch size and lr
    "progbar_loop.py": (
        _FN,
        {
            "tfdata-prefetch": ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline (line 48, 49)",
            "mixed-precision": "kept float32: Dense at line 21 (MLP) (output layer of the model computing the "
            "loss: MLP: its output reaches loss)",
            "batch-scale": "batch size ×2 (--batch-size default 64 → 128, line 41); learning rate Adam at line 52: "
            "--lr default (line 42) 0.001 → 0.001414",
        },
    ),
    # user repositories' Trainer class with a tqdm bar: the tape inline in train_one_epoch's loop over
    # (pbar := tqdm(dataloader)), a hand-written Loader class whose __iter__ is a generator (numpy per batch).
    # generator-prefetch said "no Python generator feeds the training loop" (it looked at generator functions
    # and methods called in the loop, never at a class's __iter__); the thread now goes inside __iter__
    "tqdm_trainer.py": (
        Facts(loop_kind="custom", step_kind="eager", input_kind="numpy"),
        {
            "tf-function": "extracted the training step (line 48) into @tf.function train_step(s)",
            "generator-prefetch": "Loader.__iter__() (line 25) runs in a background thread",
            "mixed-precision": "kept float32: Dense at line 84 (build_model())",
            "batch-scale": "--lr default (line 101) 0.001 → 0.001414",
        },
    ),
    # TensorFlow's actor-critic (CartPole) tutorial: an episode inside the @tf.function step, the environment
    # stepped through tf.numpy_function two calls down, call() returning two heads (actor, critic). bf16
    # kept only the first head float32 (the trial failed in the gradient of the critic's TensorArray);
    # xla-jit ran a trial that failed on PyFunc (now skipped before a run, test_fix_transforms.py)
    "actor_critic.py": (
        Facts(loop_kind="custom", step_kind="tf.function", input_kind="numpy"),
        {
            "mixed-precision": "kept float32: Dense at line 59 (ActorCritic), Dense at line 60 (ActorCritic)",
        },
    ),
    # keras-io's English-to-Spanish seq2seq Transformer: make_dataset() assigns dataset = dataset.map(...) and
    # returns dataset.cache().shuffle(2048).prefetch(16); the decoder a functional model called by name in
    # the transformer's outputs (decoder_outputs = decoder([...])). tfdata-cache added a second cache after
    # the map (it read only the assignments, not the return), and mixed-precision said "output layer not
    # found" (the nested model was not known by name yet)
    "seq2seq_transformer.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="tf.data"),
        {
            "steps-per-execution": "steps_per_execution=8 in transformer.compile() (line 247)",
            "tfdata-parallel-map": "(line 102)",
            "xla-jit": "jit_compile=True on transformer.compile() (line 247)",
            "mixed-precision": "kept float32: Dense at line 234 (transformer)",
            "batch-scale": "RMSprop at line 247: default 0.001 made explicit, → 0.001414",
        },
    ),
    # TensorFlow's data augmentation tutorial: prepare(ds, shuffle=False, augment=False) maps ds (a parameter)
    # with num_parallel_calls set already, shuffles and augments under its flags; its maps' skip said "on a name
    # not known to be a tf.data dataset", tfdata-cache "no in-memory source" (both now say what is there)
    "data_augmentation.py": (
        Facts(loop_kind="keras_fit", step_kind="tf.function", input_kind="tf.data"),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 75)",
            "xla-jit": "jit_compile=True on model.compile() (line 75)",
            "mixed-precision": "kept float32: Dense at line 71 (model)",
            "batch-scale": "batch size ×2 (batch_size = 64, line 11)",
        },
    ),
    # an eager text loop with dynamic padding (each batch padded to its longest sequence by pad_sequences in
    # a generator): the run sees the input change shape, so the step is compiled with reduce_retracing=True
    "dynamic_padding.py": (
        Facts(loop_kind="custom", step_kind="eager", input_kind="numpy", input_shapes_vary=True),
        {
            "tf-function": "into @tf.function train_step(x, y); reduce_retracing=True",
            "generator-prefetch": "batches() at line 33 runs in a background thread",
            "mixed-precision": "kept float32: Dense at line 25 (model)",
            "batch-scale": "batch size ×2",
        },
    ),
    # TensorFlow's "Load CSV data" (Titanic): a dict of columns, a symbolic preprocessing head with StringLookup,
    # a builder compiling a functional model whose output comes from a Sequential `body` called by name, fit()
    # on the dict at Keras's default batch. Right the first time (XLA: Keras runs StringLookup without it)
    "load_csv.py": (
        Facts(
            loop_kind="keras_fit",
            step_kind="tf.function",
            input_kind="numpy",
            xla_unsupported=["StringLookup"],
        ),
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 58)",
            "mixed-precision": "kept float32: Dense at line 52 (model)",
            "batch-scale": "fit()'s default 32 made explicit, → 64 (fit at line 63)",
        },
    ),
    # Kaggle's TPU starter template: ``dataset`` built in get_training_dataset() (no cache) and in
    # get_validation_dataset() (cached, prefetched): the cache fix said "dataset already caches (line 82)",
    # the validation function's line; BATCH_SIZE = 16 * strategy.num_replicas_in_sync was "no batch size
    # found", and lrfn()'s rate from LR_START / LR_MAX / LR_MIN constants "not computed from the one it is
    # given"
    "kaggle_tpu_starter.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 122)",
            "tfdata-parallel-map": "num_parallel_calls=tf.data.AUTOTUNE on 1 map/interleave (line 69)",
            "tfdata-cache": "cache() after map() of dataset (line 69)",
            "xla-jit": "jit_compile=True on model.compile() (line 122)",
            "mixed-precision": "kept float32: Dense at line 118 (model)",
            "batch-scale": (
                "BATCH_SIZE = 32 * strategy.num_replicas_in_sync (was 16 × ...), line 34); learning rate Adam "
                "at line 122: default 0.001 made explicit, → 0.001414 (square-root scaling for Adam); "
                "LearningRateScheduler at line 105: lrfn() returns a rate computed from LR_MAX, LR_START, "
                "LR_MIN (LR_MAX 5e-05 → 7.071e-05; LR_START 1e-05 → 1.414e-05; LR_MIN 1e-05 → 1.414e-05)"
            ),
        },
    ),
    # Kaggle's K-fold tabular notebooks: K.clear_session() before each fold's build_model() reset the
    # policy set after the imports (the trial: "not applied: the dtype policy float32"); kfold_split() was
    # taken for a batch generator by generator-cache
    "kfold_tabular.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 58)",
            "xla-jit": "jit_compile=True on model.compile() (line 58)",
            "mixed-precision": "set again after clear_session() (line 72), which resets it to float32",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 512, line 21); learning rate Adam at line 59: LR (line 22)",
        },
    ),
    # the DeepLearning.AI course's windowed_dataset(): window/flat_map (unknown cardinality, a shuffle
    # buffer refilled at each epoch), ``dataset`` both in the function and at module level (prefetch(1)
    # in the function: the prefetch fix must read it there), clear_session() after the imports; the cache
    # said "the pipeline already ran window(): a cache after it would replay it every epoch" (window() is
    # the same every epoch): now the shuffle moves after the element-wise split and the cache before it
    "windowed_dataset.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 86)",
            "tfdata-parallel-map": "num_parallel_calls=tf.data.AUTOTUNE on 2 map/interleave (line 62, line 90)",
            "tfdata-cache": "cache() after map() of dataset (line 62)",
            "xla-jit": "jit_compile=True on model.compile() (line 86)",
            "mixed-precision": "set again after clear_session() (line 67), which resets it to float32",
            "batch-scale": "batch size ×2 (batch_size = 64, line 54); learning rate SGD at line 85: 1e-05 → 2e-05",
        },
    ),
    # eriklindernoren/Keras-GAN: a GAN class, generator.predict(noise) and three train_on_batch calls a
    # step, batch_size given at train()'s call; works as it should (keras-on-batch 6.06x end to end)
    "keras_gan.py": (
        Facts(
            loop_kind="custom",
            step_kind="tf.function",
            keras_batch_calls=[
                KerasBatchCall(
                    api="predict",
                    site="keras_gan.py:112",
                    code="gen_imgs = self.generator.predict(noise)",
                    calls=24,
                    rows=32,
                )
            ],
        ),
        {
            "keras-on-batch": "predict() -> predict_on_batch() at line 112 (32 row(s) a call)",
            "xla-jit": "jit_compile=True on self.discriminator.compile() (line 29); self.combined.compile() (line 47)",
            "mixed-precision": "kept float32: Dense at line 78 (model)",
            # np.random.randint(0, X_train.shape[0], batch_size) each of a fixed number of iterations: a
            # bigger batch is more work an iteration, not fewer iterations (batch-scale skips; it was kept
            # at ×8 and reported in examples/s while the script ran longer)
        },
    ),
    # pierremtb/PINNs-TF2.0's 1d-burgers/inf_cont_burgers.py: a plain class whose name-mangled __f_model()
    # takes derivatives of u with respect to the inputs on a persistent tape, __grad() the loss's gradient,
    # fit() the loop with the update; helpers in burgersutil.py beside it. The hooks named __f_model (the
    # first tape.gradient) as the step, every derivative ended a step (4 an update), and tf-function
    # decorated __f_model alone: 0.60x measured. Now the step is __grad's and the update's (7.69x kept)
    "pinn/inf_cont_burgers.py": (
        Facts(
            loop_kind="custom",
            step_kind="eager",
            source={
                "gradient": "/w/inf_cont_burgers.py:82",
                "step_fn": "/w/inf_cont_burgers.py:79",
                "apply_gradients": "/w/inf_cont_burgers.py:106",
            },
        ),
        {
            "tf-function": "extracted the training step (line 105: __grad() and the optimizer update after it)",
            "mixed-precision": "kept float32: Dense at line 37 (PhysicsInformedNN.u_model)",
        },
    ),
    # TensorFlow's "Neural machine translation with attention" (2019-2021): Encoder / Decoder models, a
    # BahdanauAttention layer, a tf.function train_step unrolling teacher forcing over the target's
    # positions, the hidden state sized by BATCH_SIZE, dataset.take(steps_per_epoch) each epoch, a
    # checkpoint every 2 epochs: right as it is (xla 1.39x and batch x2 kept end to end)
    "nmt_attention.py": (
        _FN,
        {
            "tfdata-prefetch": ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline (line 38)",
            "xla-jit": "jit_compile=True on @tf.function on train_step() (line 159)",
            "mixed-precision": "Dense at line 109 (Decoder)",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 128, line 32); learning rate Adam at line 138: default 0.001 "
            "made explicit, → 0.001414",
        },
    ),
    # ageron/handson-ml2 chapter 11: a 1cycle callback sets the rate before every batch from max_rate
    # (the optimizer's own rate is overwritten at once); batch-scale said "from batch_size, scaled" (the
    # batch constant counted as a scaled rate) and left max_rate: now max_rate is scaled where it is built
    "onecycle.py": (
        _FIT,
        {
            "xla-jit": "jit_compile=True on model.compile() (line 56)",
            "mixed-precision": "kept float32: Dense at line 54 (model)",
            "batch-scale": "from OneCycleScheduler(...)'s max_rate=0.05 → 0.1 (line 61), scaled (linear scaling)",
        },
    ),
    # federated averaging from scratch (the widely copied TDS tutorial): a new local model built, compiled
    # and fitted per client per round on a dict of per-client tf.data pipelines built by batch_data();
    # prefetch went to the test set only (fit(clients_batched[client]) was not followed into the dict)
    "fedavg.py": (
        _FIT,
        {
            "tfdata-prefetch": ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline (line 56)",
            "steps-per-execution": "steps_per_execution=8 in local_model.compile() (line 155)",
            "xla-jit": "jit_compile=True on local_model.compile() (line 155)",
            "mixed-precision": "set again after clear_session() (line 169)",
            "batch-scale": "learning rate SGD at line 154: lr (line 127) 0.01 → 0.02 (linear scaling for SGD)",
        },
    ),
    # keras-io's DDPG (Keras 3 version): a Buffer class whose @tf.function update() method trains the critic
    # and the actor with two optimizers on 64 rows sampled from the replay buffer each environment step
    "ddpg_pendulum.py": (
        Facts(
            loop_kind="custom",
            step_kind="tf.function",
            host_calls=[  # as the run timed them: both target updates, and the actor acting on one state
                HostCall(
                    api=api,
                    site=f"ddpg_pendulum.py:{line}",
                    code=code,
                    calls=48,
                    seconds=0.05,
                    timed_steps=24,
                )
                for api, line, code in [
                    ("get_weights", 193, "target_weights = target.get_weights()"),
                    ("get_weights", 194, "original_weights = original.get_weights()"),
                    ("set_weights", 199, "target.set_weights(target_weights)"),
                    ("call", 253, "sampled_actions = tf.squeeze(actor_model(state))"),
                ]
            ],
        ),
        {
            # kept at 2.15x [1.61, 2.86] end to end; the loop 1.7-2.6x side by side (rewards alike)
            "host-calls": "update_target() (line 192) a tf.function on the weights; actor_model() at line 253 "
            "called in a tf.function",
            "xla-jit": "jit_compile=True on @tf.function on update() (line 143)",
            "mixed-precision": "kept float32: Dense at line 238 (get_critic())",
            # np.random.choice(record_range, self.batch_size): a replay batch (batch-scale skips it; it was
            # kept at ×8, "5.12x" in examples/s, each update 8x the work for as many updates)
        },
    ),
    # keras-io's "Deep Q-Learning for Atari Breakout" (Keras 3): the eager tape sits under `if frame_count %
    # update_after_actions == 0 and ...:` inside the frame loop inside `while True:`, a level below the loop's
    # body ("no training step found" before); model_target.predict() on the 32 sampled rows each update.
    # End to end: keras-on-batch 1.71x, tf-function 3.27x, XLA 1.133x; combined 5.41x [4.30, 6.78]
    "dqn_breakout.py": (
        Facts(
            loop_kind="custom",
            step_kind="eager",
            keras_batch_calls=[
                KerasBatchCall(
                    api="predict",
                    site="dqn_breakout.py:201",
                    code="future_rewards = model_target.predict(state_next_sample)",
                    calls=24,
                    rows=32,
                )
            ],
            source={"apply_gradients": "dqn_breakout.py:224"},
        ),
        {
            "keras-on-batch": "predict() -> predict_on_batch() at line 201 (32 row(s) a call)",
            "tf-function": "extracted the training step (line 213) into @tf.function train_step(state_sample, "
            "masks, updated_q_values)",
            "mixed-precision": "kept float32: Dense at line 104 (create_q_model())",
            # np.random.choice(range(len(done_history)), size=batch_size): a replay batch (batch-scale skips)
        },
    ),
    # keras-io's PPO (Keras 3): three @tf.function functions at module level (two training steps, two
    # optimizers), an mlp() builder returning its last Dense's output for both the actor and the critic
    # (the critic's squeezed), 1,000 eager critic calls between bursts of updates
    "ppo_cartpole.py": (
        Facts(
            loop_kind="custom",
            step_kind="tf.function",
            batch_size=1000,
            input_kind="numpy",
            optimizer="Adam",
            between_fits=BetweenFits(
                seconds=3.791,
                ended_by="next_step",
                limit_s=30.0,
                fit_site="ppo_cartpole.py:148",
                fit_steps=86,
                loop="steps",
                model_calls=[
                    GapPredict(
                        site="ppo_cartpole.py:251",
                        code="value_t = critic(observation)",
                        calls=1000,
                        seconds=2.0812,
                        api="call",
                    )
                ],
            ),
        ),
        {
            "xla-jit": "jit_compile=True on @tf.function on train_policy() (line 149); @tf.function on "
            "train_value_function() (line 173)",
            # mlp()'s returned Dense (it was "output layer not found" for both models)
            "mixed-precision": "kept float32: Dense at line 126 (actor)",
            # host-calls skips here (no whole-loop judging in this context): the critic calls lie
            # between bursts, outside the steps a trial times; see the whole-loop test below
        },
    ),
    # tensorflow/models-style script: absl flags (FLAGS.batch_size, FLAGS.learning_rate), app.run(main),
    # TFRecord shards of PNGs: list_files -> interleave(TFRecordDataset) -> shuffle under `if is_training:`
    # -> a lambda map parsing + decoding + flipping (random under is_training), batch, no prefetch. The
    # batch and rate are flag defaults; the cache is out of reach (files of unknown decoded size, and the
    # map is random), and says so
    "tfrecord_absl.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 115)",
            "tfdata-parallel-map": "num_parallel_calls=tf.data.AUTOTUNE on 2 map/interleave (line 80, line 83)",
            "tfdata-prefetch": ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline (line 85)",
            "xla-jit": "jit_compile=True on model.compile() (line 115)",
            "mixed-precision": "kept float32: Dense at line 98 (build_model())",
            "batch-scale": "batch size ×2 (--batch_size default 64 → 128, line 19); learning rate Adam at line 116: "
            "--learning_rate default (line 20) 0.001 → 0.001414",
        },
    ),
    # keras-io image classification from scratch, Keras 3 style (from tensorflow import data as tf_data)
    "keras_io_image_classification.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8",
            "tfdata-parallel-map": "(line 28)",
            "tfdata-cache": "cache() after map() of train_ds (line 28)",
            "xla-jit": "model.compile() (line 59)",
            "mixed-precision": "Dense at line 52 (make_model())",
            "batch-scale": "Adam at line 60: 0.0003 → 0.0004243",
        },
    ),
    # machinelearningmastery's drop-based decay: SGD(learning_rate=0.0) set by a LearningRateScheduler whose
    # step_decay() returns initial_lrate * math.pow(drop, ...); batch-scale said "0 → 0" and NOT SCALED
    "step_decay.py": (
        _FIT,
        {
            "steps-per-execution": "steps_per_execution=8 in model.compile() (line 34)",
            "xla-jit": "jit_compile=True on model.compile() (line 34)",
            "mixed-precision": "kept float32: Dense at line 31 (model)",
            "batch-scale": "batch size ×2 (28 → 56, line 39); learning rate SGD at line 33: 0 left (zero scales "
            "to zero) (linear scaling for SGD); LearningRateScheduler at line 36: step_decay() returns lrate = initial_lrate × … "
            "(initial_lrate 0.1 → 0.2)",
        },
    ),
    # university course templates: Trainer.train() a generator running the @tf.function step method over
    # self.ds_train and yielding the validation accuracy; generator-cache read it as a batch generator
    # ("Trainer.train_step() is decorated"), tfdata-prefetch also prefetched the per-element stage both
    # the training and the validation pipeline are built from
    "trainer_yields.py": (
        _FN,
        {
            "tfdata-parallel-map": "on 1 map/interleave (line 29)",
            "tfdata-prefetch": "at the end of the pipeline (line 30, 31)",
            "tfdata-cache": "cache() after map() of ds (line 29)",
            "xla-jit": "@tf.function on train_step() (line 68)",
            "mixed-precision": "kept float32: Dense at line 42 (vgg_like())",
            "batch-scale": "batch size ×2 (BATCH_SIZE = 64, line 16); learning rate Adam at line 50: default 0.001 "
            "made explicit",
        },
    ),
}


def test_a_generator_that_runs_the_training_step_is_not_a_source_of_batches() -> None:
    """``for _ in trainer.train(): continue`` drains a generator that trains and yields metrics: the
    functions it calls are the step, not per-example work to cache."""
    out = run("generator-cache", shape("trainer_yields.py").read_text())
    assert out.status == "skipped"
    assert out.reason == (
        "no Python generator of batches in the script: Trainer.train() runs the training step itself (a "
        "training loop that yields, not a source of batches)"
    )


def test_fixes_follow_a_packages_relative_imports_from_the_folder_python_m_starts_in() -> None:
    # tests/data/shapes/pkg_trainer: python -m trainer.train (from . import data; from .model import ...)
    from tfdoctor.fixes.project import local_modules

    root = shape("pkg_trainer")
    script = root / "trainer" / "train.py"
    project = local_modules(script, root)
    assert sorted(project) == ["trainer/data.py", "trainer/model.py"]
    # the same package as a plain file's folder: relative imports still lead beside it, paths from there
    assert sorted(local_modules(script)) == ["data.py", "model.py"]
    src = script.read_text()
    bs = get_fix("batch-scale").apply(
        src, FixContext(project=project, params={"factor": "2"}, filename="trainer/train.py")
    )
    assert bs.changed and 'add_argument("--batch-size", type=int, default=128)' in bs.code
    assert (
        list(bs.files) == ["trainer/model.py"] and "LEARNING_RATE = 0.001414" in bs.files["trainer/model.py"]
    )
    mp = get_fix("mixed-precision").apply(src, FixContext(hardware=BF16, project=project))
    assert mp.changed and 'Dense(NUM_CLASSES, dtype="float32")' in mp.files["trainer/model.py"]


@pytest.mark.parametrize("script", sorted(SHAPE_CASES))
def test_each_fix_on_scripts_in_the_shapes_of_public_tutorials(script: str) -> None:
    """Every fix on each script: the ones that apply change it (and say what, where), the others skip
    with a reason; each finding here was a wrong or missing change before (see each case's comment)."""
    facts, expected = SHAPE_CASES[script]
    src = shape(script).read_text()
    ctx = FixContext(hardware=BF16, filename=script, facts=facts)
    got: dict[str, str] = {}
    for fix in all_fixes():
        if fix.precheck(ctx):
            continue
        out = fix.apply(src, ctx)
        assert out.status != "failed", (fix.ID, out.reason)
        assert out.reason, fix.ID
        if out.changed:
            ast.parse(out.code)
            got[fix.ID] = out.reason
    assert set(got) == set(expected), got
    for fid, phrase in expected.items():
        assert phrase in got[fid], (fid, got[fid])


@pytest.mark.parametrize(
    ("error", "hinted"),
    [
        ("TypeError: `x` and `y` must have the same dtype, got tf.bfloat16 != tf.float32.", True),
        (
            "InvalidArgumentError: cannot compute AddV2 as input #1(zero-based) was expected to be a half "
            "tensor but is a float tensor [Op:AddV2]",
            True,
        ),
        ("ValueError: Tensor conversion requested dtype float32 for Tensor with dtype bfloat16", True),
        ("TypeError: `x` and `y` must have the same dtype, got tf.float32 != tf.int32.", False),
        ("ResourceExhaustedError: OOM when allocating tensor", False),
    ],
)
def test_mixed_precision_says_what_to_cast_when_the_scripts_float32_math_clashes(
    error: str, hinted: bool
) -> None:
    hint = get_fix("mixed-precision").failure_hint(error)
    assert bool(hint) is hinted
    if hinted:
        assert "cast the model's outputs to float32" in hint
    assert get_fix("xla-jit").failure_hint(error) == ""


def test_xla_jit_says_which_op_has_no_xla_kernel() -> None:
    """keras-io's OCR under XLA failed with "Graph execution error:"; the op XLA cannot compile is named
    in TensorFlow's message (recorded here, TF 2.21) and now in the trial's reason."""
    error = (
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: Graph execution error:\n\n"
        "Detected unsupported operations when trying to compile graph __inference_one_step_on_data_9330[] on "
        "XLA_CPU_JIT: CTCLoss (No registered 'CTCLoss' OpKernel for XLA_CPU_JIT devices compatible with node "
        "{{node ocr_model_v1_1/ctc_loss_1/CTCLoss}}){{node ocr_model_v1_1/ctc_loss_1/CTCLoss}}\n"
    )
    hint = get_fix("xla-jit").failure_hint(error)
    assert hint.startswith(
        "XLA has no kernel for CTCLoss on XLA_CPU_JIT: a step that runs it cannot be compiled"
    )
    assert get_fix("mixed-precision").failure_hint(error) == ""


def test_tf_function_on_gradient_accumulation_keeps_the_update_on_some_steps_in_the_loop() -> None:
    """Gradients summed over ACCUM_STEPS batches, the update under an ``if``: the traced step computes
    and accumulates them (``accum`` read before it is bound: a parameter), the conditional update stays
    in the loop as written. It had put the ``if`` in the step with ``step`` as a Python number (a trace
    per step), read ``accum`` unbound, and returned the comprehension's ``v``."""
    reason = assert_codemod(
        "tf-function",
        """
        import tensorflow as tf
        accum = [tf.zeros_like(v) for v in model.trainable_variables]
        for epoch in range(EPOCHS):
            for step, (x, y) in enumerate(train_ds):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x, training=True)) / ACCUM_STEPS
                grads = tape.gradient(loss, model.trainable_variables)
                accum = [a + g for a, g in zip(accum, grads)]
                if (step + 1) % ACCUM_STEPS == 0:
                    optimizer.apply_gradients(zip(accum, model.trainable_variables))
                    accum = [tf.zeros_like(v) for v in model.trainable_variables]
        """,
        """
        import tensorflow as tf
        accum = [tf.zeros_like(v) for v in model.trainable_variables]
        @tf.function
        def train_step(x, y, accum):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True)) / ACCUM_STEPS
            grads = tape.gradient(loss, model.trainable_variables)
            accum = [a + g for a, g in zip(accum, grads)]
            return loss, accum

        for epoch in range(EPOCHS):
            for step, (x, y) in enumerate(train_ds):
                loss, accum = train_step(x, y, accum)
                if (step + 1) % ACCUM_STEPS == 0:
                    optimizer.apply_gradients(zip(accum, model.trainable_variables))
                    accum = [tf.zeros_like(v) for v in model.trainable_variables]
        """,
        facts=Facts(step_kind="eager", loop_kind="custom"),
    )
    assert "the optimizer update under the if at line 9 (some steps only) stays in the loop" in reason


def test_batch_scale_wraps_a_learning_rate_schedule_of_the_scripts_own() -> None:
    """TensorFlow's Transformer tutorial: ``CustomSchedule(d_model)`` (a LearningRateSchedule subclass, its
    warm-up counted in steps) had left the learning rate NOT SCALED. It is wrapped: with the batch ×N the
    schedule runs N times as far per step (the same schedule per example) and its rate is scaled (checked
    by running it: 1.414 × CustomSchedule(2 × step) at steps 1, 100, 2000); the wrapper's base is the
    class the script's schedule derives from, as the script names it."""
    src = """
    import tensorflow as tf
    BATCH_SIZE = 64


    class CustomSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
        def __init__(self, d_model, warmup_steps=4000):
            super().__init__()
            self.d_model = d_model

        def __call__(self, step):
            return step


    # the learning rate
    learning_rate = CustomSchedule(128)
    optimizer = tf.keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    """
    out = run("batch-scale", textwrap.dedent(src), params={"factor": "2"})
    assert out.changed and "NOT SCALED" not in out.reason, out.reason
    assert "CustomSchedule(...) (line 15) run 2x as far per step" in out.reason
    assert "class TfdoctorScaledSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):" in out.code
    assert "        return self.rate_factor * self.schedule(step * self.steps_factor)" in out.code
    # before the statement using it, which keeps its comment; two blank lines around the class
    assert "\n\n\nclass TfdoctorScaledSchedule(" in out.code
    assert (
        "\n\n\n# the learning rate\nlearning_rate = TfdoctorScaledSchedule(CustomSchedule(128), 2, 1.41421)\n"
        in out.code
    )
    ast.parse(out.code)
    sgd = run(
        "batch-scale",
        textwrap.dedent(src).replace(
            "Adam(learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9)", "SGD(learning_rate)"
        ),
        params={"factor": "4"},
    )
    assert "TfdoctorScaledSchedule(CustomSchedule(128), 4, 4)" in sgd.code, sgd.code


def test_tfdata_fixes_write_autotune_as_the_script_names_tf_data() -> None:
    """keras-io's Keras 3 examples import ``tensorflow.data as tf_data`` (or ``from tensorflow import data
    as tf_data``) and no ``tf``: the fixes write ``tf_data.AUTOTUNE`` and add no import (they had added
    ``import tensorflow as tf`` for ``tf.data.AUTOTUNE``)."""
    for imp in ("import tensorflow.data as tf_data", "from tensorflow import data as tf_data"):
        src = f"""
        {imp}
        ds = tf_data.Dataset.from_tensor_slices(x).map(f).batch(32)
        model.fit(ds)
        """
        par = run("tfdata-parallel-map", src)
        assert (
            "map(f, num_parallel_calls=tf_data.AUTOTUNE)" in par.code
            and "import tensorflow as tf" not in par.code
        )
        pre = run("tfdata-prefetch", src)
        assert (
            ".batch(32).prefetch(tf_data.AUTOTUNE)" in pre.code and "import tensorflow as tf" not in pre.code
        )


def test_tfdata_prefetch_ends_a_pipeline_where_its_function_returns_it() -> None:
    """keras-io's ``make_dataset()`` returns ``dataset.cache().shuffle(2048).prefetch(16)``: it already
    prefetches (a second prefetch had gone mid-pipeline, on the map's line); without one, the prefetch
    goes on the returned chain, after the batch, not on the last assignment before it."""
    src = """
    import tensorflow as tf


    def make_dataset(x):
        dataset = tf.data.Dataset.from_tensor_slices(x).batch(64)
        dataset = dataset.map(f)
        return dataset.cache().shuffle(2048).prefetch(16)


    model.fit(make_dataset(x))
    """
    assert_skipped("tfdata-prefetch", src, "already prefetches (dataset)")
    out = run("tfdata-prefetch", src.replace(".prefetch(16)", ""))
    assert "    return dataset.cache().shuffle(2048).prefetch(tf.data.AUTOTUNE)\n" in out.code, out.code
    assert "    dataset = dataset.map(f)\n" in out.code


def test_a_pipeline_a_function_of_the_script_returns_is_a_pipeline() -> None:
    """keras-io's DDIM: ``prepare_dataset(split)`` returns ``tfds.load(...).map(..., AUTOTUNE).cache()
    ...prefetch(AUTOTUNE)`` and ``train_dataset = prepare_dataset(...)`` is what ``fit`` gets: the tf.data
    fixes said "no tf.data pipeline assigned to a name in the script" and "a name not known to be a
    tf.data dataset". The pipeline is followed into the function (and into one its return calls); a
    function that prefetches and caches already is said to, one that does not gets the prefetch on its
    returned chain, not a second one on the call."""
    src = """
    import tensorflow as tf


    def load_split(n):
        return tf.data.Dataset.from_tensor_slices(tf.zeros([n, 4]))


    def prepare_dataset(n):
        return load_split(n).map(f, num_parallel_calls=tf.data.AUTOTUNE).cache().batch(32).prefetch(8)


    train_dataset = prepare_dataset(1024)
    model.fit(train_dataset)
    """
    assert_skipped("tfdata-prefetch", src, "already prefetches (train_dataset)")
    assert_skipped("tfdata-cache", src, "train_dataset already caches (line 9)")
    assert_skipped("tfdata-parallel-map", src, "every tf.data map/interleave already sets num_parallel_calls")
    bare = src.replace(".prefetch(8)", "").replace(", num_parallel_calls=tf.data.AUTOTUNE", "")
    out = run("tfdata-prefetch", bare)
    assert ".batch(32).prefetch(tf.data.AUTOTUNE)\n" in out.code, out.code
    assert "train_dataset = prepare_dataset(1024)\n" in out.code  # not prepare_dataset(1024).prefetch(...)
    assert "map(f, num_parallel_calls=tf.data.AUTOTUNE)" in run("tfdata-parallel-map", bare).code
    # a function defined twice is not guessed at
    twice = bare + "\n\n    def prepare_dataset(n):\n        return None\n"
    assert_skipped(
        "tfdata-prefetch",
        twice,
        "no tf.data pipeline assigned to a name (or returned by a function) in the script",
    )


def test_a_function_transforming_the_dataset_it_is_given_continues_that_pipeline() -> None:
    """TensorFlow's "Load and preprocess images": ``train_ds = configure_for_performance(train_ds)``,
    a function caching, shuffling, batching and prefetching its parameter. The call is the pipeline's
    end: its prefetch is seen, and where it has none the prefetch goes on its ``return ds``; a call of
    such a function on what is not a dataset is not one. A look at a batch (``next(iter(ds))``, a loop
    in a script that fits) is not what trains: no prefetch and no parallel map go there."""
    src = """
    import tensorflow as tf

    AUTOTUNE = tf.data.AUTOTUNE
    list_ds = tf.data.Dataset.list_files("photos/*/*", shuffle=False)
    list_ds = list_ds.shuffle(1000, reshuffle_each_iteration=False)
    for f in list_ds.take(5):
        print(f.numpy())
    train_ds = list_ds.skip(200)
    peek_ds = train_ds.map(lambda x: x)
    batch = next(iter(peek_ds))
    train_ds = train_ds.map(process_path, num_parallel_calls=AUTOTUNE)


    def configure_for_performance(ds):
        ds = ds.cache()
        ds = ds.shuffle(buffer_size=1000)
        ds = ds.batch(32)
        ds = ds.prefetch(buffer_size=AUTOTUNE)
        return ds


    train_ds = configure_for_performance(train_ds)
    model.fit(train_ds, epochs=3)
    """
    assert_skipped("tfdata-prefetch", src, "already prefetches (train_ds)")
    assert_skipped(
        "tfdata-parallel-map",
        src,
        "every tf.data map/interleave feeding the model (train_ds) already sets num_parallel_calls (left "
        "alone: line 9: map() of peek_ds, which no training or evaluation reads)",
    )
    bare = src.replace("        ds = ds.prefetch(buffer_size=AUTOTUNE)\n", "")
    out = run("tfdata-prefetch", bare)
    assert out.changed, out.reason
    assert "\n    return ds.prefetch(tf.data.AUTOTUNE)\n" in out.code, out.code
    assert out.code.count("prefetch(") == 1  # not on list_ds, peek_ds or the call
    # the same function called on what is not a dataset makes no pipeline
    other = bare.replace(
        "train_ds = configure_for_performance(train_ds)", "x = configure_for_performance(arr)"
    )
    other = other.replace("model.fit(train_ds, epochs=3)", "model.fit(x, epochs=3)")
    out = run("tfdata-prefetch", other)
    assert "configure_for_performance(arr).prefetch" not in out.code and "return ds.prefetch" not in out.code
    # a map only a look at a batch reads: left alone beside the one parallelised
    serial = bare.replace("map(process_path, num_parallel_calls=AUTOTUNE)", "map(process_path)")
    out = run("tfdata-parallel-map", serial)
    assert "map(process_path, num_parallel_calls=tf.data.AUTOTUNE)" in out.code
    assert "peek_ds = train_ds.map(lambda x: x)\n" in out.code
    assert any("line 9: map() of peek_ds" in w for w in out.warnings), out.warnings


def test_a_model_subclass_with_its_own_init_arguments_is_not_a_functional_model() -> None:
    """keras-io's DDIM builds ``DiffusionModel(image_size, widths, block_depth)`` (no ``call()``, its own
    ``__init__``): read as ``Model(inputs, outputs)`` it was a model with no output layer ("output layer
    not found"), and the network its ``__init__`` builds with ``get_network()`` was not one of its
    models, so its zero-initialised last Conv2D stayed bf16 (then ``noisy_images - noise_rates *
    pred_noises`` mixes float32 and bf16). Two more stood between the policy and a run: its
    ``Lambda(sinusoidal_embedding)`` multiplies a bf16 input by float32 frequencies (Keras could not
    build the model), and the KID metric's encoder fed bf16 features to the metric's float32 math. Its
    loss reached through ``self.denoise()``'s return, and only there: the metric's local
    ``batch_size`` is not the module's one ``train_step`` reads (that name had made the encoder "reach
    noise_loss")."""
    out = run("mixed-precision", (SHAPES / "ddim.py").read_text(), hardware=BF16)
    assert out.changed, out.reason
    assert 'layers.Conv2D(3, kernel_size=1, kernel_initializer="zeros", dtype="float32")(x)' in out.code
    assert "output layer not found" not in out.reason
    assert out.reason.count("its output reaches noise_loss") == 1
    assert "get_network(): its output reaches noise_loss" in out.reason
    assert 'layers.Lambda(sinusoidal_embedding, dtype="float32")(noise_variances)' in out.code
    assert 'layers.GlobalAveragePooling2D(dtype="float32"),' in out.code
    assert "KID.encoder: a metric's model, its output meets the metric's float32 math" in out.reason
    # a metric's model does not stand for the model computing the loss where that is not visible
    src = """
    import keras


    class KID(keras.metrics.Metric):
        def __init__(self):
            super().__init__()
            self.encoder = keras.Sequential([keras.layers.Dense(4)])


    net = keras.Sequential([keras.layers.Dense(8), keras.layers.Dense(1)])
    """
    out = run("mixed-precision", src, hardware=BF16)
    assert out.code.count('dtype="float32"') == 2, out.code
    assert "which model computes the loss is not visible" in out.reason
    # keras-io's "Customizing fit" subclass, no __init__: still built like Model(inputs, outputs)
    src = """
    import keras


    class CustomModel(keras.Model):
        def train_step(self, data):
            return {}


    inputs = keras.Input(shape=(32,))
    outputs = keras.layers.Dense(1)(inputs)
    model = CustomModel(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")
    """
    out = run("mixed-precision", src, hardware=BF16)
    assert 'keras.layers.Dense(1, dtype="float32")(inputs)' in out.code, out.reason


def test_a_model_whose_output_is_a_nested_models_call_keeps_that_models_output_layer_float32() -> None:
    """keras-io's VQ-VAE: ``get_vqvae()`` returns ``keras.Model(inputs, reconstructions)`` where
    ``reconstructions = decoder(quantized_latents)`` and ``decoder = get_decoder(latent_dim)``; the
    trainer's ``__init__`` holds ``self.vqvae = get_vqvae(...)`` and its ``train_step`` computes the loss
    from ``self.vqvae(x)``. The output layer is the decoder's last ``Conv2DTranspose`` (once found by a
    name that two functions share, then "output layer not found" when names got their scopes)."""
    src = """
    import keras
    import tensorflow as tf
    from keras import layers


    def get_decoder(latent_dim=16):
        latent_inputs = keras.Input(shape=(7, 7, latent_dim))
        x = layers.Conv2DTranspose(32, 3, strides=2, padding="same")(latent_inputs)
        decoder_outputs = layers.Conv2DTranspose(1, 3, padding="same")(x)
        return keras.Model(latent_inputs, decoder_outputs, name="decoder")


    def get_vqvae(latent_dim=16):
        decoder = get_decoder(latent_dim)
        inputs = keras.Input(shape=(7, 7, latent_dim))
        reconstructions = decoder(inputs)
        return keras.Model(inputs, reconstructions, name="vq_vae")


    class VQVAETrainer(keras.models.Model):
        def __init__(self, train_variance, latent_dim=32, **kwargs):
            super().__init__(**kwargs)
            self.train_variance = train_variance
            self.vqvae = get_vqvae(latent_dim)

        def train_step(self, x):
            with tf.GradientTape() as tape:
                reconstructions = self.vqvae(x)
                reconstruction_loss = tf.reduce_mean((x - reconstructions) ** 2) / self.train_variance
            grads = tape.gradient(reconstruction_loss, self.vqvae.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.vqvae.trainable_variables))
            return {"loss": reconstruction_loss}


    trainer = VQVAETrainer(0.1, latent_dim=16)
    trainer.compile(optimizer=keras.optimizers.Adam())
    trainer.fit(x_train, epochs=30, batch_size=128)
    """
    out = run("mixed-precision", src, hardware=BF16)
    assert out.changed, out.reason
    assert 'decoder_outputs = layers.Conv2DTranspose(1, 3, padding="same", dtype="float32")(x)' in out.code
    assert out.code.count('dtype="float32"') == 1
    assert "get_vqvae(): its output reaches reconstruction_loss" in out.reason, out.reason


def test_mixed_precision_skips_a_script_with_no_keras_layer() -> None:
    """TensorFlow's "Basic training loops": a tf.Module of tf.Variables; a Keras policy changes none of
    its math, so the trial would measure nothing (it was run and rejected at 1.0x)."""
    out = run("mixed-precision", shape("basic_training_loops.py").read_text(), hardware=BF16)
    assert out.status == "skipped"
    assert "no Keras layer or model in the script" in out.reason


def test_mixed_precision_keeps_the_students_output_float32_through_the_distiller() -> None:
    out = run("mixed-precision", (SHAPES / "distiller.py").read_text(), hardware=BF16)
    assert out.changed, out.reason
    assert out.code.count('layers.Dense(10, dtype="float32")') == 2  # teacher's and student's
    assert "Distiller: trained with fit()" in out.reason


def test_batch_scale_passes_over_a_batch_size_the_script_never_reads() -> None:
    """keras-io's distillation sets ``batch_size = 64`` and fits at Keras's default: scaling the unused
    name changed nothing (the trial saw 32 examples a step and was rejected). Without facts saying
    fit trains on arrays the name is the last resort (a module beside the script may read it), and the
    summary says that nothing here reads it."""
    src = (SHAPES / "distiller.py").read_text()
    out = run("batch-scale", src, facts=Facts(loop_kind="keras_fit", input_kind="numpy"))
    assert out.changed, out.reason
    assert "batch_size = 64\n" in out.code  # left as it is
    assert "teacher.fit(x_train, y_train, epochs=1, batch_size=64)" in out.code
    assert "distiller.fit(x_train, y_train, epochs=3, batch_size=64)" in out.code
    out = run("batch-scale", src, facts=Facts(loop_kind="keras_fit", input_kind="tf.data"))
    assert out.changed, out.reason
    assert "batch_size = 128\n" in out.code and "batch_size=64" not in out.code
    assert "nothing in the script reads batch_size" in out.reason
    # a keyword, a parameter or an attribute of that name reads nothing: fit's own batch_size=32 is scaled
    other = "import keras\nbatch_size = 64\ndef load(batch_size=8):\n    return cfg.batch_size\nm.fit(x, y, batch_size=32)\n"
    out = run("batch-scale", other, facts=Facts(loop_kind="keras_fit", input_kind="numpy"))
    assert out.changed, out.reason
    assert "batch_size = 64\n" in out.code and "m.fit(x, y, batch_size=64)" in out.code, out.code


def test_a_model_compiled_only_to_be_evaluated_is_left_alone() -> None:
    """TensorFlow's text-classification tutorial compiles an export model (the vectorisation layer, the
    trained model, a sigmoid) only to evaluate it: steps_per_execution and XLA go on the model fit only
    (XLA there met a string layer). A model passed elsewhere may be trained there: still edited."""
    src = """
    import tensorflow as tf
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer="adam")
    model.fit(x, y, epochs=10)
    export_model = tf.keras.Sequential([vectorize_layer, model])
    export_model.compile(loss="mse", optimizer="adam", metrics=["accuracy"])
    metrics = export_model.evaluate(raw_test_ds, return_dict=True)
    """
    for fix_id, edit in (("steps-per-execution", "steps_per_execution=8"), ("xla-jit", "jit_compile=True")):
        out = run(fix_id, src)
        assert out.status == "changed" and out.code.count(edit) == 1, out.reason
        assert 'optimizer="adam", ' + edit + ")\nmodel.fit" in out.code
        passed = run(fix_id, src + "train(export_model)\n")
        assert passed.code.count(edit) == 2, passed.reason


def test_mixed_precision_keeps_the_output_layer_inside_a_sequential_attribute_float32() -> None:
    """TensorFlow's autoencoder tutorial: ``self.decoder = tf.keras.Sequential([...])`` returned by
    ``call()``. The Sequential got ``dtype="float32"``, which Keras 3's Sequential does not take (a
    TypeError in the trial); its last layer is the one. Both models the name ``autoencoder`` holds in
    turn are trained, and each keeps its output float32."""
    out = run("mixed-precision", (SHAPES / "autoencoder.py").read_text(), hardware=BF16)
    assert out.changed, out.reason
    assert 'layers.Reshape(shape, dtype="float32")' in out.code
    assert "padding='same', dtype=\"float32\")])" in out.code
    assert "Sequential([" in out.code and "], dtype=" not in out.code


def test_generator_prefetch_says_why_an_image_data_generator_is_left_alone() -> None:
    src = (SHAPES / "image_data_generator.py").read_text()
    reason = assert_skipped("generator-prefetch", src, "fit() at line 41 reads a Keras ImageDataGenerator")
    assert "under the GIL" in reason and "; advice: Keras preprocessing layers" in reason
    # a flow() assigned to a name first, and flow_from_directory, are the same loader
    named = src.replace(
        "history = model.fit(datagen.flow(x_train, y_train, batch_size=batch_size),",
        "train_gen = datagen.flow_from_directory('data', batch_size=batch_size)\nhistory = model.fit(train_gen,",
    )
    assert_skipped("generator-prefetch", named, "reads a Keras ImageDataGenerator")
    # an ImageDataGenerator made but not fitted on: the usual reason
    plain = src.replace(
        "model.fit(datagen.flow(x_train, y_train, batch_size=batch_size),",
        "model.fit(x_train, y_train, batch_size=batch_size,",
    )
    assert_skipped("generator-prefetch", plain, "no Python generator function")


def test_cache_says_once_why_each_pipeline_is_left_alone_for_all_its_lines() -> None:
    """numpy_function_loader.py reassigns ``ds`` six times in get_dataset() after a shuffle of the paths:
    the reason named every line with the same sentence, six times; now one sentence per pipeline and
    reason, with its lines. (As written the shuffle now moves below the loads: here read_data_fn keeps
    what it loaded in a module-level dict, which a cache would not see, so nothing moves.)"""
    src = shape("numpy_function_loader.py").read_text()
    memo = src.replace('    """Reading data with numpy."""\n', "    LOADED[image] = True\n").replace(
        'DATA_DIR = "scans"\n', 'DATA_DIR, LOADED = "scans", {}\n'
    )
    assert memo.count("LOADED") == 2 and memo.count("\n") == src.count("\n")
    out = get_fix("tfdata-cache").apply(
        memo, FixContext(hardware=BF16, filename="numpy_function_loader.py", facts=_FIT)
    )
    assert out.status == "skipped"
    assert out.reason.startswith(
        "ds (lines 59, 61): no deterministic map before the end of the pipeline: nothing worth caching; "
        "ds (lines 62, 63, 65, 66): the pipeline already ran shuffle() at line 61: a cache after it would "
        "replay it every epoch; advice: where map(load_data_fn) is deterministic"
    )
    # TFD102 asks for a cache (21 % of the CPU re-loading the same files): the reorder that allows one
    assert "from_tensor_slices() → map(load_data_fn) → cache() → shuffle() → the random maps" in out.reason


def test_cache_on_tfrecord_shards_says_it_cannot_size_them_and_the_flags_carry_the_batch() -> None:
    """tfrecord_absl.py (tensorflow/models style): the records come from list_files() + interleave(), whose
    decoded size no codemod can know, and the map after the shuffle flips at random: tfdata-cache leaves
    it with both reasons (TFD102 asked for it: 18 % of the CPU). Batch-scale changes the absl flags'
    defaults, where the script reads its batch and rate, and nothing else."""
    src = shape("tfrecord_absl.py").read_text()
    ctx = FixContext(hardware=BF16, filename="tfrecord_absl.py", facts=_FIT)
    out = get_fix("tfdata-cache").apply(src, ctx)
    assert out.status == "skipped"
    assert out.reason.startswith(
        "dataset (lines 79, 80) reads list_files(): tfdoctor cannot tell whether the decoded data fits in "
        "memory (cache(filename) caches to disk); dataset (lines 82, 83, 84): the pipeline already ran "
        "interleave() at line 80"
    )
    scaled = get_fix("batch-scale").apply(src, ctx)
    changed = [(a, b) for a, b in zip(src.splitlines(), scaled.code.splitlines(), strict=True) if a != b]
    assert changed == [
        (
            'flags.DEFINE_integer("batch_size", 64, "Global batch size.")',
            'flags.DEFINE_integer("batch_size", 128, "Global batch size.")',
        ),
        (
            'flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate.")',
            'flags.DEFINE_float("learning_rate", 0.00141421, "Adam learning rate.")',
        ),
    ]


def test_a_fix_applied_after_kept_ones_cites_the_lines_of_the_users_file() -> None:
    """keras-io's DDPG: host-calls (kept first) adds a helper and an import above the step, so the later
    fixes' codemods see the step 6 lines lower; the loop's reasons cite the user's lines, and a line an
    earlier fix wrote is said to be one."""
    original = (SHAPES / "ddpg_pendulum.py").read_text()
    facts = SHAPE_CASES["ddpg_pendulum.py"][0]
    kept = get_fix("host-calls").apply(original, FixContext(facts=facts)).code
    xla = get_fix("xla-jit").apply(kept, FixContext(facts=facts)).reason
    batch = get_fix("batch-scale").apply(kept, FixContext(facts=facts)).reason
    assert "update() (line 149)" in xla and "(line 182: np.random.choice" in batch  # the copy's lines
    assert user_lines(xla, kept, original) == "jit_compile=True on @tf.function on update() (line 143)"
    assert "(line 176: np.random.choice(record_range, self.batch_size))" in user_lines(batch, kept, original)
    assert "np.random.choice(record_range" in original.splitlines()[175]
    # a line host-calls wrote (its graph_call helper): the user's line it stands at, said to be rewritten
    added = next(i for i, ln in enumerate(kept.splitlines(), 1) if "def graph_call" in ln)
    assert user_lines(f"line {added}", kept, original).endswith("(as an earlier fix left it)")
    assert user_lines("lines 149-150 and line 182", kept, original) == "lines 143-144 and line 176"
    assert user_lines("line 149", original, original) == "line 149"  # nothing kept yet: the same lines


def test_host_calls_between_bursts_of_steps_are_skipped_with_the_reason() -> None:
    """keras-io's PPO: its eager critic calls fall between bursts of updates, which no trial times."""
    facts = SHAPE_CASES["ppo_cartpole.py"][0]
    why = get_fix("host-calls").precheck(FixContext(facts=facts))
    assert why is not None and why.startswith(
        "the Keras host calls at ppo_cartpole.py:251 (1000 calls, 2.1 s) run between bursts of steps (TFD207)"
    )
    assert get_fix("host-calls").precheck(FixContext(facts=Facts())) == (
        "no get_weights() / set_weights() or eager model call between the steps in the run"
    )


def test_host_calls_between_bursts_are_moved_where_the_loop_is_judged_whole() -> None:
    """keras-io's PPO, where the --fix loop judges every run on the whole loop (a burst of updates and the
    collection until the next): the critic called eagerly on each state between bursts goes through a
    tf.function, and nothing else changes."""
    facts = SHAPE_CASES["ppo_cartpole.py"][0]
    ctx = FixContext(facts=facts, whole_loop=True, filename="ppo_cartpole.py")
    fix = get_fix("host-calls")
    assert fix.precheck(ctx) is None
    src = (SHAPES / "ppo_cartpole.py").read_text()
    out = fix.apply(src, ctx)
    assert out.changed, out.reason
    assert out.reason.endswith("critic() at line 251 called in a tf.function"), out.reason
    assert "        value_t = graph_call(critic, observation)\n" in out.code
    assert "def graph_call(model, *args, **kwargs):" in out.code
    # below the imports it needs: keras-io sets KERAS_BACKEND between `import os` and the rest (the
    # helper landed above `import tensorflow as tf`: NameError: name 'tf' is not defined)
    code = out.code.splitlines()
    assert code.index("import tensorflow as tf") < code.index("@tf.function(reduce_retracing=True)")
    before, after = src.splitlines(), out.code.splitlines()
    changed = [ln for ln in after if ln not in before]
    assert [ln for ln in changed if ln.strip() and "graph_call" not in ln] == [
        "@tf.function(reduce_retracing=True)",
        '    """tfdoctor host-calls: the model run as one graph, not op by op."""',
        "    return model(*args, **kwargs)",
    ]
    ast.parse(out.code)


def test_xla_jit_on_an_in_graph_loop_whose_body_is_the_step_says_what_to_change() -> None:
    """A tf.function looping over its batches with the tape inline in the loop: XLA cannot compile the
    dataset ops, and there is no step function of its own to compile: skipped, and why, before a run."""
    src = """\
import tensorflow as tf

@tf.function
def train_epoch(model, optimizer, dataset):
    for x, y in dataset:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
"""
    facts = Facts(loop_kind="custom", step_kind="tf.function", steps_per_execution=32)
    out = get_fix("xla-jit").apply(src, FixContext(hardware=BF16, filename="train.py", facts=facts))
    assert out.status == "skipped" and not out.changed, out.reason
    assert "loops over its batches in its graph (32 a call; the loop in train_epoch() (line 5))" in out.reason
    assert "move the loop's body into a function of its own" in out.reason
    # one batch a call (no in-graph loop in the run's facts): the step function itself, as before
    one = Facts(loop_kind="custom", step_kind="tf.function")
    out = get_fix("xla-jit").apply(src, FixContext(hardware=BF16, filename="train.py", facts=one))
    assert out.changed and "@tf.function(jit_compile=True)\ndef train_epoch" in out.code, out.reason


def test_prefetch_ends_a_pipeline_a_function_returns_into_a_call() -> None:
    """``train(model, make_ds())`` and ``for x in make_ds()``: no name holds the pipeline; the chain the
    function returns gets the prefetch (once), and one that prefetches already is left alone."""
    src = """\
import tensorflow as tf

def make_ds():
    return tf.data.Dataset.from_tensor_slices(x).shuffle(100).batch(8)

for epoch in range(3):
    train(model, make_ds())
    for batch in make_ds():
        pass
"""
    out = get_fix("tfdata-prefetch").apply(src, FixContext(filename="train.py", facts=_FN))
    assert out.changed, out.reason
    assert (
        "return tf.data.Dataset.from_tensor_slices(x).shuffle(100).batch(8).prefetch(tf.data.AUTOTUNE)\n"
        in out.code
    )
    assert out.code.count("prefetch") == 1
    done = out.code
    again = get_fix("tfdata-prefetch").apply(done, FixContext(filename="train.py", facts=_FN))
    assert not again.changed and "make_ds()" in again.reason, again.reason
