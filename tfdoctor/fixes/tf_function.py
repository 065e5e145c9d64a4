"""``tf-function``: compile the training step (the code holding GradientTape / apply_gradients) with
``@tf.function``; an inline loop body is extracted into a step function first."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import libcst as cst
from libcst.codemod import SkipFile
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext
from tfdoctor.fixes._cst import (
    aliases,
    attr_name,
    call_name,
    dotted,
    expr,
    function_defs,
    kwarg,
    names_in,
    own_nodes,
    set_kwarg,
    unique_name,
    walk,
)
from tfdoctor.model import RETRACES_RELAXED

MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "add",
        "update",
        "pop",
        "remove",
        "clear",
        "setdefault",
        "write",
        "discard",
    }
)
VALUE_READS = frozenset({"float", "int", "bool"})
FROZEN_PREFIXES = ("time.", "random.", "np.random.", "numpy.random.", "datetime.")


def _leading(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    """A statement's leading blank lines and comments (every concrete statement has them)."""
    return (
        stmt.leading_lines if isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) else ()
    )


#: where an inline step's statements sit: a loop's body, or a branch of an ``if`` inside a loop
Block = cst.For | cst.While | cst.If | cst.Else


def _suite(loop: Block) -> list[cst.BaseStatement]:
    """The statements of a loop's (or branch's) indented body (a one-line ``for x in y: f(x)`` has none
    to extract)."""
    return list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []


def _loop_branches(loop: cst.For | cst.While) -> Iterator[cst.If | cst.Else]:
    """The branches of the ``if`` statements in a loop's body, nested ``if``s too (not inside a nested
    loop, which is a loop of its own): keras-io's DQN updates under ``if frame_count % 4 == 0 and ...:``
    in its frame loop."""
    todo: list[cst.BaseStatement] = _suite(loop)
    while todo:
        st = todo.pop(0)
        branch: cst.If | cst.Else | None = st if isinstance(st, cst.If) else None
        while branch is not None:
            yield branch
            todo.extend(_suite(branch))
            nxt = branch.orelse if isinstance(branch, cst.If) else None
            branch = nxt if isinstance(nxt, (cst.If, cst.Else)) else None


def _is_tape(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.With) and any(
        isinstance(it.item, cst.Call) and (call_name(it.item) or "").endswith("GradientTape")
        for it in node.items
    )


def _calls(node: cst.CSTNode, method: str) -> bool:
    return any(isinstance(n, cst.Call) and attr_name(n) == method for n in own_nodes(node))


def is_apply(call: cst.Call) -> bool:
    """An optimizer update: ``opt.apply_gradients(...)``, or Keras 3's ``opt.apply(grads, vars)`` (told
    from ``dataset.apply(fn)`` by the receiver's name or the gradients passed)."""
    method = attr_name(call)
    if method == "apply_gradients":
        return True
    if method != "apply" or not isinstance(call.func, cst.Attribute) or not call.args:
        return False
    receiver = (dotted(call.func.value) or "").lower()
    grads = names_in(call.args[0].value)
    return "opt" in receiver.split(".")[-1] or any("grad" in g.lower() for g in grads)


def _applies(node: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Call) and is_apply(n) for n in own_nodes(node))


def _has_tape(node: cst.CSTNode) -> bool:
    return any(_is_tape(n) for n in own_nodes(node))


def _is_step_body(node: cst.CSTNode) -> bool:
    return _has_tape(node) or _applies(node)


#: Keras metric / tf.Variable methods that only update TF state (safe to move into a tf.function)
METRIC_UPDATES = frozenset({"update_state", "assign_add", "assign_sub", "assign"})


def _is_metric_update(stmt: cst.CSTNode, bound: set[str]) -> bool:
    """``train_acc_metric.update_state(y, logits)`` on an object the loop does not rebind (a metric
    created per epoch would be a new tf.function argument every epoch: a retrace)."""
    receiver = _metric_receiver(stmt)
    return receiver is not None and receiver not in bound


#: what a script may do with a metric that the step's extraction creates once and resets each epoch
METRIC_USES = frozenset({"update_state", "result", "reset_state", "reset_states"})


