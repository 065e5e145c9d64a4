"""``host-calls``: weights copied through numpy and models called op by op between the training steps,
moved into tf.functions."""

from __future__ import annotations

import builtins

import libcst as cst
from libcst.codemod import SkipFile
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext
from tfdoctor.fixes._cst import (
    aliases,
    bound_names,
    dotted,
    expr,
    insert_after_imports,
    names_read,
    unique_name,
    walk,
)
from tfdoctor.model import HostCall

#: calls a weight-update function may make and still run the same in a tf.function
_SAFE_BUILTINS = {"range", "len", "zip", "enumerate", "list", "reversed", "float", "int", "min", "max", "abs"}
_SAFE_METHODS = {"get_weights", "set_weights", "append"}
#: module names whose functions are not models
_MODULES = {"tf", "tensorflow", "np", "numpy", "keras", "math", "random", "K", "ops", "layers", "jnp"}


def _timed(c: HostCall) -> bool:
    return c.calls > 0


def _between_bursts(ctx: FixContext) -> list[HostCall]:
    """The Keras host calls the profile run timed between bursts of steps (``BetweenFits.model_calls``),
    where the loop judges the whole loop (``ctx.whole_loop``): only then does a trial measure them."""
    gap = ctx.facts.between_fits
    if not ctx.whole_loop or gap is None or gap.loop != "steps":
        return []
    return [
        HostCall(api=c.api, site=c.site, code=c.code, calls=c.calls, seconds=c.seconds)
        for c in gap.model_calls
        if c.calls and c.api != "predict"
    ]


def _func_root(func: cst.BaseExpression) -> str | None:
    """The first name of a called expression: ``actor`` for ``actor(s)``, ``self`` for ``self.actor(s)``."""
    while isinstance(func, cst.Attribute):
        func = func.value
    return func.value if isinstance(func, cst.Name) else None


