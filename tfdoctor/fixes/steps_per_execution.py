"""``steps-per-execution``: ``model.compile(steps_per_execution=N)`` for tiny Keras steps."""

from __future__ import annotations

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext
from tfdoctor.fixes._cst import expr, kwarg, set_kwarg
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
        self.summary = f"steps_per_execution={self.n} in {'; '.join(where)}"
        self.examples_factor = float(self.n)  # the harness counts one step per execution
        return super().transform_module_impl(tree)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if id(original_node) in self.targets:
            return set_kwarg(updated_node, "steps_per_execution", expr(str(self.n)))
        return updated_node


class StepsPerExecution(Fix):
    """Run several training steps per call into TensorFlow: ``model.compile(steps_per_execution=N)``.

    What it changes: ``steps_per_execution=8`` in ``model.compile(...)`` (for a model whose class
    overrides ``compile`` with its own signature, a GAN's ``compile(d_optimizer, g_optimizer, loss_fn)``:
    in that override's ``super().compile(...)`` call; not on a model the script only compiles to
    evaluate, predict or save while another is fitted, such as the export model of TensorFlow's
    text-classification tutorial: the same for ``xla-jit``), so ``fit`` runs 8 batches per
    trip from Python into the compiled function: the fixed per-step cost (callbacks, Python, function
    dispatch) is paid once per 8 batches. Batches, their order and the updates are the same; callbacks
    and logs see one batch end per 8 steps.

    When it applies: Keras ``fit`` loops (the harness saw ``model.fit``) with a ``compile`` call in the
    script that does not set it yet. Throughput is compared in examples/s (one counted step is 8 batches).

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
        return None


FIX = StepsPerExecution
