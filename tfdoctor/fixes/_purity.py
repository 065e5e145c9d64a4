"""Which leading statements of a function are pure and deterministic (for ``generator-cache``).

Decided statically and conservatively from the source, never by running it: a statement qualifies when it
reads only locals assigned before it, parameters that are not random sources, numpy/math, module-level
constants that nothing changes, and safe builtins; calls only numpy/math (nothing under ``random``, no
``out=``), safe builtins and array methods that only read; and changes in place only arrays it made
itself. Alongside, each value is tracked for whether it may share memory with something from outside the
call (a parameter, a global), so a cached copy of it is indistinguishable from the original.
:func:`prefix_plan` returns where the deterministic prefix ends and what it reads and returns, or why not.

A method (``cls`` given, from :func:`class_info`) may read ``self.<attr>`` for attributes its class
assigns that are not random sources, methods or properties; each becomes an argument of the prefix
(:attr:`Plan.attrs`), so the cache keys on the attribute's content. Reading ``self`` whole (passing it,
calling ``self.other()``) ends the prefix. A function nested in another (``enclosing``: the names the
enclosing functions bind) may not read those names: its prefix moves to module level, where they do not
exist.
"""

from __future__ import annotations

import inspect
import itertools
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from tfdoctor.fixes._cst import dotted, names_in, walk
from tfdoctor.fixes._cst import target_names as _target_names


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# -- what counts as pure ---------------------------------------------------------------------------------
#: builtins that neither draw random numbers nor change their arguments: name → what the result is
#: ("immutable": a number/bool/str, "new": a new object, "alias": may be (part of) an argument)
SAFE_BUILTINS: dict[str, str] = {
    "len": "immutable",
    "int": "immutable",
    "float": "immutable",
    "bool": "immutable",
    "complex": "immutable",
    "str": "immutable",
    "isinstance": "immutable",
    "all": "immutable",
    "any": "immutable",
    "divmod": "immutable",
    "range": "immutable",
    "slice": "immutable",
    "abs": "new",
    "round": "new",
    "pow": "new",
    "sum": "new",
    "min": "alias",
    "max": "alias",
    "tuple": "alias",
    "list": "alias",
    "sorted": "alias",
    "reversed": "alias",
    "zip": "alias",
    "enumerate": "alias",
}
#: ndarray methods that read their receiver only: name → (the most positional arguments that cannot be
#: ``out``, None for any number; "view" when the result shares the receiver's memory)
VIEW_METHODS: dict[str, int | None] = {
    "reshape": None,
    "transpose": None,
    "swapaxes": 2,
    "squeeze": 1,
    "ravel": 1,
    "view": 1,
    "diagonal": 3,
}
FRESH_METHODS: dict[str, int | None] = {
    "astype": 1,
    "copy": 1,
    "flatten": 1,
    "mean": 2,
    "sum": 2,
    "std": 2,
    "var": 2,
    "prod": 2,
    "cumsum": 2,
    "cumprod": 2,
    "min": 1,
    "max": 1,
    "argmin": 1,
    "argmax": 1,
    "any": 1,
    "all": 1,
    "clip": 2,
    "round": 1,
    "dot": 1,
    "take": 2,
    "repeat": 2,
    "tolist": 0,
    "item": None,
}
#: attributes of an array that are immutable values, and those that are views of it
SHAPE_ATTRS = frozenset({"shape", "ndim", "size", "dtype", "itemsize", "nbytes"})
VIEW_ATTRS = frozenset({"T", "real", "imag"})
#: numpy functions known to return new arrays (sharing no memory with their arguments); ufuncs too
NUMPY_FRESH = _words(
    "zeros zeros_like ones ones_like empty empty_like full full_like array copy arange linspace "
    "logspace geomspace eye identity pad stack concatenate vstack hstack dstack column_stack tile "
    "repeat clip where dot convolve correlate sort argsort cumsum cumprod mean sum std var prod "
    "median percentile quantile average min max amin amax round around outer einsum tensordot kron "
    "cross diff gradient histogram bincount unique searchsorted interp"
)
#: numpy names that write files or arguments, call back into Python, depend on memory layout or global
#: state: never part of a cached prefix
NUMPY_DENY = _words(
    "random testing ctypeslib f2py distutils format npyio copyto put place putmask fill_diagonal "
    "put_along_axis save savez savez_compressed savetxt load loadtxt genfromtxt fromfile tofile "
    "memmap fromiter frompyfunc vectorize apply_along_axis apply_over_axes piecewise seterr "
    "seterrcall set_printoptions setbufsize isfortran shares_memory may_share_memory byte_bounds info "
    "show_config"
)
#: methods of numpy's / Python's random generators: a parameter used with one is a random source
SAMPLING_METHODS = _words(
    "uniform integers random normal choice shuffle permutation permuted randint rand randn "
    "random_sample standard_normal binomial poisson exponential beta gamma bytes sample randrange "
    "gauss triangular lognormal multinomial dirichlet laplace logistic geometric normalvariate spawn"
)
RANDOM_NAMES = frozenset(
    {"rng", "random_state", "randomstate", "gen", "generator", "seed", "key", "rand", "prng", "rs", "rnd"}
)
STOPPERS = {
    cst.If: "an if statement",
    cst.With: "a with block",
    cst.Try: "a try block",
    cst.While: "a while loop",
    cst.FunctionDef: "a nested function",
    cst.ClassDef: "a class",
    cst.Return: "a return",
    cst.Global: "a global statement",
    cst.Nonlocal: "a nonlocal statement",
    cst.Del: "a del statement",
    cst.Raise: "a raise",
    cst.Assert: "an assert",
    cst.Import: "an import",
    cst.ImportFrom: "an import",
    cst.Break: "a break",
    cst.Continue: "a continue",
}


class _Impure(Exception):
    """The statement or expression is not provably pure and deterministic (the message says why)."""


