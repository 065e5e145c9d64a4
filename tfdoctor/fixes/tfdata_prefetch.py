"""``tfdata-prefetch``: ``.prefetch(tf.data.AUTOTUNE)`` at the end of the pipeline that feeds training."""

from __future__ import annotations

from typing import TypeVar

import libcst as cst
from libcst.codemod import SkipFile
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod
from tfdoctor.fixes._cst import (
    COMBINATORS,
    DATASET_METHODS,
    Pipelines,
    aliases,
    by_owner,
    call_name,
    chain_append,
    consumers,
    expr,
    method_chain,
    owners,
    source_kind,
    walk,
)

T = TypeVar("T", cst.Return, cst.Assign)


def _prefetching_source(pipes: Pipelines, assigns: list[cst.Assign]) -> str | None:
    """The source of a pipeline that is a dataset utility's result with nothing after it, when that
    utility ends with ``prefetch(AUTOTUNE)`` itself (``image_dataset_from_directory``,
    ``timeseries_dataset_from_array``, ``tf.data.experimental.make_csv_dataset``), else None."""
    found = None
    for a in assigns:
        source, stages = pipes.stages(a.value)
        if stages:
            return None
        if source is not None:
            last = (call_name(source) or "").split(".")[-1]
            if not (
                last.endswith(("_dataset_from_directory", "_dataset_from_array"))
                or last in ("make_csv_dataset", "make_batched_features_dataset")  # prefetch_buffer_size
            ):
                return None
            found = last
    return found


def _prefetching_inputs(pipes: Pipelines, assigns: list[cst.Assign]) -> list[str]:
    """The pipelines a combining source reads, when the pipeline is that source with nothing after it and
    every one of them prefetches (keras-io's SimSiam: ``ssl_ds = tf.data.Dataset.zip((ssl_ds_one,
    ssl_ds_two))``, each ending ``.batch(BATCH_SIZE).prefetch(AUTO)``: the work is already overlapped), else
    []."""
    source, stages = pipes.stages(assigns[-1].value)
    if stages or source is None or source_kind(source) not in COMBINATORS:
        return []
    inputs = pipes.read_by(source)
    prefetches = [
        any(op == "prefetch" for b in pipes.assigns.get(i, []) for op, _ in method_chain(b.value)[1])
        for i in inputs
    ]
    return inputs if inputs and all(prefetches) else []


def _used_directly(tree: cst.Module, pipes: Pipelines) -> list[str]:
    """The functions of the script's returning a dataset whose call is used as it is, not assigned to a
    name: TensorFlow's tf.function guide trains with ``train(model, optimizer, make_ds())`` (a function
    ``return tf.data.Dataset...batch(BATCH)``), others write ``for x, y in make_ds():`` or
    ``model.fit(make_ds())``. Their returned chains end a pipeline no name holds. A call that a chain goes
    on from (``load_split(n).map(...)``, keras-io's DDIM) is that chain's source, not its end."""
    used: list[cst.BaseExpression] = []
    for n in walk(tree):
        if isinstance(n, cst.Call) and not (
            isinstance(n.func, cst.Attribute) and n.func.attr.value in DATASET_METHODS
        ):
            used += [a.value for a in n.args]
        elif isinstance(n, cst.For):
            used.append(n.iter)
    out: dict[str, None] = {}
    for c in used:
        if (
            isinstance(c, cst.Call)
            and isinstance(c.func, cst.Name)
            and c.func.value in pipes.functions
            and pipes.functions[c.func.value]
            and not c.func.value.startswith("tfdoctor_")
        ):
            out[c.func.value] = None
    return list(out)


def _prefetches(ends: list[cst.BaseExpression]) -> bool:
    """Does any of the chains ``ends`` (where a pipeline ends) call ``prefetch``?"""
    return any(n == "prefetch" for e in ends for n, _ in method_chain(e)[1])


def _returns_a_name(r: cst.Return, pipes: Pipelines) -> bool:
    root = method_chain(r.value)[0] if r.value is not None else None
    return isinstance(root, cst.Name) and root.value in pipes.names


