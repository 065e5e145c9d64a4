"""``mixed-precision``: a 16-bit compute policy where the hardware has it (float16 on tensor-core GPUs
with loss scaling, bfloat16 on CPUs with AVX512_BF16/AMX), the output layer kept float32."""

from __future__ import annotations

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext
from tfdoctor.fixes._cst import aliases, attr_name, call_name, expr, kwarg, set_kwarg, walk
from tfdoctor.fixes.batch_scale import LINEAR, SQRT

OPTIMIZERS = LINEAR | SQRT


def policy_for(ctx: FixContext) -> str | None:
    hw = ctx.hardware
    if hw.gpu_compute_capability:
        return "mixed_float16" if hw.tensor_core_gpu else None
    return "mixed_bfloat16" if hw.cpu_bf16 else None


class MixedPrecisionCodemod(FixCodemod):
    DESCRIPTION = "mixed precision policy, float32 output layer, loss scaling in custom loops"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.policy = self.fix.params.get("policy") or policy_for(self.fix) or "mixed_bfloat16"
        al = aliases(tree)
        if al.keras is None:
            raise SkipFile("the script imports neither tensorflow nor keras")
        self.keras = al.keras
        for c in walk(tree):
            if isinstance(c, cst.Call) and (call_name(c) or "").endswith("set_global_policy"):
                raise SkipFile(f"the script sets a dtype policy itself (line {self.line(c)})")
        dense = [c for c in walk(tree) if isinstance(c, cst.Call) and attr_name(c) == "Dense"]
        self.output: cst.Call | None = dense[-1] if dense else None
        notes = []
        if self.output is not None and kwarg(self.output, "dtype") is None:
            notes.append(f"output layer at line {self.line(self.output)} kept float32")
        else:
            self.output = None
            self.warn(
                "no final Dense layer found: make sure the model's outputs are float32 (dtype='float32')"
            )
        # float16 needs loss scaling; Keras compile() adds it, a custom loop needs it spelled out
        self.wrap_opt: set[int] = set()
        self.scale_grad: set[int] = set()
        self.opt_name: str | None = None
        custom = any(isinstance(c, cst.Call) and attr_name(c) == "apply_gradients" for c in walk(tree))
        if self.policy == "mixed_float16" and custom:
            for a in walk(tree):
                if (
                    isinstance(a, cst.Assign)
                    and len(a.targets) == 1
                    and isinstance(a.targets[0].target, cst.Name)
                    and isinstance(a.value, cst.Call)
                    and (call_name(a.value) or "").split(".")[-1] in OPTIMIZERS
                ):
                    self.wrap_opt.add(id(a.value))
                    self.opt_name = a.targets[0].target.value
                    break
            if self.opt_name is None:
                raise SkipFile(
                    "float16 in a custom loop needs loss scaling, and no optimizer assignment was found"
                )
            for c in walk(tree):
                if isinstance(c, cst.Call) and attr_name(c) == "gradient" and c.args:
                    self.scale_grad.add(id(c))
            notes.append(f"LossScaleOptimizer around {self.opt_name}, loss scaled before tape.gradient")
        self.summary = f"{self.keras}.mixed_precision.set_global_policy({self.policy!r}); " + "; ".join(notes)
        new = super().transform_module_impl(tree)
        stmt = cst.parse_statement(f'{self.keras}.mixed_precision.set_global_policy("{self.policy}")\n')
        body = list(new.body)
        at = 0
        for i, s in enumerate(body):
            if isinstance(s, cst.SimpleStatementLine) and all(
                isinstance(x, (cst.Import, cst.ImportFrom))
                or (isinstance(x, cst.Expr) and isinstance(x.value, cst.SimpleString))
                for x in s.body
            ):
                at = i + 1
        stmt = stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        return new.with_changes(body=[*body[:at], stmt, *body[at:]])

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.output is not None and original_node is self.output:
            return set_kwarg(updated_node, "dtype", expr('"float32"'))
        if id(original_node) in self.wrap_opt:
            return cst.Call(
                func=expr(f"{self.keras}.mixed_precision.LossScaleOptimizer"), args=[cst.Arg(updated_node)]
            )
        if id(original_node) in self.scale_grad:
            first = updated_node.args[0]
            scaled = cst.Call(func=expr(f"{self.opt_name}.scale_loss"), args=[cst.Arg(first.value)])
            return updated_node.with_changes(args=[first.with_changes(value=scaled), *updated_node.args[1:]])
        return updated_node


class MixedPrecision(Fix):
    """Compute in 16 bit where the hardware does it faster: a mixed precision dtype policy.

    What it changes: ``keras.mixed_precision.set_global_policy(...)`` right after the imports (before
    any layer is built) and ``dtype="float32"`` on the last ``Dense`` layer (softmax/loss stay float32).
    On a GPU with tensor cores (compute capability ≥ 7.0) the policy is ``mixed_float16``; a custom loop
    then also gets loss scaling (``LossScaleOptimizer`` around the optimizer, ``optimizer.scale_loss(loss)``
    before ``tape.gradient``; Keras ``compile`` adds it itself). On a CPU it is ``mixed_bfloat16``, and only
    where the CPU has bfloat16 instructions (AVX512_BF16 or AMX-BF16).

    Never tried: GPUs without tensor cores, CPUs without bf16 (it would slow them down). Where tried,
    the measurement decides: bf16 on a CPU is kept only if measured faster. Measured on an AVX512_BF16
    CPU (2 cores): 1.04x on ``examples/mlp_loop.py`` (width 512; a standalone 2048-wide MLP ran 1.8x),
    0.5-1.0x on the case study's small CNN, where the loop rejects it.

    Rolled back when: not faster beyond the noise band, losses not finite or off the baseline trajectory.
    """

    ID = "mixed-precision"
    DESCRIPTION = "mixed precision (float16 on tensor cores, bfloat16 on bf16 CPUs)"
    CODEMOD = MixedPrecisionCodemod
    AFTER = ("tf-function", "xla-jit")
    PRIORITY = 60

    def precheck(self, ctx: FixContext) -> str | None:
        if ctx.facts.dtype_policy and ctx.facts.dtype_policy.startswith("mixed"):
            return f"already training with {ctx.facts.dtype_policy}"
        hw = ctx.hardware
        if hw.gpu_compute_capability and not hw.tensor_core_gpu:
            return f"GPU without tensor cores ({', '.join(hw.gpu_models)}): float16 would not be faster"
        if not hw.gpu_compute_capability and not hw.cpu_bf16:
            return "CPU without bfloat16 instructions (AVX512_BF16/AMX): mixed precision would slow it down"
        return None


FIX = MixedPrecision
