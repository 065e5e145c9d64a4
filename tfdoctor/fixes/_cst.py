"""LibCST helpers the fixes share: dotted names, import aliases, method chains, tf.data pipelines,
adding keyword arguments without breaking the call's layout."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

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

#: sources combining datasets (``tf.data.Dataset.zip((a, b))``): their elements are what those datasets
#: make, so what those do (shuffle, prefetch) is looked for in them
COMBINATORS = frozenset({"zip", "sample_from_datasets", "choose_from_datasets"})


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


#: the name generator-prefetch gives its chunked ``from_generator`` helper (a numbered one if taken)
CHUNKED_FROM_GENERATOR = "tfdoctor_from_generator"


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
        # functions that transform the dataset they are given (TensorFlow's "Load and preprocess images":
        # ``def configure_for_performance(ds): ds = ds.cache() ... ds = ds.prefetch(...); return ds``,
        # then ``train_ds = configure_for_performance(train_ds)``): name -> (the parameter's position and
        # name, the returns); a call of one is a dataset where that argument is
        self.transformers: dict[str, tuple[int, str, list[cst.Return]]] = {}
        # id() of such a function's return -> the function's assignments building what it returns
        self._local: dict[int, list[cst.Assign]] = {}
        for fname, fs in defs.items():
            if len(fs) == 1 and (t := _transformer(fs[0])) is not None:
                (pos, param, rets), local = t
                self.transformers[fname] = (pos, param, rets)
                self._local.update({id(r): local for r in rets})
        # tfdoctor's own helpers (generator-prefetch's chunked from_generator) make datasets: a call of
        # one is a dataset, but what is inside is tfdoctor's, not a pipeline of the script's to change
        inside: set[int] = set()
        for fname, fs in defs.items():
            if fname.startswith("tfdoctor_"):
                inside.update(id(n) for f in fs for n in walk(f))
                if fname.startswith(CHUNKED_FROM_GENERATOR):
                    self.functions[fname] = []
        changed = True
        assigns = [n for n in walk(module) if isinstance(n, cst.Assign) and id(n) not in inside]
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
        if (arg := self.transformed(root)) is not None:
            return self.is_dataset(arg)
        return is_dataset_source(root) if isinstance(root, cst.Call) else False

    def transformed(self, e: cst.BaseExpression) -> cst.BaseExpression | None:
        """The argument a call of a transformer function of the script's gets as its dataset, or None."""
        if not (
            isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value in self.transformers
        ):
            return None
        pos, pname, _ = self.transformers[e.func.value]
        if (a := kwarg(e, pname)) is not None:
            return a.value
        positional = [a for a in e.args if a.keyword is None and not a.star]
        return positional[pos].value if pos < len(positional) else None

    def read_by(self, node: cst.CSTNode) -> list[str]:
        """The dataset names ``node`` reads, in the order they first appear (``tf.data.Dataset.zip((one,
        two))`` -> ["one", "two"])."""
        return list(
            dict.fromkeys(n.value for n in walk(node) if isinstance(n, cst.Name) and n.value in self.names)
        )

    def built_by(self, ret: cst.Return) -> list[cst.Assign]:
        """The assignments of a transformer function that build what ``ret`` (one of its returns) returns:
        ``ds = ds.cache()``, ``ds = ds.prefetch(...)`` for ``return ds``; [] for any other return."""
        return self._local.get(id(ret), [])

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
            if fname in seen or (fname not in self.functions and self.transformed(e) is None):
                continue
            seen.add(fname)
            rets = self.functions[fname] if fname in self.functions else self.transformers[fname][2]
            for r in rets:
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