class HostCallsCodemod(FixCodemod):
    DESCRIPTION = (
        "get_weights()/set_weights() and eager model calls between the steps moved into tf.functions"
    )
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        calls = [c for c in self.fix.facts.host_calls if _timed(c)] or _between_bursts(self.fix)
        al = aliases(tree)
        self.tf = al.tf or "tf"
        lines = tree.code.splitlines()
        modules = set(_MODULES) | {a for a in (al.tf, al.keras) if a}
        for node in walk(tree):  # every name the script imports is a module or a function, not a model
            if isinstance(node, (cst.Import, cst.ImportFrom)):
                modules |= bound_names(node)
        # the function holding each statement (innermost), and each statement's lines
        holder: dict[int, cst.FunctionDef] = {}
        for fdef in (n for n in walk(tree) if isinstance(n, cst.FunctionDef)):  # outer first
            holder.update({id(n): fdef for n in walk(fdef.body) if isinstance(n, cst.SimpleStatementLine)})
        spans: list[tuple[cst.SimpleStatementLine, int, int, set[str]]] = []
        for stmt in walk(tree):
            if isinstance(stmt, cst.SimpleStatementLine):
                pos = self.get_metadata(PositionProvider, stmt)
                first, last = pos.start.line, pos.end.line
                texts = {lines[n - 1].strip() for n in range(first, last + 1) if 0 < n <= len(lines)}
                spans.append((stmt, first, last, texts))
        self.functions: dict[int, cst.FunctionDef] = {}  # id(FunctionDef) -> it: made tf.functions
        self.model_calls: set[int] = set()  # id(Call): wrapped in the graph call
        done: list[tuple[int, str]] = []
        skipped: list[tuple[int, str]] = []
        for c in calls:
            at = [(stmt, first, last) for stmt, first, last, texts in spans if c.code in texts]
            seen = c.site.rpartition(":")[2]
            exact = [m for m in at if seen.isdigit() and m[1] <= int(seen) <= m[2]]
            for stmt, line, _ in exact if len(at) > 1 and exact else at:
                if c.api in ("get_weights", "set_weights"):
                    held = holder.get(id(stmt))
                    if held is None:
                        skipped.append((line, f"{c.api}() at line {line}: not in a function"))
                        continue
                    fdef = held
                    if id(fdef) in self.functions:
                        continue
                    why = self._why_not_function(fdef)
                    name = fdef.name.value
                    if why:
                        skipped.append((line, f"{name}() (its {c.api}() at line {line}): {why}"))
                    else:
                        self.functions[id(fdef)] = fdef
                        done.append(
                            (
                                self.line(fdef),
                                f"{name}() (line {self.line(fdef)}) a tf.function on the weights",
                            )
                        )
                else:
                    found = self._model_calls(stmt, modules)
                    if len(found) != 1:
                        what = (
                            "no call of a model" if not found else f"{len(found)} calls that may be a model's"
                        )
                        skipped.append((line, f"the model call at line {line}: {what} in `{c.code}`"))
                        continue
                    call = found[0]
                    if id(call) not in self.model_calls:
                        self.model_calls.add(id(call))
                        done.append(
                            (
                                line,
                                f"{cst.Module([]).code_for_node(call.func)}() at line {line} called in a tf.function",
                            )
                        )
        if not self.functions and not self.model_calls:
            if skipped:
                raise SkipFile("; ".join(m for _, m in sorted(set(skipped))))
            raise SkipFile(
                "the calls the run saw ("
                + ", ".join(f"{c.api}() at {c.site}" for c in calls)
                + ") are not in this file as the run read them"
            )
        self.graph_call = unique_name(tree, "graph_call") if self.model_calls else ""
        left = "; ".join(m for _, m in sorted(set(skipped)))
        self.summary = "; ".join(m for _, m in sorted(done)) + (f"; left as they are: {left}" if left else "")
        new = super().transform_module_impl(tree)
        if self.graph_call:
            helper = cst.parse_statement(
                f"@{self.tf}.function(reduce_retracing=True)\n"
                f"def {self.graph_call}(model, *args, **kwargs):\n"
                '    """tfdoctor host-calls: the model run as one graph, not op by op."""\n'
                "    return model(*args, **kwargs)\n"
            )
            assert isinstance(helper, cst.FunctionDef)
            new = insert_after_imports(new, helper)
        if al.tf is None:
            AddImportsVisitor.add_needed_import(self.context, "tensorflow", asname="tf")
            new = AddImportsVisitor(self.context).transform_module(new)
        return new

    def _model_calls(self, stmt: cst.SimpleStatementLine, modules: set[str]) -> list[cst.Call]:
        """The calls in ``stmt`` that may be a model's: called with arguments, on a name or attribute that
        is no module, builtin or method of a value (``x.numpy()``)."""
        out = []
        for node in walk(stmt):
            if not isinstance(node, cst.Call) or not node.args:
                continue
            root = _func_root(node.func)
            if root is None or root in modules or hasattr(builtins, root):
                continue
            if isinstance(node.func, cst.Attribute) and root != "self":
                continue  # obj.method(...): a method, not a model held by the script (self.actor is one)
            if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Attribute):
                continue  # self.model.predict(...), self.buffer.record(...)
            out.append(node)
        return out

    def _why_not_function(self, fdef: cst.FunctionDef) -> str | None:
        """Why this function cannot run as a tf.function on the weights, or None."""
        for d in fdef.decorators:
            name = dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or ""
            if name.endswith("function"):
                return "it is already a tf.function"
            return f"it is decorated ({name or 'a decorator'})"
        if fdef.asynchronous:
            return "it is async"
        for node in walk(fdef.body):
            if isinstance(node, cst.Return) and node.value is not None:
                return "it returns a value"
            if isinstance(node, (cst.Yield, cst.Await, cst.Global, cst.Nonlocal, cst.Try, cst.With)):
                return f"it uses {type(node).__name__.lower()}"
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return "it defines a function or class inside"
            if isinstance(node, cst.Call):
                if isinstance(node.func, cst.Name):
                    if node.func.value not in _SAFE_BUILTINS:
                        return f"it calls {node.func.value}()"
                elif isinstance(node.func, cst.Attribute):
                    if node.func.attr.value not in _SAFE_METHODS:
                        return f"it calls {dotted(node.func) or node.func.attr.value}()"
                    if node.func.attr.value == "get_weights" and node.args:
                        return "get_weights() is passed arguments"
                else:
                    return "it calls an expression"
        used = names_read(fdef.body) & {"np", "numpy"}
        if used:
            return "it uses numpy"
        for node in walk(fdef.body):
            if isinstance(node, cst.SimpleStatementLine):
                for small in node.body:
                    if (
                        isinstance(small, cst.Expr)
                        and isinstance(small.value, cst.Call)
                        and (dotted(small.value.func) or "").endswith(".set_weights")
                        and len(node.body) > 1
                    ):
                        return "set_weights() shares its line with another statement"
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "set_weights"
            ):
                parent_ok = any(
                    isinstance(s, cst.SimpleStatementLine)
                    and len(s.body) == 1
                    and isinstance(s.body[0], cst.Expr)
                    and s.body[0].value is node
                    for s in walk(fdef.body)
                )
                if not parent_ok:
                    return "its set_weights() result is used"
                if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
                    return "set_weights() is not passed one list"
        if not any(
            isinstance(n, cst.Call)
            and isinstance(n.func, cst.Attribute)
            and n.func.attr.value == "set_weights"
            for n in walk(fdef.body)
        ):
            return "it sets no weights (set_weights())"
        return None

    # -- the edits ---------------------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if id(original_node) in self.model_calls:
            return cst.Call(
                func=cst.Name(self.graph_call),
                args=[cst.Arg(updated_node.func), *updated_node.args],
            )
        if (
            self._inside
            and isinstance(updated_node.func, cst.Attribute)
            and updated_node.func.attr.value == "get_weights"
        ):
            owner = cst.Module([]).code_for_node(updated_node.func.value)
            return expr(f"[{self.tf}.convert_to_tensor(_w) for _w in {owner}.weights]")
        return updated_node

    _inside = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if id(node) in self.functions:
            self._inside += 1

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        if not self._inside or len(updated_node.body) != 1:
            return updated_node
        small = updated_node.body[0]
        if not (
            isinstance(small, cst.Expr)
            and isinstance(small.value, cst.Call)
            and isinstance(small.value.func, cst.Attribute)
            and small.value.func.attr.value == "set_weights"
        ):
            return updated_node
        owner = cst.Module([]).code_for_node(small.value.func.value)
        value = cst.Module([]).code_for_node(small.value.args[0].value)
        loop = cst.parse_statement(f"for _v, _w in zip({owner}.weights, {value}):\n    _v.assign(_w)\n")
        return loop.with_changes(leading_lines=updated_node.leading_lines)

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        if id(original_node) not in self.functions:
            return updated_node
        self._inside -= 1
        deco = cst.Decorator(decorator=expr(f"{self.tf}.function"))
        return updated_node.with_changes(decorators=[deco, *updated_node.decorators])


