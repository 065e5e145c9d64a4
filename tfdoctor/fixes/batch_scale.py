"""``batch-scale``: multiply the batch size (×2, ×4, …) and scale the learning rate with it."""

from __future__ import annotations

import math
import re

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext
from tfdoctor.fixes._cst import attr_name, call_name, dotted, kwarg, walk

FACTORS = (2, 4, 8)
BATCH_NAME = re.compile(r"^-*(batch[_-]?size|bs|batch)$", re.I)
LR_NAME = re.compile(r"^-*(lr|learning[_-]?rate)$", re.I)
#: optimizers whose learning rate scales linearly with the batch (Goyal et al. 2017)
LINEAR = frozenset({"SGD", "Momentum", "MomentumOptimizer", "GradientDescentOptimizer", "LARS"})
#: Adam-style (per-parameter adaptive) optimizers: square-root scaling (Hoffer et al. 2017; Malladi et al. 2022)
SQRT = frozenset(
    {
        "Adam",
        "AdamW",
        "Adamax",
        "Nadam",
        "RMSprop",
        "Adagrad",
        "Adadelta",
        "Adafactor",
        "Lion",
        "Ftrl",
        "Lamb",
    }
)


def _number(node: cst.BaseExpression) -> float | None:
    if isinstance(node, cst.Integer):
        return float(int(node.value, 0))
    if isinstance(node, cst.Float):
        return float(node.value)
    return None