@dataclass(frozen=True)
class Val:
    """What the analysis knows about a value.

    ``groups``: the allocations made inside the call that the value may share memory with (empty for
    immutables), or None when it may share memory with something from outside (a parameter, a global).
    ``mutable``: changing it in place cannot reach outside the call (a new array, or a number to rebind).
    ``array``: known to be a numpy array (or numpy scalar).
    """

    groups: frozenset[int] | None
    mutable: bool = False
    array: bool = False


IMMUTABLE = Val(frozenset(), mutable=True)
FOREIGN = Val(None)


def _union(vals: list[Val]) -> frozenset[int] | None:
    out: frozenset[int] = frozenset()
    for v in vals:
        if v.groups is None:
            return None
        out |= v.groups
    return out


def _merge(a: Val, b: Val) -> Val:
    groups = None if a.groups is None or b.groups is None else a.groups | b.groups
    return Val(groups, a.mutable and b.mutable, a.array and b.array)


def _slice_parts(sub: cst.Subscript) -> list[cst.BaseExpression]:
    """The index expressions of ``x[i, a:b:c]``: i, a, b, c."""
    out: list[cst.BaseExpression] = []
    for el in sub.slice:
        sl = el.slice
        if isinstance(sl, cst.Index):
            out.append(sl.value)
        elif isinstance(sl, cst.Slice):
            out += [p for p in (sl.lower, sl.upper, sl.step) if p is not None]
    return out


def _root(t: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(t, (cst.Subscript, cst.Attribute)):
        t = t.value
    return t


def _is_number(e: cst.BaseExpression, floats_only: bool = False) -> bool:
    if isinstance(e, cst.UnaryOperation):
        return _is_number(e.expression, floats_only)
    return isinstance(e, (cst.Float, cst.Imaginary)) or (not floats_only and isinstance(e, cst.Integer))


def _bound_in(node: cst.CSTNode) -> set[str]:
    """Every name a function body binds anywhere (its locals), nested scopes included (conservative)."""
    out: set[str] = set()
    for n in walk(node):
        targets: list[cst.BaseExpression] = []
        if isinstance(
            n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.Del, cst.For, cst.CompFor)
        ):
            targets.append(n.target)
        elif isinstance(n, cst.AsName) and isinstance(n.name, (cst.Name, cst.Tuple, cst.List)):
            targets.append(n.name)
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            out.add(n.name.value)
        elif isinstance(n, cst.Import):
            for a in n.names:
                out.add((a.evaluated_alias or a.evaluated_name).split(".")[0])
        elif isinstance(n, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar):
            for a in n.names:
                out.add(a.evaluated_alias or a.evaluated_name)
        for t in targets:
            out.update(_binds(t))
    return out


def _binds(t: cst.BaseExpression) -> list[str]:
    """The names a target rebinds (``x``, ``a, *b``); ``x[i]`` and ``x.y`` rebind none."""
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for el in t.elements for n in _binds(el.value)]
    if isinstance(t, cst.StarredElement):
        return _binds(t.value)
    return []


# -- the module ---------------------------------------------------------------------------------------------
def _numpy_object(path: str) -> object:
    """The numpy/math object a dotted path names, or raise _Impure."""
    import importlib

    parts = path.split(".")
    if any(p in NUMPY_DENY for p in parts[1:]):
        raise _Impure(f"calls {path} (not pure: writes, calls back or reads global state)")
    try:
        obj: object = importlib.import_module(parts[0])
        for p in parts[1:]:
            obj = getattr(obj, p)
    except (ImportError, AttributeError) as e:
        raise _Impure(f"uses {path}, which tfdoctor cannot find ({e})") from None
    return obj


_METHODS = (
    types.MethodType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.ClassMethodDescriptorType,
)


def _check_out(obj: object, path: str, call: cst.Call) -> None:
    """Raise _Impure when the call may write into an argument (``out=``, or ``out`` passed by position)."""
    import numpy as np

    if any(isinstance(a.star, str) and a.star for a in call.args):
        raise _Impure(f"calls {path} with unpacked arguments")
    positional = sum(1 for a in call.args if a.keyword is None)
    if any(a.keyword is not None and a.keyword.value == "out" for a in call.args):
        raise _Impure(f"calls {path} with out= (writes into an argument)")
    if isinstance(obj, np.ufunc):
        if positional > obj.nin:
            raise _Impure(f"calls {path} with an output argument")
        return
    self_ = getattr(obj, "__self__", None)
    if (self_ is not None and not inspect.ismodule(self_)) or isinstance(obj, _METHODS):
        raise _Impure(f"calls {path}, a method (it may change its object)")
    if not callable(obj):
        raise _Impure(f"calls {path}, which is not a function")
    if inspect.ismodule(obj) or isinstance(obj, type):
        return
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        if positional > 1:
            raise _Impure(f"calls {path}: tfdoctor cannot tell whether it writes into an argument") from None
        return
    for i, p in enumerate(sig.parameters.values()):
        if p.name == "out" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and positional > i:
            raise _Impure(f"calls {path} with an output argument")


