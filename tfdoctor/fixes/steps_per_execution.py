"""``steps-per-execution``: ``model.compile(steps_per_execution=N)`` for tiny Keras steps."""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext, rebuilt_every_fit
from tfdoctor.fixes._cst import attr_name, call_name, dotted, expr, kwarg, names_called, set_kwarg, walk
from tfdoctor.fixes._models import compile_sites

DEFAULT_N = 8


class StepsPerExecutionCodemod(FixCodemod):
    DESCRIPTION = "steps_per_execution=N in model.compile()"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.n = int(self.fix.params.get("n", DEFAULT_N))
        self.targets: set[int] = set()
        where = []
        sites, notes = compile_sites(tree, self.line)
        for c, label in sites:
            if kwarg(c, "steps_per_execution") is not None:
                raise SkipFile(f"{label} at line {self.line(c)} already sets steps_per_execution")
            self.targets.add(id(c))
            where.append(f"{label} (line {self.line(c)})")
        if not self.targets:
            if notes:
                raise SkipFile("; ".join(notes) + ": nowhere to set steps_per_execution")
            raise SkipFile(
                "no Keras model.compile() in the script (steps_per_execution is a Keras fit setting)"
            )
        hooks = batch_hooks(tree, self.line)
        for hook, changes in hooks:
            if changes:
                raise SkipFile(
                    f"{hook} {changes} every batch: with steps_per_execution={self.n} Keras calls it once per "
                    f"{self.n} batches, which changes the training (not only its logs)"
                )
        if hooks:
            self.warn(
                f"{', '.join(h for h, _ in hooks)}: Keras calls batch hooks once per {self.n} batches with "
                f"steps_per_execution={self.n} (what they log or count per batch comes {self.n}× less often)"
            )
        self.summary = f"steps_per_execution={self.n} in {'; '.join(where)}"
        self.examples_factor = float(self.n)  # the harness counts one step per execution
        return super().transform_module_impl(tree)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if id(original_node) in self.targets:
            return set_kwarg(updated_node, "steps_per_execution", expr(str(self.n)))
        return updated_node


#: Keras callback methods called per batch (once per execution with steps_per_execution)
BATCH_HOOKS = frozenset({"on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end"})


def batch_hooks(tree: cst.Module, line: Callable[[cst.CSTNode], int]) -> list[tuple[str, str]]:
    """The script's per-batch callback code: ``(what, how it changes the training or "")`` for each
    method of a ``Callback`` subclass in :data:`BATCH_HOOKS` and each ``LambdaCallback(on_batch_end=...)``;
    a hook that sets the learning rate or assigns a variable (a warm-up written as a callback) changes the
    training when Keras calls it once per execution; one that reads them to log does not."""
    out: list[tuple[str, str]] = []

    def writes(node: cst.CSTNode) -> str:
        for n in walk(node):
            if isinstance(n, cst.Call) and attr_name(n) in (
                "set_value",
                "assign",
                "assign_add",
                "assign_sub",
            ):
                return f"calls {cst.Module([]).code_for_node(n.func)}()"
            targets = (
                [t.target for t in n.targets]
                if isinstance(n, cst.Assign)
                else [n.target]
                if isinstance(n, (cst.AugAssign, cst.AnnAssign))
                else []
            )
            for t in targets:
                code = cst.Module([]).code_for_node(t)
                if "learning_rate" in code or re.search(r"\blr\b", code):
                    return f"sets {code}"
        return ""

    made = names_called(tree)
    for cls in walk(tree):
        if not (
            isinstance(cls, cst.ClassDef)
            and cls.name.value in made
            and any((dotted(b.value) or "").split(".")[-1].endswith("Callback") for b in cls.bases)
            and isinstance(cls.body, cst.IndentedBlock)
        ):
            continue
        for fn in cls.body.body:
            if isinstance(fn, cst.FunctionDef) and fn.name.value in BATCH_HOOKS:
                out.append((f"{cls.name.value}.{fn.name.value}() (line {line(fn)})", writes(fn.body)))
    for c in walk(tree):
        if isinstance(c, cst.Call) and (call_name(c) or "").split(".")[-1] == "LambdaCallback":
            for a in c.args:
                if a.keyword is not None and a.keyword.value in BATCH_HOOKS:
                    out.append((f"LambdaCallback({a.keyword.value}=...) (line {line(c)})", writes(a.value)))
    return out


class StepsPerExecution(Fix):
    """Run several training steps per call into TensorFlow: ``model.compile(steps_per_execution=N)``.

    What it changes: ``steps_per_execution=8`` in ``model.compile(...)`` (for a model whose class
    overrides ``compile`` with its own signature, a GAN's ``compile(d_optimizer, g_optimizer, loss_fn)``:
    in that override's ``super().compile(...)`` call; not on a model the script only compiles to
    evaluate, predict or save while another is fitted, such as the export model of TensorFlow's
    text-classification tutorial: the same for ``xla-jit``), so ``fit`` runs 8 batches per
    trip from Python into the compiled function: the fixed per-step cost (callbacks, Python, function
    dispatch) is paid once per 8 batches. Batches, their order and the updates are the same; callbacks
    and logs see one batch end per 8 steps: the script's own batch hooks (``on_train_batch_begin`` /
    ``_end``, ``on_batch_*``, ``LambdaCallback(on_batch_end=...)``) are named in a note, and a hook that
    sets the learning rate or assigns a variable (a warm-up written as a callback) skips the fix before
    any run: called once per 8 batches, it would change the training.

    When it applies: Keras ``fit`` loops (the harness saw ``model.fit``) with a ``compile`` call in the
    script that does not set it yet; not where each ``fit()`` of the script's loop trains a model built or
    compiled in the loop and that tracing is a quarter or more of the loop's time (the profile's TFD207),
    skipped before any run: the 8-step function is traced again in every call, outside the steps a trial
    times (a federated-averaging script: 1.53x on the steps, 0.86-0.92x on the whole script side by
    side). Throughput is compared in examples/s (one counted step is 8 batches).

    Rolled back when: not faster beyond the noise band, or not sane.
    """

    ID = "steps-per-execution"
    DESCRIPTION = "model.compile(steps_per_execution=8)"
    CODEMOD = StepsPerExecutionCodemod
    PRIORITY = 15
    SCALES_EXAMPLES = True

    def precheck(self, ctx: FixContext) -> str | None:
        if ctx.facts.loop_kind == "custom":
            return "custom training loop: steps_per_execution only affects Keras fit"
        if (ctx.facts.steps_per_execution or 1) > 1:
            return f"steps_per_execution is already {ctx.facts.steps_per_execution}"
        return rebuilt_every_fit(ctx, "steps_per_execution")


FIX = StepsPerExecution
