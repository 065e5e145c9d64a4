"""``tfdata-parallel-map``: ``num_parallel_calls=tf.data.AUTOTUNE`` on tf.data ``map``/``interleave``."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from libcst.codemod import SkipFile
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod
from tfdoctor.fixes._cst import (
    Pipelines,
    add_arg,
    aliases,
    attr_name,
    expr,
    feeding,
    kwarg,
    make_kwarg,
    method_chain,
    own_nodes,
    walk,
)


class ParallelMapCodemod(FixCodemod):
    DESCRIPTION = "num_parallel_calls=tf.data.AUTOTUNE on tf.data map/interleave"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.pipes = Pipelines(tree)
        al = aliases(tree)
        self.autotune = al.autotune()  # tf.data.AUTOTUNE, or tf_data.AUTOTUNE as keras-io writes it
        self.lines: list[int] = []
        self.kept: list[str] = []
        self.unknown: list[int] = []  # lines of map/interleave on what is not known to be a dataset
        # a map in a pipeline no training reads (``normalized_ds = train_ds.map(...)`` only looked at with
        # ``next(iter(normalized_ds))``) is left alone, where the pipelines feeding training are known
        fed, reach = feeding(tree, self.pipes)
        self.unfed: dict[int, str] = {}  # id() of a map/interleave call -> the unread pipeline it builds
        for name, assigns in self.pipes.assigns.items():
            for c in (c for a in assigns for c in walk(a.value)) if name not in reach else ():
                if isinstance(c, cst.Call) and attr_name(c) in ("map", "interleave"):
                    self.unfed.setdefault(id(c), name)
        self.unfed_lines: list[str] = []
        self.cache_after = _cached_after(tree, self.line)
        self.before_cache: list[str] = []
        new = super().transform_module_impl(tree)
        if self.unfed_lines:
            said = "; ".join(self.unfed_lines)
            fedby = ", ".join(sorted(fed))
            if not self.lines:
                raise SkipFile(
                    (
                        f"every tf.data map/interleave feeding the model ({fedby}) already sets "
                        "num_parallel_calls"
                        if self.kept
                        else f"no tf.data map/interleave feeds the model ({fedby})"
                    )
                    + f" (left alone: {said}, which no training or evaluation reads)"
                )
            self.warn(f"left alone: {said}, which no training or evaluation ({fedby}) reads")
        if not self.lines:
            if self.kept:
                raise SkipFile("every tf.data map/interleave already sets num_parallel_calls")
            if self.unknown:  # ``dataset.map(...)`` on a helper's parameter: said as it is
                where = ", ".join(str(n) for n in self.unknown)
                raise SkipFile(
                    f"no map/interleave on a tf.data pipeline the script builds (.map() at line {where}: on a "
                    "name not known to be a tf.data dataset, left alone)"
                )
            raise SkipFile("no tf.data map/interleave found in the script")
        if al.data is None:
            AddImportsVisitor.add_needed_import(self.context, "tensorflow", asname="tf")
            new = AddImportsVisitor(self.context).transform_module(new)
        where = ", ".join(f"line {n}" for n in self.lines)
        self.summary = f"num_parallel_calls={self.autotune} on {len(self.lines)} map/interleave ({where})"
        for k in self.kept:
            self.warn(k)
        if self.before_cache:
            self.warn(
                f"{'; '.join(self.before_cache)}: the map runs in the epoch that fills the cache (the first) "
                "and not after it, when the cache serves its elements: a gain measured in that epoch holds "
                "for it only"
            )
        return new

    @staticmethod
    def kept_value(arg: cst.Arg) -> bool:
        """The script's own ``num_parallel_calls`` (anything but ``None``), which the fix keeps."""
        return not (isinstance(arg.value, cst.Name) and arg.value.value == "None")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        name = attr_name(original_node)
        if name not in ("map", "interleave") or not isinstance(original_node.func, cst.Attribute):
            return updated_node
        line = self.line(original_node.func.attr)  # the map's own line, not its chain's first one
        existing = kwarg(original_node, "num_parallel_calls")
        if not self.pipes.is_dataset(original_node.func.value):
            if existing is not None and self.kept_value(existing):  # a tf.data map, whatever its receiver
                self.kept.append(f"line {line}: {name}() keeps the script's own num_parallel_calls")
            elif original_node.args:  # not the builtin map(), which has no receiver: ``x.map(f)``
                self.unknown.append(line)
            return updated_node
        if id(original_node) in self.unfed and (existing is None or not self.kept_value(existing)):
            self.unfed_lines.append(f"line {line}: {name}() of {self.unfed[id(original_node)]}")
            return updated_node
        if existing is not None:
            if self.kept_value(existing):
                self.kept.append(f"line {line}: {name}() keeps the script's own num_parallel_calls")
                return updated_node
            self.lines.append(line)
            return updated_node.with_changes(
                args=[
                    a.with_changes(value=expr(self.autotune))
                    if a.keyword and a.keyword.value == "num_parallel_calls"
                    else a
                    for a in updated_node.args
                ]
            )
        self.lines.append(line)
        if id(original_node) in self.cache_after:
            self.before_cache.append(
                f"line {line}: {name}() comes before cache() (line {self.cache_after[id(original_node)]})"
            )
        return add_arg(updated_node, make_kwarg("num_parallel_calls", expr(self.autotune)))