class HostCalls(Fix):
    """Move the weight copies and eager model calls between the training steps into tf.functions.

    What it changes: a function that copies weights through numpy, ``target.get_weights()`` and
    ``target.set_weights(...)`` (a soft target update, ``w * tau + t * (1 - tau)``, as keras-io's DDPG
    writes it for Keras 3 and many DQN / TD3 / SAC agents do), becomes a ``@tf.function``: each
    ``m.get_weights()`` reads the variables (``[tf.convert_to_tensor(_w) for _w in m.weights]``) and
    ``m.set_weights(ws)`` assigns them (``for _v, _w in zip(m.weights, ws): _v.assign(_w)``), the same
    arithmetic on the same weights in the same order, with no copy to numpy and back. A model called
    eagerly between the steps, ``actor_model(state)`` to act, is called through a ``@tf.function``
    (``graph_call(actor_model, state)``, ``reduce_retracing=True``), one graph instead of its ops one by
    one. On keras-io's DDPG these took 61-69 % of each environment step here.

    When it applies: the harness timed the calls between the steps of a custom loop (``host_calls`` in
    the facts: the script's line, the calls, their time). A weight-copying function is made a
    tf.function only where nothing in it needs Python: no value returned, no call but ``get_weights``,
    ``set_weights``, ``append`` and ``range`` / ``len`` / ``zip`` / ``enumerate``-like builtins, no numpy,
    ``set_weights`` a statement of its own; a model call only where the line holds one call that can be
    a model's (not a module's function, a builtin or a value's method). What is left, and why, is said
    in the result. Found by the line's text, so edits above it by other fixes do not lose it.

    Between bursts of steps (keras-io's PPO: 1,000 eager critic calls between bursts of 80 updates,
    ``BetweenFits.model_calls``) the calls are moved the same way where the loop spends half its time or
    more there: every run of the ``--fix`` loop is then timed over a burst and the work until the next,
    and judged on that whole-loop rate. Skipped, saying so, where the loop spends less there (its trials
    time the steps, which those calls are not in).

    Rolled back when: not faster beyond the noise band, or not sane (same losses and output); a trial
    whose facts still show the copies is "not applied".
    """

    ID = "host-calls"
    DESCRIPTION = (
        "get_weights()/set_weights() and eager model calls between the steps moved into tf.functions"
    )
    CODEMOD = HostCallsCodemod
    PRIORITY = 7

    def precheck(self, ctx: FixContext) -> str | None:
        if not any(_timed(c) for c in ctx.facts.host_calls) and not _between_bursts(ctx):
            gap = ctx.facts.between_fits
            calls = [c for c in gap.model_calls if c.calls] if gap is not None and gap.loop == "steps" else []
            if calls:
                where = ", ".join(
                    f"{c.site} ({c.calls} call{'s' if c.calls != 1 else ''}, {c.seconds:.1f} s)"
                    for c in calls[:3]
                )
                return (
                    f"the Keras host calls at {where} run between bursts of steps (TFD207), outside the "
                    "steps a trial times, and the loop spends too little of its time there to be judged "
                    "on the whole loop: call the model inside a @tf.function by hand and time the loop"
                )
            return "no get_weights() / set_weights() or eager model call between the steps in the run"
        return None


FIX = HostCalls