def _ends(pipes: Pipelines) -> set[str]:
    """Where nothing visibly trains on a pipeline (a class's loop over ``self.ds_train``), the pipelines no
    other one is built from: ``ds = from_tensor_slices(...).map(f)`` read by ``ds_train = ds.take(n)...``
    and ``ds_val = ds.skip(n)...`` is a stage of those two, not an end (every pipeline when each is a stage
    of another)."""
    stages = set()
    for name in pipes.names:
        for a in pipes.assigns.get(name, []):
            root = method_chain(a.value)[0]
            if isinstance(root, cst.Name) and root.value != name and root.value in pipes.names:
                stages.add(root.value)
    return set(pipes.names) - stages or set(pipes.names)


class PrefetchCodemod(FixCodemod):
    DESCRIPTION = ".prefetch(tf.data.AUTOTUNE) at the end of the training pipeline"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        pipes = Pipelines(tree)
        direct = _used_directly(tree, pipes)
        if not pipes.names and not direct:
            raise SkipFile("no tf.data pipeline assigned to a name (or returned by a function) in the script")
        al = aliases(tree)
        self.autotune = al.autotune()  # tf.data.AUTOTUNE, or tf_data.AUTOTUNE as keras-io writes it
        feeding = consumers(tree, pipes) or _ends(pipes)
        self.targets: set[int] = set()  # id() of the Assign (or Return) whose value gets the prefetch
        # return dataset.cache().shuffle(2048).prefetch(16): a function's returned chain is where the
        # pipeline it builds ends (keras-io's make_dataset())
        returns: dict[str, list[cst.Return]] = {}
        for r in walk(tree):
            if isinstance(r, cst.Return) and r.value is not None:
                root, _ = method_chain(r.value)
                if isinstance(root, cst.Name) and root.value in pipes.names:
                    returns.setdefault(root.value, []).append(r)
        done: list[str] = []
        # a name's assignments and returns in each function apart (Kaggle's TPU starters: ``dataset``
        # in get_training_dataset() and get_validation_dataset(), only the second prefetching)
        owner = owners(tree)
        scoped: list[tuple[str, list[cst.Assign], list[cst.Return]]] = []
        for name in sorted(feeding):
            groups = by_owner([*pipes.assigns.get(name, []), *returns.get(name, [])], owner)
            for group in groups:
                fn = owner.get(id(group[0]))
                label = (
                    name if len(groups) == 1 else f"{name} in {fn.name.value}()" if fn else f"{name} (module)"
                )
                assigns_of = [a for a in group if isinstance(a, cst.Assign)]
                scoped.append((label, assigns_of, [r for r in group if isinstance(r, cst.Return)]))
        for label, assigns, returned in scoped:
            if not assigns:
                continue
            # ``train_dataset = prepare_dataset(...)``: the chains that function returns end the pipeline
            built = [r for a in assigns for r in pipes.returned_by(a.value)]
            ends = [
                *(a.value for a in assigns),
                *(r.value for r in [*returned, *built] if r.value is not None),
            ]
            for r in built:  # ``return ds``: the function's own pipeline, as its assignments build it
                head = method_chain(r.value)[0] if r.value is not None else None
                if isinstance(head, cst.Name):  # (the name's assignments in that function, where it has any)
                    every = pipes.assigns.get(head.value, [])
                    ends += [b.value for b in every if owner.get(id(b)) is owner.get(id(r))] or [
                        b.value for b in every
                    ]
                ends += [b.value for b in pipes.built_by(r)]  # ``ds = ds.prefetch(...)`` in a transformer
            if _prefetches(ends):
                done.append(label)
                continue
            if returned or built:
                self.targets.update(id(r) for r in [*returned, *built])
                continue
            if src := _prefetching_source(pipes, assigns):
                done.append(f"{label}: {src}() prefetches itself")
                continue
            if inputs := _prefetching_inputs(pipes, assigns):
                kind = source_kind(pipes.stages(assigns[-1].value)[0])
                done.append(f"{label}: {kind}() of {' and '.join(inputs)}, each prefetching")
                continue
            self.targets.add(id(assigns[-1]))
        for fname in direct:  # ``train(model, make_ds())``: the chains make_ds() returns end the pipeline
            # (a ``return dataset`` of a name the function assigns is that name's pipeline, read above)
            rets = [r for r in pipes.functions[fname] if not _returns_a_name(r, pipes)]
            if not rets:
                continue
            ends = [r.value for r in rets if r.value is not None] + [
                b.value for r in rets for b in pipes.built_by(r)
            ]
            if _prefetches(ends):
                done.append(f"{fname}()")
            else:
                self.targets.update(id(r) for r in rets)
        if not self.targets:
            raise SkipFile(
                f"the pipeline feeding training already prefetches ({', '.join(done) or 'none found'})"
            )
        self.lines: list[int] = []
        new = super().transform_module_impl(tree)
        if al.data is None:
            AddImportsVisitor.add_needed_import(self.context, "tensorflow", asname="tf")
            new = AddImportsVisitor(self.context).transform_module(new)
        self.summary = (
            f".prefetch({self.autotune}) at the end of the pipeline (line {', '.join(map(str, self.lines))})"
        )
        return new

    def _prefetched(self, original_node: cst.Return | cst.Assign, updated_node: T) -> T:
        """``updated_node`` (a target pipeline's return or last assignment) with the prefetch appended."""
        if id(original_node) not in self.targets or updated_node.value is None:
            return updated_node
        self.lines.append(self.line(original_node))
        value = chain_append(updated_node.value, "prefetch", [cst.Arg(expr(self.autotune))])
        return updated_node.with_changes(value=value)

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        return self._prefetched(original_node, updated_node)

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        return self._prefetched(original_node, updated_node)