def _metric_receiver(stmt: cst.CSTNode) -> str | None:
    """``name`` of a statement ``name.update_state(...)`` (any receiver name, METRIC_UPDATES), else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        e = stmt.body[0]
        if isinstance(e, cst.Expr) and isinstance(e.value, cst.Call):
            f = e.value.func
            if (
                isinstance(f, cst.Attribute)
                and f.attr.value in METRIC_UPDATES
                and isinstance(f.value, cst.Name)
            ):
                return f.value.value
    return None


def _renewed_metrics(
    everywhere: Iterable[cst.CSTNode], top: cst.BaseStatement
) -> dict[str, cst.SimpleStatementLine]:
    """Metrics the loop nest ``top`` creates anew every iteration of an outer loop (``epoch_loss_avg =
    keras.metrics.Mean()`` in the epoch loop, as TensorFlow's walkthrough writes it) that can be created
    once and reset instead: one such assignment in the nest, nothing of the nest in its arguments, and
    the name used nowhere (``everywhere``: the nodes of its scope) but as ``.update_state`` /
    ``.result`` / ``.reset_state(s)`` and that assignment. Name -> the assignment statement."""
    nest = [n for n in own_nodes(top) if isinstance(n, cst.SimpleStatementLine)]
    bound_in_nest = _stores(top)
    out: dict[str, cst.SimpleStatementLine] = {}
    counts: dict[str, int] = {}
    for st in nest:
        for name in _stores(st):
            counts[name] = counts.get(name, 0) + 1
        if not (len(st.body) == 1 and isinstance(st.body[0], cst.Assign)):
            continue
        a = st.body[0]
        if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name):
            continue
        call = a.value
        made_by = call_name(call) if isinstance(call, cst.Call) else None
        if not made_by or "metrics" not in made_by.split(".")[:-1] or names_in(call) & bound_in_nest:
            continue
        out[a.targets[0].target.value] = st
    nodes = list(everywhere)
    for name in list(out):
        if counts.get(name) != 1:
            del out[name]
            continue
        uses = sum(isinstance(n, cst.Name) and n.value == name for n in nodes)
        allowed = 1 + sum(
            isinstance(n, cst.Attribute)
            and isinstance(n.value, cst.Name)
            and n.value.value == name
            and n.attr.value in METRIC_USES
            for n in nodes
        )
        if uses != allowed:
            del out[name]
    return out


def _calls_named(node: cst.CSTNode, name: str) -> bool:
    """A call of ``name``: ``name(...)`` or ``obj.name(...)`` (a method called on any receiver)."""
    return isinstance(node, cst.Call) and (
        (isinstance(node.func, cst.Name) and node.func.value == name)
        or (isinstance(node.func, cst.Attribute) and node.func.attr.value == name)
    )


def _loops(
    tree: cst.Module, skip: cst.FunctionDef | None = None
) -> Iterable[tuple[cst.Module | cst.FunctionDef, cst.BaseStatement, cst.For | cst.While]]:
    """Every loop of the module and of its functions (``skip`` left out), as (its scope, the scope's
    top-level statement holding it, the loop): where a step written in a loop is looked for."""
    scopes: list[cst.Module | cst.FunctionDef] = [
        tree,
        *(n for n in walk(tree) if isinstance(n, cst.FunctionDef) and n is not skip),
    ]
    for scope in scopes:
        body = scope.body if isinstance(scope, cst.Module) else scope.body.body
        for top in body:
            if isinstance(top, (cst.FunctionDef, cst.ClassDef)) or not isinstance(top, cst.BaseStatement):
                continue
            for loop in (n for n in [top, *own_nodes(top)] if isinstance(n, (cst.For, cst.While))):
                yield scope, top, loop


def _tape_names(stmts: Iterable[cst.CSTNode]) -> set[str]:
    """Names a ``with tf.GradientTape() as <name>`` binds under ``stmts``."""
    out: set[str] = set()
    for s in stmts:
        for n in [s, *own_nodes(s)]:
            if _is_tape(n):
                assert isinstance(n, cst.With)
                for it in n.items:
                    if it.asname is not None and isinstance(it.asname.name, cst.Name):
                        out.add(it.asname.name.value)
    return out


def _is_tf_function(d: cst.Decorator, tf_function: set[str]) -> bool:
    """``@tf.function`` or ``@tf.function(...)``, as the script spells it (``tf_function``)."""
    spelled = (
        dotted(d.decorator) or call_name(d.decorator)
        if isinstance(d.decorator, cst.Call)
        else dotted(d.decorator)
    )
    return spelled in tf_function


def _is_compiled(fn: cst.FunctionDef, tf_function: set[str], wrapped: set[str]) -> bool:
    return fn.name.value in wrapped or any(_is_tf_function(d, tf_function) for d in fn.decorators)


def ran_lines(facts_source: dict[str, str], filename: str) -> list[int]:
    """Lines of ``filename`` where the run's hooks saw the step (its definition, its optimizer update,
    its ``tape.gradient``), most telling first: the facts say what ran, the file may hold more."""
    out = []
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    for role in ("step_fn", "apply_gradients", "gradient"):
        where = facts_source.get(role) or ""
        path, _, line = where.rpartition(":")
        if path.replace("\\", "/").rsplit("/", 1)[-1] == base and line.isdigit():
            out.append(int(line))
    return out


def _is_keras_model(cls: cst.ClassDef) -> bool:
    """A subclass of keras.Model (or Sequential): Keras compiles its train_step itself."""
    return any((dotted(b.value) or "").split(".")[-1] in ("Model", "Sequential") for b in cls.bases)


KERAS_TRAIN_STEP = (
    "{what} overrides keras.Model.train_step: fit already compiles it into a tf.function ({then})"
)


def fit_fixes(ctx: FixContext) -> str:
    """What to say of the fixes that do apply to a step fit() compiles: xla-jit and steps-per-execution,
    as far as their own prechecks let them (both may be ruled out: XLA already on, a model rebuilt every
    fit())."""
    from tfdoctor.fixes import get_fix

    ids = ("xla-jit", "steps-per-execution")
    why = {fid: get_fix(fid).precheck(ctx) for fid in ids}
    apply = [fid for fid in ids if why[fid] is None]
    if len(apply) == 2:
        return "xla-jit and steps-per-execution are the fixes that apply"
    if apply:
        other = next(fid for fid in ids if fid not in apply)
        return f"{apply[0]} is the fix that applies; {other} does not: {why[other]}"
    return "xla-jit and steps-per-execution do not apply here either: " + "; ".join(
        f"{fid}: {why[fid]}" for fid in ids
    )


def _stores(node: cst.CSTNode, comprehensions: bool = True) -> set[str]:
    """Names bound under ``node`` (assignment targets, for targets, with ... as, augmented, walrus).
    ``comprehensions=False``: not a comprehension's own variables (``v`` in ``[f(v) for v in vs]``),
    which Python 3 keeps inside the comprehension: the statements around it do not bind them."""
    out: set[str] = set()

    def target(t: cst.BaseExpression) -> None:
        if isinstance(t, cst.Name):
            out.add(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)):
            for el in t.elements:
                target(el.value)
        elif isinstance(t, cst.StarredElement):
            target(t.value)

    for n in [node, *own_nodes(node)]:
        if isinstance(n, cst.Assign):
            for t in n.targets:
                target(t.target)
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For)) or (
            comprehensions and isinstance(n, cst.CompFor)
        ):
            target(n.target)
        elif isinstance(n, cst.WithItem) and n.asname is not None:
            target(n.asname.name)
        elif isinstance(n, cst.NamedExpr):
            target(n.target)
        elif isinstance(n, cst.FunctionDef | cst.ClassDef):
            out.add(n.name.value)
    return out


def _target_reads(t: cst.BaseExpression) -> set[str]:
    """The names an assignment target reads: those of ``x[i]`` and ``obj.attr``, none of a name or a
    tuple of names (``loss, grads = ...`` binds both, reads neither)."""
    if isinstance(t, cst.Name):
        return set()
    if isinstance(t, (cst.Tuple, cst.List)):
        return {n for el in t.elements for n in _target_reads(el.value)}
    if isinstance(t, cst.StarredElement):
        return _target_reads(t.value)
    return names_in(t)


def _branches(node: cst.If) -> list[Sequence[cst.CSTNode]]:
    """The bodies of an ``if``/``elif``/``else`` chain, in order."""
    out: list[Sequence[cst.CSTNode]] = [node.body.body]
    orelse = node.orelse
    while orelse is not None:
        if isinstance(orelse, cst.If):
            out.append(orelse.body.body)
            orelse = orelse.orelse
        else:
            out.append(orelse.body.body)
            orelse = None
    return out


def _last_orelse(node: cst.If) -> cst.Else | None:
    """The final ``else:`` of an ``if``/``elif`` chain (None: some path binds nothing)."""
    orelse = node.orelse
    while isinstance(orelse, cst.If):
        orelse = orelse.orelse
    return orelse


def _exposed_reads(stmts: Sequence[cst.BaseStatement]) -> list[str]:
    """Names the statements read before binding them (in order of first read)."""
    bound: set[str] = set()
    order: list[str] = []

    def read(names: Iterable[str]) -> None:
        for n in names:
            if n not in bound and n not in order:
                order.append(n)

    def stmt(s: cst.CSTNode) -> None:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign):
                    read(sorted(names_in(small.value)))
                    for t in small.targets:
                        read(sorted(_target_reads(t.target)))
                    bound.update(_stores(small))
                elif isinstance(small, cst.AugAssign):
                    read(sorted(names_in(small.target) | names_in(small.value)))
                    bound.update(_stores(small))
                else:
                    read(sorted(names_in(small)))
                    bound.update(_stores(small))
        elif isinstance(s, cst.With):
            for it in s.items:
                read(sorted(names_in(it.item)))
                if it.asname is not None:
                    bound.update(names_in(it.asname.name))
            for b in s.body.body:
                stmt(b)
        elif isinstance(s, cst.If):  # each branch in order; bound after it: what every branch binds
            read(sorted(names_in(s.test)))
            before = set(bound)
            branches: list[set[str]] = []
            for body in _branches(s):
                bound.intersection_update(before)
                for inner in body:
                    stmt(inner)
                branches.append(bound - before)
            bound.intersection_update(before)
            if _last_orelse(s) is not None:  # no path skips every branch
                bound.update(set.intersection(*branches))
        else:
            read(sorted(names_in(s)))
            bound.update(_stores(s))

    for s in stmts:
        stmt(s)
    return order


COUNTER_ITERS = frozenset(
    {"range", "trange", "tqdm.trange", "itertools.count", "count"}
)  # + enumerate's index


def _loop_counters(nest: Sequence[cst.CSTNode], skip: set[int]) -> set[str]:
    """Python ints the loop nest around a step changes every iteration: ``for epoch in range(..)``,
    the index of ``enumerate(..)`` (``tqdm(range(..))`` too) and ``step += 1`` counters. Passed to a
    tf.function as they are, each new value traces the step again."""
    out: set[str] = set()
    other: set[str] = set()  # names the nest binds some other way
    for n in nest:
        if id(n) in skip:
            continue
        if isinstance(n, cst.For):
            it = n.iter
            if isinstance(it, cst.Call) and call_name(it) in ("tqdm", "tqdm.tqdm") and it.args:
                it = it.args[0].value
            name = call_name(it) if isinstance(it, cst.Call) else None
            if name in COUNTER_ITERS and isinstance(n.target, cst.Name):
                out.add(n.target.value)
            elif name == "enumerate" and isinstance(n.target, (cst.Tuple, cst.List)) and n.target.elements:
                first = n.target.elements[0].value
                if isinstance(first, cst.Name):
                    out.add(first.value)
        elif (
            isinstance(n, cst.AugAssign)
            and isinstance(n.target, cst.Name)
            and isinstance(n.value, cst.Integer)
            and isinstance(n.operator, (cst.AddAssign, cst.SubtractAssign))
        ):
            out.add(n.target.value)
        elif isinstance(n, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.WithItem, cst.NamedExpr)) and not (
            isinstance(n, cst.Assign) and isinstance(n.value, cst.Integer)
        ):
            other |= _stores(n)
    return out - other


def _counter_note(tensors: Sequence[str], python: Sequence[str]) -> str:
    """What the step's summary says of the loop counters it takes: passed as tensors, or as Python
    numbers (the step traced again for each new value)."""
    note = ""
    if tensors:
        note += (
            f"; {', '.join(tensors)} passed as {'a tensor' if len(tensors) == 1 else 'tensors'} "
            "(a Python number would trace the step again for each new value)"
        )
    if python:
        note += f"; {', '.join(python)} passed as Python numbers: the step is traced again for each new value"
    return note


def _as_tensor(tf: str, name: str, dtype: str) -> cst.BaseExpression:
    """``tf.constant(name, tf.<dtype>)``: a loop counter as the tensor a tf.function traces once."""
    return expr(f"{tf}.constant({name}, {tf}.{dtype})")


ARITH = (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.BooleanOperation)


def _arith_leaves(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The operands and operators of an arithmetic expression, down to what is not arithmetic (a call,
    an attribute, a name, a literal)."""
    out: list[cst.CSTNode] = []
    for c in node.children:
        if isinstance(c, (*ARITH, cst.ComparisonTarget)):
            out.extend(_arith_leaves(c))
        elif not isinstance(c, (cst.LeftParen, cst.RightParen, cst.BaseParenthesizableWhitespace)):
            out.append(c)
    return out


