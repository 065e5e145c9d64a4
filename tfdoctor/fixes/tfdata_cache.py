"""``tfdata-cache``: ``.cache()`` after the deterministic preprocessing of an in-memory tf.data source,
before shuffling and random augmentation."""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod
from tfdoctor.fixes._cst import (
    COMBINATORS,
    IN_MEMORY_SOURCES,
    Pipelines,
    aliases,
    attr_name,
    by_owner,
    call_name,
    dotted,
    feeding,
    kwarg,
    method_chain,
    names_in,
    names_read,
    owners,
    source_kind,
    walk,
)
from tfdoctor.fixes._purity import Module, _bound_in, _is_docstring, _live, _target_names
from tfdoctor.model import CACHE_FILL_SWITCH

DETERMINISTIC_OPS = ("map", "filter")


#: in-memory sources whose elements are work of their own (windows gathered from an array, batched):
#: cached as they come when they do not shuffle
SELF_MAPPING_SOURCES = frozenset({"timeseries_dataset_from_array"})


#: Keras preprocessing layers whose output is a function of their input and of what ``adapt()`` /
#: the constructor gave them: no random numbers, no state a call changes
FIXED_LAYERS = frozenset(
    {"StringLookup", "IntegerLookup", "TextVectorization", "Normalization", "Rescaling", "Resizing"}
    | {"CenterCrop", "Hashing", "CategoryEncoding", "Discretization"}
)
#: methods that change what such a layer computes
LAYER_SETTERS = frozenset({"adapt", "set_vocabulary", "set_weights", "load_assets", "load_own_variables"})


def fixed_layers(tree: cst.Module) -> frozenset[str]:
    """Module-level names bound once to a Keras preprocessing layer of ``FIXED_LAYERS`` (keras-io's OCR:
    ``char_to_num = layers.StringLookup(vocabulary=list(characters), mask_token=None)``, called in the
    map decoding each sample) that nothing changes once a ``.map(`` may have traced it: adapted, if at
    all, in module-level statements before the first one holding a ``.map(`` call (a function or class
    holding one counts where it is defined). A map calling one is as deterministic as its other ops."""
    bound: Counter[str] = Counter()
    made: dict[str, int] = {}  # name -> index of the module-level statement binding it to a fixed layer
    setters: dict[str, list[int]] = {}  # name -> indices of the statements adapting it
    first_map = len(tree.body)
    for i, stmt in enumerate(tree.body):
        top = list(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else []
        for n in walk(stmt):
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    for name in _target_names(t.target) or []:
                        bound[name] += 1
                        if (
                            any(n is s for s in top)
                            and isinstance(n.value, cst.Call)
                            and (call_name(n.value) or "").split(".")[-1] in FIXED_LAYERS
                        ):
                            made[name] = i
            elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
                for name in _target_names(n.target) or []:
                    bound[name] += 1
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute):
                if attr_name(n) == "map":
                    first_map = min(first_map, i)
                elif attr_name(n) in LAYER_SETTERS:
                    # inside a function or class: when it runs is not known, so it counts as late
                    at = len(tree.body) if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else i
                    setters.setdefault(dotted(n.func.value) or "", []).append(at)
    return frozenset(
        name
        for name, at in made.items()
        if bound[name] == 1 and at < first_map and all(i < first_map for i in setters.get(name, []))
    )


#: TensorFlow ops that run a Python function inside the graph: the function is what runs every epoch
PY_WRAPPERS = frozenset({"numpy_function", "py_function", "py_func", "eager_py_func"})


def _wrapper(call: cst.Call) -> str:
    """``numpy_function`` for ``tf.numpy_function(...)``: the last part of the called name."""
    return (call_name(call) or attr_name(call) or "").split(".")[-1]


def _python_fn(call: cst.Call) -> cst.BaseExpression | None:
    """The Python function ``tf.numpy_function(func=read_data_fn, inp=..., Tout=...)`` (or
    ``py_function``) runs, or None when ``call`` is not such a call."""
    if _wrapper(call) not in PY_WRAPPERS:
        return None
    given = kwarg(call, "func")
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return given.value if given is not None else positional[0].value if positional else None


#: names of calls that draw random numbers without saying "random" (cv2.randn, cv2.randu,
#: cv2.randShuffle; scipy.stats' ``.rvs``), lower case
RANDOM_WITHOUT_THE_WORD = ("randn", "randu", "randshuffle", "rvs")


def _random_call(node: cst.CSTNode) -> str | None:
    for n in walk(node):
        if isinstance(n, cst.Call):
            name = call_name(n) or attr_name(n) or ""
            last = name.split(".")[-1].lower()
            if (
                "random" in name.lower()
                or name.split(".")[0] in ("rng", "random")
                or last in RANDOM_WITHOUT_THE_WORD
            ):
                return name
    return None


class _Purity:
    """Which module-level functions draw random numbers (directly or through functions they call)."""

    def __init__(self, tree: cst.Module, fixed: frozenset[str] = frozenset()):
        self.defs = {f.name.value: f for f in tree.body if isinstance(f, cst.FunctionDef)}
        #: the module-level ones (a map function split in two must be one: the halves go beside it)
        self.top = frozenset(self.defs)
        # a map function nested in the helper that builds the pipeline (keras-io's segmentation example:
        # get_dataset() defines load_img_masks and maps it) is read too, where its name is defined once
        # in the whole module (a bare-name call then means that function)
        nested = [
            n
            for f in tree.body
            if isinstance(f, cst.FunctionDef)
            for n in walk(f.body)
            if isinstance(n, cst.FunctionDef)
        ]
        once = Counter(n.name.value for n in walk(tree) if isinstance(n, cst.FunctionDef))
        for n in nested:
            if once[n.name.value] == 1:
                self.defs[n.name.value] = n
        self.memo: dict[str, str | None] = {}
        self.fixed = fixed  # names of deterministic preprocessing layers (fixed_layers)

    def why_random(self, node: cst.CSTNode, seen: frozenset[str] = frozenset()) -> str | None:
        direct = _random_call(node)
        if direct:
            return direct
        for n in walk(node):
            if not isinstance(n, cst.Call):
                continue
            # a function of the script's called, or run by tf.numpy_function / py_function every epoch
            target = n.func if isinstance(n.func, cst.Name) else _python_fn(n)
            if isinstance(target, cst.Name) and target.value in self.defs:
                name = target.value
                if name in seen:
                    continue
                if name not in self.memo:
                    inner = self.why_random(self.defs[name].body, seen | {name})
                    self.memo[name] = f"{name} → {inner}" if inner else None
                if self.memo[name]:
                    return self.memo[name]
        return None

    def opaque(self, node: cst.CSTNode, seen: frozenset[str] = frozenset()) -> str | None:
        """A call under ``node`` (or in the script's functions it calls) whose randomness cannot be told
        from its name: a callable object (``augmenter(x)``, a Keras layer or model: it may hold
        ``RandomFlip``), a function made on the fly (``make()(x)``); None when there is none."""
        local = _bound_in(node)
        for n in walk(node):
            if not isinstance(n, cst.Call):
                continue
            if (py := _python_fn(n)) is not None:  # what numpy_function runs: the script's, followed
                if not (isinstance(py, cst.Name) and py.value in self.defs):
                    return f"{cst.Module([]).code_for_node(py)} (run by {_wrapper(n)})"
                if py.value not in seen and (
                    inner := self.opaque(self.defs[py.value].body, seen | {py.value})
                ):
                    return inner
            if isinstance(n.func, cst.Name):
                name = n.func.value
                if name in self.defs and name not in seen:
                    inner = self.opaque(self.defs[name].body, seen | {name})
                    if inner:
                        return inner
                elif name not in self.defs and (name in local or not hasattr(builtins, name)):
                    if name in self.fixed and name not in local:
                        continue
                    return f"{name}()"
            elif not isinstance(n.func, cst.Attribute):
                return "a function made on the fly"
        return None

    def fn_random(self, arg: cst.BaseExpression) -> str | None:
        """Why the map function is random, "" when it is deterministic, None when it cannot be told."""
        if isinstance(arg, cst.Lambda):
            return self.why_random(arg.body) or ("" if not self.opaque(arg.body) else None)
        if isinstance(arg, cst.Name) and arg.value in self.defs:
            why = self.why_random(self.defs[arg.value].body, frozenset({arg.value}))
            if why:
                return f"{arg.value} → {why}"
            return "" if not self.opaque(self.defs[arg.value].body, frozenset({arg.value})) else None
        return None


