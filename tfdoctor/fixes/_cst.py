"""LibCST helpers the fixes share: dotted names, import aliases, method chains, tf.data pipelines,
adding keyword arguments without breaking the call's layout."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

#: methods of tf.data.Dataset that return a dataset (a chain of them is a pipeline)
DATASET_METHODS = frozenset(
    {
        "map",
        "batch",
        "shuffle",
        "prefetch",
        "cache",
        "repeat",
        "take",
        "skip",
        "filter",
        "interleave",
        "flat_map",
        "unbatch",
        "padded_batch",
        "ragged_batch",
        "concatenate",
        "apply",
        "with_options",
        "rebatch",
        "shard",
        "enumerate",
        "window",
        "prefetch_to_device",
        "ignore_errors",
        "take_while",
        "scan",
        "bucket_by_sequence_length",
        "rejection_resample",
        "sample_from_datasets",
        "snapshot",
    }
)
#: constructors whose data is already in memory (a cache of the decoded data is bounded by it)
IN_MEMORY_SOURCES = frozenset(
    {"from_tensor_slices", "from_tensors", "range", "from_generator", "timeseries_dataset_from_array"}
)


def dotted(expr: cst.BaseExpression) -> str | None:
    """``tf.data.Dataset.range`` for the Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name):
        parts.append(expr.value)
        return ".".join(reversed(parts))
    return None


def call_name(call: cst.Call) -> str | None:
    return dotted(call.func)


def attr_name(call: cst.Call) -> str | None:
    """The last name of the called thing: ``compile`` for ``model.compile(...)``, ``print`` for ``print()``."""
    f = call.func
    if isinstance(f, cst.Attribute):
        return f.attr.value
    if isinstance(f, cst.Name):
        return f.value
    return None


def kwarg(call: cst.Call, name: str) -> cst.Arg | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a
    return None


@dataclass(frozen=True)
class Aliases:
    """How the script refers to TensorFlow and Keras."""

    tf: str | None = None  # "tf" for ``import tensorflow as tf``
    keras: str | None = None  # "keras" for ``from tensorflow import keras`` / ``import keras``
    # how it spells tf.function: "tf.function", "function" for ``from tensorflow import function``
    functions: frozenset[str] = frozenset()
    # "tf_data" for ``import tensorflow.data as tf_data`` / ``from tensorflow import data as tf_data``
    # (keras-io's Keras 3 style); "tf.data" where only ``tf`` is imported; None without either
    data: str | None = None

    def autotune(self) -> str:
        """How the script would write ``tf.data.AUTOTUNE``."""
        return f"{self.data or (self.tf or 'tf') + '.data'}.AUTOTUNE"