class Prefetch(Fix):
    """Overlap input production with training: ``.prefetch(tf.data.AUTOTUNE)`` at the end of the pipeline.

    What it changes: the last assignment of each tf.data pipeline the script trains on (``model.fit(ds)``;
    in a script that fits nothing, ``for ... in ds`` and ``iter(ds)``; a ``next(iter(ds))`` outside any
    loop is a look at one batch, not training) gets ``.prefetch(tf.data.AUTOTUNE)`` appended (the chain
    a function returns, ``return ds.cache().shuffle(n)``, where it builds the pipeline there; the chain a
    function of the script's returns when the pipeline is that call, ``train_dataset =
    prepare_dataset(split)`` as in keras-io's DDIM, or ``train_ds = configure_for_performance(train_ds)``,
    a function applying tf.data methods to the dataset it is given, as in TensorFlow's "Load and
    preprocess images"; a function defined once; a pipeline no name holds, a function's returned chain
    whose call the script uses as it is, ``train(model, optimizer, make_ds())`` in TensorFlow's tf.function
    guide), unless any assignment of that pipeline, or that
    returned chain, already prefetches, or it is a ``tf.data.Dataset.zip`` (``sample_from_datasets``,
    ``choose_from_datasets``) of the script's pipelines with nothing after it and each of those prefetches
    (keras-io's SimSiam zips two pipelines ending in ``.prefetch(AUTO)``). A name assigned in two
    functions is two pipelines (Kaggle's TPU starters build ``dataset`` in ``get_training_dataset()`` and in
    ``get_validation_dataset()``; the tfdata-cache fix reads them apart too). Elements and their order are
    unchanged.

    Measured: tf.data itself injects an autotuned prefetch at the end of most pipelines (its
    ``inject_prefetch`` rewrite, on by default since TF 2.9), so on TF 2.21 an explicit one often changes
    nothing: 0.99x on ``tfdata_loop.py`` (benchmarks/fix_gains.py), where the loop rejects it. It pays
    where that rewrite is off (``apply_default_optimizations=False``) or does not apply.

    Rolled back when: throughput does not rise beyond the noise band, or the run is not sane.
    """

    ID = "tfdata-prefetch"
    DESCRIPTION = "prefetch(AUTOTUNE) at the end of the tf.data pipeline"
    CODEMOD = PrefetchCodemod
    PRIORITY = 25


FIX = Prefetch