#: builtins a map function may call: they act on trace-time Python values and keep no state
PURE_BUILTINS = frozenset(
    {"len", "int", "float", "bool", "str", "tuple", "list", "dict", "range", "min", "max", "abs", "round"}
    | {"isinstance", "zip", "enumerate", "sum", "slice"}
)
#: parts of a dotted TensorFlow/Keras/numpy name that make a call random or stateful (conservative, by
#: name: ``tf.nn.dropout`` and ``sample_distorted_bounding_box`` draw random numbers without saying so)
STATEFUL_PARTS = (
    "random",
    *RANDOM_WITHOUT_THE_WORD,
    "variable",
    "generator",
    "shuffle",
    "dropout",
    "sample",
    "noise",
    "py_function",
    "numpy_function",
    "py_func",
    "print",
    "summary",
    "write",
    "assign",
)
#: module roots whose functions a map may call (TensorFlow ops, Keras ops, numpy/math at trace time)
OP_ROOTS = ("tensorflow", "keras", "numpy", "math")
#: methods of a tensor a map function holds that only annotate it (numpy_function loses static shapes)
TENSOR_METHODS = frozenset({"set_shape", "get_shape"})
#: libraries whose functions the Python a numpy_function / py_function runs may call besides
#: OP_ROOTS': file readers and decoders (images, audio, medical volumes), the same array for the same file
PY_READER_ROOTS = (
    "PIL",
    "cv2",
    "imageio",
    "skimage",
    "librosa",
    "soundfile",
    "pydicom",
    "nibabel",
    "SimpleITK",
    "tifffile",
)


class _ElementWise:
    """Which map functions are element-wise and deterministic, provably from the source: each output
    depends only on its own element. Calls go only to TensorFlow/Keras/numpy/math functions that draw no
    random numbers and touch no state (no ``tf.Variable``, ``py_function``, ``print``), to safe builtins,
    or to module-level functions that pass the same test; module-level names read are bound once and
    not from a variable or a random generator (Python values are frozen when tf.data traces the
    function, so only TensorFlow state could change between epochs). Method calls (``layer(x)``,
    ``gen.uniform()``, ``counter.assign_add()``) are not followed: they fail the test, but for
    ``set_shape`` / ``get_shape`` on a tensor the function holds. The Python function a
    ``tf.numpy_function`` / ``py_function`` runs (every call, not once at trace time) passes when its body
    does, methods of its own local values allowed (``path.decode()``, ``x.astype()``: made in the call,
    gone after it); it must be the script's own module-level function."""

    def __init__(self, tree: cst.Module, fixed: frozenset[str] = frozenset()):
        self.mod = Module(tree)
        self.fixed = fixed  # names of deterministic preprocessing layers (fixed_layers)
        self.roots: dict[str, str] = {}  # local name -> the module it imports (tf -> tensorflow)
        self.readers: dict[str, str] = {}  # the same for PY_READER_ROOTS (from PIL import Image)
        for node in walk(tree):
            if isinstance(node, cst.Import):
                for a in node.names:
                    name = a.evaluated_name
                    top = name.split(".")[0]
                    if top in OP_ROOTS or top in PY_READER_ROOTS:
                        into = self.roots if top in OP_ROOTS else self.readers
                        into[a.evaluated_alias or top] = name if a.evaluated_alias else top
            elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
                mod = dotted(node.module) if node.module is not None and not node.relative else None
                top = mod.split(".")[0] if mod else ""
                if top in OP_ROOTS or top in PY_READER_ROOTS:
                    into = self.roots if top in OP_ROOTS else self.readers
                    for a in node.names:
                        into[a.evaluated_alias or a.evaluated_name] = f"{mod}.{a.evaluated_name}"
        self.values: dict[str, cst.BaseExpression] = {}
        for stmt in tree.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for t in small.targets:
                            for n in _target_names(t.target) or []:
                                self.values[n] = small.value
        self.memo: dict[tuple[str, bool], str | None] = {}

    def op_call(self, name: str) -> str | None:
        """Why a call of the dotted ``name`` (rooted at an import) is not element-wise, or None."""
        root, _, rest = name.partition(".")
        full = {**self.readers, **self.roots}[root] + (f".{rest}" if rest else "")
        low = full.lower()
        bad = next((p for p in STATEFUL_PARTS if p in low), None)
        return f"calls {name} (random or stateful)" if bad else None

    def why_not(
        self, node: cst.CSTNode, local: set[str], seen: frozenset[str] = frozenset(), python: bool = False
    ) -> str | None:
        """Why ``node`` (in a function whose locals and parameters are ``local``) is not element-wise;
        ``python``: the body of a function numpy_function / py_function runs (see the class)."""
        attrs = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
        attrs |= {id(n.keyword) for n in walk(node) if isinstance(n, cst.Arg) and n.keyword is not None}
        calls = {id(n.func) for n in walk(node) if isinstance(n, cst.Call)}
        for n in walk(node):
            if isinstance(n, (cst.Global, cst.Nonlocal)):
                return "declares global or nonlocal names"
            if isinstance(n, (cst.Yield, cst.Await)):
                return "yields or awaits"
            if python and isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                # Python that runs every call may keep state in what it writes into: CACHE[key] = x
                for t in [x.target for x in n.targets] if isinstance(n, cst.Assign) else [n.target]:
                    if isinstance(t, (cst.Subscript, cst.Attribute)):
                        base: cst.BaseExpression = t
                        while isinstance(base, (cst.Subscript, cst.Attribute)):
                            base = base.value
                        if not (isinstance(base, cst.Name) and base.value in local):
                            return f"writes into {cst.Module([]).code_for_node(t)}, state kept between calls"
            if isinstance(n, cst.Call) and (py := _python_fn(n)) is not None:
                if not (isinstance(py, cst.Name) and py.value in self.mod.defs):
                    return f"runs {cst.Module([]).code_for_node(py)} through {_wrapper(n)}, not a function of the script's"
                why = self.fn_why_not(py.value, seen, python=True)
                if why:
                    return f"runs {py.value}() through {_wrapper(n)}, which {why}"
                calls.add(id(py))  # the function passed is checked: not read as a value below
                continue
            if isinstance(n, cst.Call):
                name = dotted(n.func)
                if name is None:
                    if python and isinstance(n.func, cst.Attribute):
                        continue  # Image.open(p).convert("L"): a method of a value made in the call
                    return "calls the result of an expression (a layer or a function made on the fly)"
                root = name.split(".")[0]
                if root in local:
                    if python or (name.split(".")[-1] in TENSOR_METHODS and name.count(".") == 1):
                        continue
                    return f"calls {name}(), a method of a value it holds"
                if python and name == "open" and not self.mod.bindings[name]:
                    continue  # reads the element's file
                readers = self.readers if python else {}
                if (root in self.roots or root in readers) and self.mod.bindings[root] == 1:
                    why = self.op_call(name)
                    if why:
                        return why
                    continue
                if "." in name:
                    return f"calls {name}(), which tfdoctor cannot tell is element-wise"
                if name in self.mod.defs:
                    why = self.fn_why_not(name, seen, python)
                    if why:
                        return f"calls {name}(), which {why}"
                    continue
                if name in PURE_BUILTINS and not self.mod.bindings[name]:
                    continue
                if name in self.fixed:  # a lookup layer maps each element on its own
                    continue
                return f"calls {name}(), which tfdoctor cannot tell is element-wise"
            if isinstance(n, cst.Name) and id(n) not in attrs and id(n) not in calls:
                why = self.global_why_not(n.value, local, seen)
                if why:
                    return why
        return None

    def global_why_not(self, name: str, local: set[str], seen: frozenset[str]) -> str | None:
        if name in local or name in ("True", "False", "None") or name in PURE_BUILTINS:
            return None
        if name in self.roots or name in self.readers:
            return None if self.mod.bindings[name] == 1 else f"reads {name}, which the script rebinds"
        if name in self.mod.defs:  # passed as a value (tf.map_fn(fn, x)): it must pass too
            why = self.fn_why_not(name, seen)
            return f"uses {name}(), which {why}" if why else None
        if self.mod.bindings[name] != 1 or name in self.mod.globals:
            return f"reads {name}, which the script binds more than once (or not at module level)"
        value = self.values.get(name)
        if value is None:
            return f"reads {name}, which tfdoctor cannot follow"
        for c in walk(value):
            if isinstance(c, cst.Call):
                called = (dotted(c.func) or "").lower()
                if any(p in called for p in ("variable", "random", "generator", "rng")):
                    return f"reads {name}, made by {dotted(c.func)}() (state that changes between epochs)"
        return None

    def fn_why_not(self, name: str, seen: frozenset[str] = frozenset(), python: bool = False) -> str | None:
        """Why the module-level function ``name`` is not element-wise throughout, or None; ``python``:
        it runs as Python every call (numpy_function / py_function)."""
        if name in seen:
            return None
        if (name, python) not in self.memo:
            fn = self.mod.defs[name]
            if fn.decorators:
                self.memo[name, python] = "is decorated"
            else:
                local = _bound_in(fn.body) | set(_params(fn))
                self.memo[name, python] = self.why_not(fn.body, local, seen | {name}, python)
        return self.memo[name, python]

    def expr_why_not(self, arg: cst.BaseExpression) -> str | None:
        """Why the map's function (a lambda or a module-level function) is not element-wise, or None."""
        if isinstance(arg, cst.Lambda):
            local = {p.name.value for p in [*arg.params.params, *arg.params.posonly_params]}
            return self.why_not(arg.body, local)
        if isinstance(arg, cst.Name) and arg.value in self.mod.defs:
            return self.fn_why_not(arg.value)
        return "is not a lambda or a module-level function"