def aliases(module: cst.Module) -> Aliases:
    tf = keras = data = None
    functions: set[str] = set()
    for node in walk(module):
        if isinstance(node, cst.Import):
            for n in node.names:
                name = dotted(n.name)
                asname = n.asname.name.value if n.asname and isinstance(n.asname.name, cst.Name) else None
                if name == "tensorflow":
                    tf = tf or asname or "tensorflow"
                elif name == "keras":
                    keras = keras or asname or "keras"
                elif name == "tensorflow.data" and asname:
                    data = data or asname
        elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            mod = dotted(node.module) if node.module is not None else None
            if mod == "tensorflow":
                for n in node.names:
                    if n.name.value == "function":
                        functions.add(
                            n.asname.name.value
                            if n.asname and isinstance(n.asname.name, cst.Name)
                            else "function"
                        )
                    if n.name.value == "data":
                        data = data or (
                            n.asname.name.value
                            if n.asname and isinstance(n.asname.name, cst.Name)
                            else "data"
                        )
                    if n.name.value == "keras":
                        keras = keras or (
                            n.asname.name.value
                            if n.asname and isinstance(n.asname.name, cst.Name)
                            else "keras"
                        )
    if keras is None and tf is not None:
        keras = f"{tf}.keras"
    if tf is not None:
        functions.add(f"{tf}.function")
    if data is None and tf is not None:
        data = f"{tf}.data"
    return Aliases(tf, keras, frozenset(functions), data)


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node`` (pre-order), including ``node``."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def own_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes under ``node`` that run in its own frame (nested defs, lambdas and classes excluded), in
    source order (pre-order)."""
    stack = list(reversed(node.children))
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(n.children))


def method_chain(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, list[tuple[str, cst.Call]]]:
    """``a.b(1).c(2)`` → (``a``, [("b", call_b), ("c", call_c)]): the root and the calls, in order."""
    calls: list[tuple[str, cst.Call]] = []
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        calls.append((expr.func.attr.value, expr))
        expr = expr.func.value
    calls.reverse()
    return expr, calls


def is_dataset_source(expr: cst.BaseExpression) -> bool:
    """A call that creates a tf.data dataset: ``tf.data.Dataset.from_tensor_slices(...)``,
    ``tf.data.TFRecordDataset(...)``, ``keras.utils.image_dataset_from_directory(...)``,
    ``keras.utils.timeseries_dataset_from_array(...)``, ``tfds.load(...)``."""
    if not isinstance(expr, cst.Call):
        return False
    name = call_name(expr) or ""
    parts = name.split(".")
    return (
        "Dataset" in parts
        or (len(parts) >= 2 and parts[-2] == "data" and parts[-1].endswith("Dataset"))
        or parts[-1].endswith("Dataset")
        or parts[-1].endswith("_dataset_from_directory")
        or parts[-1].endswith("_dataset_from_array")  # keras.utils.timeseries_dataset_from_array
        or parts[-1] in ("make_csv_dataset", "make_batched_features_dataset")  # tf.data.experimental
        or name in TFDS_LOADS
        or parts[-1] == "as_dataset"  # tfds.builder("mnist").as_dataset(split="train")
    )


#: TensorFlow Datasets: ``tfds.load(...)`` returns a dataset, a tuple of them, or (that, info)
TFDS_LOADS = frozenset({"tfds.load", "tensorflow_datasets.load"})


def target_names(t: cst.BaseExpression) -> list[str] | None:
    """Names bound by a plain (possibly unpacking) target, None when it stores into something."""
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        out: list[str] = []
        for el in t.elements:
            if not isinstance(el, cst.Element):
                return None
            inner = target_names(el.value)
            if inner is None:
                return None
            out += inner
        return out
    return None


class Pipelines:
    """The tf.data pipelines of a module: which names hold datasets (flow-insensitive, by name)."""

    def __init__(self, module: cst.Module):
        self.names: set[str] = set()
        self.assigns: dict[str, list[cst.Assign]] = {}
        # functions of the script's whose every return is a dataset (keras-io's DDIM: ``def
        # prepare_dataset(split): return (tfds.load(...).map(...)...prefetch(...))``, then ``train_dataset
        # = prepare_dataset("train[:80%]")``): name -> those returns; a function defined twice is not one
        self.functions: dict[str, list[cst.Return]] = {}
        defs: dict[str, list[cst.FunctionDef]] = {}
        for f in walk(module):
            if isinstance(f, cst.FunctionDef):
                defs.setdefault(f.name.value, []).append(f)
        changed = True
        assigns = [n for n in walk(module) if isinstance(n, cst.Assign)]
        for a in assigns:  # (ds_train, ds_test), ds_info = tfds.load(..., with_info=True)
            if len(a.targets) == 1 and isinstance(a.value, cst.Call) and call_name(a.value) in TFDS_LOADS:
                target: cst.BaseExpression = a.targets[0].target
                info = kwarg(a.value, "with_info")
                if (
                    info is not None
                    and isinstance(info.value, cst.Name)
                    and info.value.value == "True"
                    and isinstance(target, (cst.Tuple, cst.List))
                    and target.elements
                ):
                    target = target.elements[0].value
                self.names.update(target_names(target) or [])
        while changed:  # a name assigned from another dataset name is a dataset too
            changed = False
            for fname, fs in defs.items():
                if fname in self.functions or len(fs) != 1:
                    continue
                rets = [r for r in own_nodes(fs[0].body) if isinstance(r, cst.Return)]
                if rets and all(r.value is not None and self.is_dataset(r.value) for r in rets):
                    self.functions[fname] = rets
                    changed = True
            for a in assigns:
                if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name):
                    continue
                name = a.targets[0].target.value
                if name not in self.names and self.is_dataset(a.value):
                    self.names.add(name)
                    changed = True
        for a in assigns:
            if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
                name = a.targets[0].target.value
                if name in self.names and self.is_dataset(a.value):
                    self.assigns.setdefault(name, []).append(a)

    def root_of(self, expr: cst.BaseExpression) -> tuple[cst.BaseExpression, list[tuple[str, cst.Call]]]:
        root, calls = method_chain(expr)
        # the root itself may be a source call ``tf.data.Dataset.range(8)`` whose func chain is dotted
        return root, calls

    def is_dataset(self, expr: cst.BaseExpression) -> bool:
        root, calls = method_chain(expr)
        if any(name not in DATASET_METHODS for name, _ in calls):
            # a source call such as tf.data.Dataset.from_tensor_slices(x) parses as a chain whose
            # first "method" is the constructor: accept it when the dotted prefix names a dataset
            first = next((i for i, (n, _) in enumerate(calls) if n not in DATASET_METHODS), None)
            if first is None:
                return False
            if any(n not in DATASET_METHODS for n, _ in calls[first + 1 :]):
                return False
            return is_dataset_source(calls[first][1])
        if isinstance(root, cst.Name) and root.value in self.names:
            return True
        if (
            isinstance(root, cst.Call)
            and isinstance(root.func, cst.Name)
            and root.func.value in self.functions
        ):
            return True
        return is_dataset_source(root) if isinstance(root, cst.Call) else False

    def returned_by(self, expr: cst.BaseExpression) -> list[cst.Return]:
        """Where a pipeline built by a function of the script's ends: ``prepare_dataset(...)`` (the call,
        nothing after it) -> that function's returns, followed through a return that is such a call."""
        seen: set[str] = set()
        out: list[cst.Return] = []
        todo = [expr]
        while todo:
            e = todo.pop()
            if not (isinstance(e, cst.Call) and isinstance(e.func, cst.Name)):
                continue
            fname = e.func.value
            if fname not in self.functions or fname in seen:
                continue
            seen.add(fname)
            for r in self.functions[fname]:
                if (
                    r.value is not None
                    and isinstance(r.value, cst.Call)
                    and isinstance(r.value.func, cst.Name)
                ):
                    todo.append(r.value)
                else:
                    out.append(r)
        return out

    def stages(self, expr: cst.BaseExpression) -> tuple[cst.Call | None, list[tuple[str, cst.Call]]]:
        """(the source call or None when the chain starts at a name, the dataset method calls)."""
        _root, calls = method_chain(expr)
        first = next((i for i, (n, _) in enumerate(calls) if n not in DATASET_METHODS), None)
        if first is not None:
            return calls[first][1], calls[first + 1 :]
        if isinstance(_root, cst.Call) and is_dataset_source(_root):
            return _root, calls
        return None, calls