def _tensor_dtype(name: str, block: Sequence[cst.CSTNode], tf: str) -> str | None:
    """The dtype a loop counter read by the step can be passed as, so that the step is traced once:
    ``int32`` where it only meets integer literals (``step % 100 == 0``), ``float32`` where it meets a
    division, a float or another value (``0.5 / (1 + epoch)``, ``epoch * rate``). None when a read
    needs the Python int (an index, ``range(..)``, a Python call, an ``if`` test, a string) or the step
    rebinds it."""
    if name in {n for s in block for n in _stores(s, comprehensions=False)}:
        return None
    floaty = False
    safe = True

    def visit(node: cst.CSTNode, ok: bool) -> None:
        """``ok``: the node's value may be a tensor (it feeds arithmetic or a tf.* call)."""
        nonlocal floaty, safe
        if isinstance(node, cst.Name):
            if node.value == name and not ok:
                safe = False
            return
        if isinstance(node, ARITH):
            chain = _arith_leaves(node)
            if any(isinstance(c, cst.Name) and c.value == name for c in chain):
                if any(isinstance(c, (cst.Divide, cst.Power, cst.Float)) for c in chain):
                    floaty = True
                if any(
                    isinstance(c, (cst.Attribute, cst.Call, cst.Subscript))
                    or (isinstance(c, cst.Name) and c.value not in (name, "True", "False", "None"))
                    for c in chain
                ):
                    floaty = True
            for c in node.children:
                visit(c, True)
            return
        if isinstance(node, cst.Call):
            tf_call = (call_name(node) or "").startswith(f"{tf}.")
            visit(node.func, False)
            for a in node.args:
                visit(a.value, tf_call)
            return
        if isinstance(node, (cst.If, cst.While, cst.IfExp)):  # a Python test (autograph would make it a cond)
            if name in names_in(node.test):
                safe = False
            for c in node.children:
                visit(c, False)
            return
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)) and name in _stores(
            node.for_in
        ):  # a comprehension's own variable of that name (Python 3 keeps it inside): only the first
            visit(node.for_in.iter, False)  # iterable is read in the step's scope
            return
        if isinstance(node, (cst.Subscript, cst.FormattedString, cst.CompFor, cst.Attribute)):
            for c in node.children:
                visit(c, False)
            return
        for c in node.children:
            visit(c, ok if isinstance(node, (cst.Arg, cst.Element, cst.Tuple, cst.List)) else False)

    for s in block:
        visit(s, False)
    if not safe:
        return None
    return "float32" if floaty else "int32"


def eager_switches(tree: cst.Module) -> list[tuple[cst.Name, str]]:
    """The script's own switches to eager execution, each as (its ``True``, what it is): the debugging
    settings ``model.compile(..., run_eagerly=True)``, ``model.run_eagerly = True`` and
    ``tf.config.run_functions_eagerly(True)`` (every tf.function then runs op by op)."""
    out: list[tuple[cst.Name, str]] = []
    for n in walk(tree):
        if isinstance(n, cst.Call):
            name = (call_name(n) or "").split(".")[-1]
            if name in ("run_functions_eagerly", "experimental_run_functions_eagerly") and n.args:
                v = n.args[0].value
                if isinstance(v, cst.Name) and v.value == "True":
                    out.append((v, f"{call_name(n)}(True)"))
            elif name == "compile":
                k = kwarg(n, "run_eagerly")
                if k is not None and isinstance(k.value, cst.Name) and k.value.value == "True":
                    out.append((k.value, f"{call_name(n)}(run_eagerly=True)"))
        elif (
            isinstance(n, cst.Assign)
            and isinstance(n.value, cst.Name)
            and n.value.value == "True"
            and any(
                isinstance(t.target, cst.Attribute) and t.target.attr.value == "run_eagerly"
                for t in n.targets
            )
        ):
            out.append((n.value, f"{dotted(n.targets[0].target)} = True"))
    return out


class EagerSwitchCodemod(cst.CSTTransformer):
    """Turns the given ``True`` nodes into ``False``."""

    def __init__(self, off: set[int]):
        super().__init__()
        self.off = off

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value="False") if id(original_node) in self.off else updated_node


