"""``mixed-precision``: a 16-bit compute policy where the hardware has it (float16 on tensor-core GPUs
with loss scaling, bfloat16 on CPUs with AVX512_BF16/AMX), the output layer kept float32."""

from __future__ import annotations

import re
from dataclasses import replace

import libcst as cst
from libcst.codemod import SkipFile
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext, FixOutcome
from tfdoctor.fixes._cst import (
    aliases,
    attr_name,
    call_name,
    dotted,
    expr,
    imports_end,
    kwarg,
    set_kwarg,
    walk,
)
from tfdoctor.fixes._models import Models
from tfdoctor.fixes.batch_scale import LINEAR, SQRT, script_optimizers
from tfdoctor.fixes.tf_function import is_apply
from tfdoctor.model import FP16_POLICIES

OPTIMIZERS = LINEAR | SQRT


#: the summary's note when the script builds no model (its output layer may be in a module beside it)
NO_MODEL = "no model found in the script: outputs not changed"


def policy_position(tree: cst.Module, keras_root: str) -> int | None:
    """Index of the module statement the policy goes before: after the leading imports (and after the
    statement that imports ``keras_root`` where that comes later), before anything else runs, so before
    the first model is built. Imports further down (``import matplotlib`` after training in a notebook
    export) do not move it. None when ``keras_root`` is not imported at module level."""
    body = list(tree.body)
    at = imports_end(body)
    for i, stmt in enumerate(body):
        bound = any(
            isinstance(n, (cst.Import, cst.ImportFrom))
            and not isinstance(n.names, cst.ImportStar)
            and any(
                (
                    a.asname.name.value
                    if a.asname and isinstance(a.asname.name, cst.Name)
                    else (dotted(a.name) or "").split(".")[0]
                )
                == keras_root
                for a in n.names
            )
            for n in walk(stmt)
            if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef))
        )
        if bound:
            return max(at, i + 1)
    return None


def _first_from_import(tree: cst.Module) -> int | None:
    """Index of the first module statement importing from keras or tensorflow (``from keras import
    layers``), or None."""
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        for n in walk(stmt):
            if (
                isinstance(n, cst.ImportFrom)
                and n.module is not None
                and (dotted(n.module) or "").split(".")[0] in ("keras", "tensorflow")
            ):
                return i
    return None


def policy_for(ctx: FixContext) -> str | None:
    hw = ctx.hardware
    if hw.gpu_compute_capability:
        return "mixed_float16" if hw.tensor_core_gpu else None
    return "mixed_bfloat16" if hw.cpu_bf16 else None


#: a 16-bit tensor meeting a 32-bit one in an op (TensorFlow's and Keras's wordings: "got tf.bfloat16 !=
#: tf.float32", "expected to be a half tensor but is a float tensor", "requested dtype float32 for Tensor
#: with dtype bfloat16")
_HALF = r"(?:tf\.)?(?:bfloat16|float16|half)"
_FULL = r"(?:tf\.)?float(?:32)?"
_DTYPE_CLASH = re.compile(
    rf"{_HALF} != {_FULL}\b|{_FULL} != {_HALF}"
    rf"|expected to be an? (?:{_HALF}|{_FULL}) tensor but is an? (?:{_HALF}|{_FULL}) tensor"
    rf"|requested dtype (?:{_HALF}|{_FULL}) for Tensor with dtype (?:{_HALF}|{_FULL})"
)