def _fmt(value: float, like: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(like, cst.Integer) and value == int(value):
        return cst.Integer(str(int(value)))
    text = f"{value:.6g}"
    if "e" not in text and "." not in text:
        text += ".0"
    return cst.Float(text)


def _argparse_name(call: cst.Call) -> str | None:
    if attr_name(call) != "add_argument" or not call.args:
        return None
    for a in call.args:
        if a.keyword is None and isinstance(a.value, cst.SimpleString):
            name = a.value.evaluated_value
            if isinstance(name, str) and name.startswith("--"):
                return name
    dest = kwarg(call, "dest")
    if dest is not None and isinstance(dest.value, cst.SimpleString):
        v = dest.value.evaluated_value
        return v if isinstance(v, str) else None
    return None


class BatchScaleCodemod(FixCodemod):
    DESCRIPTION = "batch size ×N, learning rate scaled with it"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.factor = int(self.fix.params.get("factor", "2"))
        self.edits: dict[int, cst.BaseExpression] = {}  # id(original number node) -> new node
        args = list(self.fix.script_args)
        batch_desc = self._batch(tree, args)
        opt = self._optimizer(tree)
        rule = "sqrt" if opt in SQRT else "linear"
        if opt is None:
            self.warn("optimizer not recognised: learning rate scaled linearly (the SGD rule)")
        scale = self.factor if rule == "linear" else math.sqrt(self.factor)
        lr_desc = self._lr(tree, args, scale)
        self.summary = (
            f"batch size ×{self.factor} ({batch_desc}); learning rate ×{scale:.3g} "
            f"({'linear' if rule == 'linear' else 'square-root'} scaling for {opt or 'an unknown optimizer'}: {lr_desc})"
        )
        self.examples_factor = float(self.factor)
        return super().transform_module_impl(tree)

    def _batch(self, tree: cst.Module, args: list[str]) -> str:
        for a in args:
            if BATCH_NAME.match(a.split("=")[0]):
                raise SkipFile(f"the batch size is given on the command line ({a}): scale it there")
        for c in walk(tree):  # argparse --batch-size default
            if isinstance(c, cst.Call) and (name := _argparse_name(c)) and BATCH_NAME.match(name):
                d = kwarg(c, "default")
                if d is not None and (v := _number(d.value)) is not None:
                    self.edits[id(d.value)] = _fmt(v * self.factor, d.value)
                    return f"--{name.lstrip('-')} default {v:g} → {v * self.factor:g}, line {self.line(c)}"
        for s in walk(tree):  # BATCH_SIZE = 32
            if not (
                isinstance(s, cst.Assign)
                and len(s.targets) == 1
                and isinstance(s.targets[0].target, cst.Name)
            ):
                continue
            if BATCH_NAME.match(s.targets[0].target.value) and (v := _number(s.value)) is not None:
                self.edits[id(s.value)] = _fmt(v * self.factor, s.value)
                return f"{s.targets[0].target.value} = {v * self.factor:g}, line {self.line(s)}"
        for c in walk(tree):  # .batch(32) / fit(batch_size=32)
            if isinstance(c, cst.Call):
                target = None
                if attr_name(c) == "batch" and c.args and c.args[0].keyword is None:
                    target = c.args[0].value
                elif (k := kwarg(c, "batch_size")) is not None:
                    target = k.value
                if target is not None and (v := _number(target)) is not None:
                    self.edits[id(target)] = _fmt(v * self.factor, target)
                    return f"{v:g} → {v * self.factor:g}, line {self.line(c)}"
        raise SkipFile(
            "no batch size found to scale (argparse --batch-size default, BATCH_SIZE = N, .batch(N))"
        )

    def _optimizer(self, tree: cst.Module) -> str | None:
        for c in walk(tree):
            if isinstance(c, cst.Call):
                last = (call_name(c) or "").split(".")[-1]
                if last in LINEAR or last in SQRT:
                    self.opt_call = c
                    return last
            if isinstance(c, cst.SimpleString) and isinstance(c.evaluated_value, str):
                v = c.evaluated_value.lower()
                for o in (*LINEAR, *SQRT):
                    if v == o.lower():
                        return o
        return None

    def _lr(self, tree: cst.Module, args: list[str], scale: float) -> str:
        for a in args:
            if LR_NAME.match(a.split("=")[0]):
                self.warn(
                    f"the learning rate is given on the command line ({a}): scale it ×{scale:.3g} there"
                )
                return "given on the command line, not changed"
        for c in walk(tree):
            if isinstance(c, cst.Call) and (name := _argparse_name(c)) and LR_NAME.match(name):
                d = kwarg(c, "default")
                if d is not None and (v := _number(d.value)) is not None:
                    self.edits[id(d.value)] = _fmt(v * scale, d.value)
                    return f"--{name.lstrip('-')} default {v:g} → {v * scale:.4g}, line {self.line(c)}"
        opt = getattr(self, "opt_call", None)
        if opt is not None:
            lr = kwarg(opt, "learning_rate") or (
                opt.args[0] if opt.args and opt.args[0].keyword is None else None
            )
            if lr is not None and (v := _number(lr.value)) is not None:
                self.edits[id(lr.value)] = _fmt(v * scale, lr.value)
                return f"{v:g} → {v * scale:.4g}, line {self.line(opt)}"
            if lr is not None:
                self.warn(
                    f"learning rate {dotted(lr.value) or 'expression'} at line {self.line(opt)} not scaled: scale it ×{scale:.3g}"
                )
                return "not found as a number, not changed"
        self.warn(f"no learning rate found to scale: scale it ×{scale:.3g} yourself")
        return "not found, not changed"

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        updated = super().on_leave(original_node, updated_node)
        new = self.edits.get(id(original_node))
        return new if new is not None else updated  # type: ignore[return-value]


class BatchScale(Fix):
    """Train on bigger batches: batch size ×2, ×4, ×8 until throughput stops rising, learning rate scaled.

    What it changes: the batch size where the script sets it (an argparse ``--batch-size`` default, a
    ``BATCH_SIZE = N`` constant, ``.batch(N)`` or ``batch_size=N``), and the learning rate with it:
    **linear** scaling for SGD/momentum (Goyal et al., 2017), **square-root** scaling for Adam-style
    optimizers (Adam, AdamW, RMSprop, Adagrad, …). The summary line says which rule was used. A batch
    size or learning rate given on the command line is not edited (the fix is skipped or warns).

    How it is measured: in examples/s (a step has more examples on purpose). ×2 first; ×4 only if ×2 was
    kept, and so on. A run that runs out of memory is rolled back with the error.

    Rolled back when: examples/s does not rise beyond the noise band, out of memory, losses not sane.
    """

    ID = "batch-scale"
    DESCRIPTION = "batch size ×N with the learning rate scaled"
    CODEMOD = BatchScaleCodemod
    AFTER = ("tf-function", "xla-jit", "mixed-precision", "steps-per-execution", "generator-prefetch")
    PRIORITY = 90
    SCALES_EXAMPLES = True

    def variants(self, ctx: FixContext) -> list[dict[str, str]]:
        return [{"factor": str(f)} for f in FACTORS]


FIX = BatchScale
