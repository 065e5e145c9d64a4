"""``xla-jit``: compile the step with XLA (``jit_compile=True`` on the step's tf.function or on
``model.compile``); the harness's run-time switch when the step is compiled outside the script."""

from __future__ import annotations

import re

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext, rebuilt_every_fit
from tfdoctor.fixes._cst import aliases, attr_name, call_name, dotted, expr, kwarg, own_nodes, set_kwarg, walk
from tfdoctor.fixes._models import compile_sites
from tfdoctor.fixes.tf_function import _is_step_body

#: graph ops that call back into Python: XLA has no kernel for them (PyFunc, EagerPyFunc)
PYTHON_OPS = frozenset({"numpy_function", "py_function", "py_func"})


def _steps_run(node: cst.CSTNode, step_names: set[str], *, direct: bool) -> list[str]:
    """The step functions ``node`` runs through ``strategy.run(step_fn, ...)`` and, with ``direct``, calls
    by name, in source order."""
    out = []
    for c in walk(node):
        if not isinstance(c, cst.Call):
            continue
        if direct and isinstance(c.func, cst.Name) and c.func.value in step_names:
            out.append(c.func.value)
        elif (
            attr_name(c) == "run"
            and c.args
            and isinstance(c.args[0].value, cst.Name)
            and c.args[0].value.value in step_names
        ):
            out.append(c.args[0].value.value)
    return out