class Module:
    """What the module binds: numpy/math imports, constants, functions; what it may change."""

    def __init__(self, tree: cst.Module):
        self.tree = tree
        self.imports: dict[str, str] = {}  # local name → "numpy", "numpy.pad", "math", ...
        self.star = False
        self.bindings: Counter[str] = Counter()
        self.globals: set[str] = set()  # declared global in some function
        self.defs: dict[str, cst.FunctionDef] = {}
        self.consts: dict[str, Val] = {}
        self.const_why: dict[str, str] = {}
        for stmt in tree.body:
            self._bind(stmt)
        for n in walk(tree):
            if isinstance(n, cst.Global):
                self.globals.update(g.name.value for g in n.names)
        for stmt in tree.body:
            if isinstance(stmt, cst.FunctionDef) and self.bindings[stmt.name.value] == 1:
                self.defs[stmt.name.value] = stmt
        self._parents: dict[int, cst.CSTNode] = {}
        for n in walk(tree):
            for c in n.children:
                self._parents[id(c)] = n
        self._mutated = self._target_roots(tree)
        for stmt in tree.body:
            self._constant(stmt)

    # bindings at module scope (not inside functions or classes)
    def _bind(self, node: cst.CSTNode) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.bindings[node.name.value] += 1
            return
        if isinstance(node, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            return
        if isinstance(node, cst.Import):
            for a in node.names:
                name = a.evaluated_name
                local = a.evaluated_alias or name.split(".")[0]
                self.bindings[local] += 1
                if name.split(".")[0] in ("numpy", "math"):
                    self.imports[local] = name if a.evaluated_alias else name.split(".")[0]
            return
        if isinstance(node, cst.ImportFrom):
            mod = dotted(node.module) if node.module is not None and not node.relative else None
            if isinstance(node.names, cst.ImportStar):
                self.star = True
                return
            for a in node.names:
                local = a.evaluated_alias or a.evaluated_name
                self.bindings[local] += 1
                if mod and mod.split(".")[0] in ("numpy", "math"):
                    self.imports[local] = f"{mod}.{a.evaluated_name}"
            return
        names: list[str] = []
        if isinstance(node, cst.AssignTarget):
            names = _target_names(node.target) or []
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name):
            names = [node.target.value]
        elif isinstance(node, cst.For):
            names = [m.value for m in walk(node.target) if isinstance(m, cst.Name)]
        elif isinstance(node, cst.AsName) and isinstance(node.name, cst.Name):
            names = [node.name.value]
        elif isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
            names = [node.target.value]
        elif isinstance(node, cst.Del):
            names = [m.value for m in walk(node.target) if isinstance(m, cst.Name)]
        for name in names:
            self.bindings[name] += 1
        for c in node.children:
            self._bind(c)

    @staticmethod
    def _target_roots(tree: cst.Module) -> set[str]:
        """Names stored into, changed in place or rebound anywhere (any scope): ``x[i] = ``, ``x += ``."""
        out: set[str] = set()
        for n in walk(tree):
            targets: list[cst.BaseExpression] = []
            if isinstance(
                n,
                (
                    cst.AssignTarget,
                    cst.AugAssign,
                    cst.AnnAssign,
                    cst.NamedExpr,
                    cst.Del,
                    cst.For,
                    cst.CompFor,
                ),
            ):
                targets.append(n.target)
            for t in targets:
                for m in walk(t):
                    if isinstance(m, (cst.Subscript, cst.Attribute)) and isinstance(_root(m), cst.Name):
                        out.add(_root(m).value)  # type: ignore[attr-defined]
                if isinstance(n, cst.AugAssign) and isinstance(t, cst.Name):
                    out.add(t.value)
        return out

    def _constant(self, stmt: cst.BaseStatement) -> None:
        if not (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1
            and isinstance(stmt.body[0].targets[0].target, cst.Name)
        ):
            return
        assign = stmt.body[0]
        name = assign.targets[0].target.value  # type: ignore[attr-defined]
        if self.bindings[name] != 1 or name in self.globals:
            self.const_why[name] = f"{name} is bound more than once or declared global"
            return
        if name in self._mutated:
            self.const_why[name] = f"{name} is changed in place somewhere in the script"
            return
        try:
            val = _Scan(self, None).expr(assign.value)
        except _Impure as e:
            self.const_why[name] = f"{name} is not a constant ({e})"
            return
        if val.groups == frozenset() and not val.array:
            self.consts[name] = IMMUTABLE
            return
        for n in walk(self.tree):
            if isinstance(n, cst.Name) and n.value == name and n is not assign.targets[0].target:
                why = self._escapes(n)
                if why:
                    self.const_why[name] = f"{name} (a mutable constant) {why}"
                    return
        self.consts[name] = FOREIGN  # a shared array: read, never owned

    def _escapes(self, node: cst.CSTNode) -> str | None:
        """Why a use of a mutable constant might change it (None: read only)."""
        cur = node
        first = self._parents.get(id(node))
        if (isinstance(first, cst.Attribute) and first.attr is node) or (
            isinstance(first, cst.Arg) and first.keyword is node
        ):
            return None  # obj.NAME, f(NAME=...): another name
        while True:
            parent = self._parents.get(id(cur))
            if parent is None:
                return "is used where tfdoctor cannot follow it"
            if isinstance(parent, cst.AugAssign) and parent.value is cur:
                return None
            if isinstance(parent, cst.Subscript) and parent.value is cur:
                cur = parent  # a view of it: where does the view go?
                continue
            if isinstance(parent, cst.Attribute) and parent.value is cur:
                attr = parent.attr.value
                if attr in SHAPE_ATTRS:
                    return None
                if attr in VIEW_ATTRS:
                    cur = parent
                    continue
                call = self._parents.get(id(parent))
                if isinstance(call, cst.Call) and call.func is parent:
                    if attr in FRESH_METHODS:
                        return None
                    if attr in VIEW_METHODS:
                        cur = call
                        continue
                return f"is used as .{attr}"
            if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison)):
                return None
            if isinstance(parent, cst.ComparisonTarget):
                return None
            if isinstance(parent, (cst.Index, cst.Slice)):
                return None  # used as an index
            if isinstance(parent, cst.Arg):
                call = self._parents.get(id(parent))
                if isinstance(call, cst.Call):
                    name = dotted(call.func)
                    path = self.resolve(call.func)
                    if path is not None:
                        try:
                            _check_out(_numpy_object(path), path, call)
                        except _Impure as e:
                            return f"is passed to a call that {e}"
                        return None
                    if name in SAFE_BUILTINS and self.bindings[name] == 0:
                        return None
                    return f"is passed to {name or 'a call'}()"
            return f"is used as a value ({type(parent).__name__})"

    def resolve(
        self, expr: cst.BaseExpression, shadow: set[str] | frozenset[str] = frozenset()
    ) -> str | None:
        """``numpy.linalg.norm`` for ``np.linalg.norm`` when the root is a numpy/math import, else None."""
        name = dotted(expr)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        if root in shadow or root not in self.imports or self.bindings[root] != 1 or root in self.globals:
            return None
        return self.imports[root] + (f".{rest}" if rest else "")

    def value(self, name: str) -> Val:
        """A module-level name read by a prefix, or raise _Impure."""
        if name in self.imports and self.bindings[name] == 1:
            path = self.imports[name]
            if any(p in NUMPY_DENY for p in path.split(".")[1:]):
                raise _Impure(f"reads {path}")
            return IMMUTABLE
        if name in self.consts:
            return self.consts[name]
        if name in self.defs:
            raise _Impure(f"uses {name}, a function of the script")
        if name in self.const_why:
            raise _Impure(f"reads {self.const_why[name]}")
        if self.bindings[name]:
            raise _Impure(f"reads {name}, which tfdoctor cannot tell is constant")
        if name in ("True", "False", "None", "Ellipsis") or name in SAFE_BUILTINS:
            return IMMUTABLE
        raise _Impure(f"reads {name}, which tfdoctor cannot tell is constant")