def _cached_after(tree: cst.Module, line: Callable[[cst.CSTNode], int]) -> dict[int, int]:
    """id() of each map/interleave call a ``cache()`` of its pipeline follows -> that cache's line: later
    in its own chain, or in a later assignment or return of the same scope that continues the name it
    builds (keras-io's seq2seq Transformer: ``dataset = dataset.map(format_dataset)``, then ``return
    dataset.cache().shuffle(2048).prefetch(16)``)."""
    out: dict[int, int] = {}
    scopes: list[cst.CSTNode] = [tree, *(f for f in walk(tree) if isinstance(f, cst.FunctionDef))]
    for scope in scopes:
        body = scope.body if isinstance(scope, cst.FunctionDef) else scope
        stmts = [
            n for n in own_nodes(body) if isinstance(n, (cst.Assign, cst.Return)) and n.value is not None
        ]
        chains = []  # in source order: (target name or None, root name or None, calls)
        for st in stmts:
            assert st.value is not None
            root, calls = method_chain(st.value)
            target = (
                st.targets[0].target.value
                if isinstance(st, cst.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0].target, cst.Name)
                else None
            )
            chains.append((target, root.value if isinstance(root, cst.Name) else None, calls))
        for k, (target, _, calls) in enumerate(chains):
            for i, (op, call) in enumerate(calls):
                if op not in ("map", "interleave"):
                    continue
                cache = next((c for o, c in calls[i + 1 :] if o == "cache"), None)
                if cache is None and target is not None:
                    cache = next(
                        (
                            c
                            for _, root2, calls2 in chains[k + 1 :]
                            if root2 == target
                            for o, c in calls2
                            if o == "cache"
                        ),
                        None,
                    )
                if cache is not None:
                    out[id(call)] = line(cache)
    return out


class ParallelMap(Fix):
    """Run the tf.data ``map``/``interleave`` functions in parallel.

    What it changes: adds ``num_parallel_calls=tf.data.AUTOTUNE`` to every ``map`` and ``interleave`` of
    a tf.data pipeline in the script (a ``num_parallel_calls=None`` is replaced; any other value the
    script sets is kept). ``deterministic`` is left alone, so the element order is unchanged. Where the
    pipelines the model runs on are known (what ``fit`` trains and validates on, what ``evaluate`` and
    ``predict`` get), a map of a pipeline none of them reads is left alone and named: TensorFlow's "Load
    and preprocess images" maps ``normalized_ds`` only to look at one batch.

    When it applies: a map/interleave on something the script built with ``tf.data`` (a ``Dataset``
    constructor, or a name assigned from one). ``pool.map`` or ``map()`` are not touched. A map that a
    ``cache()`` of its pipeline follows (later in its chain, or where the function building it returns
    it with one: keras-io's seq2seq Transformer) runs only in the epoch that fills the cache, the one a
    trial times when the epoch is longer than its window: the result says that a gain measured there
    holds for that epoch only.

    Rolled back when: throughput does not rise beyond the noise band, or the run is not sane.
    """

    ID = "tfdata-parallel-map"
    DESCRIPTION = "tf.data map/interleave with num_parallel_calls=AUTOTUNE"
    CODEMOD = ParallelMapCodemod
    PRIORITY = 20


FIX = ParallelMap