class TfFunctionCodemod(FixCodemod):
    DESCRIPTION = "@tf.function on the training step"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        facts = self.fix.facts
        forced = [
            (v, label)
            for v, label in eager_switches(tree)
            # the switches the run shows in effect (no facts: every one)
            if facts.loop_kind == "unknown"
            or (facts.functions_run_eagerly and "run_functions_eagerly" in label)
            or (facts.loop_kind == "keras_fit" and facts.step_kind == "eager" and "run_eagerly" in label)
        ]
        if forced:  # the script itself runs eagerly (a debugging setting left in): switch it off
            what = "; ".join(f"{label} → False (line {self.line(v)})" for v, label in forced)
            self.summary = f"{what}: the script's own switch to eager execution, turned off"
            return tree.visit(EagerSwitchCodemod({id(v) for v, _ in forced}))
        al = aliases(tree)
        self.tf = al.tf or "tf"
        tf_function = set(al.functions)
        wrapped: set[str] = set()
        for n in walk(tree):
            if isinstance(n, cst.Call) and call_name(n) in tf_function and n.args:
                v = n.args[0].value
                if isinstance(v, cst.Name):
                    wrapped.add(v.value)
        owner: dict[int, cst.ClassDef] = {}  # methods -> their class
        for c in walk(tree):
            if isinstance(c, cst.ClassDef):
                for f in c.body.body:
                    if isinstance(f, cst.FunctionDef):
                        owner[id(f)] = c
        # functions handed to strategy.run(fn, ...) -> the function making that call
        run_in: dict[str, cst.FunctionDef] = {}
        for caller in (n for n in walk(tree) if isinstance(n, cst.FunctionDef)):
            for n in own_nodes(caller.body):
                if (
                    isinstance(n, cst.Call)
                    and attr_name(n) == "run"
                    and n.args
                    and isinstance(n.args[0].value, cst.Name)
                ):
                    run_in[n.args[0].value.value] = caller
        self.decorate: set[int] = set()
        self.extraction: tuple[Block, int, int] | None = None  # not `extract`: a libcst method
        self.params: list[str] = []
        self.method = False  # the extracted step is a method of the class it was extracted from
        # metrics the loop created anew each epoch, now created once before it (metrics_top) and reset
        self.renewed: dict[str, cst.SimpleStatementLine] = {}
        self.conditional_update: int | None = None  # the line of an update on some steps only (find_inline)
        self.metrics_top: cst.BaseStatement | None = None
        self.tensor_args: dict[str, str] = {}  # loop counters passed as tensors -> their dtype
        self.call_args: dict[int, str] = {}  # id(call argument) of a counter passed to the step -> dtype
        self.returns: list[str] = []
        self.block: list[cst.BaseStatement] = []
        self.anchor: cst.BaseStatement | None = None
        self.step_name = ""
        self.relax: set[int] = set()  # id(a step's tf.function decorator) to get reduce_retracing=True
        self.relax_note = ""
        facts = self.fix.facts
        eager = facts.step_kind == "eager"
        # decide from what ran: the hooks' lines of the step (an eager run of a file that also holds
        # tf.function versions of it is decided by those lines, not by what the file contains)
        self.ran = ran_lines(facts.source, self.fix.filename) if eager else []
        candidates = []
        for fn in (n for n in walk(tree) if isinstance(n, cst.FunctionDef)):
            if not _is_step_body(fn.body):
                continue
            loops = [n for n in own_nodes(fn.body) if isinstance(n, (cst.For, cst.While))]
            if any(_is_step_body(lp.body) for lp in loops):
                continue  # the function holds the training loop itself: handled as an inline body
            candidates.append(fn)
        candidates = self._outermost(tree, candidates)
        if self.ran:
            candidates.sort(key=lambda f: not self._holds_ran_line(f))
        compiled: list[str] = []
        keras_steps: list[str] = []
        in_strategy: list[str] = []
        step_decorators: list[tuple[cst.FunctionDef, cst.Decorator]] = []
        for fn in candidates:
            name = fn.name.value
            cls = owner.get(id(fn))
            decorated = _is_compiled(fn, tf_function, set())
            wrapped_only = name in wrapped and not decorated
            if (decorated or wrapped_only) and not (
                # ``tf.function(step)`` made elsewhere (``compiled = tf.function(step)``, or under an
                # ``if not args.eager:``) while the run called the plain function: the facts say it ran
                # eagerly, so it is decorated (a tf.function of a tf.function still works)
                wrapped_only and self.ran and self._holds_ran_line(fn)
            ):
                compiled.append(name)
                step_decorators += [(fn, d) for d in fn.decorators if _is_tf_function(d, tf_function)]
                continue
            # a keras.Model subclass's step methods are compiled by fit (train_step and what it
            # calls), unless the profiled run saw this method run eagerly (a custom loop calling
            # model.train_step(...) itself); a plain class's train_step is the user's own step
            if cls is not None and _is_keras_model(cls) and not (self.ran and self._holds_ran_line(fn)):
                keras_steps.append(f"{cls.name.value}.{name}()")
                continue
            if self.ran and not self._holds_ran_line(fn):
                # a gradient function whose update the loop that ran makes (the hooks saw the update
                # there, maybe not the tape): the split step; else a step function the run did not use
                if not _applies(fn.body) and self.find_split(tree, fn, ran_only=True):
                    break
                continue
            target: cst.FunctionDef = fn
            note = ""
            runner = run_in.get(name)
            if runner is not None:
                if _is_compiled(runner, tf_function, wrapped):
                    in_strategy.append(
                        f"{name}() runs through strategy.run inside the tf.function {runner.name.value}()"
                    )
                    continue
                if owner.get(id(runner)) is not None and _is_keras_model(owner[id(runner)]):
                    keras_steps.append(f"{owner[id(runner)].name.value}.{runner.name.value}()")
                    continue
                target, note = runner, f", which runs {name}() through strategy.run"
            elif not _applies(fn.body) and self.find_split(tree, fn):
                break  # the gradient function's call and the update after it: extracted together
            if wrapped_only and target is fn:
                note += f" (the run called it eagerly, not through the tf.function({name}) the script makes)"
            self.decorate.add(id(target))
            self.step_name = target.name.value
            self.effects(fn.body, fn)
            target_cls = owner.get(id(target))
            what = f"{target_cls.name.value}.{target.name.value}" if target_cls else target.name.value
            self.summary = f"@{self.tf}.function on {what}() (line {self.line(target)}){note}"
            self._counter_call_args(tree, target, target_cls is not None)
            break
        if self.extraction is not None:
            pass  # a split step (find_split), planned above
        elif not self.decorate and compiled and not self.ran and not keras_steps and not in_strategy:
            if self._plan_relax(step_decorators):
                return super().transform_module_impl(tree)
            raise SkipFile(
                f"the training step is already a tf.function ({', '.join(compiled)}){self.relax_note}"
            )
        if self.extraction is None and not self.decorate and not self.find_inline(tree):
            ran = f" (the profiled run was eager: step at line {self.ran[0]})" if self.ran else ""
            if keras_steps:
                raise SkipFile(KERAS_TRAIN_STEP.format(what=", ".join(keras_steps), then=fit_fixes(self.fix)))
            if in_strategy:
                raise SkipFile(f"the training step is already compiled: {'; '.join(in_strategy)}")
            if compiled and not self.ran:
                raise SkipFile(f"the training step is already a tf.function ({', '.join(compiled)})")
            if facts.step_kind == "tf.function":  # let through by the precheck for its retraces
                raise SkipFile(
                    "the profiled training step already runs as a tf.function, defined outside this script: "
                    f"reduce_retracing=True on it there (the run traced it {(facts.retraces or 0) + 1} times)"
                )
            raise SkipFile(
                "no training step found (no function or loop with GradientTape / apply_gradients / "
                f"optimizer.apply){ran}"
            )
        new = super().transform_module_impl(tree)
        if al.tf is None:
            AddImportsVisitor.add_needed_import(self.context, "tensorflow", asname="tf")
            new = AddImportsVisitor(self.context).transform_module(new)
        if facts.input_shapes_vary:
            self.summary += (
                "; reduce_retracing=True: the step's input changed shape from step to step in the run (a "
                "trace per new shape otherwise)"
            )
        return new

    def _outermost(self, tree: cst.Module, candidates: list[cst.FunctionDef]) -> list[cst.FunctionDef]:
        """``candidates`` less those another candidate calls, directly or through the file's other
        functions: a tape inside a function the step calls (a physics-informed loss's derivatives of the
        model's output, a gradient penalty) is part of that step; compiling it alone would leave the step
        eager and put a function call on its tape. A caller the run's hooks did not see run does not
        count (a function of another script path in the same file)."""
        calls: dict[str, set[str]] = {}
        for fn in function_defs(tree):
            called = {n for c in walk(fn.body) if isinstance(c, cst.Call) and (n := attr_name(c)) is not None}
            calls.setdefault(fn.name.value, set()).update(called)

        def reach(name: str) -> set[str]:
            seen: set[str] = set()
            todo = list(calls.get(name, ()))
            while todo:
                n = todo.pop()
                if n not in seen:
                    seen.add(n)
                    todo += calls.get(n, ())
            return seen

        inner: set[str] = set()
        for fn in candidates:
            if not self.ran or self._holds_ran_line(fn):
                inner |= reach(fn.name.value) - {fn.name.value}
        return [fn for fn in candidates if fn.name.value not in inner] or candidates

    def _counter_call_args(self, tree: cst.Module, fn: cst.FunctionDef, method: bool) -> None:
        """Where the decorated step is called with a loop counter (``train_step(x, y, epoch)`` inside
        ``for epoch in range(..)``), the call passes it as a tensor when the step's reads allow it
        (:func:`_tensor_dtype`); otherwise the summary says the step retraces for each new value."""
        name = fn.name.value
        params = [p.name.value for p in fn.params.params]
        if method and params and params[0] in ("self", "cls"):
            params = params[1:]
        converted: list[str] = []
        kept: list[str] = []
        python_args = bool(self.fix.params.get("python_args"))  # the fallback run
        for top in (n for n in walk(tree) if isinstance(n, (cst.For, cst.While))):
            counters = _loop_counters([top, *own_nodes(top)], set())
            for call in (n for n in own_nodes(top) if isinstance(n, cst.Call)):
                callee = call.func
                if not (
                    (isinstance(callee, cst.Name) and callee.value == name and not method)
                    or (isinstance(callee, cst.Attribute) and callee.attr.value == name and method)
                ):
                    continue
                for i, a in enumerate(call.args):
                    if not (isinstance(a.value, cst.Name) and a.value.value in counters) or a.star:
                        continue
                    param = (
                        a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else None)
                    )
                    dtype = _tensor_dtype(param, fn.body.body, self.tf) if param else None
                    label = f"{a.value.value} (line {self.line(call)})"
                    if dtype is None or python_args:
                        if label not in kept:
                            kept.append(label)
                    elif id(a) not in self.call_args:
                        self.call_args[id(a)] = dtype
                        converted.append(label)
        self.summary += _counter_note(converted, kept)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        dtype = self.call_args.get(id(original_node))
        if dtype is None or not isinstance(updated_node.value, cst.Name):
            return updated_node
        return updated_node.with_changes(value=_as_tensor(self.tf, updated_node.value.value, dtype))

    def _span(self, node: cst.CSTNode) -> tuple[int, int]:
        try:
            r = self.get_metadata(PositionProvider, node)
        except KeyError:
            return (0, -1)
        return r.start.line, r.end.line

    def _holds_ran_line(self, node: cst.CSTNode) -> bool:
        lo, hi = self._span(node)
        return any(lo <= ln <= hi for ln in self.ran)

    # -- side effects ----------------------------------------------------------------------------
    def effects(self, body: cst.CSTNode, fn: cst.FunctionDef | None, params: Iterable[str] = ()) -> None:
        """Warn about Python side effects: under tf.function they run once, at trace time."""
        local = _stores(body) | set(params)
        if fn is not None:
            local |= {p.name.value for p in fn.params.params} | {
                p.name.value for p in fn.params.kwonly_params
            }

        def warn(msg: str) -> None:
            self.side_effect(msg)

        for n in own_nodes(body):
            line = self.line(n)
            if isinstance(n, (cst.Global, cst.Nonlocal)):
                names = ", ".join(x.name.value for x in n.names)
                warn(
                    f"line {line}: rebinds {names} outside the step (global/nonlocal): done once, at trace time"
                )
            elif isinstance(n, cst.Call):
                name = call_name(n) or ""
                method = attr_name(n)
                if name == "print":
                    warn(
                        f"line {line}: print() runs once, when tf.function traces the step (tf.print runs every step)"
                    )
                elif (
                    isinstance(n.func, cst.Attribute)
                    and method in MUTATORS
                    and isinstance(n.func.value, cst.Name)
                    and n.func.value.value not in local
                ):
                    warn(
                        f"line {line}: {n.func.value.value}.{method}(...) changes a Python object outside the step: "
                        "under tf.function it happens once, at trace time"
                    )
                elif name in VALUE_READS and n.args and names_in(n.args[0].value) & local:
                    warn(
                        f"line {line}: {name}(...) reads a tensor's value in Python, which a traced step cannot do"
                    )
                elif method in ("numpy", "item") and isinstance(n.func, cst.Attribute):
                    warn(
                        f"line {line}: .{method}() reads a tensor's value in Python, which a traced step cannot do"
                    )
                elif name.startswith(FROZEN_PREFIXES):
                    warn(f"line {line}: {name}() is evaluated once, at trace time, and frozen into the graph")
            elif isinstance(n, cst.AssignTarget) and isinstance(n.target, (cst.Subscript, cst.Attribute)):
                base = n.target.value
                while isinstance(base, (cst.Subscript, cst.Attribute)):
                    base = base.value
                if isinstance(base, cst.Name) and base.value not in local and base.value != "self":
                    warn(
                        f"line {line}: assigns into {base.value}, a Python object outside the step: done once, at trace time"
                    )

    # -- metric updates after the optimizer update ------------------------------------------------
    def _take_metric_updates(
        self,
        tree: cst.Module,
        scope: cst.Module | cst.FunctionDef,
        top: cst.BaseStatement,
        stmts: Sequence[cst.BaseStatement],
        last: int,
    ) -> int:
        """The index of the step's last statement once the metric updates right after the optimizer
        update are taken in (they are TF ops). A metric the nest creates anew every epoch would be a
        stale capture in a traced step (the first epoch's object, updated for ever after): it is
        created once before the loop and reset where it was created (``epoch_loss_avg.reset_state()``)
        when :func:`_renewed_metrics` allows it; otherwise its update stays outside the step."""
        bound = _stores(top)
        everywhere = walk(tree) if isinstance(scope, cst.Module) else [scope, *own_nodes(scope)]
        renewed = _renewed_metrics(everywhere, top)
        while last + 1 < len(stmts):
            nxt = stmts[last + 1]
            name = _metric_receiver(nxt)
            if name is not None and name not in bound:
                last += 1
            elif name in renewed:
                self.renewed[name] = renewed[name]
                last += 1
            else:
                break
        if self.renewed:
            self.metrics_top = top
        return last

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        for name, st in self.renewed.items():
            if st is original_node:  # created once before the loop now: reset where it was created
                reset = cst.Expr(cst.Call(cst.Attribute(cst.Name(name), cst.Name("reset_state"))))
                return updated_node.with_changes(body=[reset])
        return updated_node

    # -- a step split between a gradient function and the loop -----------------------------------
    def find_split(self, tree: cst.Module, fn: cst.FunctionDef, ran_only: bool = False) -> bool:
        """Plan the extraction of a step split in two: ``fn`` holds the tape but not the optimizer
        update (``grad(model, x, y)`` returning the loss and the gradients, as TensorFlow's "Custom
        training: walkthrough" writes it), and a loop calls it and applies the gradients right after.
        The call and the update (and the metric updates after it) are extracted together, so the
        update is compiled too: decorating the gradient function alone leaves the optimizer's update
        eager, its ops dispatched one by one for every variable. False (``fn`` is decorated instead)
        when no loop calls it and then updates, or when what lies between would change under
        tf.function (a print, a Python read of a tensor, a break). ``ran_only``: only a loop holding
        a line where the run's hooks saw the step (its optimizer update)."""
        name = fn.name.value

        def shallow(stmt: cst.BaseStatement) -> list[cst.CSTNode]:  # not into a nested loop's body
            return [] if isinstance(stmt, (cst.For, cst.While)) else [stmt, *own_nodes(stmt)]

        def calls_fn(stmt: cst.BaseStatement) -> bool:
            return any(_calls_named(n, name) for n in shallow(stmt))

        def updates(stmt: cst.BaseStatement) -> bool:
            return any(isinstance(n, cst.Call) and is_apply(n) for n in shallow(stmt))

        found: list[
            tuple[cst.Module | cst.FunctionDef, cst.BaseStatement, cst.For | cst.While, int, int]
        ] = []
        for scope, top, loop in _loops(tree, skip=fn):
            stmts = _suite(loop)
            first = next((i for i, st in enumerate(stmts) if calls_fn(st)), None)
            if first is None:
                continue
            last = next((i for i in range(first, len(stmts)) if updates(stmts[i])), None)
            if last is not None:
                found.append((scope, top, loop, first, last))
        if ran_only:  # only the loop the profiled run went through
            found = [f for f in found if self._holds_ran_line(f[2])]
        if self.ran:
            found.sort(key=lambda f: not self._holds_ran_line(f[2]))
        if not found:
            return False
        scope, top, loop, first, last = found[0]
        stmts = _suite(loop)
        last = self._take_metric_updates(tree, scope, top, stmts, last)
        block = stmts[first : last + 1]
        if any(
            isinstance(n, (cst.Break, cst.Continue, cst.Return, cst.Yield))
            for st in block
            for n in [st, *own_nodes(st)]
        ):
            return False
        before = list(self.side_effects)
        self.effects(cst.IndentedBlock(body=block), None)
        clean = self.side_effects == before
        self.side_effects[:] = before
        if not clean:
            return False
        self.plan_extract(tree, scope, top, loop, first, last)
        self.effects(fn.body, fn)  # the gradient function is traced with the step
        self.summary = self.summary.replace(
            f"(line {self.line(stmts[first])})",
            f"(line {self.line(stmts[first])}: {name}() and the optimizer update after it)",
            1,
        )
        return True

    # -- an inline loop body -------------------------------------------------------------------
    def find_inline(self, tree: cst.Module) -> bool:
        """Plan the extraction of a step written inline in a loop; False when there is none."""
        found: list[tuple[cst.Module | cst.FunctionDef, cst.BaseStatement, Block, int]] = []
        for scope, top, loop in _loops(tree):
            for block in (loop, *_loop_branches(loop)):  # the loop's body, else a branch of an if in it
                first = next((i for i, s in enumerate(_suite(block)) if _is_tape(s)), None)
                if first is not None:
                    found.append((scope, top, block, first))
                    break
        if self.ran:  # the loop the profiled run went through, where the facts say which
            found.sort(key=lambda f: not self._holds_ran_line(f[2]))
        if not found:
            return False
        scope, top, block, first = found[0]
        stmts = _suite(block)
        last = max((i for i in range(first, len(stmts)) if _applies(stmts[i])), default=None)
        if (
            last is not None
            and isinstance(stmts[last], cst.If)
            and any(_calls(stmts[i], "gradient") for i in range(first, last))
        ):  # an update on some steps only (gradients accumulated over ACCUM_STEPS batches): the traced
            # step computes and accumulates the gradients; the update stays in the loop, as written
            self.conditional_update = self.line(stmts[last])
            last -= 1
        elif last is None:  # no optimizer update in the loop: the step ends with its gradients
            last = max((i for i in range(first, len(stmts)) if _calls(stmts[i], "gradient")), default=first)
        else:  # metric updates right after the update go into the step too (they are TF ops)
            last = self._take_metric_updates(tree, scope, top, stmts, last)
        for s in stmts[first : last + 1]:
            for n in [s, *own_nodes(s)]:
                if isinstance(n, (cst.Break, cst.Continue, cst.Return, cst.Yield)):
                    raise SkipFile(
                        f"the training step at line {self.line(stmts[first])} uses "
                        f"{type(n).__name__.lower()}: cannot extract it into a function"
                    )
        self.plan_extract(tree, scope, top, block, first, last)
        return True

    def plan_extract(
        self,
        tree: cst.Module,
        scope: cst.Module | cst.FunctionDef,
        top: cst.BaseStatement,
        loop: Block,
        first: int,
        last: int,
    ) -> None:
        stmts = _suite(loop)
        block = stmts[first : last + 1]
        block_ids = {id(n) for s in block for n in [s, *own_nodes(s)]}
        # names the loop nest binds outside the block change every iteration: they become parameters
        varying = set()
        for n in [top, *own_nodes(top)]:
            if id(n) in block_ids:
                continue
            if isinstance(
                n,
                (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.WithItem, cst.NamedExpr),
            ):
                varying |= (
                    _stores(n)
                    if not isinstance(n, (cst.For,))
                    else _stores(cst.Assign(targets=[cst.AssignTarget(n.target)], value=cst.Name("_")))
                )
        varying -= set(self.renewed)  # created once before the loop now: captured, not passed
        augs = {
            n.target.value
            for s in block
            for n in [s, *own_nodes(s)]
            if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name)
        }
        # a name the step reads before it binds it is local to the step function (Python's scoping):
        # passed in (accum = [a + g for a, g in zip(accum, grads)]: gradients accumulated over batches)
        rebound = {n for s in block for n in _stores(s, comprehensions=False)}
        params: list[str] = [r for r in _exposed_reads(block) if r in varying or r in augs or r in rebound]
        # loop counters become tensors (one trace), unless the fallback run asked for Python values
        counters = sorted(_loop_counters([top, *own_nodes(top)], block_ids) & set(params))
        if not self.fix.params.get("python_args"):
            for name in counters:
                dtype = _tensor_dtype(name, block, self.tf)
                if dtype is not None:
                    self.tensor_args[name] = dtype
        stored = [n for s in block for n in sorted(_stores(s, comprehensions=False))]
        used_outside: set[str] = set()
        for node in own_nodes(scope):  # other functions' own locals do not count
            if id(node) not in block_ids and isinstance(node, cst.Name):
                used_outside.add(node.value)
        returns: list[str] = []
        tapes = _tape_names(block)
        for name in stored:
            if name in used_outside and name not in returns:
                if name in tapes:  # a tf.function cannot return a GradientTape: the step would be cut short
                    raise SkipFile(
                        f"the gradient tape {name!r} of the training step at line {self.line(stmts[first])} "
                        "is used after the optimizer update: cannot extract the step into a function"
                    )
                returns.append(name)
        if not any("loss" in n.lower() for n in returns):  # the loss, returned all the same and first:
            loss = [n for n in stored if "loss" in n.lower() and n not in tapes][:1]  # the hooks read it
            returns = loss + returns
        self.step_name = unique_name(tree, "train_step")
        self.extraction = (loop, first, last)
        self.anchor = top
        hoisted = self._hoist(tree, scope)
        if hoisted is not None:  # a function run once an epoch: the step is defined once, beside it
            self.anchor, local, self.method = hoisted
            bound = {n for st in block for n in _stores(st)}  # set by the step itself: not read in
            params += [
                r
                for r in _exposed_reads(block)
                if r in local and r not in params and r not in bound and not (self.method and r == "self")
            ]
        self.params = params
        self.returns = returns
        self.effects(cst.IndentedBlock(body=block), None, params)
        line = self.line(stmts[first])
        self.summary = (
            f"extracted the training step (line {line}) into @{self.tf}.function {self.step_name}"
            f"({', '.join(params)})"
        )
        self.summary += _counter_note(
            list(self.tensor_args), [c for c in counters if c not in self.tensor_args]
        )
        if self.conditional_update is not None:
            self.summary += (
                f"; the optimizer update under the if at line {self.conditional_update} (some steps only) "
                "stays in the loop"
            )
        if self.renewed:
            names = ", ".join(self.renewed)
            self.summary += (
                f"; {names} created once before the loop and reset where {'it was' if len(self.renewed) == 1 else 'they were'} "
                "created (reset_state()): a traced step must not hold a metric replaced every epoch"
            )

    def _hoist(
        self, tree: cst.Module, scope: cst.Module | cst.FunctionDef
    ) -> tuple[cst.BaseStatement, set[str], bool] | None:
        """Where a step extracted from ``scope`` goes when ``scope`` is a function that a loop calls (a
        ``train_one_epoch(model, ds, ...)`` called once an epoch): a tf.function defined inside it would
        be a new one at every call, traced again (and, with XLA, compiled again) every epoch. Then the
        step is defined once: at module level before the function, the names of its frame the step
        reads passed as parameters; for a method (``self`` first), as a method of its class before it,
        called ``self.train_step(...)``. Returns (the statement the step goes before, the names of
        ``scope``'s frame, whether it is a method). None for the module, a function no loop calls, or
        a function nested in another (its closure would be lost)."""
        if not isinstance(scope, cst.FunctionDef):
            return None
        holder: cst.BaseStatement | None = None
        method = False
        for stmt in tree.body:
            if stmt is scope:
                holder = stmt
            elif isinstance(stmt, cst.ClassDef) and any(f is scope for f in stmt.body.body):
                first = scope.params.params[0].name.value if scope.params.params else ""
                if first != "self" or scope.decorators:  # a static or class method: left as it is
                    return None
                holder, method = scope, True
        if holder is None:
            return None
        name = scope.name.value
        called = any(
            _calls_named(n, name)
            for loop in walk(tree)
            if isinstance(loop, (cst.For, cst.While))
            for n in own_nodes(loop.body)
        )
        if not called:
            return None
        ps = scope.params
        local = {p.name.value for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params)}
        for star in (ps.star_arg, ps.star_kwarg):
            if isinstance(star, cst.Param):
                local.add(star.name.value)
        return holder, local | _stores(scope.body), method

    def _plan_relax(self, decorators: list[tuple[cst.FunctionDef, cst.Decorator]]) -> bool:
        """A step that is a tf.function already and that the run traced again and again (TFD204: a batch
        padded to its longest sequence, ``facts.retraces``): ``reduce_retracing=True`` on its decorator,
        unless it sets that or an ``input_signature`` already (then ``self.relax_note`` says so)."""
        self.relax_note = ""
        retraces = self.fix.facts.retraces or 0
        if retraces < RETRACES_RELAXED or self.fix.facts.step_kind != "tf.function" or len(decorators) != 1:
            return False
        fn, d = decorators[0]
        given = (
            kwarg(d.decorator, "reduce_retracing") or kwarg(d.decorator, "input_signature")
            if isinstance(d.decorator, cst.Call)
            else None
        )
        if given is not None:
            assert given.keyword is not None
            self.relax_note = f"; the run traced {fn.name.value}() {retraces + 1} times though it sets {given.keyword.value}"
            return False
        self.relax.add(id(d))
        self.warn(
            "measured over the first steps, where the plain function still traces each new input shape: once "
            "most shapes are traced the gain falls (a text loop with dynamic padding: 5.85x measured, 2.0-2.5x "
            "over its 3 epochs side by side, 1.5-2x in the third)"
        )
        self.summary = (
            f"reduce_retracing=True on the tf.function {fn.name.value}() (line {self.line(fn)}): the run traced it "
            f"{retraces + 1} times (its input changing shape, TFD204; Keras's own train function sets it)"
        )
        return True

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        if id(original_node) not in self.relax:
            return updated_node
        call = (
            updated_node.decorator
            if isinstance(updated_node.decorator, cst.Call)
            else cst.Call(func=updated_node.decorator)
        )
        return updated_node.with_changes(decorator=set_kwarg(call, "reduce_retracing", expr("True")))

    def _decorator(self) -> cst.Decorator:
        """``@tf.function``; ``@tf.function(reduce_retracing=True)`` where the run saw the step's input
        change shape from step to step (a batch padded to its longest sequence): one trace per new shape
        otherwise (an eager text loop with dynamic padding ran 3 epochs in 7.8 s with the plain decorator,
        5.1 s with it, 16.4 s eagerly, start-up included; Keras's own train function sets it too)."""
        if self.fix.facts.input_shapes_vary:
            return cst.Decorator(decorator=expr(f"{self.tf}.function(reduce_retracing=True)"))
        return cst.Decorator(decorator=expr(f"{self.tf}.function"))

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        if id(original_node) in self.decorate:
            deco = self._decorator()
            return updated_node.with_changes(decorators=[deco, *updated_node.decorators])
        return updated_node

    def _replace_block(self, loop: Block) -> Block:
        assert self.extraction is not None
        _, first, last = self.extraction
        stmts = _suite(loop)
        func: cst.BaseExpression = (
            cst.Attribute(cst.Name("self"), cst.Name(self.step_name))
            if self.method
            else cst.Name(self.step_name)
        )
        call = cst.Call(func=func, args=[self._arg(p) for p in self.params])
        small: cst.BaseSmallStatement
        if not self.returns:
            small = cst.Expr(call)
        else:
            target: cst.BaseAssignTargetExpression = (
                cst.Name(self.returns[0])
                if len(self.returns) == 1
                else cst.Tuple([cst.Element(cst.Name(r)) for r in self.returns], lpar=[], rpar=[])
            )
            small = cst.Assign(targets=[cst.AssignTarget(target)], value=call)
        line = cst.SimpleStatementLine(body=[small], leading_lines=_leading(stmts[first]))
        self.block = [stmts[first].with_changes(leading_lines=[]), *stmts[first + 1 : last + 1]]
        return loop.with_changes(body=loop.body.with_changes(body=[*stmts[:first], line, *stmts[last + 1 :]]))

    def _arg(self, name: str) -> cst.Arg:
        dtype = self.tensor_args.get(name)
        if dtype is None:
            return cst.Arg(cst.Name(name))
        return cst.Arg(_as_tensor(self.tf, name, dtype))

    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.For:
        if self.extraction is not None and original_node is self.extraction[0]:
            return self._replace_block(updated_node)  # type: ignore[return-value]
        return updated_node

    def leave_While(self, original_node: cst.While, updated_node: cst.While) -> cst.While:
        if self.extraction is not None and original_node is self.extraction[0]:
            return self._replace_block(updated_node)  # type: ignore[return-value]
        return updated_node

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        if self.extraction is not None and original_node is self.extraction[0]:
            return self._replace_block(updated_node)  # type: ignore[return-value]
        return updated_node

    def leave_Else(self, original_node: cst.Else, updated_node: cst.Else) -> cst.Else:
        if self.extraction is not None and original_node is self.extraction[0]:
            return self._replace_block(updated_node)  # type: ignore[return-value]
        return updated_node

    def _step_def(self) -> cst.FunctionDef:
        body: list[cst.BaseStatement] = list(self.block)
        if self.returns:
            value = (
                cst.Name(self.returns[0])
                if len(self.returns) == 1
                else cst.Tuple([cst.Element(cst.Name(r)) for r in self.returns], lpar=[], rpar=[])
            )
            body.append(cst.SimpleStatementLine([cst.Return(value)]))
        return cst.FunctionDef(
            name=cst.Name(self.step_name),
            params=cst.Parameters(
                [cst.Param(cst.Name(p)) for p in (["self"] if self.method else []) + self.params]
            ),
            body=cst.IndentedBlock(body),
            decorators=[self._decorator()],
        )

    def _insert(
        self, body: Sequence[cst.BaseStatement], originals: Sequence[cst.BaseStatement], module: bool = False
    ) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        for new, old in zip(body, originals, strict=True):
            lead = _leading(new)
            made = (  # the metrics the loop created anew each epoch, created once before it
                [st.with_changes(leading_lines=[]) for st in self.renewed.values()]
                if old is self.metrics_top
                else []
            )
            if old is self.anchor:
                out.append(self._step_def().with_changes(leading_lines=lead))
                gap = 2 if module and isinstance(old, (cst.FunctionDef, cst.ClassDef)) else 1  # PEP 8
                seq = [*made, new.with_changes(leading_lines=[])]
                seq[0] = seq[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)] * gap)
                out.extend(seq)
            elif made:
                out.extend(
                    [made[0].with_changes(leading_lines=lead), *made[1:], new.with_changes(leading_lines=[])]
                )
            else:
                out.append(new)
        return out

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if any(s is self.anchor or s is self.metrics_top for s in original_node.body):
            return updated_node.with_changes(body=self._insert(updated_node.body, original_node.body))
        return updated_node

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if any(s is self.anchor or s is self.metrics_top for s in original_node.body):
            return updated_node.with_changes(body=self._insert(updated_node.body, original_node.body, True))
        return updated_node