# -- a class ------------------------------------------------------------------------------------------------
#: a class defining one of these decides what ``self.<attr>`` reads at run time: no attribute is followed
DYNAMIC_ATTRS = frozenset({"__getattr__", "__getattribute__"})


@dataclass(frozen=True)
class ClassInfo:
    """What a module-level class of the script binds, for reading ``self.<attr>`` in a method's prefix.

    ``members``: names its body (or a base class of the script) binds by ``def`` or as a class, i.e.
    methods and properties: reading one is not a plain value. ``assigned``: attributes assigned as
    ``self.<attr> = ...`` in its methods or as plain class-level names (values tfdoctor may pass on).
    ``random``: attributes that are random sources, with why. ``dynamic``: why attribute reads are not
    plain (a ``__getattr__``), else None.
    """

    name: str
    members: frozenset[str]
    assigned: frozenset[str]
    random: dict[str, str]
    dynamic: str | None = None


def _random_name(name: str) -> bool:
    low = name.lower().lstrip("_")
    return low in RANDOM_NAMES or low.endswith("rng") or "random" in low or "seed" in low


def class_info(mod: Module, cls: cst.ClassDef) -> ClassInfo:
    """The :class:`ClassInfo` of ``cls``, its base classes defined in the script included."""
    members: set[str] = set()
    assigned: set[str] = set()
    random: dict[str, str] = {}
    dynamic: str | None = None
    classes = {c.name.value: c for c in mod.tree.body if isinstance(c, cst.ClassDef)}
    seen: set[str] = set()
    queue = [cls]
    while queue:
        c = queue.pop(0)
        if c.name.value in seen:
            continue
        seen.add(c.name.value)
        queue += [
            classes[b.value.value]
            for b in c.bases
            if isinstance(b.value, cst.Name) and b.value.value in classes
        ]
        if not isinstance(c.body, cst.IndentedBlock):
            continue
        for stmt in c.body.body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                members.add(stmt.name.value)
                if stmt.name.value in DYNAMIC_ATTRS:
                    dynamic = f"{c.name.value} defines {stmt.name.value}"
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for t in small.targets:
                            assigned.update(_target_names(t.target) or [])
                    elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        assigned.add(small.target.value)
            else:  # a class body with if/try/for: tfdoctor cannot tell what it binds
                members.update(_bound_in(stmt))
        for n in walk(c):
            if not isinstance(n, cst.FunctionDef):
                continue
            ps = n.params
            first = [*ps.posonly_params, *ps.params]
            if not first or n.decorators:
                continue
            me = first[0].name.value
            for m in walk(n.body):
                if isinstance(m, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)):
                    for node in walk(m.target):
                        if (
                            isinstance(node, cst.Attribute)
                            and isinstance(node.value, cst.Name)
                            and node.value.value == me
                        ):
                            assigned.add(node.attr.value)
                if isinstance(m, cst.Assign):
                    source = m.value.func if isinstance(m.value, cst.Call) else None
                    where = dotted(source) if source is not None else None
                    if where and any(w in where for w in ("random", "rng", "Generator", "RandomState")):
                        for target in m.targets:
                            for node in walk(target.target):
                                if (
                                    isinstance(node, cst.Attribute)
                                    and isinstance(node.value, cst.Name)
                                    and node.value.value == me
                                ):
                                    random.setdefault(node.attr.value, f"assigned {where}(...)")
                if (
                    isinstance(m, cst.Call)
                    and isinstance(m.func, cst.Attribute)
                    and isinstance(m.func.value, cst.Attribute)
                    and isinstance(m.func.value.value, cst.Name)
                    and m.func.value.value.value == me
                    and m.func.attr.value in SAMPLING_METHODS
                ):
                    attr = m.func.value.attr.value
                    random.setdefault(attr, f"used as self.{attr}.{m.func.attr.value}()")
    for name in assigned | members:
        if name not in random and _random_name(name):
            random[name] = "named like a random generator"
    return ClassInfo(cls.name.value, frozenset(members), frozenset(assigned), random, dynamic)


# -- one function -------------------------------------------------------------------------------------------
@dataclass
class _State:
    locals: dict[str, Val] = field(default_factory=dict)
    definite: set[str] = field(default_factory=set)
    order: list[str] = field(default_factory=list)  # prefix locals, first assignment first
    read_params: list[str] = field(default_factory=list)
    read_attrs: list[str] = field(default_factory=list)  # self.<attr> read, first read first

    def copy(self) -> _State:
        return _State(
            dict(self.locals),
            set(self.definite),
            list(self.order),
            list(self.read_params),
            list(self.read_attrs),
        )


