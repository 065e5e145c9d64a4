"""``generator-cache``: the deterministic start of the per-example function a Python generator calls is
computed once per distinct input and served from memory afterwards (the generator-pipeline analogue of
``tfdata-cache``).

The codemod proves, conservatively and statically, that a prefix of the function's statements is pure and
deterministic (reads only its non-random parameters, numpy/math, constants and locals; changes none of its
parameters), moves it into ``_<f>_prefix(...)`` decorated with ``tfdoctor_memoize`` (a helper added to
the script) and calls that instead. For a method (``Trainer.preprocess`` called as ``self.preprocess``
by a generator method) the prefix goes to module level as ``_Trainer_preprocess_prefix(...)`` and the
``self.<attr>`` it reads are passed in as arguments. The cache keys on the arguments' content and hands
out copies, so what the function computes is unchanged bit for bit.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod
from tfdoctor.fixes._cst import attr_name, insert_after_imports, names_in, unique_name, walk
from tfdoctor.fixes._purity import ClassInfo, Module, Plan, _bound_in, class_info, prefix_plan
from tfdoctor.fixes.generator_prefetch import _generator_methods, _is_generator, _step_names, runs_step

#: the cache stops growing at this many bytes of results (it still serves what it holds)
MAX_BYTES = 1 << 30

HELPER = '''
def {name}(fn, max_bytes={max_bytes}):
    """Added by tfdoctor (generator-cache): remember what ``fn`` returns for each distinct input.

    tfdoctor checked that ``fn`` is deterministic: it reads only its arguments, numpy/math and
    constants, draws no random numbers and changes none of its arguments. A repeated call returns a
    copy of the first result instead of recomputing it. Arguments are keyed by content: numpy arrays
    by shape, dtype and a BLAKE2b digest of their bytes; numbers, strings, bytes and None by value;
    tuples and lists element by element. Any other argument, or a result that is not numpy arrays,
    numbers, strings, or tuples/lists of them, is passed through uncached ("bypass"). Results are
    copied in and out, so the caller may change what it gets. Once the results held reach
    ``max_bytes`` (default 1 GiB) nothing more is added; what is held is still served.

    ``<function>.tfdoctor_memo`` counts hits, misses, bypass, bytes held and whether it is full
    (tfdoctor's harness reads it). A lock guards the table and the counts (``fn`` runs outside it),
    so a background thread (generator-prefetch) may call the function too.
    """
    import functools
    import hashlib
    import threading

    try:
        import numpy
    except ImportError:  # no numpy: numbers, strings and tuples are still keyed
        numpy = None
    ndarray = numpy.ndarray if numpy is not None else None
    generic = numpy.generic if numpy is not None else ()
    plain = (bool, int, str, bytes, type(None))
    unkeyable = object()
    missing = object()
    lock = threading.Lock()
    table = {{}}
    stats = {{"hits": 0, "misses": 0, "bypass": 0, "bytes": 0, "full": False}}

    def key(value):
        kind = type(value)
        if kind is ndarray:
            dtype = value.dtype
            if dtype.hasobject or dtype.names is not None:
                return unkeyable
            if not value.flags.c_contiguous:
                value = numpy.ascontiguousarray(value)
            digest = hashlib.blake2b(value.reshape(-1).view(numpy.uint8), digest_size=20).digest()
            return ("ndarray", value.shape, dtype.str, digest)
        if kind in plain:
            return (kind.__name__, value)
        if kind is float or kind is complex:
            return (kind.__name__, repr(value))  # repr tells 0.0 from -0.0 and keys nan
        if isinstance(value, generic) and not value.dtype.hasobject and value.dtype.names is None:
            return ("generic", value.dtype.str, value.tobytes())
        if kind is tuple or kind is list:
            parts = tuple(key(v) for v in value)
            return unkeyable if any(p is unkeyable for p in parts) else (kind.__name__, parts)
        return unkeyable

    def copy(value):
        """(a copy the caller may change, its array bytes), or None when it cannot be copied safely."""
        kind = type(value)
        if kind in plain or kind is float or kind is complex:
            return value, 0
        if kind is ndarray and not value.dtype.hasobject:
            out = value.copy(order="K")
            return out, out.nbytes
        if isinstance(value, generic) and not value.dtype.hasobject:
            return value, value.nbytes
        if kind is tuple or kind is list:
            parts = [copy(v) for v in value]
            if any(p is None for p in parts):
                return None
            return kind(p[0] for p in parts), sum(p[1] for p in parts)
        return None

    @functools.wraps(fn)
    def cached(*args, **kwargs):
        k = key(args) if not kwargs else key((args, tuple(sorted(kwargs.items()))))
        if k is unkeyable:
            with lock:
                stats["bypass"] += 1
            return fn(*args, **kwargs)
        with lock:
            held = table.get(k, missing)
            if held is not missing:
                stats["hits"] += 1
        if held is not missing:
            return copy(held)[0]
        result = fn(*args, **kwargs)
        stored = copy(result)
        with lock:
            if stored is None:
                stats["bypass"] += 1
                return result
            stats["misses"] += 1
            if k not in table and not stats["full"]:
                if stats["bytes"] + stored[1] > max_bytes:
                    stats["full"] = True
                else:
                    table[k] = stored[0]
                    stats["bytes"] += stored[1]
        return result

    cached.tfdoctor_memo = stats
    return cached
'''

ADVICE = (
    "the cache pays from the second pass over the data (the first computes and stores every "
    "result), and it costs memory: the bytes of {names} per example × the distinct examples, up to {cap} "
    "(then it serves what it holds without growing)"
)


def _driving_loops(tree: cst.Module, steps: set[str]) -> dict[str, cst.For]:
    """Generator names every call of which is what a ``for`` loop that trains iterates (Kaggle's K-fold
    notebooks: ``for fold, (tr, va) in enumerate(kfold_split(...)):`` around ``model.fit(...)``): name ->
    the first such loop. Such a generator hands out folds, not batches."""
    calls: Counter[str] = Counter(
        c.func.value for c in walk(tree) if isinstance(c, cst.Call) and isinstance(c.func, cst.Name)
    )
    looped: Counter[str] = Counter()
    first: dict[str, cst.For] = {}
    for loop in walk(tree):
        # a whole training per item: a fit() in the body, or an inner loop running the step (a loop over
        # batches runs the step itself, per item)
        if not (
            isinstance(loop, cst.For)
            and (
                any(
                    isinstance(c, cst.Call) and attr_name(c) in ("fit", "fit_generator")
                    for c in walk(loop.body)
                )
                or any(isinstance(i, cst.For) and runs_step(i.body, steps) for i in walk(loop.body))
            )
        ):
            continue
        for c in walk(loop.iter):
            if isinstance(c, cst.Call) and isinstance(c.func, cst.Name):
                looped[c.func.value] += 1
                first.setdefault(c.func.value, loop)
    return {name: first[name] for name in looped if looped[name] == calls[name]}


@dataclass
class _Target:
    """A function a generator calls (or the generator itself): where it is and how to name it."""

    fn: cst.FunctionDef
    label: str  # preprocess, Trainer.preprocess, main.<locals>.preprocess
    stem: str  # the prefix function's name stem: preprocess, Trainer_preprocess, main_preprocess
    top: cst.BaseStatement  # the module-level statement holding it (fn itself when module-level)
    cls: ClassInfo | None = None
    cls_def: cst.ClassDef | None = None
    outer: cst.FunctionDef | None = None  # the module-level function it is nested in
    enclosing: frozenset[str] = frozenset()  # the names ``outer`` binds (its params included)

    @property
    def module_level(self) -> bool:
        return self.cls is None and self.outer is None


def _param_names(fn: cst.FunctionDef) -> list[str]:
    ps = fn.params
    out = [p.name.value for p in [*ps.posonly_params, *ps.params, *ps.kwonly_params]]
    out += [s.name.value for s in (ps.star_arg, ps.star_kwarg) if isinstance(s, cst.Param)]
    return out


def _defined_once(
    block: cst.BaseSuite, exclude: frozenset[str] | set[str] = frozenset()
) -> dict[str, cst.FunctionDef]:
    """The functions defined directly in ``block`` whose name nothing else in it binds."""
    if not isinstance(block, cst.IndentedBlock):
        return {}
    out: dict[str, cst.FunctionDef] = {}
    counts: Counter[str] = Counter()
    for stmt in block.body:
        counts.update(_bound_in(stmt) if not isinstance(stmt, cst.FunctionDef) else {stmt.name.value})
    for stmt in block.body:
        if (
            isinstance(stmt, cst.FunctionDef)
            and counts[stmt.name.value] == 1
            and stmt.name.value not in exclude
        ):
            out[stmt.name.value] = stmt
    return out


class _SelfAttrs(cst.CSTTransformer):
    """``self.mean`` → ``self_mean`` (the prefix's parameter) for the attributes the prefix reads."""

    def __init__(self, me: str, names: dict[str, str]):
        super().__init__()
        self.me = me
        self.names = names

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if (
            isinstance(updated.value, cst.Name)
            and updated.value.value == self.me
            and updated.attr.value in self.names
        ):
            return cst.Name(self.names[updated.attr.value], lpar=updated.lpar, rpar=updated.rpar)
        return updated


class _Replace(cst.CSTTransformer):
    """Replaces nodes by identity (the functions the fix rewrote, wherever they are nested)."""

    def __init__(self, new: dict[int, cst.CSTNode]):
        super().__init__()
        self.new = new

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        return self.new.get(id(original), updated)


class GeneratorCacheCodemod(FixCodemod):
    DESCRIPTION = "cache the deterministic per-example preprocessing in memory"
    METADATA_DEPENDENCIES = (PositionProvider,)
    #: the names of generators that run the training step themselves (not sources of batches)
    training_generators: list[str]

    def end_line(self, node: cst.CSTNode) -> int:
        try:
            return self.get_metadata(PositionProvider, node).end.line
        except KeyError:
            return 0

    # -- what the generators call -----------------------------------------------------------------
    def _callers(self, tree: cst.Module, mod: Module) -> list[_Target]:
        """The generators (module-level, methods of module-level classes, nested in module-level
        functions) and the ``__getitem__`` methods; not a generator that trains (:meth:`_trains`), whose
        label goes to ``self.training_generators``."""
        steps = _step_names(tree)
        drives = _driving_loops(tree, steps)
        out = []
        for t in self._all_callers(tree, mod):
            if self._trains(t, steps):
                continue
            if t.cls is None and (loop := drives.get(t.fn.name.value)) is not None:
                self.driving_generators.append(f"{t.label}() (the loop at line {self.line(loop)})")
                continue
            out.append(t)
        return out

    def _trains(self, t: _Target, steps: set[str]) -> bool:
        """A generator that runs the training step itself and yields metrics (a university course's
        ``Trainer.train()``: ``for images, labels in self.ds_train: self.train_step(...)``, a
        ``yield`` of the test accuracy every ``log_interval`` steps): the training loop, not a source of
        batches; what it calls is the step, not per-example work."""
        trains = _is_generator(t.fn) and runs_step(t.fn.body, steps)
        if trains:
            self.training_generators.append(t.label)
        return trains

    def _all_callers(self, tree: cst.Module, mod: Module) -> list[_Target]:
        out: list[_Target] = []
        for stmt in tree.body:
            if isinstance(stmt, cst.FunctionDef) and not stmt.name.value.startswith("tfdoctor_"):
                name = stmt.name.value
                if _is_generator(stmt):
                    out.append(_Target(stmt, name, name, stmt))
                enclosing = frozenset(_bound_in(stmt.body) | set(_param_names(stmt)))
                for n in walk(stmt.body):
                    if isinstance(n, cst.FunctionDef) and _is_generator(n):
                        label = f"{name}.<locals>.{n.name.value}"
                        out.append(
                            _Target(n, label, f"{name}_{n.name.value}", stmt, outer=stmt, enclosing=enclosing)
                        )
            elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                info: ClassInfo | None = None
                for m in stmt.body.body:
                    if isinstance(m, cst.FunctionDef) and (_is_generator(m) or m.name.value == "__getitem__"):
                        info = info or class_info(mod, stmt)
                        cname = stmt.name.value
                        out.append(
                            _Target(m, f"{cname}.{m.name.value}", f"{cname}_{m.name.value}", stmt, info, stmt)
                        )
        return out

    def _callees(self, t: _Target, mod: Module) -> list[_Target]:
        """The functions of the script ``t`` calls: module-level ones by name, methods of its class
        through self, functions nested in the same module-level function."""
        fn = t.fn
        params = _param_names(fn)
        own = _bound_in(fn.body) | set(params)
        me = params[0] if t.cls is not None and params and not fn.decorators else None
        if me is not None and me in _bound_in(fn.body):
            me = None
        methods = _defined_once(t.cls_def.body) if t.cls_def is not None else {}
        nested = _defined_once(t.outer.body, set(_param_names(t.outer))) if t.outer is not None else {}
        out: list[_Target] = []
        for c in walk(fn.body):
            if not isinstance(c, cst.Call):
                continue
            f = c.func
            if isinstance(f, cst.Name) and f.value not in own:
                name = f.value
                if t.outer is not None and name in t.enclosing:
                    if name in nested:
                        outer = t.outer.name.value
                        label = f"{outer}.<locals>.{name}"
                        out.append(
                            _Target(
                                nested[name],
                                label,
                                f"{outer}_{name}",
                                t.top,
                                outer=t.outer,
                                enclosing=t.enclosing,
                            )
                        )
                elif name in mod.defs:
                    out.append(_Target(mod.defs[name], name, name, mod.defs[name]))
            elif (
                isinstance(f, cst.Attribute)
                and me is not None
                and isinstance(f.value, cst.Name)
                and f.value.value == me
                and f.attr.value in methods
                and t.cls is not None
            ):
                m = methods[f.attr.value]
                cname = t.cls.name
                out.append(
                    _Target(m, f"{cname}.{m.name.value}", f"{cname}_{m.name.value}", t.top, t.cls, t.cls_def)
                )
        return out

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        if any(
            isinstance(n, cst.FunctionDef) and n.name.value.startswith("tfdoctor_memoize") for n in tree.body
        ):
            raise SkipFile("the script already uses tfdoctor's cache (tfdoctor_memoize)")
        mod = Module(tree)
        self.training_generators = []
        self.driving_generators: list[str] = []
        callers = self._callers(tree, mod)
        if not callers and self.driving_generators:
            raise SkipFile(
                "no Python generator of batches in the script: "
                + ", ".join(self.driving_generators)
                + " hands out what a loop around a whole training iterates (folds, epochs), not the batches "
                "it trains on"
            )
        if not callers:
            trained = {n.split(".")[-1] for n in self.training_generators}
            methods = [f"{n}()" for n in _generator_methods(tree) if n not in trained]
            if self.training_generators and not methods:
                raise SkipFile(
                    "no Python generator of batches in the script: "
                    + ", ".join(f"{n}()" for n in self.training_generators)
                    + " runs the training step itself (a training loop that yields, not a source of batches)"
                )
            if methods:
                raise SkipFile(
                    f"the batch generator is a method of a class defined inside a function ({', '.join(methods)}): "
                    "generator-cache follows methods of module-level classes only"
                )
            raise SkipFile("no Python generator function (or __getitem__) in the script")
        if mod.star:
            raise SkipFile("the script has a star import: tfdoctor cannot tell which names are constant")
        # the functions the generators call, and those they call in turn
        callers_ids = {id(c.fn) for c in callers}
        candidates: list[_Target] = []
        seen: set[int] = set()
        queue = list(callers)
        while queue:
            for callee in self._callees(queue.pop(0), mod):
                if id(callee.fn) in callers_ids or id(callee.fn) in seen:
                    continue
                seen.add(id(callee.fn))
                candidates.append(callee)
                queue.append(callee)
        if not candidates:
            raise SkipFile(
                f"the generator(s) {', '.join(f'{c.label}()' for c in callers)} call no function of the script "
                "(module-level, a method of their class through self, or nested in the same function): per-example "
                "work written inline in the generator is not cached"
            )
        plans: list[tuple[_Target, Plan]] = []
        reasons: list[str] = []
        for t in candidates:
            plan, why = prefix_plan(
                mod,
                t.fn,
                self.line,
                label=t.label,
                cls=t.cls,
                enclosing=t.enclosing,
                enclosing_name=t.outer.name.value if t.outer is not None else "",
            )
            if plan is None:
                reasons.append(why)
            else:
                plans.append((t, plan))
        if not plans:
            raise SkipFile("; ".join(reasons))
        self.helper = unique_name(tree, "tfdoctor_memoize")
        self.taken = names_in(tree) | {self.helper}
        self.cap = f"{MAX_BYTES / 2**30:g} GiB"
        before: dict[int, list[cst.FunctionDef]] = {}  # module-level statement → prefixes to put above it
        replaced: dict[int, cst.CSTNode] = {}
        done: list[str] = []
        for t, plan in plans:
            if plan.whole and t.module_level:
                replaced[id(t.fn)] = t.fn.with_changes(decorators=[cst.Decorator(cst.Name(self.helper))])
                lines = f"lines {self.line(t.fn)}-{self.end_line(t.fn)}"
                self.warn(
                    f"{t.label}() ({lines}) is deterministic throughout (no random source, no parameter "
                    f"changed): decorated with {self.helper} (up to {self.cap})"
                )
                self.advise(ADVICE.format(names=f"{t.label}()'s result", cap=self.cap))
                done.append(f"{t.label}() ({lines}) cached whole")
                continue
            prefix_name = self._fresh(f"_{t.stem}_prefix")
            pre, new_fn = self._split(t, plan, prefix_name)
            replaced[id(t.fn)] = new_fn
            before.setdefault(id(t.top), []).append(pre)
            done.append(self._report(t, plan, prefix_name))
        for why in reasons:
            self.warn(f"not cached: {why}")
        self.summary = f"{'; '.join(done)} (in memory by {self.helper}, up to {self.cap})"
        body: list[cst.BaseStatement] = []
        blank = [cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]
        for stmt in tree.body:
            new = stmt.visit(_Replace(replaced)) if replaced else stmt
            assert isinstance(new, cst.BaseStatement)
            pres = before.get(id(stmt), [])
            if pres:
                above = list(stmt.leading_lines)
                cut = max((i + 1 for i, ln in enumerate(above) if ln.comment is None), default=0)
                body.append(pres[0].with_changes(leading_lines=above[:cut]))
                body += [p.with_changes(leading_lines=blank) for p in pres[1:]]
                new = new.with_changes(leading_lines=[*blank, *above[cut:]])
            body.append(new)
        helper = cst.parse_module(HELPER.format(name=self.helper, max_bytes="1 << 30")).body[0]
        assert isinstance(helper, cst.FunctionDef)
        return insert_after_imports(tree.with_changes(body=body), helper)

    def _fresh(self, name: str) -> str:
        out = name
        for i in itertools.count(2):
            if out not in self.taken:
                break
            out = f"{name}_{i}"
        self.taken.add(out)
        return out

    def _report(self, t: _Target, plan: Plan, prefix_name: str) -> str:
        """Warns and advises what was cached; returns the summary's part."""
        stmts = list(t.fn.body.body)  # type: ignore[union-attr]
        first, last = self.line(stmts[plan.start]), self.end_line(stmts[plan.end - 1])
        args = [*plan.params, *(f"{plan.me}.{a}" for a in plan.attrs)]
        passed = ""
        if plan.attrs:
            attrs = ", ".join(f"{plan.me}.{a}" for a in plan.attrs)
            one = len(plan.attrs) == 1
            passed = (
                f"; {attrs} {'is' if one else 'are'} passed in, so the cache keys on "
                f"{'its' if one else 'their'} content"
            )
        if plan.whole:
            self.warn(
                f"{t.label}() lines {first}-{last} are deterministic throughout (no random source, no "
                f"parameter changed): moved into {prefix_name}({', '.join(args)}), cached by {self.helper} "
                f"(up to {self.cap}); {t.label}() returns its result{passed}"
            )
            self.advise(ADVICE.format(names=f"{t.label}()'s result", cap=self.cap))
            return f"{t.label}() lines {first}-{last} cached whole as {prefix_name}()"
        returns = ", ".join(plan.returns)
        self.warn(
            f"{t.label}() lines {first}-{last} (deterministic: no random source, no parameter changed) "
            f"moved into {prefix_name}({', '.join(args)}), cached by {self.helper} (up to {self.cap}); "
            f"{t.label}() reads {returns} from it{passed}"
        )
        self.advise(ADVICE.format(names=returns, cap=self.cap))
        return f"{t.label}() lines {first}-{last} cached as {prefix_name}() → {returns}"

    def _split(self, t: _Target, plan: Plan, prefix_name: str) -> tuple[cst.FunctionDef, cst.FunctionDef]:
        fn = plan.fn
        block = fn.body
        assert isinstance(block, cst.IndentedBlock)
        stmts = list(block.body)
        prefix = stmts[plan.start : plan.end]
        anns = {}
        ps = fn.params
        for p in [*ps.posonly_params, *ps.params, *ps.kwonly_params]:
            anns[p.name.value] = p.annotation
        params = [cst.Param(cst.Name(p), annotation=anns.get(p)) for p in plan.params]
        args = list(plan.params)
        if plan.me is not None and plan.attrs:
            names: dict[str, str] = {}
            used = names_in(fn) | self.taken
            for a in plan.attrs:
                base = f"{plan.me}_{a}"
                name = base
                for i in itertools.count(2):
                    if name not in used:
                        break
                    name = f"{base}_{i}"
                used.add(name)
                names[a] = name
            prefix = [s.visit(_SelfAttrs(plan.me, names)) for s in prefix]  # type: ignore[misc]
            params += [cst.Param(cst.Name(names[a])) for a in plan.attrs]
            args += [f"{plan.me}.{a}" for a in plan.attrs]
        doc = cst.parse_statement(
            f'"""Added by tfdoctor (generator-cache): the start of {t.label}(), cached per input."""\n'
            if not plan.whole
            else f'"""Added by tfdoctor (generator-cache): {t.label}(), cached per input."""\n'
        )
        if plan.whole:  # the final return moved too: the function returns what the prefix returns
            work = [doc, *prefix]
            call = cst.parse_statement(f"return {prefix_name}({', '.join(args)})\n")
        else:
            work = [doc, *prefix, cst.parse_statement(f"return {', '.join(plan.returns)}\n")]
            call = cst.parse_statement(f"{', '.join(plan.returns)} = {prefix_name}({', '.join(args)})\n")
        pre = cst.FunctionDef(
            name=cst.Name(prefix_name),
            params=cst.Parameters(params=params),
            body=cst.IndentedBlock(body=work, indent=block.indent),
            decorators=[cst.Decorator(cst.Name(self.helper))],
        )
        above = getattr(stmts[plan.start], "leading_lines", ())
        call = call.with_changes(leading_lines=[ln for ln in above if ln.comment is None])
        new_fn = fn.with_changes(
            body=block.with_changes(body=[*stmts[: plan.start], call, *stmts[plan.end :]])
        )
        return pre, new_fn


class GeneratorCache(Fix):
    """Compute the deterministic start of the per-example function once per input, serve it from memory.

    What it changes: a function that a Python generator (or a ``__getitem__``) calls per example,
    directly or through other functions of the script, e.g. ``preprocess(image, rng)``, is split at
    the first statement that is not provably pure and deterministic. The leading statements move into
    ``_<f>_prefix(<the parameters they read>)``, decorated ``@tfdoctor_memoize`` and placed just
    before the function, which now starts with ``x = _<f>_prefix(image)``. A module-level function
    that is pure throughout is decorated itself. ``tfdoctor_memoize`` (added after the imports) keys on
    the arguments' content (numpy arrays by shape, dtype and a BLAKE2b digest of their bytes; numbers,
    strings, tuples, lists by value; any other argument is passed through uncached), stores and
    returns copies (the caller may change what it gets), stops adding at 1 GiB (``max_bytes``) and
    still serves what it holds. Its counts are the function's ``tfdoctor_memo`` dict (hits, misses,
    bypass, bytes, full), which the capture harness reads (in the script's globals) to keep warming up
    until the cache serves.

    Methods: a generator method of a module-level class (``Trainer.batches(self)``) calling
    ``self.preprocess(image)`` (and the methods and functions that calls in turn): the prefix of
    ``Trainer.preprocess`` moves into a module-level ``_Trainer_preprocess_prefix(image, self_mean,
    self_std)`` placed before the class, and the method calls it with ``self.mean, self.std``: each
    ``self.<attr>`` the prefix reads becomes an argument, so the cache keys on the attribute's content
    and a changed attribute is a miss, never a stale hit. Only attributes the class assigns
    (``self.<attr> = ...`` or a class-level name) are read; a random source (named like one, assigned
    from ``np.random...``/``default_rng``, or used as ``self.<attr>.integers()`` ...), a method or
    property, an attribute of a class with ``__getattr__``, an attribute indexed by a parameter (a
    per-example lookup into the dataset: the whole of it would be hashed), reading ``self`` whole or
    calling ``self.other()`` end the prefix. A method pure throughout moves whole (it returns what the
    prefix returns). Generators nested in a function (``def batches()`` inside ``main()``): a
    module-level function they call is cached as above; a function nested beside them gets a
    module-level ``_main_<f>_prefix`` when that prefix reads no name of the enclosing function (else it
    is left alone, with the reason). Per-example work written inline in the generator is not cached.
    A generator a loop around a whole training iterates (a K-fold split around ``fit()``) hands out
    folds, not batches: it is not a source, and the skip says so.

    Pure and deterministic, decided statically and conservatively: a statement reads only locals
    assigned before it, parameters that are not random sources (a parameter named or annotated like
    a generator, ``rng``/``seed``/``np.random.Generator``, or used as ``p.uniform()``/``p.integers()``
    ...), numpy/math, module-level constants bound once and never changed, and safe builtins; it calls
    only numpy/math (nothing under ``random``, no ``out=``), safe builtins and array methods that
    read (``astype``, ``reshape``, ``mean``, ``clip`` ...); it changes in place only arrays it made
    (``np.zeros_like``, ``.astype``, arithmetic). A ``for`` over ``range`` of such statements counts;
    ``if``/``with``/``try``/``return``, a call to the script's own functions or the first use of the
    random source end the prefix. The prefix must be worth it (a loop, 3 calls, or 4 calls and
    arithmetic operators together), and what the rest reads from it must not share memory with the
    arguments.

    Measured (examples/naive_loop.py, 4096 images, 2-core CPU shared with other work): preprocess()
    took a median 337 µs per example before, 180 µs with a warm cache (the float conversion and 5×5
    smoothing are served; brightness, contrast, crop, flip and normalisation still run per call) and
    about 380 µs on the first pass (content hash and copy: about 15 µs per call). The cache holds the
    prefix's result for every distinct example: 12 KiB each there, 48 MiB for the 4096 images. It
    pays from the second pass over the data, so a measurement within the first epoch sees only misses.
    On examples/corpus/class_trainer.py (numpy only, 2048 images, same machine) Trainer.preprocess()
    took 49-69 µs per example before, 20-37 µs warm (normalise and reflect-pad served; crop and flip
    still run) and about 108 µs on the first pass; 19 KiB per example, 150 MiB for its 8192 images. A
    saving of about 2 ms in a step of about 160 ms: ``--fix --steps 40`` there measured it "not
    decided" (1.37x, interval [1.01x, 1.92x] over 4 paired rounds on the loaded machine).

    Rolled back when: not faster beyond the noise band, or not sane (same losses).
    """

    ID = "generator-cache"
    DESCRIPTION = "deterministic per-example preprocessing cached in memory"
    CODEMOD = GeneratorCacheCodemod
    AFTER = ("tf-function", "generator-prefetch")
    PRIORITY = 35


FIX = GeneratorCache