def _transformer(f: cst.FunctionDef) -> tuple[tuple[int, str, list[cst.Return]], list[cst.Assign]] | None:
    """``((position, name), returns), assignments`` when ``f`` only applies tf.data methods to one of
    its parameters and returns the result (every return a chain of dataset methods on that parameter, or
    on a local name every assignment of which is such a chain), else None."""
    params = [p.name.value for p in f.params.params]
    if not params or isinstance(f.params.star_arg, cst.Param) or f.params.posonly_params:
        return None
    body = list(own_nodes(f.body))
    assigns: dict[str, list[cst.Assign]] = {}
    for a in body:
        if isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
            assigns.setdefault(a.targets[0].target.value, []).append(a)

    def rooted(e: cst.BaseExpression, seen: frozenset[str]) -> str | None:
        """The parameter a chain of dataset methods starts from (through local names), or None."""
        root, calls = method_chain(e)
        if any(n not in DATASET_METHODS for n, _ in calls) or not isinstance(root, cst.Name):
            return None
        name = root.value
        if name in seen:  # ``ds = ds.cache()``: the name's earlier value, which its other assignments give
            return name if name in params else None
        found = {rooted(a.value, seen | {name}) for a in assigns.get(name, [])}
        if name in params:
            found.add(name)
        return found.pop() if len(found) == 1 else None

    rets = [r for r in body if isinstance(r, cst.Return)]
    if not rets or any(r.value is None for r in rets):
        return None
    roots = {rooted(r.value, frozenset()) for r in rets if r.value is not None}
    if len(roots) != 1 or (param := roots.pop()) is None:
        return None
    # at least one tf.data method applied on the way: ``def f(x): return x`` transforms nothing
    used = [a for n in assigns for a in assigns[n]] + rets
    if not any(
        method_chain(v)[1] for v in (u.value for u in used) if v is not None and rooted(v, frozenset())
    ):
        return None
    # the local names built from the parameter: every assignment of theirs a chain of dataset methods
    local = [a for al in assigns.values() if all(rooted(x.value, frozenset()) for x in al) for a in al]
    return (params.index(param), param, rets), local


def _peeks(tree: cst.Module) -> set[int]:
    """id() of the ``iter(ds)`` calls that are a one-batch look outside any loop: ``image_batch,
    labels_batch = next(iter(normalized_ds))``, as tutorials print a batch's shape before training."""
    out: set[int] = set()

    def visit(node: cst.CSTNode, in_loop: bool) -> None:
        if (
            not in_loop
            and isinstance(node, cst.Call)
            and call_name(node) == "next"
            and node.args
            and isinstance(node.args[0].value, cst.Call)
            and call_name(node.args[0].value) == "iter"
        ):
            out.add(id(node.args[0].value))
        inside = in_loop or isinstance(node, (cst.For, cst.While, cst.CompFor))
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            inside = True  # a function's body runs when it is called, which may be in a loop
        for c in node.children:
            visit(c, inside)

    visit(tree, False)
    return out


#: Keras calls that run a model on the batches given (a loop handing its batches to one evaluates)
_RUNS_MODEL = ("predict", "evaluate", "predict_on_batch", "test_on_batch", "train_on_batch")