class _StatementIndex:
    """Where each statement of a module sits: its block and place in it, the line holding each small
    statement, the compound statement owning each indented block."""

    def __init__(self, tree: cst.Module):
        self.statement: dict[int, cst.SimpleStatementLine] = {}  # id(small statement) -> its line
        self.place: dict[int, tuple[cst.Module | cst.IndentedBlock, int]] = {}
        self.holder: dict[int, cst.CSTNode] = {}  # id(indented block) -> the statement it is the body of
        for node in walk(tree):
            if isinstance(node, (cst.Module, cst.IndentedBlock)):
                for i, stmt in enumerate(node.body):
                    self.place[id(stmt)] = (node, i)
                    if isinstance(stmt, cst.SimpleStatementLine):
                        self.statement.update({id(small): stmt for small in stmt.body})
            elif isinstance(node, cst.BaseCompoundStatement) and isinstance(node.body, cst.IndentedBlock):
                self.holder[id(node.body)] = node

    def line_of(self, small: cst.BaseSmallStatement) -> cst.SimpleStatementLine | None:
        """The line holding ``small`` when it holds nothing else."""
        line = self.statement.get(id(small))
        return line if line is not None and len(line.body) == 1 else None

    def unit(self, small: cst.BaseSmallStatement) -> cst.BaseStatement | None:
        """The statement that moves with ``small``: the ``if`` (no else) holding only its line (``if
        training: ds = ds.shuffle(n)``), else its line; None when the line holds more."""
        line = self.line_of(small)
        if line is None:
            return None
        block, _ = self.place[id(line)]
        owner = self.holder.get(id(block))
        if isinstance(owner, cst.If) and owner.orelse is None and len(block.body) == 1:
            return owner
        return line


def _moved(
    original: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement], moves: dict[int, int]
) -> list[cst.BaseStatement]:
    """``updated`` (a block's statements, one for one with ``original``) with each statement whose
    original is a key of ``moves`` taken out and put after the statement whose original's id is its
    value."""
    after: dict[int, list[cst.BaseStatement]] = {}
    for o, u in zip(original, updated, strict=True):
        if id(o) in moves:
            after.setdefault(moves[id(o)], []).append(u)
    out: list[cst.BaseStatement] = []
    for o, u in zip(original, updated, strict=True):
        if id(o) not in moves:
            out += [u, *after.get(id(o), [])]
    return out


def _params(fn: cst.FunctionDef) -> list[str]:
    ps = fn.params
    out = [p.name.value for p in [*ps.posonly_params, *ps.params, *ps.kwonly_params]]
    return out + [s.name.value for s in (ps.star_arg, ps.star_kwarg) if isinstance(s, cst.Param)]


@dataclass(frozen=True)
class _Split:
    """A map function cut in two: ``prefix`` (element-wise, deterministic) then ``rest`` (the random part)."""

    fn: cst.FunctionDef
    end: int  # index in the body of the first statement of the rest
    passed: tuple[str, ...]  # what the prefix returns and the rest takes, in this order
    stop: str  # why the prefix ends there


