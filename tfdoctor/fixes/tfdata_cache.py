"""``tfdata-cache``: ``.cache()`` after the deterministic preprocessing of an in-memory tf.data source,
before shuffling and random augmentation."""

from __future__ import annotations

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod
from tfdoctor.fixes._cst import (
    IN_MEMORY_SOURCES,
    Pipelines,
    attr_name,
    call_name,
    method_chain,
    source_kind,
    walk,
)

DETERMINISTIC_OPS = ("map", "filter")


def _random_call(node: cst.CSTNode) -> str | None:
    for n in walk(node):
        if isinstance(n, cst.Call):
            name = call_name(n) or attr_name(n) or ""
            if "random" in name.lower() or name.split(".")[0] in ("rng", "random"):
                return name
    return None


class _Purity:
    """Which module-level functions draw random numbers (directly or through functions they call)."""

    def __init__(self, tree: cst.Module):
        self.defs = {f.name.value: f for f in tree.body if isinstance(f, cst.FunctionDef)}
        self.memo: dict[str, str | None] = {}

    def why_random(self, node: cst.CSTNode, seen: frozenset[str] = frozenset()) -> str | None:
        direct = _random_call(node)
        if direct:
            return direct
        for n in walk(node):
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in self.defs:
                name = n.func.value
                if name in seen:
                    continue
                if name not in self.memo:
                    inner = self.why_random(self.defs[name].body, seen | {name})
                    self.memo[name] = f"{name} → {inner}" if inner else None
                if self.memo[name]:
                    return self.memo[name]
        return None

    def fn_random(self, arg: cst.BaseExpression) -> str | None:
        """Why the map function is random, "" when it is deterministic, None when it cannot be told."""
        if isinstance(arg, cst.Lambda):
            return self.why_random(arg.body) or ""
        if isinstance(arg, cst.Name) and arg.value in self.defs:
            why = self.why_random(self.defs[arg.value].body, frozenset({arg.value}))
            return f"{arg.value} → {why}" if why else ""
        return None