def source_kind(call: cst.Call | None) -> str | None:
    if call is None:
        return None
    return (call_name(call) or "").split(".")[-1] or None


NO_WS = cst.SimpleWhitespace("")


def make_kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=NO_WS, whitespace_after=NO_WS),
    )


def add_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """Append ``arg`` keeping the call's layout (a multi-line call with a trailing comma stays one)."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # trailing comma: the new argument goes on its own line
        if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
            between = args[-2].comma
        else:
            between = cst.Comma(whitespace_after=call.whitespace_before_args)
        args[-1] = last.with_changes(comma=between)
        args.append(arg.with_changes(comma=last.comma))
    else:  # the space before ``)`` (a newline in a call laid out over lines) stays before it
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        args.append(arg.with_changes(whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)


def set_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Set keyword ``name`` (replacing its value when present)."""
    existing = kwarg(call, name)
    if existing is None:
        return add_arg(call, make_kwarg(name, value))
    return call.with_changes(args=[a.with_changes(value=value) if a is existing else a for a in call.args])


def chain_append(expr: cst.BaseExpression, method: str, args: list[cst.Arg]) -> cst.Call:
    """``expr.method(*args)``, placed on its own line when the chain is laid out one call per line."""
    dot = cst.Dot()
    inner = expr
    lpar, rpar = list(getattr(expr, "lpar", ())), list(getattr(expr, "rpar", ()))
    if lpar and rpar:
        inner = expr.with_changes(lpar=[], rpar=[])
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute):
            dot = cst.Dot(whitespace_before=inner.func.dot.whitespace_before)
    new = cst.Call(func=cst.Attribute(value=inner, attr=cst.Name(method), dot=dot), args=args)
    if lpar and rpar:
        new = new.with_changes(lpar=lpar, rpar=rpar)
    return new


def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def assigned_values(node: cst.CSTNode) -> dict[str, list[cst.BaseExpression]]:
    """The values assigned to each plain name under ``node`` (``name = value``, one target), in order."""
    out: dict[str, list[cst.BaseExpression]] = {}
    for a in walk(node):
        if isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
            out.setdefault(a.targets[0].target.value, []).append(a.value)
    return out