class XlaCodemod(FixCodemod):
    DESCRIPTION = "jit_compile=True on the training step"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        al = aliases(tree)
        tf_function = al.functions  # tf.function, or function from ``from tensorflow import function``
        self.tf_function_name = f"{al.tf}.function" if al.tf else min(tf_function, default="tf.function")
        self.targets: set[int] = set()
        self.bare: set[int] = set()  # @tf.function without a call
        where: list[str] = []
        already: list[str] = []
        step_names = {
            f.name.value for f in walk(tree) if isinstance(f, cst.FunctionDef) and _is_step_body(f.body)
        }
        # a function running the step through strategy.run(step_fn, ...) is the compiled step
        for f in walk(tree):
            if isinstance(f, cst.FunctionDef) and _steps_run(f.body, step_names, direct=False):
                step_names.add(f.name.value)
        self.decorate: set[int] = set()  # id() of step functions that get @tf.function(jit_compile=True)
        facts = self.fix.facts
        if facts.loop_kind == "custom" and (facts.steps_per_execution or 1) > 1:
            step_names = self._in_graph_loop(tree, step_names, tf_function, where)
        for n in walk(tree):
            if isinstance(n, cst.FunctionDef) and n.name.value in step_names:
                for d in n.decorators:
                    if (spelled := dotted(d.decorator)) in tf_function:
                        self.bare.add(id(d))
                        where.append(f"@{spelled} on {n.name.value}() (line {self.line(n)})")
                    elif (
                        isinstance(d.decorator, cst.Call)
                        and (spelled := call_name(d.decorator)) in tf_function
                    ):
                        self._consider(d.decorator, f"@{spelled}(...) on {n.name.value}()", where, already)
                if any(id(d) in self.bare or id(d.decorator) in self.targets for d in n.decorators):
                    self._refuse_unsupported(n, tree)
            elif isinstance(n, cst.Call) and (spelled := call_name(n)) in tf_function and n.args:
                v = n.args[0].value
                if isinstance(v, cst.Name) and v.value in step_names:
                    self._consider(n, f"{spelled}({v.value})", where, already)
        sites, notes = compile_sites(tree, self.line)
        for c, label in sites:
            self._consider(c, label, where, already)
        if not self.targets and not self.bare and not self.decorate:
            if already:
                raise SkipFile(f"the script already sets jit_compile ({'; '.join(already)})")
            if notes:
                raise SkipFile("; ".join(notes) + ": nowhere to set jit_compile")
            if self.fix.facts.step_kind == "tf.function":
                # the step is a tf.function compiled outside this file: the harness sets it at run time
                self.switches = {"jit": "1"}
                self.summary = (
                    "jit_compile=True by run-time switch (the step's tf.function is not in the script)"
                )
                return tree
            raise SkipFile(
                "no tf.function training step or model.compile() in the script to compile with XLA"
            )
        self.summary = "jit_compile=True on " + "; ".join(where)
        return super().transform_module_impl(tree)

    def _in_graph_loop(
        self, tree: cst.Module, step_names: set[str], tf_function: frozenset[str], where: list[str]
    ) -> set[str]:
        """The run's step function loops over its batches in its graph (the facts: several optimizer
        updates a call): TensorFlow's tf.function guide writes ``for x, y in dataset:`` inside one
        tf.function, the distributed-training tutorial and Model Garden's Orbit ``for _ in tf.range(n):
        step_fn(next(iterator))``. XLA cannot compile that function: the dataset's ops have no XLA kernel
        (``ScanDataset``, ``IteratorGetNext``). The step function its loop calls is compiled instead,
        ``@tf.function(jit_compile=True)`` on it (one XLA cluster a batch, the loop around it in the
        graph as before); a loop whose body holds the step itself is skipped with what to change.
        Returns the step names left to the usual targets (those without such a loop)."""
        functions: dict[str, list[cst.FunctionDef]] = {}
        for f in walk(tree):
            if isinstance(f, cst.FunctionDef):
                functions.setdefault(f.name.value, []).append(f)

        def decorated(f: cst.FunctionDef) -> bool:
            return any(
                dotted(d.decorator) in tf_function
                or (isinstance(d.decorator, cst.Call) and call_name(d.decorator) in tf_function)
                for d in f.decorators
            )

        def loops(f: cst.FunctionDef) -> list[cst.For | cst.While]:
            return [n for n in own_nodes(f.body) if isinstance(n, (cst.For, cst.While))]

        outer = [f for fs in functions.values() for f in fs if decorated(f) and loops(f)]
        if not outer:
            return step_names
        called: dict[str, None] = {}
        inline: list[str] = []
        for f in outer:
            for loop in loops(f):
                names = _steps_run(loop.body, step_names, direct=True)
                if _is_step_body(loop.body) and not names:
                    inline.append(f"{f.name.value}() (line {self.line(loop)})")
                called.update(dict.fromkeys(names))
        outer_names = {f.name.value for f in outer}
        for name in called:
            fs = functions.get(name, [])
            if len(fs) != 1 or name in outer_names:
                continue
            f = fs[0]
            if not decorated(f):
                self._refuse_unsupported(f, tree)
                self.decorate.add(id(f))
                where.append(
                    f"{name}() (line {self.line(f)}) as @tf.function(jit_compile=True): the step the loop of "
                    f"{' and '.join(sorted(outer_names))}() runs each batch (XLA cannot compile the dataset "
                    "ops of that loop)"
                )
        if not self.decorate and inline:
            raise SkipFile(
                f"the step function loops over its batches in its graph ({self.fix.facts.steps_per_execution} "
                f"a call; the loop in {', '.join(inline)}): XLA cannot compile the dataset ops of that loop; "
                "move the loop's body into a function of its own (its training step) to compile that with XLA"
            )
        return {n for n in step_names if n not in outer_names and n not in called}

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        if id(original_node) not in self.decorate:
            return updated_node
        deco = cst.Decorator(decorator=expr(f"{self.tf_function_name}(jit_compile=True)"))
        return updated_node.with_changes(decorators=[*updated_node.decorators, deco])

    def _refuse_unsupported(self, step: cst.FunctionDef, tree: cst.Module) -> None:
        """Ops XLA has no kernel for, in the step or the file's functions it calls (followed by name):
        summary ops ("No registered 'WriteSummary'": the pix2pix tutorial writes tf.summary.scalar inside
        its step) and Python called from the graph (``tf.numpy_function`` / ``tf.py_function``:
        "No registered 'PyFunc'"; TensorFlow's actor-critic tutorial steps its environment that way
        inside the episode its step runs). Said before any run, where the call is."""
        functions: dict[str, cst.FunctionDef] = {}
        for f in walk(tree):
            if isinstance(f, cst.FunctionDef):
                functions.setdefault(f.name.value, f)
        seen = {step.name.value}
        queue: list[tuple[cst.FunctionDef, list[str]]] = [(step, [])]
        while queue:
            fn, via = queue.pop(0)
            path = f", via {' → '.join(f'{v}()' for v in via)}" if via else ""
            for c in walk(fn.body):
                if not isinstance(c, cst.Call):
                    continue
                name = call_name(c) or ""
                if ".summary." in f".{name}":
                    raise SkipFile(
                        f"{step.name.value}() writes {name}() (line {self.line(c)}{path}): XLA cannot "
                        "compile summary ops (no XLA kernel for WriteSummary); write them outside the step"
                    )
                if name.split(".")[-1] in PYTHON_OPS:
                    raise SkipFile(
                        f"{step.name.value}() calls {name}() (line {self.line(c)}{path}): XLA cannot compile "
                        "Python called from the graph (no XLA kernel for PyFunc); keep that call out of the "
                        "compiled step to use XLA"
                    )
                if isinstance(c.func, cst.Name) and c.func.value in functions and c.func.value not in seen:
                    seen.add(c.func.value)
                    queue.append((functions[c.func.value], [*via, c.func.value]))

    def _consider(self, call: cst.Call, label: str, where: list[str], already: list[str]) -> None:
        existing = kwarg(call, "jit_compile")
        if existing is not None:
            already.append(f"{label}: jit_compile={cst.Module([]).code_for_node(existing.value)}")
            return
        self.targets.add(id(call))
        where.append(f"{label} (line {self.line(call)})")

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        if id(original_node) in self.bare:
            call = cst.Call(func=updated_node.decorator, args=[])
            return updated_node.with_changes(decorator=set_kwarg(call, "jit_compile", expr("True")))
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if id(original_node) in self.targets:
            return set_kwarg(updated_node, "jit_compile", expr("True"))
        return updated_node