def consumers(tree: cst.Module, pipes: Pipelines, *, read: bool = False) -> set[str]:
    """Dataset names the script hands to ``fit`` or, in a script that fits nothing, iterates: the
    pipelines that feed training. In a script that fits, a loop over a dataset or an ``iter()`` of one is
    a look at its batches (TensorFlow's "Load and preprocess images": ``for f in list_ds.take(5):
    print(f.numpy())``), and a ``next(iter(ds))`` outside any loop is one anywhere.

    ``read``: every dataset name such an argument reads (``fit(make_ds(raw_ds))``, an item of a container
    filled with pipelines: ``fit(clients_batched[client])``), not only the name a chain starts from, and
    those ``fit(validation_data=...)``, ``evaluate`` and ``predict`` run the model on, or a loop hands its
    batches to (a function of the script's, ``predict``...); an empty set (not known) where what ``fit``
    trains on is a call reading none."""
    fitted: set[str] = set()
    looped: set[str] = set()
    peeks = _peeks(tree)
    unknown = False
    # a container of pipelines, filled item by item (a federated-averaging script's
    # ``clients_batched[name] = batch_data(shard)``, trained on as ``fit(clients_batched[client])``): its
    # name -> what its items are assigned
    filled: dict[str, list[cst.BaseExpression]] = {}
    for node in walk(tree):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                if isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name):
                    filled.setdefault(t.target.value.value, []).append(node.value)

    def datasets(e: cst.BaseExpression, fit: bool = False) -> set[str]:
        """The dataset names ``e`` feeds from: the name its chain starts from (``read``: every one it
        reads; a call of ``fit`` reading none makes the answer not known)."""
        nonlocal unknown
        if (
            isinstance(e, cst.Subscript)
            and isinstance(e.value, cst.Name)
            and e.value.value not in pipes.names
        ):
            # an item of a container of pipelines: what its items are assigned, or the pipelines the
            # functions building them return
            items = [
                v
                for v in filled.get(e.value.value, [])
                if not any(isinstance(n, cst.Subscript) for n in walk(v))  # d[k] = d[j]: not followed
            ]
            ends = [*items, *(r.value for v in items for r in pipes.returned_by(v) if r.value is not None)]
            found = set().union(*(datasets(v) for v in ends)) if ends else set()
            if found:
                return found
        if read:
            found = names_in(e) & pipes.names
            if not found and fit and isinstance(e, cst.Call):
                unknown = True
            return found
        root, _ = method_chain(e)
        return {root.value} if isinstance(root, cst.Name) and root.value in pipes.names else set()

    evaluated: set[str] = set()
    own = {f.name.value for f in walk(tree) if isinstance(f, cst.FunctionDef)}  # the script's functions
    for node in walk(tree):
        if isinstance(node, (cst.For, cst.CompFor)):
            found = datasets(node.iter)
            if not found and isinstance(node.iter, cst.Call):  # enumerate(ds), zip(ds, ..)
                found = next((f for a in node.iter.args if (f := datasets(a.value))), set())
            looped |= found
            if read and found and isinstance(node, cst.For):
                # a loop handing its batches to a call other than print() evaluates on them (a federated-
                # averaging script's ``for X_test, Y_test in test_batched: test_model(X_test, ...)``)
                batch = names_in(node.target)
                if any(
                    isinstance(c, cst.Call)
                    and (call_name(c) in own or attr_name(c) in _RUNS_MODEL)
                    and any(names_in(a.value) & batch for a in c.args)
                    for c in walk(node.body)
                ):
                    evaluated |= found
            continue
        if not isinstance(node, cst.Call):
            continue
        what = attr_name(node)
        if what in ("fit", "fit_generator"):  # what it trains on: its first argument or x=
            for a in [*node.args[:1], *[x for x in node.args if x.keyword and x.keyword.value == "x"]]:
                fitted |= datasets(a.value, fit=True)
        if read and what in ("fit", "evaluate", "predict"):  # what else the model runs on
            for a in node.args[1:] if what == "fit" else node.args:
                if what != "fit" or (a.keyword and a.keyword.value == "validation_data"):
                    fitted |= datasets(a.value)
        elif what in ("iter", "evaluate_generator") and node.args and id(node) not in peeks:
            (looped if what == "iter" else fitted).update(datasets(node.args[0].value))
    return set() if unknown else (fitted | evaluated if fitted else looped)


def feeding(tree: cst.Module, pipes: Pipelines) -> tuple[set[str], set[str]]:
    """(the pipelines training reads, :func:`consumers` with ``read``; those and every pipeline they are
    built from, :func:`upstream`, or every pipeline the script assigns where the first is not known)."""
    fed = consumers(tree, pipes, read=True)
    return fed, upstream(pipes, fed) if fed else set(pipes.assigns)