class TfFunction(Fix):
    """Compile the training step with ``@tf.function`` instead of dispatching every op eagerly.

    What it changes: the function holding ``GradientTape`` / ``apply_gradients`` (or Keras 3's
    ``optimizer.apply(grads, vars)``) gets ``@tf.function``; a method (``Trainer.step(self, x, y)``)
    too. A function with a tape that such a function calls (a physics-informed loss's derivatives of the
    model's output, a gradient penalty) is part of that step, not the step. When the step is written inline in the training loop, those statements (from the ``with
    tf.GradientTape()`` block to the optimizer update) are extracted into ``train_step(...)``, defined
    just before the loop: values the loop changes every iteration become its parameters, values used
    after it are returned (never the tape: a step whose tape is used after the update is not cut).
    The loop counters the step reads (``for epoch in range(..)``, ``enumerate``'s index, ``step +=
    1``) are passed as tensors, ``tf.constant(epoch, tf.float32)`` (``int32`` where they only meet
    integer literals): a Python number traces the step again for each new value, once an epoch or
    once a step, which a short timing window does not show. A counter a read needs as a Python int
    (an index, ``range(..)``, an ``if`` test) stays one, and the result says the step retraces; when
    the tensor guess breaks the step, the trial fails and the fix is tried again with Python numbers.
    A step function the loop calls with a counter (``train_step(x, y, epoch)``) gets it the same way
    at its calls in the loop. Where the run saw the step's input change shape from step to step (a batch
    padded to its own longest sequence; ``input_shapes_vary`` in the facts), the decorator is
    ``@tf.function(reduce_retracing=True)``, as Keras's own train function is: a plain one traced once per
    new length (an eager text loop: 1.80x with it plain, 10.73x so). A step that is a tf.function already and
    that the run traced 4 times or more (``facts.retraces`` ≥ 3, TFD204) gets ``reduce_retracing=True`` on
    its decorator; one that sets ``reduce_retracing`` or an ``input_signature`` already is left, the skip
    saying how often it was traced. Its gain is measured where the plain function still traces each new
    shape, and the result says that it falls once most shapes are traced (5.85x measured on such a loop,
    2.0-2.5x over its 3 epochs side by side). A step split in two, a function holding the tape and returning the
    gradients (``grad(model, x, y)``, as TensorFlow's "Custom training: walkthrough" writes it) and
    the loop applying them right after the call, is extracted the same way, from the call to the
    update: decorating the gradient function alone would leave the optimizer's update eager. When
    something between the two would run only once under tf.function (a ``print``, ``float(loss)``),
    the gradient function alone is decorated.
    A step extracted from a function that a loop calls (``train_one_epoch(model, ds, ...)`` once an
    epoch) is defined once, at module level before that function (the names of its frame the step
    reads become parameters), or as a method of its class called ``self.train_step(...)``: a
    tf.function defined inside it would be a new one every epoch, traced and, with XLA, compiled again.
    Metric updates right after the optimizer update go into the step (TF ops). A metric the loop
    creates anew every epoch (``epoch_loss_avg = keras.metrics.Mean()`` in the epoch loop, as the
    walkthrough writes it) is created once before the loop and reset where it was created
    (``epoch_loss_avg.reset_state()``): a traced step holding a metric replaced every epoch would keep
    updating the first one. Only when the script uses it through ``update_state`` / ``result`` /
    ``reset_state`` alone; otherwise its update stays outside the step. An extracted step returns its
    loss even when the loop does not read it: the run reads the loss there (for the loss check of the
    fixes after it).

    Which step: the one that ran. When the run's facts say the profiled step was eager, the function or
    loop holding the lines where the hooks saw it (its ``tape.gradient``, its optimizer update) is the
    one compiled, even if the file also defines ``@tf.function`` versions used later, or wraps it in
    ``tf.function(step)`` where the run did not go (``if not args.eager: train_step =
    tf.function(train_step)`` with the flag on: it is decorated, and a tf.function of it still
    works). Not tried when
    the profiled step already ran as a tf.function, on a Keras ``fit`` loop (``fit`` compiles the step,
    a ``train_step`` override too: xla-jit and steps-per-execution are the fixes that apply there, as
    far as their own checks let them, and the reason says which), or
    on a ``step_fn`` that ``strategy.run`` calls inside a tf.function (a function calling
    ``strategy.run`` eagerly is the one decorated).

    Where the script switches eager execution on itself, a debugging setting left in
    (``model.compile(..., run_eagerly=True)``, ``model.run_eagerly = True``,
    ``tf.config.run_functions_eagerly(True)``: the run's facts show an eager ``fit`` step or
    ``functions_run_eagerly``), the fix is to switch it off where it is written (``True`` → ``False``),
    and nothing else; a switch the script computes (``run_eagerly=args.debug``) is left alone.

    Python side effects in the step (``print``, appending to an outer list, ``float(tensor)``,
    ``time``/``random`` calls, ``global``) run only once under tf.function, when it traces: the codemod
    reports each one, and the loop rejects the fix (after measuring it) when there are any, or when the
    script's output changes.

    Rolled back when: side effects, changed output, not faster beyond the noise band, or not sane.
    """

    ID = "tf-function"
    DESCRIPTION = "@tf.function on the training step"
    CODEMOD = TfFunctionCodemod
    PRIORITY = 10

    def variants(self, ctx: FixContext) -> list[dict[str, str]]:
        """The loop counters the step reads passed as tensors (one trace); when that run fails (a
        read the codemod took for arithmetic needed the Python int), as Python numbers: traced again
        for each new value, still compiled."""
        return [{}, {"python_args": "1", "fallback": "1", "label": "loop counters as Python numbers"}]

    def precheck(self, ctx: FixContext) -> str | None:
        facts = ctx.facts
        if facts.functions_run_eagerly or (facts.loop_kind == "keras_fit" and facts.step_kind == "eager"):
            return None  # the script switches eager execution on itself (run_eagerly=True, ...): turned off
        if facts.loop_kind == "keras_fit":
            return (
                "Keras fit already compiles the training step (a train_step override too) into a "
                f"tf.function: {fit_fixes(ctx)}"
            )
        if facts.step_kind == "tf.function" and (facts.retraces or 0) < RETRACES_RELAXED:
            where = facts.source.get("step_fn") or ""
            where = f" ({where.replace(chr(92), '/').rsplit('/', 1)[-1]})" if where else ""
            return f"the profiled training step already runs as a tf.function{where}"
        return None


FIX = TfFunction