class MixedPrecisionCodemod(FixCodemod):
    DESCRIPTION = "mixed precision policy, float32 output layer, loss scaling in custom loops"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.policy = self.fix.params.get("policy") or policy_for(self.fix) or "mixed_bfloat16"
        al = aliases(tree)
        # ``from keras import layers`` / ``from tensorflow import GradientTape`` alone bind no name for
        # the policy call: ``import keras`` is added, the policy goes after the first such import
        from_import = _first_from_import(tree)
        if al.keras is None and from_import is None:
            raise SkipFile("the script imports neither tensorflow nor keras")
        self.keras = al.keras or "keras"
        self.add_keras = al.keras is None
        self.new_policy: dict[int, str] = {}  # id(the policy's string) -> the policy replacing it
        self.reset_after: dict[int, int] = {}  # id(a clear_session() statement) -> its line
        # the layer calls (by id) given dtype="float32": output layers and Normalization layers
        self.outputs: set[int] = set()
        # id(an expression a subclass's call() returns, or an activation's input there) -> cast to float32
        self.casts: set[int] = set()
        self.cast_fn = f"{al.tf}.cast" if al.tf else f"{self.keras}.ops.cast"
        self.wrap_opt: set[int] = set()
        self.scale_grad: set[int] = set()
        sets = [
            c
            for c in walk(tree)
            if isinstance(c, cst.Call) and (call_name(c) or "").endswith("set_global_policy")
        ]
        if sets:
            return self._leave_float16(tree, sets)
        self.at = policy_position(tree, self.keras.split(".")[0])
        if self.add_keras and from_import is not None:
            self.at = max(imports_end(list(tree.body)), from_import + 1)
        if self.at is None and not self.fix.params.get("outputs_only"):
            raise SkipFile(
                f"{self.keras} is not imported at the top level of the script: nowhere to set the policy "
                "before the model is built"
            )
        notes = [self._output_layers(tree)]
        notes += self._normalization_layers(tree)
        if self.fix.params.get("outputs_only"):  # a module beside the script: its output layers only
            if not self.outputs:
                raise SkipFile(notes[0])
            self.summary = "; ".join(notes)
            return super().transform_module_impl(tree)
        # float16 needs loss scaling; Keras compile() adds it, a custom loop needs it spelled out
        self.opt_name: str | None = None
        custom = any(isinstance(c, cst.Call) and is_apply(c) for c in walk(tree))
        if self.policy == "mixed_float16" and custom:
            optimizers = OPTIMIZERS | set(script_optimizers(tree))  # class GCAdam(Adam) too
            for a in walk(tree):
                if (
                    isinstance(a, cst.Assign)
                    and len(a.targets) == 1
                    and isinstance(a.targets[0].target, cst.Name)
                    and isinstance(a.value, cst.Call)
                    and (call_name(a.value) or "").split(".")[-1] in optimizers
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
        body = list(tree.body)
        assert self.at is not None
        where = (
            f"before line {self.line(body[self.at])}" if self.at < len(body) else "at the end of the imports"
        )
        # Keras's clear_session() resets the global policy to float32 (Kaggle's K-fold notebooks call it
        # before each fold's build_model()): the policy is set again after each such statement
        self.reset_after = {
            id(stmt): self.line(stmt)
            for stmt in walk(tree)
            if isinstance(stmt, cst.SimpleStatementLine)
            and any(
                isinstance(c, cst.Call) and (call_name(c) or "").split(".")[-1] == "clear_session"
                for c in walk(stmt)
            )
        }
        if self.reset_after:
            lines = ", ".join(map(str, self.reset_after.values()))
            notes.append(f"set again after clear_session() (line {lines}), which resets it to float32")
        self.summary = (
            f"{self.keras}.mixed_precision.set_global_policy({self.policy!r}) {where}; " + "; ".join(notes)
        )
        new = super().transform_module_impl(tree)
        stmt = cst.parse_statement(f'{self.keras}.mixed_precision.set_global_policy("{self.policy}")\n')
        body = list(new.body)
        stmt = stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        new = new.with_changes(body=[*body[: self.at], stmt, *body[self.at :]])
        if self.add_keras:
            AddImportsVisitor.add_needed_import(self.context, "keras")
            new = AddImportsVisitor(self.context).transform_module(new)
        return new

    def _leave_float16(self, tree: cst.Module, sets: list[cst.Call]) -> cst.Module:
        """The script sets its own policy: a float16 one on a CPU (a GPU script run where nothing
        computes float16) is replaced in place by ``mixed_bfloat16`` (a bf16 CPU) or ``float32``."""
        where = f"line {self.line(sets[0])}"
        if self.fix.hardware.gpu_compute_capability:
            raise SkipFile(f"the script sets a dtype policy itself ({where})")
        # the policy's string: in set_global_policy("mixed_float16") or in a Policy("mixed_float16") it takes
        found = [
            (n, v)
            for c in walk(tree)
            if isinstance(c, cst.Call)
            and (call_name(c) or "").split(".")[-1] in ("set_global_policy", "Policy", "DTypePolicy")
            and c.args
            and isinstance(n := c.args[0].value, cst.SimpleString)
            and (v := n.evaluated_value) in FP16_POLICIES
        ]
        if not found:
            raise SkipFile(
                f"the script sets a dtype policy itself ({where}), not a float16 one tfdoctor can read"
            )
        mixed = "mixed_bfloat16" if self.fix.hardware.cpu_bf16 else "float32"
        notes = []
        for node, old in found:
            new = mixed if old == "mixed_float16" or mixed == "float32" else "bfloat16"
            self.new_policy[id(node)] = new
            notes.append(f"{old!r} → {new!r} (line {self.line(node)})")
        self.policy = self.new_policy[id(found[0][0])]
        why = (
            "this CPU computes bfloat16 natively (AVX512_BF16/AMX)"
            if mixed != "float32"
            else "this CPU has no bfloat16 instructions either"
        )
        self.summary = f"dtype policy {'; '.join(notes)}: float16 has no fast kernels on a CPU, {why}"
        if mixed != "float32":
            out = self._output_layers(tree)
            if self.outputs:
                self.summary += f"; {out}"
        if any(
            isinstance(c, cst.Call) and (call_name(c) or "").endswith("LossScaleOptimizer")
            for c in walk(tree)
        ):
            self.warn("the LossScaleOptimizer stays: it still trains without float16, and can go")
        return super().transform_module_impl(tree)

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.SimpleString:
        new = self.new_policy.get(id(original_node))
        if new is None:
            return updated_node
        quote = updated_node.value[-1]
        return updated_node.with_changes(value=f"{quote}{new}{quote}")

    def _output_layers(self, tree: cst.Module) -> str:
        """Mark the output layer of each model that computes the loss; the summary's note."""
        models = Models(tree)
        if not models.defs and not any(
            "keras" in text.lower() for text in (tree.code, *self.fix.project.values())
        ):  # TF's "Basic training loops": a tf.Module of tf.Variables, no layer a policy would reach
            raise SkipFile(
                "no Keras layer or model in the script: its weights are tf.Variables it computes with "
                "itself, which a Keras dtype policy does not change"
            )
        if not models.defs:
            self.warn(
                "no Keras model built in the script: make sure the model's outputs are float32 (dtype='float32')"
            )
            return NO_MODEL
        keys, why = models.loss_models()
        guessed = not keys
        if guessed:  # which model computes the loss is not visible: every model's output stays float32
            keys = list(dict.fromkeys(models.defs))
        done: list[str] = []
        for key in dict.fromkeys(keys):
            d = models.defs[key]
            if not d.outputs and d.casts:  # call() ends in an op: ``return tf.nn.sigmoid(x)``
                for e, op in d.casts:
                    if id(e) not in self.casts:
                        self.casts.add(id(e))
                        what = " ".join(cst.Module([]).code_for_node(e).split())
                        what = what if len(what) <= 40 else what[:37] + "..."
                        what = f"{op}'s input {what}" if op else f"the value returned, {what},"
                        done.append(
                            f"{what} at line {self.line(e)} cast ({key}.call() returns an op, not a layer)"
                        )
                continue
            if not d.outputs:
                self.warn(f"model {key}: {d.unresolved}: make sure its outputs are float32 (dtype='float32')")
                continue
            for layer in d.outputs:
                if kwarg(layer, "dtype") is None and id(layer) not in self.outputs:
                    self.outputs.add(id(layer))
                    name = (call_name(layer) or "layer").split(".")[-1]
                    via, endpoint = d.via.get(id(layer)), d.fed.get(id(layer))
                    whose = f"{key}, {via}'s" if via else key  # Distiller, student's
                    if endpoint:  # keras-io's OCR: CTCLayer()(labels, x)
                        whose += f", fed to its output {endpoint}, which takes no dtype"
                    done.append(f"{name} at line {self.line(layer)} ({whose})")
        if not done:
            missing = [
                f"{k}: {models.defs[k].unresolved}" for k in dict.fromkeys(keys) if not models.defs[k].outputs
            ]
            if missing:  # said as it is: not found, not "already set"
                return f"output layer not found ({'; '.join(missing)}): make sure it computes in float32"
            return "output layers already set their dtype"
        how = (
            "which model computes the loss is not visible in the script: output layer of every model"
            if guessed
            else "output layer of the model computing the loss: " + "; ".join(why)
        )
        return f"kept float32: {', '.join(done)} ({how})"

    def _normalization_layers(self, tree: cst.Module) -> list[str]:
        """Layers kept float32, a note for each kind: Keras ``Normalization`` (under a 16-bit policy
        ``adapt()`` on a tf.data dataset fails, ``AddV2 ... expected to be a float tensor but is a bfloat16
        tensor``: TensorFlow's structured-data tutorial; raw feature values lose their digits: a fee of 300
        squared overflows float16) and ``Lambda`` (its function is the script's own math, written for
        float32: keras-io's DDIM ``Lambda(sinusoidal_embedding)`` multiplies its bf16 input by a float32
        tensor, and Keras cannot even build the model)."""
        notes = []
        for cls, why in (
            (
                "Normalization",
                "a preprocessing layer: under a 16-bit policy its adapt() on a dataset fails "
                "and raw feature values lose digits",
            ),
            (
                "Lambda",
                "the script's own function, written for float32: its float32 tensors would meet "
                "16-bit inputs",
            ),
        ):
            found = [
                c
                for c in walk(tree)
                if isinstance(c, cst.Call)
                and (call_name(c) or "").split(".")[-1] == cls
                and kwarg(c, "dtype") is None
            ]
            if not found:
                continue
            self.outputs.update(id(c) for c in found)
            lines = ", ".join(str(self.line(c)) for c in found)
            notes.append(f"kept float32: {cls} at line{'s' if len(found) > 1 else ''} {lines} ({why})")
        return notes

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.SimpleStatementLine]:
        if id(original_node) not in self.reset_after:
            return updated_node
        again = cst.parse_statement(f'{self.keras}.mixed_precision.set_global_policy("{self.policy}")\n')
        assert isinstance(again, cst.SimpleStatementLine)
        return cst.FlattenSentinel([updated_node, again])

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        updated = super().on_leave(original_node, updated_node)
        if id(original_node) in self.casts and isinstance(updated, cst.BaseExpression):
            return cst.Call(func=expr(self.cast_fn), args=[cst.Arg(updated), cst.Arg(expr('"float32"'))])
        return updated  # type: ignore[return-value]

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if id(original_node) in self.outputs:
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

    What it changes: ``keras.mixed_precision.set_global_policy(...)`` right after the script's leading
    imports (after the statement importing Keras when that comes later, as in a notebook export), so
    before any model is built; imports further down the file do not move it; after each
    ``clear_session()`` statement it is set again (Keras resets the global policy to float32 there, and
    K-fold notebooks call it before each fold's model). ``dtype="float32"`` goes
    on the output layer of each model that computes the loss: the layer producing the model's output
    (the ``Activation("softmax")`` after the last ``Dense``, each output of a functional model, where
    it is built when made first and called later (``head = Dense(1)`` ... ``outputs = head(x)``), the
    layer a subclassed model's ``call`` returns, the output layer of the model it was given when
    ``call`` returns that (keras-io's ``Distiller``: the student's), the layers feeding an output
    layer of the script's that takes no ``dtype`` (an endpoint layer adding the loss, keras-io's OCR
    ``CTCLayer(name="ctc_loss")(labels, x)``: ``x``'s softmax ``Dense``)), for the models whose output
    reaches a loss (a GAN's discriminator, not its generator; a VAE's encoder and decoder) or that are
    compiled with one or trained with ``fit``. Where that cannot be told, every model's output layer;
    given the modules beside the script (``FixContext.project``), a model built in one of them gets it
    there. A subclassed model whose ``call`` returns an op, not a layer (keras-io's collaborative
    filtering: ``return tf.nn.sigmoid(x)``), gets the activation's input cast to float32
    (``tf.nn.sigmoid(tf.cast(x, "float32"))``; ``keras.ops.cast`` without tensorflow imported), or the value
    it returns; a dict of outputs is left as it is. Keras ``Normalization`` layers keep float32 too: under a 16-bit policy their ``adapt()``
    on a tf.data dataset fails (TensorFlow's structured-data tutorial) and raw feature values lose
    digits; so do ``Lambda`` layers, whose function is the script's own float32 math (keras-io's DDIM:
    ``Lambda(sinusoidal_embedding)`` multiplies its input by a float32 tensor, and the model cannot be
    built with a bf16 input). A script with no Keras layer or model at all (a ``tf.Module`` holding ``tf.Variable``
    objects, as in TensorFlow's "Basic training loops") is skipped: a Keras policy reaches none of its
    math.
    On a GPU with tensor cores (compute capability ≥ 7.0) the policy is ``mixed_float16``; a custom loop
    then also gets loss scaling (``LossScaleOptimizer`` around the optimizer, ``optimizer.scale_loss(loss)``
    before ``tape.gradient``; Keras ``compile`` adds it itself). On a CPU it is ``mixed_bfloat16``, and only
    where the CPU has bfloat16 instructions (AVX512_BF16 or AMX-BF16).

    A script that sets ``mixed_float16`` (or ``float16``) itself and runs on a CPU (a GPU script, or
    the Keras mixed precision guide, on a laptop: TFD404) gets that policy replaced where it is written,
    ``set_global_policy("mixed_float16")`` or ``Policy("mixed_float16")``: ``mixed_bfloat16`` on a bf16 CPU
    (output layers kept float32), ``float32`` otherwise; a ``LossScaleOptimizer`` stays (it still trains).
    Measured here under ``fit``: a small Conv2D model 257 ms a step in float16, 64 ms in float32, 24-28 ms
    in bf16. A policy the script sets itself is otherwise left alone.

    Never tried: GPUs without tensor cores, CPUs without bf16 (it would slow them down). Where tried,
    the measurement decides: bf16 on a CPU is kept only if measured faster. Measured on an AVX512_BF16
    CPU (2 cores): 1.04x on ``examples/mlp_loop.py`` (width 512; a standalone 2048-wide MLP ran 1.8x),
    0.5-1.0x on the case study's small CNN, where the loop rejects it.

    Rolled back when: not faster beyond the noise band, losses not finite or off the baseline trajectory.
    A trial that fails on a dtype mismatch (the script's own float32 math, e.g. ``tf.cast(n, tf.float32)``
    in a loss, meeting a layer's 16-bit output: TensorFlow's style-transfer tutorial) says where that
    math is to cast.
    """

    ID = "mixed-precision"
    DESCRIPTION = "mixed precision (float16 on tensor cores, bfloat16 on bf16 CPUs)"
    CODEMOD = MixedPrecisionCodemod
    AFTER = ("tf-function", "xla-jit")
    PRIORITY = 60

    def failure_hint(self, error: str) -> str:
        m = _DTYPE_CLASH.search(error)
        if m is None:
            return ""
        return (
            f"the script's own float32 math meets a layer's 16-bit output ({m.group(0)}): cast the "
            "model's outputs to float32 where the script computes with them (tf.cast(x, tf.float32)) to "
            "use mixed precision here"
        )

    def follow_imports(self, out: FixOutcome, source: str, ctx: FixContext) -> FixOutcome:
        """The policy in the script; the output layers where the models are built: in the modules
        beside the script it imports when the script builds none itself."""
        if not out.changed or NO_MODEL not in out.reason:
            return super().follow_imports(out, source, ctx)
        files: dict[str, str] = {}
        notes: list[str] = []
        for rel, text in ctx.project.items():
            sub = self.apply_module(rel, text, ctx, outputs_only="1")
            if sub.changed:
                files[rel] = sub.code
                notes.append(f"{rel}: {sub.reason}")
        if not files:
            return out
        return replace(
            out,
            files=files,
            reason=out.reason.replace(NO_MODEL, "; ".join(notes)),
            warnings=tuple(w for w in out.warnings if not w.startswith("no Keras model built")),
        )

    def precheck(self, ctx: FixContext) -> str | None:
        hw = ctx.hardware
        policy = ctx.facts.dtype_policy or ""
        if policy in FP16_POLICIES and not hw.gpu_compute_capability:
            return None  # a GPU script's float16 on a CPU: replaced by bf16 or float32 (TFD404)
        if policy.startswith("mixed"):
            return f"already training with {policy}"
        if hw.gpu_compute_capability and not hw.tensor_core_gpu:
            return f"GPU without tensor cores ({', '.join(hw.gpu_models)}): float16 would not be faster"
        if not hw.gpu_compute_capability and not hw.cpu_bf16:
            return "CPU without bfloat16 instructions (AVX512_BF16/AMX): mixed precision would slow it down"
        return None


FIX = MixedPrecision