def _plain_assign(stmt: cst.BaseStatement) -> bool:
    """Only assignments to plain names (``x = ...``, ``x, y = ...``, ``x += ...``, ``x: T = ...``)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, cst.Assign):
            if any(_target_names(t.target) is None for t in s.targets):
                return False
        elif isinstance(s, (cst.AugAssign, cst.AnnAssign)):
            if not isinstance(s.target, cst.Name) or (isinstance(s, cst.AnnAssign) and s.value is None):
                return False
        else:
            return False
    return True


def _assigned(stmt: cst.BaseStatement) -> list[tuple[str, cst.BaseExpression]]:
    """(name, value) for each name a plain assignment binds (the whole value for an unpacking)."""
    out: list[tuple[str, cst.BaseExpression]] = []
    assert isinstance(stmt, cst.SimpleStatementLine)
    for s in stmt.body:
        if isinstance(s, cst.Assign):
            out += [(n, s.value) for t in s.targets for n in _target_names(t.target) or []]
        elif isinstance(s, (cst.AugAssign, cst.AnnAssign)) and isinstance(s.target, cst.Name):
            assert s.value is not None
            out.append((s.target.value, s.value))
    return out


def plan_split(
    ew: _ElementWise, tf: str | None, fn: cst.FunctionDef, line: Callable[[cst.CSTNode], int]
) -> tuple[_Split | None, str]:
    """Where ``fn`` (a module-level map function that draws random numbers) can be cut after a
    deterministic, element-wise start, or why not."""
    name = fn.name.value
    ps = fn.params
    if fn.decorators or fn.asynchronous is not None:
        return None, f"{name}() is decorated or async"
    if ps.posonly_params or ps.kwonly_params or isinstance(ps.star_arg, cst.Param) or ps.star_kwarg:
        return None, f"{name}() takes more than plain positional parameters"
    if not isinstance(fn.body, cst.IndentedBlock):
        return None, f"{name}() is a one-line function"
    params = _params(fn)
    body = list(fn.body.body)
    start = 1 if body and _is_docstring(body[0]) else 0
    local = _bound_in(fn.body) | set(params)
    # names holding tensors: the element's parts (a parameter with a default is a Python value), and
    # what tf ops made of them
    tensors = {p.name.value for p in ps.params if p.default is None}
    order: list[str] = []  # the prefix's locals, first assignment first
    end, stop = start, "ends the function"
    for i in range(start, len(body)):
        stmt = body[i]
        if not _plain_assign(stmt):
            kind = type(stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else stmt).__name__
            stop = f"is a {kind}, not an assignment (line {line(stmt)})"
            break
        why = ew.why_not(stmt, local)
        if why:
            stop = f"{why} (line {line(stmt)})"
            break
        for n, value in _assigned(stmt):
            tensor_op = tf is not None and any(
                isinstance(c, cst.Call) and (dotted(c.func) or "").split(".")[0] == tf for c in walk(value)
            )
            builtin = any(
                isinstance(c, cst.Call) and isinstance(c.func, cst.Name) and c.func.value in PURE_BUILTINS
                for c in walk(value)
            )
            if not builtin and (tensor_op or names_in(value) & tensors):
                tensors.add(n)
            else:
                tensors.discard(n)
            if n not in order:
                order.append(n)
        end = i + 1
    if end == start:
        return None, f"{name}(): its first statement {stop}: nothing deterministic to cache before it"
    rest = body[end:]
    if not rest:
        return None, f"{name}() has no return"
    live = set(_live(rest, set(params) | set(order)))
    passed: list[str] = []  # in the order the rest first reads them
    for stmt in rest:
        for node in walk(stmt):
            if isinstance(node, cst.Name) and node.value in live and node.value not in passed:
                passed.append(node.value)
    if not passed:
        return None, f"{name}(): the rest reads nothing its deterministic start computes"
    python = [n for n in passed if n not in tensors]
    if python:
        return None, (
            f"{name}(): the rest reads {', '.join(python)}, a Python value, not a tensor (one map hands "
            "the next only tensors)"
        )
    return _Split(fn, end, tuple(passed), stop), ""


def _grouped(left: list[tuple[str, int, str]]) -> list[str]:
    """``ds (lines 62, 63, 65): the pipeline already ran shuffle() ...``: one sentence per pipeline name and
    reason, with every line it holds for, in the order first met."""
    lines: dict[tuple[str, str], list[int]] = {}
    for name, line, rest in left:
        lines.setdefault((name, rest), []).append(line)
    return [
        f"{name} (line{'s' if len(at) > 1 else ''} {', '.join(map(str, at))}){rest}"
        for (name, rest), at in lines.items()
    ]


class CacheCodemod(FixCodemod):
    DESCRIPTION = ".cache() after deterministic preprocessing"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        pipes = Pipelines(tree)
        fixed = fixed_layers(tree)
        purity = _Purity(tree, fixed)
        self.ew = _ElementWise(tree, fixed)
        self.tf = aliases(tree).tf
        self.taken = names_in(tree)
        # a plan: (the chain's start, the new stages in order, the original stages' dots)
        self.plans: dict[
            int, tuple[cst.BaseExpression, list[tuple[str, cst.Call | None]], list[cst.Dot]]
        ] = {}
        self.splits: dict[str, tuple[_Split, str, str]] = {}  # function -> (its split, prefix, rest names)
        self.split_uses: Counter[str] = Counter()  # map arguments replaced, per split function
        # per plan: (what it caches, said in the reason; its warnings; the function it splits, if any)
        notes: dict[int, tuple[str, list[str], str | None]] = {}
        # id() of each assignment -> the innermost function holding it (None: module level); the names
        # of pipelines are not flow-sensitive: ``ds`` in two functions are two pipelines
        self.owner: dict[int, cst.FunctionDef | None] = owners(tree)
        owner = self.owner
        # a shuffle statement moved down past the deterministic loads it ran before (ds = ds.shuffle(n),
        # alone or under ``if training:``): id() of that statement -> (id() of the statement it goes
        # after, id() of the plan's value it serves)
        self.moves: dict[int, tuple[int, int]] = {}
        self.index = _StatementIndex(tree)
        reasons: list[str] = []
        # pipelines whose maps run inside a helper of the script's: its sentence -> "name (line n)" of each
        helped: dict[str, list[str]] = {}
        # why an assignment of a pipeline is not cached: (name, line, the rest of the sentence); the same
        # sentence for several lines of one name (ds = ds.map(...) reassigned) is said once, for them all
        alone: list[tuple[str, int, str]] = []
        # (source, map) of the first load after a shuffle of what it loads, which a cache cannot follow
        load: tuple[str, str] | None = None
        shuffled_windows = False  # a shuffled timeseries_dataset_from_array left alone
        # a pipeline no training reads (``normalized_ds = train_ds.map(...)`` only looked at with
        # ``next(iter(normalized_ds))``) is left alone, where the pipelines feeding training are known
        _, fed = feeding(tree, pipes)
        unfed = [n for n in pipes.assigns if n not in fed]
        # a name's assignments in each function apart (Kaggle's TPU starters: ``dataset = ...`` in both
        # get_training_dataset() and get_validation_dataset(), only the second caching)
        scoped = [(name, group) for name, every in pipes.assigns.items() for group in by_owner(every, owner)]
        for name, assigns in scoped:
            if name not in fed:
                continue
            # the chain itself, or what the function it calls returns (``prepare_dataset(...)``)
            chains: list[cst.Assign | cst.Return] = [*assigns]
            for b in assigns:
                chains += pipes.returned_by(b.value)
            # the function building it returns it with more stages (keras-io's seq2seq Transformer:
            # ``dataset = dataset.map(format_dataset)``, then ``return dataset.cache().shuffle(2048)...``)
            for fdef in {id(f): f for b in assigns if (f := owner.get(id(b))) is not None}.values():
                chains += [
                    r
                    for r in walk(fdef.body)
                    if isinstance(r, cst.Return)
                    and r.value is not None
                    and isinstance(root := method_chain(r.value)[0], cst.Name)
                    and root.value == name
                ]
            caching = [
                c
                for c in chains
                if c.value is not None and any(op == "cache" for op, _ in pipes.stages(c.value)[1])
            ]
            if caching:  # the script caches this pipeline itself: said once, whatever else it does
                reasons.append(
                    f"{name} already caches (line {', '.join(str(self.line(b)) for b in caching)})"
                )
                continue
            for a in assigns:
                if (helper := self._helper_maps(pipes, a.value)) is not None:
                    names_at = helped.setdefault(helper, [])
                    names_at.append(f"{name} (line {self.line(a)})")
                    continue
                source, stages = pipes.stages(a.value)
                prior: list[cst.Assign] = []
                # a shuffle statement moved below this assignment: (it, its line, the maps it then follows)
                moving: tuple[cst.BaseStatement, int, list[str]] | None = None
                kind_from: cst.Call | None = source
                start: cst.BaseExpression | None = source
                if source is None:  # ds = ds.map(...): the source is an earlier assignment of the name
                    root, _ = method_chain(a.value)
                    if not (isinstance(root, cst.Name) and root.value in pipes.names) or not stages:
                        continue
                    # the assignments above this one that built what it reads (a later one has not run
                    # yet), through other names too: ids = from_tensor_slices(...); seqs = ids.batch(51)
                    prior = self._upstream(pipes, root.value, self.line(a), a)
                    kind_from = next((c for b in prior if (c := pipes.stages(b.value)[0]) is not None), None)
                    if kind_from is None:
                        continue
                    # what the earlier assignments already do to the elements: a cache after a shuffle
                    # (or a random map, or any stage that is not per element and deterministic) would
                    # replay one order, one draw, every epoch
                    done_before = [
                        (op, b, why)
                        for b in prior
                        for op, c in pipes.stages(b.value)[1]
                        if (why := self._replayed(op, c, purity)) is not None
                    ]
                    moving = self._shuffle_moved(pipes, name, a, prior, purity) if done_before else None
                    if done_before and moving is None:
                        op, b, why = done_before[0]
                        # the paths shuffled, then loaded: the load could come first (nothing but the
                        # shuffle ran before it, and it is the first thing this assignment does)
                        ran = {o for b in prior for o, _ in pipes.stages(b.value)[1]}
                        if (
                            load is None
                            and ran == {"shuffle"}
                            and stages[0][0] == "map"
                            and stages[0][1].args
                            and not purity.fn_random(stages[0][1].args[0].value)  # random: no advice
                        ):
                            code = cst.Module([]).code_for_node(stages[0][1].args[0].value)
                            load = (f"{source_kind(kind_from)}()", f"map({code})")
                        alone.append(
                            (
                                name,
                                self.line(a),
                                f": the pipeline already ran {op}() at line {self.line(b)}{why}: a cache "
                                "after it would replay it every epoch",
                            )
                        )
                        continue
                    start = root
                line = self.line(a)
                kind = source_kind(kind_from)
                if kind in COMBINATORS and kind_from is not None:
                    # Dataset.zip((a, b)) of the script's own pipelines: what they already did comes first
                    replayed, kind_in = self._combined(pipes, kind_from, a, purity)
                    if replayed:
                        at = "" if kind_from is source else f" (line {self.line(kind_from)})"
                        alone.append(
                            (
                                name,
                                line,
                                f": {kind}(){at} reads {replayed}: a cache after it would replay that every epoch",
                            )
                        )
                        continue
                    kind = kind_in or kind
                if kind not in IN_MEMORY_SOURCES:
                    alone.append(
                        (
                            name,
                            line,
                            f" reads {kind}(): tfdoctor cannot tell whether the decoded data fits in memory "
                            "(cache(filename) caches to disk)",
                        )
                    )
                    continue
                # a Keras utility whose elements are its own work (windows gathered from an array):
                # worth caching as it comes, unless it shuffles them, when a cache anywhere after it
                # would replay the first epoch's order
                own_work = kind in SELF_MAPPING_SOURCES
                if own_work and kind_from is not None:
                    positional = [x for x in kind_from.args if x.keyword is None and not x.star]
                    given = kwarg(kind_from, "shuffle")
                    shuffle = (
                        given.value
                        if given is not None
                        else positional[6].value
                        if len(positional) > 6
                        else None
                    )
                    if shuffle is not None and not (
                        isinstance(shuffle, cst.Name) and shuffle.value in ("False", "None")
                    ):
                        # Keras draws one window order when the dataset is made, then shuffles within
                        # batch_size × 8 windows every epoch, before its own batch(): a cache after
                        # the batches would replay the first epoch's
                        alone.append(
                            (
                                name,
                                line,
                                f": {kind}(shuffle=...) reshuffles its windows every epoch (within batch_size × "
                                "8 of them, inside the utility, before it batches): a cache after its batches "
                                "would replay one epoch's order",
                            )
                        )
                        shuffled_windows = True
                        continue
                det: list[tuple[str, cst.Call]] = []
                shuffled = False
                split: tuple[int, cst.Call, _Split] | None = None
                why_stop = "the end of the pipeline"
                cut = 0
                for i, (op, call) in enumerate(stages):
                    if op == "shuffle":
                        shuffled = True
                        continue
                    if op in DETERMINISTIC_OPS and call.args:
                        fn = call.args[0].value
                        why = purity.fn_random(fn)
                        if why == "":
                            # moved before a shuffle only when provably per element (see _ElementWise)
                            hold = None
                            if shuffled and op == "filter":
                                hold = "it changes which elements the shuffle buffer holds"
                            elif shuffled:
                                hold = self.ew.expr_why_not(fn)
                            if hold:
                                why_stop = f"{op}() after shuffle(), which it cannot move before: {hold}"
                                break
                            det.append((op, call))
                            cut = i + 1
                            continue
                        if why and op == "map" and isinstance(fn, cst.Name) and fn.value in purity.top:
                            plan, how = self._split(fn.value, purity)
                            if plan is not None:
                                split = (i, call, plan)
                                cut = i + 1
                                break
                            why_stop = f"{op}() draws random numbers ({why}) and is not split: {how}"
                        else:
                            why_stop = (
                                f"{op}() draws random numbers ({why})"
                                if why
                                else f"{op}() calls a function tfdoctor cannot inspect"
                            )
                    else:
                        why_stop = f"{op}()"
                    break
                if not any(op == "map" for op, _ in det) and split is None and not own_work:
                    alone.append(
                        (name, line, f": no deterministic map before {why_stop}: nothing worth caching")
                    )
                    continue
                before: list[tuple[str, cst.Call | None]] = [s for s in stages[:cut] if s[0] != "shuffle"]
                moved: list[tuple[str, cst.Call | None]] = [s for s in stages[:cut] if s[0] == "shuffle"]
                after: list[tuple[str, cst.Call | None]] = list(stages[cut:])
                cached = ", ".join(f"{op}()" for op, _ in before) or f"{kind}()"
                split_fn: str | None = None
                if split is not None:
                    _, call, plan = split
                    fname = split_fn = plan.fn.name.value
                    _, pre, rest = self.splits[fname]
                    self.split_uses[fname] += 1
                    before[-1] = ("map", _with_fn(call, pre))
                    after.insert(0, ("map", _with_fn(call, rest)))
                    cached = (
                        ", ".join(f"{op}()" for op, _ in before[:-1])
                        + f"{', ' if len(before) > 1 else ''}map({pre})"
                    )
                new_order = [*before, ("cache", None), *moved, *after]
                assert start is not None
                dots = [c.func.dot for _, c in stages if isinstance(c.func, cst.Attribute)]
                # one cache a pipeline: this one, after more of its work, replaces a cache planned at an
                # assignment above that builds what it reads (ds = ds.map(load); ds = ds.map(set_shapes))
                for b in prior:
                    if id(b.value) in self.plans and owner.get(id(b)) is owner.get(id(a)):
                        del self.plans[id(b.value)]
                        self.moves = {k: v for k, v in self.moves.items() if v[1] != id(b.value)}
                        if (gone := notes.pop(id(b.value))[2]) is not None:
                            self.split_uses[gone] -= 1
                            if not self.split_uses[gone]:
                                del self.split_uses[gone]
                self.plans[id(a.value)] = (start, new_order, dots)
                warns: list[str] = []
                if moving is not None:
                    shuffle_stmt, shuffle_line, maps = moving
                    self.moves[id(shuffle_stmt)] = (id(self.index.statement[id(a)]), id(a.value))
                    cached = ", ".join(maps)
                    warns.append(
                        f"line {shuffle_line}: the shuffle moved below the cache at line {line}, after "
                        f"{cached}: these are element-wise and deterministic (each output depends only on its "
                        "own element: no random draw, no state, the Python a numpy_function / py_function runs "
                        "included), so it permutes the same elements and still reshuffles every epoch; its "
                        "buffer now holds the decoded elements the cache holds"
                    )
                if moved:
                    warns.append(
                        f"line {line}: shuffle() moved after cache(): the maps it now follows are element-wise and "
                        "deterministic (each output depends only on its own element: TensorFlow ops with no random "
                        "draw, no variable or Python state), so the shuffle permutes the same elements, and from "
                        "the cache it still reshuffles every epoch"
                    )
                if own_work:
                    warns.append(
                        f"line {line}: {kind}() makes each window a copy of its rows: the cache holds every "
                        "window, about sequence_length / sequence_stride times the array's size: watch memory "
                        "on long series"
                    )
                else:
                    warns.append(
                        f"line {line}: the source is in memory ({kind}); the cache holds the decoded elements, "
                        "which may be several times larger (uint8 → float32 is 4×): watch memory on big datasets"
                    )
                below = f", the shuffle of line {moving[1]} moved below it" if moving is not None else ""
                notes[id(a.value)] = (
                    f"cache() after {cached} of {name} (line {line}){below}",
                    warns,
                    split_fn,
                )
        for reason, warns, _ in notes.values():
            reasons.append(reason)
            for w in warns:
                self.warn(w)
        reasons += _grouped(alone)
        reasons += [f"{', '.join(names)}{said}" for said, names in helped.items()]
        if not self.plans:
            advice = (
                "; advice: to cache the windows, make them unshuffled and unbatched "
                "(shuffle=False, batch_size=None), then .cache().shuffle(<number of windows>).batch(<batch "
                "size>): every epoch a full reshuffle, where the utility keeps one order and reshuffles "
                "locally (a change of the data order: not applied)"
                if shuffled_windows
                else f"; advice: where {load[1]} is deterministic (the same output for the same element "
                "every epoch), run it before shuffle() and cache() after it: "
                f"{load[0]} → {load[1]} → cache() → shuffle() → the random maps → batch(); the shuffle "
                "buffer then holds decoded elements (not applied: tfdoctor moves a shuffle statement only below "
                "maps it can show element-wise and deterministic, from a shuffle alone in its statement)"
                if load is not None
                else ""
            )
            left = (
                f" (left alone: {', '.join(unfed)}, which no training or evaluation reads)" if unfed else ""
            )
            raise SkipFile(
                ("; ".join(reasons) or "no tf.data pipeline with an in-memory source in the script")
                + left
                + advice
            )
        self.summary = "; ".join(r for r in reasons if r.startswith("cache()"))
        if unfed:
            self.warn(f"left alone: {', '.join(unfed)}, which no training or evaluation reads")
        # harness-only (not in the patch): the trial's run fills the cache before its first step, so
        # the timed steps read it as every epoch after the first does (see capture/child/hooks.py)
        self.switches = {CACHE_FILL_SWITCH: "1"}
        self.warn(
            "measured with the cache filled before the timed steps (the speed from the second epoch on; "
            "a run's first epoch fills it at about the old speed)"
        )
        new = super().transform_module_impl(tree)
        return self._add_split_functions(new) if self.split_uses else new

    def _shuffle_moved(
        self,
        pipes: Pipelines,
        name: str,
        a: cst.Assign,
        prior: list[cst.Assign],
        purity: _Purity,
    ) -> tuple[cst.BaseStatement, int, list[str]] | None:
        """The shuffle statement that may move down after ``a`` so that a cache can follow ``a``'s loads,
        with its line and the maps it then follows (``map(load)``); None when the pipeline does not have
        that shape. The shape (a user repository's loader): ``ds = ds.shuffle(n)`` alone in its statement
        (or alone under an ``if`` with no else), the only thing before it that a cache would replay; then,
        in the same block, only statements ``ds = ds.map(f)`` down to ``a``, every ``f`` deterministic and
        element-wise (each output depends only on its own element), so that the shuffle after them
        permutes the same elements."""
        shuffles = [b for b in prior if any(op == "shuffle" for op, _ in pipes.stages(b.value)[1])]
        if len(shuffles) != 1:
            return None
        b = shuffles[0]
        source, shuffle = pipes.stages(b.value)
        root, _ = method_chain(b.value)
        targets = [t.target for t in b.targets]
        if (
            source is not None
            or [op for op, _ in shuffle] != ["shuffle"]
            or not (isinstance(root, cst.Name) and root.value == name)
            or not (len(targets) == 1 and isinstance(targets[0], cst.Name) and targets[0].value == name)
        ):
            return None
        if any(
            self._replayed(op, c, purity) is not None
            for p in prior
            if p is not b
            for op, c in pipes.stages(p.value)[1]
        ):
            return None
        unit, line = self.index.unit(b), self.index.line_of(a)
        if unit is None or line is None:
            return None
        (block, i), (block_a, j) = self.index.place[id(unit)], self.index.place[id(line)]
        if block is not block_a or j <= i:
            return None
        reads = set().union(*(names_read(x.value) for x in shuffle[0][1].args))
        if isinstance(unit, cst.If):
            reads |= names_read(unit.test)
        if name in reads:  # shuffle(ds.cardinality()): read where it stands
            return None
        maps: list[str] = []
        for stmt in block.body[i + 1 : j + 1]:
            small = (
                stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            )
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                return None
            target, (src, ops) = small.targets[0].target, pipes.stages(small.value)
            head, _ = method_chain(small.value)
            if (
                not (isinstance(target, cst.Name) and target.value == name)
                or not (isinstance(head, cst.Name) and head.value == name)
                or src is not None
                or not ops
            ):
                return None
            for op, c in ops:
                fn = c.args[0].value if c.args else None
                if op != "map" or fn is None or purity.fn_random(fn) != "" or self.ew.expr_why_not(fn):
                    return None
                maps.append(f"map({cst.Module([]).code_for_node(fn)})")
        return unit, self.line(b), maps

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if not any(id(s) in self.moves for s in original_node.body):
            return updated_node
        moves = {k: v[0] for k, v in self.moves.items()}
        return updated_node.with_changes(body=_moved(original_node.body, updated_node.body, moves))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not any(id(s) in self.moves for s in original_node.body):
            return updated_node
        moves = {k: v[0] for k, v in self.moves.items()}
        return updated_node.with_changes(body=_moved(original_node.body, updated_node.body, moves))

    def _helper_maps(self, pipes: Pipelines, value: cst.BaseExpression) -> str | None:
        """Why a pipeline made by a helper of the script's that transforms the dataset it is given
        (TensorFlow's data augmentation tutorial: ``train_ds = prepare(train_ds, shuffle=True, augment=True)``,
        whose ``ds = ds.map(...)`` resizes) gets no cache here, where that helper maps it; None otherwise."""
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return None
        if pipes.transformed(value) is None:
            return None
        fname = value.func.value
        rets = pipes.transformers[fname][2]
        values = [
            b.value for r in rets for b in (*pipes.built_by(r), r) if isinstance(b, (cst.Assign, cst.Return))
        ]
        maps = [c for v in values if v is not None for op, c in pipes.stages(v)[1] if op == "map"]
        if not maps:
            return None
        where = ", ".join(f"line {self.line(c)}" for c in maps)
        return (
            f": the maps run inside {fname}() ({where}), a helper every pipeline it is given goes through: "
            f"tfdoctor does not place a cache inside a shared helper; where the first map is deterministic and "
            f"the source in memory, .cache() right after it (before any shuffle or random map) serves it from "
            "the second epoch on"
        )

    def _upstream(
        self, pipes: Pipelines, name: str, line: int, skip: cst.Assign, seen: frozenset[str] = frozenset()
    ) -> list[cst.Assign]:
        """The assignments above ``line`` that built the dataset ``name`` reads, source first: those of
        ``name`` itself and, when none of them starts from a source, those of the name they read."""
        # Python's scopes: the name's assignments in the function of ``skip`` where it has any (the same
        # name in another function is another pipeline), else the module's
        every = [b for b in pipes.assigns.get(name, []) if b is not skip and self.line(b) < line]
        scope = self.owner.get(id(skip))
        own = [b for b in every if self.owner.get(id(b)) is scope] or [
            b for b in every if self.owner.get(id(b)) is None
        ]
        own = own or every
        if not own or any(pipes.stages(b.value)[0] is not None for b in own):
            return own
        first = min(own, key=self.line)
        root, _ = method_chain(first.value)
        if isinstance(root, cst.Name) and root.value in pipes.names and root.value not in seen | {name}:
            return [*self._upstream(pipes, root.value, self.line(first), first, seen | {name}), *own]
        return own

    def _combined(
        self, pipes: Pipelines, call: cst.Call, skip: cst.Assign, purity: _Purity
    ) -> tuple[str | None, str | None]:
        """A source combining pipelines of the script's (keras-io's MixUp: ``train_ds =
        tf.data.Dataset.zip((train_ds_one, train_ds_two))``, each one shuffled and batched, then a random
        ``map(mix_up)``): (what one of them already ran that a cache after them would replay, e.g.
        "train_ds_one (line 55), which already ran shuffle()", or None; the kind of their sources when
        every one is an in-memory source, else None)."""
        line = self.line(call)
        inputs = pipes.read_by(call)
        kinds: set[str | None] = set()
        for n in inputs:
            prior = self._upstream(pipes, n, line, skip)
            for b in prior:
                for op, c in pipes.stages(b.value)[1]:
                    if (why := self._replayed(op, c, purity)) is not None:
                        return f"{n} (line {self.line(b)}), which already ran {op}(){why}", None
            kinds.add(
                next((source_kind(s) for b in prior if (s := pipes.stages(b.value)[0]) is not None), None)
            )
        kind = kinds.pop() if len(kinds) == 1 else None
        ok = inputs and kind in IN_MEMORY_SOURCES and kind not in SELF_MAPPING_SOURCES
        return None, kind if ok else None

    def _replayed(self, op: str, call: cst.Call, purity: _Purity) -> str | None:
        """Why a stage an earlier assignment ran may not come before the cache ("" for "it is not per
        element and deterministic"), or None when it may (a deterministic map/filter/flat_map, shard, take, skip, batch, window)."""
        if op in ("shard", "take", "skip", "batch", "padded_batch", "unbatch", "prefetch", "window"):
            return None  # the same elements in the same order every epoch (a shuffle before is caught itself)
        if (op in DETERMINISTIC_OPS or op == "flat_map") and call.args:
            why = purity.fn_random(call.args[0].value)
            if why == "":
                return None
            return f" (it draws random numbers: {why})" if why else " (a function tfdoctor cannot inspect)"
        return ""

    def _split(self, fname: str, purity: _Purity) -> tuple[_Split | None, str]:
        """The split of the module-level map function ``fname`` (made once, shared by its maps)."""
        if fname in self.splits:
            return self.splits[fname][0], ""
        plan, how = plan_split(self.ew, self.tf, purity.defs[fname], self.line)
        if plan is None:
            return None, how
        pre, rest = self._fresh(f"{fname}_prefix"), self._fresh(f"{fname}_rest")
        self.splits[fname] = (plan, pre, rest)
        assert isinstance(plan.fn.body, cst.IndentedBlock)
        body = list(plan.fn.body.body)
        first = 1 if body and _is_docstring(body[0]) else 0
        passed = ", ".join(plan.passed)
        a, b = self.line(body[first]), self.line(body[plan.end - 1])
        lines = f"line {a}" if a == b else f"lines {a}-{b}"
        self.warn(
            f"{fname}() (line {self.line(plan.fn)}) split in two, same results: {pre}() runs {lines} "
            "(element-wise and deterministic: TensorFlow ops on its arguments, no random draw, no state) "
            f"before the cache and returns {passed}; {rest}({passed}) runs the rest after it, every epoch: "
            f"its first statement {plan.stop}"
        )
        return plan, ""

    def _fresh(self, name: str) -> str:
        out = name
        i = 2
        while out in self.taken:
            out = f"{name}_{i}"
            i += 1
        self.taken.add(out)
        return out

    def _add_split_functions(self, tree: cst.Module) -> cst.Module:
        """``<f>_prefix`` and ``<f>_rest`` after each split function ``f``; ``f`` itself is replaced by them
        when the maps were its only use."""
        body: list[cst.BaseStatement] = []
        blank = [cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]
        for stmt in tree.body:
            fname = stmt.name.value if isinstance(stmt, cst.FunctionDef) else None
            if fname is None or fname not in self.split_uses:
                body.append(stmt)
                continue
            plan, pre, rest = self.splits[fname]
            pre_fn, rest_fn = _split_functions(plan, pre, rest)
            if fname in names_read(tree):  # still used elsewhere: kept, the two go after it
                body += [stmt, pre_fn.with_changes(leading_lines=blank)]
            else:
                body.append(pre_fn.with_changes(leading_lines=stmt.leading_lines))
            body.append(rest_fn.with_changes(leading_lines=blank))
        return tree.with_changes(body=body)

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        plan = self.plans.get(id(original_node.value))
        if plan is None:
            return updated_node
        source, order, dots = plan
        outer = original_node.value
        cur: cst.BaseExpression = source
        # each position of the chain keeps the layout (the dot's whitespace) the original had there
        last_dot = dots[0] if dots else cst.Dot()
        for i, (op, call) in enumerate(order):
            dot = dots[i] if i < len(dots) else last_dot
            if call is None:
                cur = cst.Call(func=cst.Attribute(value=cur, attr=cst.Name(op), dot=dot), args=[])
            else:
                assert isinstance(call.func, cst.Attribute)
                cur = call.with_changes(func=call.func.with_changes(value=cur, dot=dot), lpar=[], rpar=[])
            last_dot = dot
        cur = cur.with_changes(lpar=outer.lpar, rpar=outer.rpar)  # type: ignore[attr-defined]
        return updated_node.with_changes(value=cur)


def _with_fn(call: cst.Call, name: str) -> cst.Call:
    """The map ``call`` with ``name`` as its function, its other arguments (num_parallel_calls ...) kept."""
    first = call.args[0]
    return call.with_changes(args=[first.with_changes(value=cst.Name(name)), *call.args[1:]])


def _split_functions(plan: _Split, pre: str, rest: str) -> tuple[cst.FunctionDef, cst.FunctionDef]:
    fn = plan.fn
    block = fn.body
    assert isinstance(block, cst.IndentedBlock)
    stmts = list(block.body)
    start = 1 if stmts and _is_docstring(stmts[0]) else 0
    label = fn.name.value
    passed = ", ".join(plan.passed)
    pre_doc = cst.parse_statement(
        f'"""Added by tfdoctor (tfdata-cache): the deterministic start of {label}(), before the cache."""\n'
    )
    rest_doc = cst.parse_statement(
        f'"""Added by tfdoctor (tfdata-cache): the rest of {label}(), after the cache (every epoch)."""\n'
    )
    ret = cst.parse_statement(f"return {passed}\n")
    pre_fn = fn.with_changes(
        name=cst.Name(pre),
        returns=None,
        body=block.with_changes(body=[pre_doc, *stmts[start : plan.end], ret]),
    )
    first_rest = stmts[plan.end]
    comments = [ln for ln in getattr(first_rest, "leading_lines", ()) if ln.comment is not None]
    rest_body = [rest_doc, first_rest.with_changes(leading_lines=comments), *stmts[plan.end + 1 :]]
    anns = {p.name.value: p.annotation for p in fn.params.params}
    rest_fn = fn.with_changes(
        name=cst.Name(rest),
        params=cst.Parameters(params=[cst.Param(cst.Name(p), annotation=anns.get(p)) for p in plan.passed]),
        body=block.with_changes(body=rest_body),
    )
    return pre_fn, rest_fn


class Cache(Fix):
    """Do the deterministic preprocessing once: ``.cache()`` after it, before shuffle and augmentation.

    What it changes: in a tf.data pipeline built from an in-memory source (``from_tensor_slices``,
    ``from_tensors``, ``range``, ``from_generator``), ``.cache()`` goes after the leading run of deterministic
    ``map``/``filter`` steps. Keras's ``timeseries_dataset_from_array`` is such a source whose windows are
    work of their own (a gather map inside it): it is cached as it comes, unless it shuffles them
    (``shuffle=True``: Keras reshuffles the windows within ``batch_size × 8`` every epoch before it batches,
    so a cache after it would replay one order; caching them unshuffled and unbatched, then
    ``.cache().shuffle(...).batch(...)``, changes the data order: advice, not applied). A map is deterministic
    when its function (a lambda or a module-level function, followed through the functions it calls) draws no
    random numbers (``tf.random``, ``tf.image.random_*``, ``np.random``, ``rng.*``) and calls no object whose
    randomness its name cannot tell (``augmenter(x)``: a Keras layer or model may hold ``RandomFlip``). The
    Python function a ``tf.numpy_function`` / ``tf.py_function`` runs is followed the same way (its
    ``np.random`` draw would otherwise be frozen by the cache); one that is not the script's cannot be told. A
    Keras lookup or rescaling layer the script makes once at module level (``StringLookup``,
    ``IntegerLookup``, ``TextVectorization``, ``Normalization``, ``Rescaling``, ``Resizing``, ``CenterCrop``,
    ``Hashing``, ``CategoryEncoding``, ``Discretization``) is followed: deterministic and element-wise, when
    nothing adapts it after the first statement holding a ``.map(`` (keras-io's OCR maps each label through
    ``char_to_num = layers.StringLookup(...)`` while it decodes the PNGs: now cached). Only the pipelines
    training reads are looked at (what ``fit`` trains and validates on, ``evaluate``, ``predict``, and the
    pipelines those are built from, where they are known): one the script only looks at
    (``next(iter(normalized_ds))``) is left alone and named. One cache a pipeline: where a pipeline is built
    over several assignments in one function (``ds = ds.map(load)``, then ``ds = ds.map(set_shapes)``), the
    cache goes after the last one that qualifies, not after each (two caches held the data twice). Where a
    pipeline is left alone, the reason is said once per pipeline with every line it holds for. A shuffle of
    the paths in a statement of its own before the loads (``if training: ds = ds.shuffle(n)``, then ``ds =
    ds.map(load)``, ``ds = ds.map(set_shapes)``: a user repository's loader) moves below them, the cache after
    the last of them, when the shuffle is alone in its statement (or alone under an ``if`` with no else),
    reads nothing of the pipeline, is the only thing a cache would replay, and only ``ds = ds.map(f)``
    statements of the same block follow it down to the cache, every ``f`` element-wise and deterministic
    (below); otherwise, where only a shuffle ran before a load map, the advice is that reorder (``map(load) →
    cache() → shuffle()``), not applied.

    Splitting a map: when the first map that draws random numbers is a module-level function whose
    body starts with element-wise, deterministic assignments (``image = tf.cast(image, tf.float32) /
    255.0``) and draws later (``image = tf.image.random_flip_left_right(image)``), it is split at the
    first statement that is not such an assignment into ``<f>_prefix`` (the original parameters; returns
    what the rest reads) and ``<f>_rest`` (takes those, runs the remaining statements): the same
    function composed, so the same results. The pipeline becomes ``.map(<f>_prefix).cache()...
    .map(<f>_rest)``, each map keeping the original's other arguments (``num_parallel_calls`` is
    ``tfdata-parallel-map``'s concern: tried before this fix, it parallelises both maps whichever runs
    first). ``<f>`` itself is replaced by the two when the map was its only use, else kept. Not split:
    a lambda, a decorated function or one with ``*args``/keyword-only parameters, a function random from
    its first statement, or one whose rest reads a Python value (not a tensor) of the start.

    Moving a shuffle: a ``shuffle`` before the cached maps moves after the cache, so the cache sits before it
    and the shuffle still reshuffles every epoch. This is done only when every map it moves past is
    element-wise and deterministic, decided from the source: each output depends only on its own element
    (calls only TensorFlow/Keras/numpy/math functions with no ``random``, ``Variable``, ``dropout``,
    ``py_function``, ``print`` ... in their name, safe builtins, or module-level functions passing the same
    test; reads only its arguments, its locals and module-level names bound once, not from a ``tf.Variable``
    or a random generator; calls no method of a value, a Keras layer or a ``tf.random.Generator``, but
    ``set_shape`` / ``get_shape`` on a tensor it holds). The Python function a ``tf.numpy_function`` /
    ``py_function`` runs must be the script's and pass the same test as Python run every call: methods of its
    own locals and of what it makes allowed (``path.decode()``, ``Image.open(p).convert("L")``), besides
    TensorFlow/numpy the file readers and decoders of ``PIL``, ``cv2``, ``imageio``, ``skimage``, ``librosa``,
    ``soundfile``, ``pydicom``, ``nibabel``, ``SimpleITK``, ``tifffile`` and ``open()`` (the same
    array for the same file), no write into anything it did not make (``CACHE[key] = x`` keeps state between
    calls). Then mapping before or after a permutation yields the same elements. A ``filter`` after a shuffle
    is never moved before it (it would change what the shuffle buffer holds).

    A pipeline built over several assignments (``ds = ds.shuffle(...).map(...)``) is followed to the
    name's in-memory source; the cache may follow what the earlier assignments ran only when each stage
    is a deterministic map/filter/flat_map, ``shard``, ``take``, ``skip``, ``batch`` or ``window``: after a shuffle, a random map or any
    other stage the cache would replay one order, one draw, every epoch. A source combining the script's
    own pipelines (``tf.data.Dataset.zip((a, b))``, ``sample_from_datasets``, ``choose_from_datasets``) is
    followed into each of them the same way: in memory when every one reads an in-memory source, and
    never cached after when one of them already shuffled or ran a random map (keras-io's MixUp zips two
    shuffled pipelines: a cache after the zip would replay one epoch's pairing).

    Fits in memory? Decided statically: only in-memory sources are cached (the raw data already fits;
    a warning says the decoded copy may be a few times larger). File sources (TFRecord, text, images
    from a directory) are skipped with the reason: cache them to disk with ``cache(filename)`` yourself.
    A pipeline whose maps run inside a helper of the script's that transforms the dataset it is given
    (``train_ds = prepare(train_ds, shuffle=True, augment=True)``, TensorFlow's data augmentation
    tutorial) is left alone, the skip naming the helper, its maps' lines and where a cache would go: the
    helper serves every pipeline it is given.

    Measured in its steady state: the cache pays from the second epoch on (the first one fills it),
    and only when an epoch reads the whole dataset (a partially read cache is discarded). A trial of
    ~30 steps would time the epoch that fills it, so the trial's run has a run-time switch of the
    harness (``tfdata_cache_fill``; not in the patch, which holds only the ``.cache()`` edit): before
    the first step, each in-memory cache of the pipelines the script iterates is read once to its end,
    through the cache stage's own dataset, whose cache every iterator built over it shares
    (``distribute_datasets_from_function``'s and ``experimental_distribute_dataset``'s included). The
    timed steps then read a full cache, as from the second epoch. The filling is bounded: half the time
    left to the warm-up's deadline, half the available memory, 10 million elements. The facts say what
    was filled (``tfdata_cache_fill``: caches, elements, seconds) or why not; a trial whose caches were
    not all filled (over a bound, a ``repeat`` before the cache, none found) is "not applied ... not
    measured", never a measured rejection. The switch is a measurement condition: the reference's paired
    runs are measured under it too (a cache the script already had is full on both sides), and once
    kept it stays on for the states measured after it. Not measured: the first epoch, which
    fills the cache at about the old speed; and a loop that never finishes an epoch (it breaks early, a
    ``take`` after the cache) never gets the cache's speed, though the trial times it.

    On examples/corpus/mirrored_ctl.py (188 steps an epoch; 12,000 elements filled in 0.6-0.9 s) with
    ``--fix --only tfdata-cache`` (up to 4 paired rounds) on a 2-core CPU loaded by other jobs (load
    average 1.5-3), the steady-state trial measured 1.19x [1.07x, 1.34x] (kept; the combined check
    after it then 0.90x [0.78x, 1.03x]), 1.012x [0.92x, 1.11x] and 1.078x [0.97x, 1.17x] (not
    decided); the first-epoch trial (before the switch), in the same session, 1.044x [1.009x, 1.075x]
    and 0.92x [0.69x, 1.23x]: caching the cast to float32 saves little here, within the noise.

    Rolled back when: not faster beyond the noise band, or not sane.
    """

    ID = "tfdata-cache"
    DESCRIPTION = "cache() after deterministic tf.data preprocessing"
    CODEMOD = CacheCodemod
    AFTER = ("tfdata-parallel-map",)
    PRIORITY = 35


FIX = Cache