class CacheCodemod(FixCodemod):
    DESCRIPTION = ".cache() after deterministic preprocessing"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        pipes = Pipelines(tree)
        purity = _Purity(tree)
        self.plans: dict[int, tuple[cst.BaseExpression, list[tuple[str, cst.Call]]]] = {}
        reasons: list[str] = []
        for name, assigns in pipes.assigns.items():
            for a in assigns:
                source, stages = pipes.stages(a.value)
                kind_from: cst.Call | None = source
                start: cst.BaseExpression | None = source
                if source is None:  # ds = ds.map(...): the source is an earlier assignment of the name
                    root, _ = method_chain(a.value)
                    if not (isinstance(root, cst.Name) and root.value in pipes.names) or not stages:
                        continue
                    prior = [b for b in pipes.assigns.get(root.value, []) if b is not a]
                    kind_from = next((c for b in prior if (c := pipes.stages(b.value)[0]) is not None), None)
                    if kind_from is None:
                        continue
                    # what the earlier assignments already do to the elements: a cache after a shuffle
                    # (or any stage but a deterministic map) would replay one order, one draw, every epoch
                    done_before = [
                        (op, b) for b in prior for op, c in pipes.stages(b.value)[1] if op != "map"
                    ]
                    if done_before:
                        op, b = done_before[0]
                        reasons.append(
                            f"{name} (line {self.line(a)}): the pipeline already ran {op}() (line "
                            f"{self.line(b)}) before this line: a cache here would replay it every epoch"
                        )
                        continue
                    start = root
                line = self.line(a)
                if any(op == "cache" for op, _ in stages) or any(
                    op == "cache" for b in assigns for op, _ in pipes.stages(b.value)[1]
                ):
                    reasons.append(f"{name} (line {line}) already caches")
                    continue
                kind = source_kind(kind_from)
                if kind not in IN_MEMORY_SOURCES:
                    reasons.append(
                        f"{name} (line {line}) reads {kind}(): tfdoctor cannot tell whether the decoded data fits "
                        "in memory (cache(filename) caches to disk)"
                    )
                    continue
                det: list[tuple[str, cst.Call]] = []
                shuffles: list[tuple[str, cst.Call]] = []
                why_stop = "the end of the pipeline"
                cut = 0
                for i, (op, call) in enumerate(stages):
                    if op == "shuffle":
                        shuffles.append((op, call))
                        continue
                    if op in DETERMINISTIC_OPS and call.args:
                        why = purity.fn_random(call.args[0].value)
                        if why == "":
                            det.append((op, call))
                            cut = i + 1
                            continue
                        why_stop = (
                            f"{op}() draws random numbers ({why})"
                            if why
                            else f"{op}() calls a function tfdoctor cannot inspect"
                        )
                    else:
                        why_stop = f"{op}()"
                    break
                if not any(op == "map" for op, _ in det):
                    reasons.append(
                        f"{name} (line {line}): no deterministic map before {why_stop}: nothing worth caching"
                    )
                    continue
                before = [s for s in stages[:cut] if s[0] != "shuffle"]
                moved = [s for s in stages[:cut] if s[0] == "shuffle"]
                new_order = [*before, ("cache", None), *moved, *stages[cut:]]
                assert start is not None
                self.plans[id(a.value)] = (start, new_order)  # type: ignore[assignment]
                if moved:
                    self.warn(
                        f"line {line}: shuffle() moved after cache(): it shuffles the same elements (the maps before "
                        "it are deterministic and per element), and now reshuffles each epoch from the cache"
                    )
                self.warn(
                    f"line {line}: the source is in memory ({kind}); the cache holds the decoded elements, which may be "
                    "several times larger (uint8 → float32 is 4×): watch memory on big datasets"
                )
                reasons.append(
                    f"cache() after {', '.join(op + '()' for op, _ in before)} of {name} (line {line})"
                )
        if not self.plans:
            raise SkipFile("; ".join(reasons) or "no tf.data pipeline with an in-memory source in the script")
        self.summary = "; ".join(r for r in reasons if r.startswith("cache()"))
        return super().transform_module_impl(tree)

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        plan = self.plans.get(id(original_node.value))
        if plan is None:
            return updated_node
        source, order = plan
        outer = original_node.value
        cur: cst.BaseExpression = source
        # each position of the chain keeps the layout (the dot's whitespace) the original had there
        moved = {id(c) for _, c in order if c is not None}
        _, chain = method_chain(original_node.value)
        dots = [c.func.dot for _, c in chain if id(c) in moved and isinstance(c.func, cst.Attribute)]
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


class Cache(Fix):
    """Do the deterministic preprocessing once: ``.cache()`` after it, before shuffle and augmentation.

    What it changes: in a tf.data pipeline built from an in-memory source (``from_tensor_slices``,
    ``from_tensors``, ``range``, ``from_generator``), ``.cache()`` goes after the leading run of
    deterministic ``map``/``filter`` steps; a ``shuffle`` that came before them moves after the cache
    (same elements: the maps are per element and deterministic). A map is deterministic when its
    function (a lambda or a module-level function, followed through the functions it calls) draws no
    random numbers (``tf.random``, ``tf.image.random_*``, ``np.random``, ``rng.*``).

    A pipeline built over several assignments (``ds = ds.shuffle(...).map(...)``) is followed to the
    name's in-memory source; a shuffle (or any stage but a map) that an earlier assignment already ran
    is never cached after: the cache would replay one order every epoch.

    Fits in memory? Decided statically: only in-memory sources are cached (the raw data already fits;
    a warning says the decoded copy may be a few times larger). File sources (TFRecord, text, images
    from a directory) are skipped with the reason: cache them to disk with ``cache(filename)`` yourself.

    Measured: the cache only pays from the second epoch, and only when an epoch reads the whole
    dataset (a partially read cache is discarded), so a short measurement may reject it.

    Rolled back when: not faster beyond the noise band, or not sane.
    """

    ID = "tfdata-cache"
    DESCRIPTION = "cache() after deterministic tf.data preprocessing"
    CODEMOD = CacheCodemod
    AFTER = ("tfdata-parallel-map",)
    PRIORITY = 35


FIX = Cache