#: TensorFlow's message when XLA meets an op it cannot compile
_NO_XLA_KERNEL = re.compile(
    r"Detected unsupported operations when trying to compile graph \S+ on (?P<device>XLA_\w+): "
    r"(?P<op>[A-Za-z0-9_]+)"
)


class XlaJit(Fix):
    """Compile the training step with XLA: ``jit_compile=True``.

    What it changes: ``@tf.function`` on the training step becomes ``@tf.function(jit_compile=True)``
    (also ``tf.function(step)`` calls), and ``model.compile(...)`` gets ``jit_compile=True`` (for a model
    whose class overrides ``compile`` with its own signature: that override's ``super().compile(...)``;
    an override without one, or a ``compile`` whose keywords keras.Model.compile does not take, is
    skipped with the reason before any run). The tf.function that runs ``strategy.run(step_fn)`` is the
    step under a distribution strategy. Where the run's step function loops over its batches in its graph
    (several optimizer updates a call: ``for x, y in dataset:`` inside one tf.function, as TensorFlow's
    tf.function guide trains an epoch, or ``for _ in tf.range(n): step_fn(next(iterator))``), XLA cannot
    compile that function (no XLA kernel for ``ScanDataset`` or ``IteratorGetNext``): the step function its
    loop calls gets ``@tf.function(jit_compile=True)`` instead, and a loop whose body is the step itself is
    skipped with what to change. A
    ``jit_compile`` the script sets itself is left alone. When the step is a tf.function defined outside
    the script, the harness's run-time switch compiles it and the patch is empty (say so to the user).

    When it applies: after ``tf-function`` (an eager step cannot be XLA-compiled); not to a ``fit`` model
    Keras runs without XLA whatever ``compile`` asks (a layer with ``supports_jit = False``, such as
    ``RandomRotation``, ``StringLookup``, or op determinism enabled: the baseline's facts name them,
    ``xla_unsupported``), skipped before any run; nor to a tf.function step that writes summaries or calls
    Python from the graph (``tf.numpy_function``, ``tf.py_function``) itself or through the file's
    functions it calls (TensorFlow's actor-critic tutorial steps its environment that way inside the
    step), skipped with where before any run; nor where each ``fit()`` of the script's loop trains a
    model built or compiled in the loop and that tracing is a quarter or more of the loop's time (the
    profile's TFD207: a federated-averaging script's client models), skipped before any run: XLA would
    compile again in every call, outside the steps a trial times. XLA often *slows*
    CPU training of convolutional networks (its CPU convolutions lose to oneDNN: 0.33x on the case
    study's CNN here), and it speeds up steps full of element-wise work it can fuse (1.17x on
    ``examples/mlp_loop.py``'s LayerNorm/GELU MLP on the same CPU), so the measurement decides.

    Rolled back when: not faster beyond the noise band (typical on CPU), compile failures (an op XLA
    has no kernel for is named: ``CTCLoss`` in keras-io's OCR), not sane.
    """

    ID = "xla-jit"
    DESCRIPTION = "XLA: jit_compile=True on the step"
    CODEMOD = XlaCodemod
    AFTER = ("tf-function", "steps-per-execution")
    PRIORITY = 40

    def failure_hint(self, error: str) -> str:
        """An op XLA has no kernel for (keras-io's OCR: ``CTCLoss`` in its loss layer): what it is."""
        m = _NO_XLA_KERNEL.search(error)
        if m is None:
            return ""
        return (
            f"XLA has no kernel for {m['op']} on {m['device']}: a step that runs it cannot be compiled "
            "as it is (keep that op out of the compiled step, or leave XLA off)"
        )

    def precheck(self, ctx: FixContext) -> str | None:
        if ctx.facts.jit_compile or ctx.facts.auto_jit:
            return "the step is already XLA-compiled"
        if ctx.facts.step_kind == "eager" and ctx.facts.loop_kind == "custom":
            return "the profiled training step runs eagerly: XLA compiles only a tf.function step (tf-function first)"
        if ctx.facts.loop_kind == "keras_fit" and ctx.facts.xla_unsupported:
            why = ctx.facts.xla_unsupported
            verb = "does" if len(why) == 1 else "do"
            return (
                "Keras runs this model without XLA whatever compile() asks (its model_supports_jit): "
                f"{', '.join(why)} {verb} not support XLA"
            )
        return rebuilt_every_fit(ctx, "XLA")


FIX = XlaJit