def upstream(pipes: Pipelines, names: set[str]) -> set[str]:
    """``names`` and every dataset name their pipelines are built from (``train_ds = list_ds.skip(n)``,
    ``train_ds = configure_for_performance(train_ds)``, ``Dataset.zip((images, labels))``): any dataset
    name an assignment of theirs reads."""
    out = set(names)
    todo = list(names)
    while todo:
        for a in pipes.assigns.get(todo.pop(), []):
            # and where a function of the script's builds it (keras-io's segmentation: ``train_dataset =
            # get_dataset(...)``, whose ``dataset = ...from_tensor_slices(...)`` ... ``return
            # dataset.batch(batch_size)``): the names its returns, and what builds them, read
            rets = pipes.returned_by(a.value)
            read = [a.value, *(r.value for r in rets if r.value is not None)]
            read += [b.value for r in rets for b in pipes.built_by(r)]
            for n in set().union(*(names_in(v) for v in read)) & pipes.names - out:
                out.add(n)
                todo.append(n)
    return out


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


N = TypeVar("N", bound=cst.CSTNode)


def owners(module: cst.Module) -> dict[int, cst.FunctionDef | None]:
    """id() of each assignment and return -> the innermost function holding it (absent: module level).
    The names of :class:`Pipelines` are not flow-sensitive: ``dataset`` in get_training_dataset() and in
    get_validation_dataset() are two pipelines, told apart by this."""
    out: dict[int, cst.FunctionDef | None] = {}
    for fdef in function_defs(module):  # outer ones first: an inner function's nodes overwritten after
        out.update({id(n): fdef for n in walk(fdef.body) if isinstance(n, (cst.Assign, cst.Return))})
    return out


def by_owner(nodes: list[N], owner: dict[int, cst.FunctionDef | None]) -> list[list[N]]:
    """``nodes`` grouped by the function holding each (:func:`owners`), in order."""
    groups: dict[int, list[N]] = {}
    for n in nodes:
        groups.setdefault(id(owner.get(id(n))), []).append(n)
    return list(groups.values())


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


def names_called(node: cst.CSTNode) -> set[str]:
    """The plain names called under ``node`` (``Loader(x, 64)``, ``build()``; not ``keras.Model(...)``)."""
    return {c.func.value for c in walk(node) if isinstance(c, cst.Call) and isinstance(c.func, cst.Name)}


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


def bound_names(node: cst.Import | cst.ImportFrom) -> set[str]:
    """The names an import binds (``import tensorflow as tf`` → ``tf``, ``import os.path`` → ``os``);
    none for ``from m import *``."""
    if isinstance(node.names, cst.ImportStar):
        return set()
    out: set[str] = set()
    for n in node.names:
        alias = n.asname.name if n.asname else n.name
        name = dotted(alias) if isinstance(alias, (cst.Name, cst.Attribute)) else None
        if name:
            out.add(name.split(".")[0])
    return out


def _imported_names(stmt: cst.BaseStatement) -> set[str]:
    """The names a module-level import line binds."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return set()
    return {
        name
        for small in stmt.body
        if isinstance(small, (cst.Import, cst.ImportFrom))
        for name in bound_names(small)
    }


def insert_after_imports(module: cst.Module, stmt: cst.BaseCompoundStatement) -> cst.Module:
    """``stmt`` (a helper function) right after the imports, two blank lines either side; the comment
    lines above the next statement stay with it (generator-prefetch's placement). Below the leading
    imports where a name it reads (its ``@tf.function``'s ``tf``) is imported further down: keras-io's
    Keras 3 examples set ``os.environ["KERAS_BACKEND"]`` between ``import os`` and the rest."""
    body = list(module.body)
    at = imports_end(body)
    reads = names_read(stmt)
    for i, line in enumerate(body):
        if i >= at and _imported_names(line) & reads:
            at = i + 1
    blank = [cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]
    stmt = stmt.with_changes(leading_lines=blank)
    rest = body[at:]
    if rest:
        rest[0] = rest[0].with_changes(
            leading_lines=[*blank, *[ln for ln in rest[0].leading_lines if ln.comment]]
        )
    return module.with_changes(body=[*body[:at], stmt, *rest])