class _Scan:
    """Walks statements of one function (or a module constant when ``fn`` is None), raising _Impure."""

    def __init__(
        self,
        mod: Module,
        fn: cst.FunctionDef | None,
        cls: ClassInfo | None = None,
        enclosing: frozenset[str] = frozenset(),
        enclosing_name: str = "",
    ):
        self.mod = mod
        self.fn = fn
        self.params: dict[str, cst.Param] = {}
        self.random: dict[str, str] = {}
        self.f_locals: set[str] = set()
        self.cls = cls
        self.me: str | None = None  # the method's self
        self.enclosing = enclosing
        self.enclosing_name = enclosing_name
        if fn is not None:
            ps = fn.params
            for p in [*ps.posonly_params, *ps.params, *ps.kwonly_params]:
                self.params[p.name.value] = p
            for star in (ps.star_arg, ps.star_kwarg):
                if isinstance(star, cst.Param):
                    self.params[star.name.value] = star
            self.f_locals = _bound_in(fn.body)
            if cls is not None and self.params:
                self.me = next(iter(self.params))
            self._find_random(fn)
        self.state = _State()
        self._ids = itertools.count()

    def _find_random(self, fn: cst.FunctionDef) -> None:
        module = cst.Module(body=[])
        for name, p in self.params.items():
            ann = module.code_for_node(p.annotation.annotation) if p.annotation is not None else ""
            if "Generator" in ann or "RandomState" in ann or "random" in ann.lower():
                self.random[name] = f"annotated {ann}"
            elif _random_name(name) and name != self.me:
                self.random[name] = "named like a random generator"
        for n in walk(fn.body):
            if (
                isinstance(n, cst.Call)
                and isinstance(n.func, cst.Attribute)
                and isinstance(n.func.value, cst.Name)
                and n.func.value.value in self.params
                and n.func.attr.value in SAMPLING_METHODS
            ):
                self.random.setdefault(
                    n.func.value.value, f"used as {n.func.value.value}.{n.func.attr.value}()"
                )

    def new(self, array: bool = True) -> Val:
        return Val(frozenset({next(self._ids)}), mutable=True, array=array)

    # expressions
    def expr(self, e: cst.BaseExpression, scope: dict[str, Val] | None = None) -> Val:
        scope = scope or {}
        if isinstance(e, cst.Name):
            return self.name(e.value, scope)
        if isinstance(e, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
            return IMMUTABLE
        if isinstance(e, cst.Ellipsis):
            return IMMUTABLE
        if isinstance(e, cst.Attribute):
            return self.attribute(e, scope)
        if isinstance(e, cst.Call):
            return self.call(e, scope)
        if isinstance(e, cst.Subscript):
            own = self._self_attr(e.value, scope)
            if own is not None and any(names_in(p) & set(self.params) for p in _slice_parts(e)):
                raise _Impure(
                    f"indexes {self.me}.{own} by a parameter (a per-example lookup: the cache would hash "
                    f"all of {self.me}.{own} on every call)"
                )
            base = self.expr(e.value, scope)
            for part in _slice_parts(e):
                self.expr(part, scope)
            if base.groups == frozenset() and not base.array:
                return IMMUTABLE  # an item of a shape, a tuple of numbers
            return Val(base.groups, base.mutable and base.array, base.array)
        if isinstance(e, cst.BinaryOperation):
            left, right = self.expr(e.left, scope), self.expr(e.right, scope)
            op = e.operator
            if (
                left.array
                or right.array
                or not isinstance(op, (cst.Add, cst.Multiply))
                or (isinstance(op, cst.Add) and (_is_number(e.left) or _is_number(e.right)))
                or (_is_number(e.left, floats_only=True) or _is_number(e.right, floats_only=True))
            ):
                return self.new(array=left.array or right.array)
            return Val(_union([left, right]))  # list + list, list * n: may hold the operands' items
        if isinstance(e, cst.UnaryOperation):
            inner = self.expr(e.expression, scope)
            return self.new(array=inner.array)
        if isinstance(e, cst.BooleanOperation):
            return Val(_union([self.expr(e.left, scope), self.expr(e.right, scope)]))
        if isinstance(e, cst.Comparison):
            vals = [self.expr(e.left, scope), *(self.expr(c.comparator, scope) for c in e.comparisons)]
            return self.new(array=any(v.array for v in vals))
        if isinstance(e, cst.IfExp):
            self.expr(e.test, scope)
            return _merge(self.expr(e.body, scope), self.expr(e.orelse, scope))
        if isinstance(e, (cst.Tuple, cst.List)):
            vals = []
            for item in e.elements:
                if not isinstance(item, cst.Element):
                    raise _Impure("unpacks with * inside a literal")
                vals.append(self.expr(item.value, scope))
            groups = _union(vals)
            if isinstance(e, cst.List) and groups is not None:
                groups = groups | {next(self._ids)}
            return Val(groups)
        if isinstance(e, (cst.ListComp, cst.GeneratorExp)):
            return self.comprehension(e, scope)
        kind = {
            cst.Lambda: "a lambda",
            cst.NamedExpr: "an assignment expression",
            cst.Yield: "yield",
            cst.Await: "await",
            cst.FormattedString: "an f-string",
        }.get(type(e), type(e).__name__)
        raise _Impure(f"uses {kind}")

    def name(self, name: str, scope: dict[str, Val]) -> Val:
        if name in scope:
            return scope[name]
        if name in self.state.locals:
            return self.state.locals[name]
        if name == self.me:
            raise _Impure(f"reads {name} whole (passes it on or calls one of its methods)")
        if name in self.params:
            if name in self.random:
                raise _Impure(f"reads the random source {name} ({self.random[name]})")
            if name not in self.state.read_params:
                self.state.read_params.append(name)
            ann = self.params[name].annotation
            code = cst.Module(body=[]).code_for_node(ann.annotation) if ann is not None else ""
            return Val(None, array="ndarray" in code or "NDArray" in code)
        if name in self.f_locals:
            raise _Impure(f"reads {name} before the function assigns it")
        if name in self.enclosing:
            raise _Impure(f"reads {name}, a name of the enclosing function {self.enclosing_name}()")
        return self.mod.value(name)

    def _shadow(self) -> set[str]:
        return set(self.state.locals) | set(self.params) | self.f_locals | self.enclosing

    def _self_attr(self, e: cst.BaseExpression, scope: dict[str, Val]) -> str | None:
        """``attr`` when ``e`` is ``self.attr`` (self not shadowed), else None."""
        if (
            self.me is not None
            and isinstance(e, cst.Attribute)
            and isinstance(e.value, cst.Name)
            and e.value.value == self.me
            and self.me not in scope
        ):
            return e.attr.value
        return None

    def self_attribute(self, attr: str) -> Val:
        """``self.attr`` read by a method's prefix: an argument of the prefix, or raise _Impure."""
        cls = self.cls
        assert cls is not None
        me = self.me
        if cls.dynamic:
            raise _Impure(f"reads {me}.{attr} ({cls.dynamic}: tfdoctor cannot tell what it reads)")
        if attr in cls.random:
            raise _Impure(f"reads the random source {me}.{attr} ({cls.random[attr]})")
        if attr in cls.members:
            raise _Impure(f"reads {me}.{attr}, a method or property of {cls.name}")
        if attr not in cls.assigned:
            raise _Impure(
                f"reads {me}.{attr}, which {cls.name} never assigns (tfdoctor cannot tell what it is)"
            )
        if attr.startswith("__") and not attr.endswith("__"):
            raise _Impure(f"reads {me}.{attr}, a private (name-mangled) attribute")
        if attr not in self.state.read_attrs:
            self.state.read_attrs.append(attr)
        return FOREIGN

    def attribute(self, e: cst.Attribute, scope: dict[str, Val]) -> Val:
        own = self._self_attr(e, scope)
        if own is not None:
            return self.self_attribute(own)
        path = self.mod.resolve(e, self._shadow() | set(scope))
        if path is not None:
            if any(p in NUMPY_DENY for p in path.split(".")[1:]):
                raise _Impure(f"uses {path}")
            return IMMUTABLE  # np.float32, np.pi, math.tau
        base = self.expr(e.value, scope)
        attr = e.attr.value
        if attr in SHAPE_ATTRS:
            return IMMUTABLE
        if attr in VIEW_ATTRS:
            return Val(base.groups, base.mutable and base.array, base.array)
        raise _Impure(f"reads .{attr} (tfdoctor follows only .shape, .dtype, .T and the like of arrays)")

    def _args(self, call: cst.Call, scope: dict[str, Val]) -> list[Val]:
        vals = []
        for a in call.args:
            if a.star:
                raise _Impure("unpacks arguments with *")
            if a.keyword is not None and a.keyword.value == "out":
                raise _Impure("passes out= (writes into an argument)")
            if isinstance(a.value, cst.GeneratorExp):
                vals.append(self.comprehension(a.value, scope))
            else:
                vals.append(self.expr(a.value, scope))
        return vals

    def call(self, call: cst.Call, scope: dict[str, Val]) -> Val:
        shadow = self._shadow() | set(scope)
        path = self.mod.resolve(call.func, shadow)
        if path is not None:
            obj = _numpy_object(path)
            _check_out(obj, path, call)
            vals = self._args(call, scope)
            top, _, rest = path.partition(".")
            last = path.rsplit(".", 1)[-1]
            if top == "math":
                return IMMUTABLE
            import numpy as np

            if isinstance(obj, np.ufunc) or rest.split(".")[0] in ("fft", "linalg"):
                return self.new()
            if last in ("array", "copy"):
                copy_kw = next((a for a in call.args if a.keyword and a.keyword.value == "copy"), None)
                if copy_kw is not None and not (
                    isinstance(copy_kw.value, cst.Name) and copy_kw.value.value == "True"
                ):
                    return Val(_union(vals))
            dtype = next((a.value for a in call.args if a.keyword and a.keyword.value == "dtype"), None)
            if dtype is not None and "object" in cst.Module(body=[]).code_for_node(dtype):
                return Val(_union(vals))  # an object array holds its arguments' objects
            if last in NUMPY_FRESH:
                return self.new()
            if isinstance(obj, type) and issubclass(obj, (np.generic, np.dtype)):  # np.float32(x)
                return IMMUTABLE
            return Val(_union(vals))  # a view or a value derived from the arguments
        func = call.func
        own = self._self_attr(func, scope)
        if own is not None and self.cls is not None:
            if own in self.cls.members:
                raise _Impure(f"calls {self.me}.{own}(), a method of {self.cls.name}")
            self.self_attribute(own)
            raise _Impure(f"calls {self.me}.{own}(), which tfdoctor cannot tell is pure")
        if isinstance(func, cst.Name):
            name = func.value
            if (
                name in self.enclosing
                and name not in scope
                and name not in self.params
                and name not in self.state.locals
            ):
                raise _Impure(f"calls {name}(), a name of the enclosing function {self.enclosing_name}()")
            if name in shadow or self.mod.bindings[name]:
                if name in self.mod.defs:
                    raise _Impure(f"calls {name}(), a function of the script")
                raise _Impure(f"calls {name}(), which tfdoctor cannot tell is pure")
            kind = SAFE_BUILTINS.get(name)
            if kind is None:
                raise _Impure(f"calls {name}()")
            vals = self._args(call, scope)
            if kind == "immutable":
                return IMMUTABLE
            if kind == "new":
                return self.new(array=any(v.array for v in vals))
            return Val(_union(vals))
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = self.expr(func.value, scope)
            limit = VIEW_METHODS.get(method, FRESH_METHODS.get(method, -1))
            if limit == -1:
                what = dotted(func) or f".{method}"
                raise _Impure(f"calls {what}(), which tfdoctor cannot tell is pure")
            self._args(call, scope)
            positional = sum(1 for a in call.args if a.keyword is None)
            if limit is not None and positional > limit:
                raise _Impure(f"calls .{method}() with an output argument")
            if method in VIEW_METHODS:
                return Val(receiver.groups, receiver.mutable and receiver.array, receiver.array)
            if method == "astype":
                copy_kw = next((a for a in call.args if a.keyword and a.keyword.value == "copy"), None)
                if copy_kw is not None:
                    return Val(receiver.groups, False, True)
                return self.new()
            if method == "copy" and not receiver.array:
                return Val(None if receiver.groups is None else receiver.groups | {next(self._ids)})
            if method in ("tolist", "item"):
                return self.new(array=False)
            return self.new(array=receiver.array or method in ("copy", "flatten", "clip", "round"))
        raise _Impure("calls something tfdoctor cannot name")

    def comprehension(self, e: cst.ListComp | cst.GeneratorExp, scope: dict[str, Val]) -> Val:
        inner = dict(scope)
        comp: cst.CompFor | None = e.for_in
        while comp is not None:
            if comp.asynchronous is not None:
                raise _Impure("uses an async comprehension")
            it = self.expr(comp.iter, inner)
            names = _target_names(comp.target)
            if names is None:
                raise _Impure("stores into something in a comprehension")
            for n in names:
                inner[n] = Val(it.groups)
            for cond in comp.ifs:
                self.expr(cond.test, inner)
            comp = comp.inner_for_in
        elt = self.expr(e.elt, inner)
        if elt.groups is None:
            return FOREIGN
        return Val(elt.groups | {next(self._ids)})

    # statements
    def statement(self, s: cst.BaseStatement) -> None:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                self.small(small)
            return
        if isinstance(s, cst.For):
            self.loop(s)
            return
        raise _Impure("is " + STOPPERS.get(type(s), f"a {type(s).__name__}"))

    def small(self, s: cst.BaseSmallStatement) -> None:
        if isinstance(s, cst.Assign):
            v = self.expr(s.value)
            for t in s.targets:
                self.assign(t.target, v)
        elif isinstance(s, cst.AnnAssign):
            if s.value is None:
                raise _Impure("is an annotation without a value")
            self.assign(s.target, self.expr(s.value))
        elif isinstance(s, cst.AugAssign):
            value = self.expr(s.value)
            target = s.target
            if isinstance(target, cst.Name):
                cur = self.owned_mutable(target.value, "changes")
                if cur.groups == frozenset() and not cur.array:  # a number: rebinding
                    nv = (
                        IMMUTABLE
                        if value.groups == frozenset() and not value.array
                        else self.new(value.array)
                    )
                    self.state.locals[target.value] = nv
            else:
                self.store(target)
        elif isinstance(s, cst.Expr):
            self.expr(s.value)
        elif isinstance(s, cst.Pass):
            return
        elif isinstance(s, cst.Return) and s.value is not None:
            self.expr(s.value)  # say why the value is not pure, when it is not
            raise _Impure("is a return")
        else:
            raise _Impure("is " + STOPPERS.get(type(s), f"a {type(s).__name__} statement"))

    def owned_mutable(self, name: str, verb: str) -> Val:
        v = self.state.locals.get(name)
        if v is None:
            if name in self.params:
                raise _Impure(f"{verb} the parameter {name} in place")
            raise _Impure(f"{verb} {name}, which is not a local of the function, in place")
        if v.groups is None or not v.mutable:
            raise _Impure(f"{verb} {name} in place, which may share memory with a parameter or a global")
        return v

    def store(self, t: cst.BaseExpression) -> None:
        root = _root(t)
        if not isinstance(root, cst.Name):
            raise _Impure("stores into an expression tfdoctor cannot follow")
        self.owned_mutable(root.value, "changes")
        node = t
        while isinstance(node, (cst.Subscript, cst.Attribute)):
            if isinstance(node, cst.Subscript):
                for part in _slice_parts(node):
                    self.expr(part)
            node = node.value

    def assign(self, t: cst.BaseExpression, v: Val) -> None:
        if isinstance(t, cst.Name):
            self._bind(t.value, v)
            return
        names = _target_names(t)
        if names is not None:
            part = IMMUTABLE if v.groups == frozenset() and not v.array else Val(v.groups)
            for n in names:
                self._bind(n, part)
            return
        if isinstance(t, (cst.Subscript, cst.Attribute)):
            self.store(t)
            return
        raise _Impure("assigns to a target tfdoctor cannot follow")

    def _bind(self, name: str, v: Val) -> None:
        self.state.locals[name] = v
        self.state.definite.add(name)
        if name not in self.state.order:
            self.state.order.append(name)

    def loop(self, s: cst.For) -> None:
        if s.asynchronous is not None or s.orelse is not None:
            raise _Impure("is a for loop with async or else")
        it = s.iter
        if not (
            isinstance(it, cst.Call)
            and isinstance(it.func, cst.Name)
            and it.func.value == "range"
            and "range" not in self._shadow()
            and not self.mod.bindings["range"]
        ):
            raise _Impure("is a for loop that is not over range(...)")
        self.expr(it)
        names = _target_names(s.target)
        if names is None:
            raise _Impure("is a for loop storing into something")
        if not isinstance(s.body, cst.IndentedBlock):
            raise _Impure("is a one-line for loop")
        entry = self.state.copy()
        for _ in range(2):  # first iteration from the entry state, later ones from the body's
            for n in names:
                self._bind(n, IMMUTABLE)
            for b in s.body.body:
                if not isinstance(b, (cst.SimpleStatementLine, cst.For)):
                    raise _Impure(f"has {STOPPERS.get(type(b), type(b).__name__)} inside its for loop")
                self.statement(b)
        after = self.state
        merged = dict(after.locals)
        for n, v in entry.locals.items():
            merged[n] = _merge(v, after.locals[n])
        self.state = _State(merged, set(entry.definite), after.order, after.read_params, after.read_attrs)


def _live(rest: list[cst.BaseStatement], candidates: set[str]) -> list[str]:
    """The candidates the rest of the body may read before it assigns them (in order of first read)."""
    live: list[str] = []
    killed: set[str] = set()

    def read(names: set[str]) -> None:
        for n in sorted(names):
            if n in candidates and n not in killed and n not in live:
                live.append(n)

    for s in rest:
        if not isinstance(s, cst.SimpleStatementLine):
            read(names_in(s))
            continue
        for small in s.body:
            if isinstance(small, (cst.Assign, cst.AnnAssign)):
                if small.value is not None:
                    read(names_in(small.value))
                targets = (
                    [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                )
                bound: list[str] = []
                for t in targets:
                    plain = _target_names(t)
                    if plain is None:
                        read(names_in(t))
                    elif isinstance(small, cst.Assign) or small.value is not None:
                        bound += plain
                killed.update(bound)
            else:
                read(names_in(small))
    return live


def _calls(n: int) -> str:
    return f"{n} call" if n == 1 else f"{n} calls"


def _is_docstring(s: cst.BaseStatement) -> bool:
    return (
        isinstance(s, cst.SimpleStatementLine)
        and len(s.body) == 1
        and isinstance(s.body[0], cst.Expr)
        and isinstance(s.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _work(stmts: list[cst.BaseStatement]) -> tuple[int, int, int]:
    """(calls, arithmetic operators, for loops) in the statements."""
    nodes = [n for s in stmts for n in walk(s)]
    return (
        sum(isinstance(n, cst.Call) for n in nodes),
        sum(isinstance(n, (cst.BinaryOperation, cst.AugAssign)) for n in nodes),
        sum(isinstance(n, cst.For) for n in nodes),
    )


def _worth(stmts: list[cst.BaseStatement]) -> str | None:
    """None when the statements do enough work to be worth a cache lookup (a loop, 3 calls, or 4 calls
    and arithmetic operators together: the lookup hashes the arguments and copies the result), else
    what they do ("1 call, no loop")."""
    calls, ops, loops = _work(stmts)
    if loops or calls >= 3 or calls + ops >= 4:
        return None
    return f"{_calls(calls)}{f', {ops} operators' if ops else ''}, no loop"


@dataclass
class Plan:
    fn: cst.FunctionDef
    whole: bool  # the whole function is pure: decorate it (a method or nested function: move it all)
    start: int = 0  # index of the first prefix statement in the body
    end: int = 0  # one past the last (the whole body, its final return included, when ``whole``)
    params: list[str] = field(default_factory=list)  # the parameters it reads, in the signature's order
    returns: list[str] = field(default_factory=list)  # the locals the rest reads (empty when ``whole``)
    attrs: list[str] = field(default_factory=list)  # self.<attr> it reads (methods), first read first
    me: str | None = None  # the method's self parameter


def prefix_plan(
    mod: Module,
    fn: cst.FunctionDef,
    line: Callable[[cst.CSTNode], int] = lambda n: 0,
    *,
    label: str | None = None,
    cls: ClassInfo | None = None,
    enclosing: frozenset[str] = frozenset(),
    enclosing_name: str = "",
) -> tuple[Plan | None, str]:
    """(the plan, what it covers) or (None, why not); ``line`` gives a statement's line for the reasons.

    ``label`` names the function in the reasons (``Trainer.preprocess``); ``cls``: ``fn`` is a method of
    that class (its first parameter is self); ``enclosing``: ``fn`` is nested in ``enclosing_name()``,
    which binds these names.
    """
    name = label or fn.name.value
    if fn.decorators:
        return None, f"{name}() is decorated"
    if fn.asynchronous is not None:
        return None, f"{name}() is async"
    if not isinstance(fn.body, cst.IndentedBlock):
        return None, f"{name}() is a one-line function"
    if any(isinstance(n, (cst.Global, cst.Nonlocal)) for n in walk(fn.body)):
        return None, f"{name}() declares global or nonlocal names"
    scan = _Scan(mod, fn, cls, enclosing, enclosing_name)
    if cls is not None:
        if scan.me is None:
            return None, f"{name}() has no self parameter"
        if scan.me in scan.f_locals:
            return None, f"{name}() assigns {scan.me}"
    body = list(fn.body.body)
    start = 1 if body and _is_docstring(body[0]) else 0
    end, stop = start, "ends the function"
    for i in range(start, len(body)):
        before = scan.state.copy()
        try:
            scan.statement(body[i])
            if cls is not None:
                _mangled(body[i])
        except _Impure as e:
            scan.state = before
            stop = f"{e} (line {line(body[i])})"
            break
        end = i + 1
    prefix = body[start:end]
    last = body[-1] if body else None
    ret = (
        last.body[0]
        if isinstance(last, cst.SimpleStatementLine)
        and len(last.body) == 1
        and isinstance(last.body[0], cst.Return)
        else None
    )
    if last is not None and end == len(body) - 1 and not scan.random and ret is not None and ret.value:
        before = scan.state.copy()
        try:
            val = scan.expr(ret.value)
            if cls is not None:
                _mangled(last)
        except _Impure as e:
            scan.state = before
            stop = f"{e} (line {line(last)})"
        else:
            if val.groups is not None:
                small = _worth([*prefix, last])
                if small:
                    return None, f"{name}() is pure but too small to be worth caching ({small})"
                params = [p for p in scan.params if p in scan.state.read_params]
                whole = Plan(fn, True, start, len(body), params, [], list(scan.state.read_attrs), scan.me)
                return whole, f"all of {name}()"
            stop = f"returns a value that may share memory with a parameter or a global (line {line(last)})"
    if not prefix:
        return None, f"{name}(): nothing deterministic to cache: its first statement {stop}"
    small = _worth(prefix)
    if small:
        return (
            None,
            f"{name}(): the deterministic start is too small to be worth caching ({small}; the next statement {stop})",
        )
    live = _live(body[end:], set(scan.state.order))
    if not live:
        return None, f"{name}(): nothing its deterministic start computes is used afterwards"
    for n in live:
        if n not in scan.state.definite:
            return None, f"{name}(): {n} is assigned only inside a loop of the deterministic start"
        if scan.state.locals[n].groups is None:
            return (
                None,
                f"{name}(): {n} may share memory with a parameter or a global, so a cached copy could differ",
            )
    seen: set[int] = set()
    for n in live:
        g = scan.state.locals[n].groups or frozenset()
        if g & seen:
            return None, f"{name}(): the results of its deterministic start may share memory"
        seen |= g
    params = [p for p in scan.params if p in scan.state.read_params]
    plan = Plan(fn, False, start, end, params, live, list(scan.state.read_attrs), scan.me)
    return plan, f"lines of {name}()"


def _mangled(stmt: cst.CSTNode) -> None:
    """Raise _Impure when the statement uses a ``__private`` name, which Python mangles inside a class
    (and the prefix moves out of it)."""
    for n in walk(stmt):
        if isinstance(n, cst.Name) and n.value.startswith("__") and not n.value.endswith("__"):
            raise _Impure(f"uses {n.value}, a private (name-mangled) name")