def function_defs(module: cst.Module) -> Iterator[cst.FunctionDef]:
    for n in walk(module):
        if isinstance(n, cst.FunctionDef):
            yield n


class _Names(cst.CSTVisitor):
    """Collects the plain names under a node (attribute names and keywords excluded) into ``out``, and
    each occurrence in ``uses`` with the attribute taken on it (``model.fit`` → ``("model", "fit")``)."""

    def __init__(self) -> None:
        super().__init__()
        self.out: set[str] = set()
        self.uses: list[tuple[str, str | None]] = []
        self._attr: dict[int, str] = {}  # id(Name) -> the attribute taken on it

    def visit_Name(self, n: cst.Name) -> None:
        self.out.add(n.value)
        self.uses.append((n.value, self._attr.get(id(n))))

    def visit_Attribute(self, n: cst.Attribute) -> bool:
        if isinstance(n.value, cst.Name):
            self._attr[id(n.value)] = n.attr.value
        n.value.visit(self)
        return False

    def visit_Arg(self, n: cst.Arg) -> bool:
        n.value.visit(self)
        return False


class _NamesRead(_Names):
    """:class:`_Names` less what only binds a name (a bare assignment target, a parameter, a def or
    class name)."""

    def visit_AssignTarget(self, n: cst.AssignTarget) -> bool:
        return not isinstance(n.target, cst.Name)

    def visit_Param(self, n: cst.Param) -> bool:
        for part in (n.default, n.annotation):
            if part is not None:
                part.visit(self)
        return False

    def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
        for child in (n.params, n.body, *n.decorators, *([n.returns] if n.returns else [])):
            child.visit(self)
        return False

    def visit_ClassDef(self, n: cst.ClassDef) -> bool:
        for child in (n.body, *n.bases, *n.keywords, *n.decorators):
            child.visit(self)
        return False


def names_in(node: cst.CSTNode) -> set[str]:
    """Every plain name read or written under ``node`` (attribute names and keywords excluded)."""
    v = _Names()
    node.visit(v)
    return v.out


def names_read(node: cst.CSTNode) -> set[str]:
    """The plain names read under ``node``: :func:`names_in` less what only binds a name (a bare
    assignment target, a parameter, a def or class name)."""
    v = _NamesRead()
    node.visit(v)
    return v.out


def name_reads(node: cst.CSTNode) -> list[tuple[str, str | None]]:
    """Each read of a plain name under ``node`` (as :func:`names_read` counts them), in source order,
    with the attribute taken on it: ``model.fit(x)`` → ``("model", "fit")``, ``f(model)`` → ``("model", None)``."""
    v = _NamesRead()
    node.visit(v)
    return v.uses


def unique_name(module: cst.Module, base: str) -> str:
    used = names_in(module)
    if base not in used:
        return base
    i = 2
    while f"{base}_{i}" in used:
        i += 1
    return f"{base}_{i}"


def imports_end(body: Sequence[cst.BaseStatement]) -> int:
    """Index of the first statement after the module docstring, ``__future__`` and the leading imports
    (``if``/``try`` blocks that only import count as imports)."""
    at = 0
    for i, stmt in enumerate(body):
        if (
            isinstance(stmt, cst.SimpleStatementLine)
            and all(
                isinstance(s, (cst.Import, cst.ImportFrom))
                or (isinstance(s, cst.Expr) and isinstance(s.value, cst.SimpleString))
                for s in stmt.body
            )
        ) or (
            isinstance(stmt, (cst.If, cst.Try))
            and all(
                isinstance(n, (cst.Import, cst.ImportFrom))
                for n in walk(stmt)
                if isinstance(n, cst.BaseSmallStatement)
            )
        ):
            at = i + 1
        else:
            break
    return at


def insert_after_imports(module: cst.Module, stmt: cst.BaseCompoundStatement) -> cst.Module:
    """``stmt`` (a helper function) right after the imports, two blank lines either side; the comment
    lines above the next statement stay with it (generator-prefetch's placement)."""
    body = list(module.body)
    at = imports_end(body)
    blank = [cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]
    stmt = stmt.with_changes(leading_lines=blank)
    rest = body[at:]
    if rest:
        rest[0] = rest[0].with_changes(
            leading_lines=[*blank, *[ln for ln in rest[0].leading_lines if ln.comment]]
        )
    return module.with_changes(body=[*body[:at], stmt, *rest])
