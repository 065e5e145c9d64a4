"""``generator-prefetch``: a Python generator feeding the training loop is run in a background thread,
so the next batches are produced while the current step trains."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod
from tfdoctor.fixes._cst import (
    CHUNKED_FROM_GENERATOR,
    assigned_values,
    attr_name,
    call_name,
    dotted,
    kwarg,
    names_called,
    set_kwarg,
    unique_name,
    walk,
)
from tfdoctor.fixes.tf_function import _is_step_body
from tfdoctor.model import PYTHON_WORK_ADVICE

HELPER = '''
def {name}(iterable, depth=4):
    """Added by tfdoctor (generator-prefetch): produce the next items of ``iterable`` in a
    background thread while the training step runs; same items, same order."""
    import queue
    import threading

    items = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def produce():
        try:
            for item in iterable:
                while not stop.is_set():
                    try:
                        items.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            items.put((end, None))
        except BaseException as e:  # handed to the training loop, raised there
            items.put((end, e))

    threading.Thread(target=produce, name="tfdoctor-prefetch", daemon=True).start()
    try:
        while True:
            item = items.get()
            if type(item) is tuple and len(item) == 2 and item[0] is end:
                if item[1] is not None:
                    raise item[1]
                return
            yield item
    finally:
        stop.set()
'''

CHUNK_HELPER = '''
def {name}(
    generator, output_signature=None, output_types=None, output_shapes=None, chunk={chunk}
):
    """Added by tfdoctor (generator-prefetch): ``tf.data.Dataset.from_generator`` taking the generator's
    items ``chunk`` at a time (stacked in Python, unbatched again in tf.data): one Python call per chunk
    instead of one per item; the same elements in the same order."""
    import numpy as np
    import tensorflow as tf

    given = dict(output_signature=output_signature, output_types=output_types, output_shapes=output_shapes)
    dataset = tf.data.Dataset.from_generator(generator, **{{k: v for k, v in given.items() if v is not None}})
    signature = dataset.element_spec  # made by from_generator itself: the generator has not run
    specs = tf.nest.flatten(signature)
    if not all(
        type(s) is tf.TensorSpec and s.shape.is_fully_defined() and s.dtype != tf.string for s in specs
    ):  # shapes that vary, strings, ragged or sparse items: as the script wrote it
        return dataset

    def stacked(items):
        columns = zip(*(tf.nest.flatten(item) for item in items))
        return tf.nest.pack_sequence_as(
            signature,
            [np.asarray(np.stack(c), dtype=s.dtype.as_numpy_dtype) for c, s in zip(columns, specs)],
        )

    def chunks():
        items = []
        try:
            for item in generator():
                items.append(item)
                if len(items) == chunk:
                    yield stacked(items)
                    items = []
        except Exception:
            if items:  # the items before an error the generator raised, then the error
                yield stacked(items)
            raise
        if items:
            yield stacked(items)

    chunked = tf.nest.map_structure(lambda s: tf.TensorSpec((None, *s.shape), s.dtype), signature)
    return tf.data.Dataset.from_generator(chunks, output_signature=chunked).unbatch()
'''
#: items a chunk of ``from_generator`` holds (CHUNK_HELPER)
CHUNK = 64

#: Keras PyDataset / Sequence base classes (``__getitem__`` makes a batch)
LOADER_BASES = frozenset({"PyDataset", "Sequence"})
#: threads Keras runs a PyDataset's ``__getitem__`` in (``workers=``)
WORKERS = 4


def _own(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Nodes under ``node`` in its own frame (nested functions, lambdas and classes not entered)."""
    out: list[cst.CSTNode] = []
    stack = list(node.children)
    while stack:
        n = stack.pop()
        out.append(n)
        if not isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            stack.extend(n.children)
    return out


def _is_generator(fn: cst.FunctionDef) -> bool:
    """``yield`` in the function's own body (a generator nested in it does not make it one)."""
    return any(isinstance(n, cst.Yield) for n in _own(fn.body))


def _generators(tree: cst.Module) -> dict[str, cst.FunctionDef]:
    """Module-level generator functions, by name."""
    return {fn.name.value: fn for fn in tree.body if isinstance(fn, cst.FunctionDef) and _is_generator(fn)}


def _generator_methods(tree: cst.Module) -> dict[str, cst.FunctionDef]:
    """Generator methods of the module's classes (``Trainer.batches(self)``), by method name."""
    out = {}
    for cls in walk(tree):
        if isinstance(cls, cst.ClassDef) and isinstance(cls.body, cst.IndentedBlock):
            for fn in cls.body.body:
                if isinstance(fn, cst.FunctionDef) and fn.name.value != "__iter__" and _is_generator(fn):
                    out[fn.name.value] = fn
    return out


def _iterable_loaders(tree: cst.Module) -> dict[str, cst.FunctionDef]:
    """Classes of the script (not a Keras PyDataset / Sequence) whose ``__iter__`` is a generator and
    that the script instantiates (``Loader(x, y, 64)``): class name -> that ``__iter__``."""
    made = names_called(tree)
    out: dict[str, cst.FunctionDef] = {}
    for cls in walk(tree):
        if (
            isinstance(cls, cst.ClassDef)
            and cls.name.value in made
            and isinstance(cls.body, cst.IndentedBlock)
            and not any((dotted(b.value) or "").split(".")[-1] in LOADER_BASES for b in cls.bases)
        ):
            for fn in cls.body.body:
                if isinstance(fn, cst.FunctionDef) and fn.name.value == "__iter__" and _is_generator(fn):
                    out[cls.name.value] = fn
    return out


def _nested_generators(tree: cst.Module) -> dict[str, cst.FunctionDef]:
    """Generator functions defined inside other functions (``def train_batches(...)`` in ``main()``)."""
    methods = {id(f) for f in _generator_methods(tree).values()}
    out: dict[str, cst.FunctionDef] = {}
    for fn in walk(tree):
        if (
            isinstance(fn, cst.FunctionDef)
            and id(fn) not in methods
            and fn not in tree.body
            and _is_generator(fn)
        ):
            out.setdefault(fn.name.value, fn)
    return out


def _step_names(tree: cst.Module) -> set[str]:
    """Functions and methods holding a training step (their calls in a loop make it a training loop)."""
    names = {"train_step", "step", "train_on_batch"}
    for fn in walk(tree):
        if isinstance(fn, cst.FunctionDef) and _is_step_body(fn.body):
            names.add(fn.name.value)
    return names


def runs_step(body: cst.CSTNode, steps: set[str]) -> bool:
    """Does ``body`` (a loop's, or a generator's) run a training step: a step written in it, or a call of
    one of ``steps`` (:func:`_step_names`)?"""
    return _is_step_body(body) or any(isinstance(c, cst.Call) and attr_name(c) in steps for c in walk(body))


class GeneratorPrefetchCodemod(FixCodemod):
    DESCRIPTION = "run the batch generator in a background thread"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        gens = {**_nested_generators(tree), **_generators(tree)}
        methods = _generator_methods(tree)
        iterables = _iterable_loaders(tree) if self.fix.facts.input_kind != "tf.data" else {}
        self.iter_wraps: dict[int, str] = {}  # id(a loader class's generator __iter__) -> its class
        self.workers: dict[int, str] = {}  # id(super().__init__ call of a PyDataset) -> its class
        self.targets: set[int] = set()
        self.chunked: set[int] = set()  # id(from_generator call) made chunked
        loaders, notes = self._pydatasets(tree)
        loaders += self._from_generators(tree, notes)
        notes += self._image_generators(tree)
        if not gens and not methods and not iterables:
            if loaders:
                return self._with_helpers(super().transform_module_impl(tree))
            if notes:
                raise SkipFile("; ".join(notes))
            raise SkipFile(
                "no Python generator function, generator method or PyDataset/Sequence in the script"
            )
        self.helper = unique_name(tree, "tfdoctor_prefetch")
        if any(
            isinstance(n, cst.FunctionDef) and n.name.value.startswith("tfdoctor_prefetch") for n in tree.body
        ):
            raise SkipFile("the script already uses tfdoctor's background prefetcher")
        used: list[str] = []
        steps = _step_names(tree)

        def generator_call(it: cst.BaseExpression) -> str | None:
            """``batches(...)`` / ``self.batches()`` calling one of the file's generators: its name."""
            if not isinstance(it, cst.Call):
                return None
            if isinstance(it.func, cst.Name) and it.func.value in gens:
                return it.func.value
            if isinstance(it.func, cst.Attribute) and it.func.attr.value in methods:
                return call_name(it) or it.func.attr.value
            return None

        # a generator assigned to a name (``gen = batches(...)``), the loop taking ``next(gen)`` or
        # iterating ``gen``: the assignment is wrapped (every one of that name)
        made: dict[str, list[cst.Call]] = {}
        for a in walk(tree):
            if (
                isinstance(a, cst.Assign)
                and len(a.targets) == 1
                and isinstance(a.targets[0].target, cst.Name)
                and generator_call(a.value) is not None
            ):
                assert isinstance(a.value, cst.Call)
                made.setdefault(a.targets[0].target.value, []).append(a.value)

        def target(it: cst.BaseExpression) -> bool:
            """Wrap the generator call ``it`` stands for; whether it stands for one."""
            if isinstance(it, cst.NamedExpr):  # for s in (pbar := tqdm(loader))
                it = it.value
            if isinstance(it, cst.Call) and call_name(it) in (
                "enumerate",
                "zip",
                "iter",
                "tqdm",
                "tqdm.tqdm",
            ):
                if not it.args:
                    return False
                it = it.args[0].value
            calls = made.get(it.value, []) if isinstance(it, cst.Name) else [it]
            found = False
            for call in calls:
                if (name := generator_call(call)) is None:
                    continue
                found = True
                if id(call) not in self.targets:
                    self.targets.add(id(call))
                    via = f" (as {it.value})" if isinstance(it, cst.Name) else ""
                    used.append(f"{name}() at line {self.line(call)}{via}")
            return found

        other_source = False  # a training loop iterating something else than the file's generator calls
        for loop in (n for n in walk(tree) if isinstance(n, (cst.For, cst.While))):
            if not runs_step(loop.body, steps):
                continue
            if isinstance(loop, cst.For) and not target(loop.iter):
                other_source = True
            for c in walk(loop.body):  # xb, yb = next(gen)
                if isinstance(c, cst.Call) and call_name(c) == "next" and c.args:
                    other_source |= not target(c.args[0].value)
        for c in walk(tree):
            if isinstance(c, cst.Call) and attr_name(c) == "fit" and c.args:
                target(c.args[0].value)
        if other_source and iterables:
            self._plan_iterables(iterables, used, notes)
        if not self.targets and not self.iter_wraps:
            if loaders:
                return self._with_helpers(super().transform_module_impl(tree))
            if notes:
                raise SkipFile("no Python generator feeds the training loop; " + "; ".join(notes))
            raise SkipFile("no Python generator feeds the training loop")
        self.summary = "; ".join(
            x
            for x in (
                f"{', '.join(used)} runs in a background thread ({self.helper}, 4 batches ahead)",
                self.summary,
            )
            if x
        )
        for u in used:
            self.advise(PYTHON_WORK_ADVICE.format(who=u.split("()")[0] + "()"))
        return self._with_helpers(super().transform_module_impl(tree))

    def _plan_iterables(
        self, iterables: dict[str, cst.FunctionDef], used: list[str], notes: list[str]
    ) -> None:
        """Plan the background thread inside each loader class's generator ``__iter__`` (every loop
        over an instance, ``tqdm(loader)`` included, gets it; ``len(loader)`` still works)."""
        for cls, fn in iterables.items():
            if any(isinstance(c, cst.Call) and call_name(c) == "super" and not c.args for c in _own(fn.body)):
                notes.append(f"{cls}.__iter__ calls super() without arguments: left as it is")
                continue
            self.iter_wraps[id(fn)] = cls
            used.append(f"{cls}.__iter__() (line {self.line(fn)})")

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        if id(original_node) not in self.iter_wraps:
            return updated_node
        # def __iter__(self): <body>  ->  def __iter__(self): def tfdoctor_items(): <body>; return prefetch(tfdoctor_items())
        inner = cst.FunctionDef(
            name=cst.Name("tfdoctor_items"), params=cst.Parameters(), body=updated_node.body
        )
        ret = cst.parse_statement(f"return {self.helper}(tfdoctor_items())")
        return updated_node.with_changes(body=cst.IndentedBlock(body=[inner, ret]))

    def _with_helpers(self, new: cst.Module) -> cst.Module:
        """The helpers the changes call, added after the docstring, ``__future__`` and the imports."""
        helpers = []
        if self.targets or self.iter_wraps:
            helpers.append(cst.parse_module(HELPER.format(name=self.helper)).body[0])
        if self.chunked:
            code = CHUNK_HELPER.format(name=self.chunk_helper, chunk=CHUNK)
            helpers.append(cst.parse_module(code).body[0])
        if not helpers:
            return new
        body = list(new.body)
        at = 0  # after the docstring, __future__ and the imports
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
        blank = [cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]
        helpers = [h.with_changes(leading_lines=blank) for h in helpers]
        rest = body[at:]
        if rest:
            rest[0] = rest[0].with_changes(
                leading_lines=[*blank, *[ln for ln in rest[0].leading_lines if ln.comment]]
            )
        return new.with_changes(body=[*body[:at], *helpers, *rest])

    def _from_generators(self, tree: cst.Module, notes: list[str]) -> list[str]:
        """Plan the chunked ``from_generator`` (CHUNK_HELPER) for each ``...from_generator(gen,
        output_signature=...)`` (or ``output_types=`` with ``output_shapes=``) of the script; ``notes`` gets
        why one is left alone. Returns what was planned."""
        calls = [c for c in walk(tree) if isinstance(c, cst.Call) and attr_name(c) == "from_generator"]
        if not calls:
            return []
        self.chunk_helper = unique_name(tree, CHUNKED_FROM_GENERATOR)
        if any(
            isinstance(n, cst.FunctionDef) and n.name.value.startswith(CHUNKED_FROM_GENERATOR)
            for n in tree.body
        ):
            notes.append("the script already uses tfdoctor's chunked from_generator")
            return []
        lines: list[str] = []
        left: list[str] = []
        for c in calls:
            keywords = {a.keyword.value for a in c.args if a.keyword is not None}
            positional = [a for a in c.args if a.keyword is None]
            if (
                any(a.star for a in c.args)
                or len(positional) > 1
                or not (len(positional) == 1 or "generator" in keywords)
            ):
                left.append(
                    f"from_generator() at line {self.line(c)} passes its types or shapes by position or with "
                    "*: left as it is"
                )
                continue
            extra = keywords - {"generator", "output_signature", "output_types", "output_shapes"}
            if extra:
                left.append(
                    f"from_generator() at line {self.line(c)} passes {', '.join(sorted(extra))}=: left as it is"
                )
                continue
            if "output_signature" not in keywords and not {"output_types", "output_shapes"} <= keywords:
                left.append(
                    f"from_generator() at line {self.line(c)} gives no element shapes (output_signature): "
                    "left as it is"
                )
                continue
            self.chunked.add(id(c))
            lines.append(f"line {self.line(c)}")
        if not lines:
            notes.extend(left)
            return []
        done = (
            f"from_generator() at {', '.join(lines)} takes the generator's items {CHUNK} at a time "
            f"({self.chunk_helper}: stacked in Python, unbatched again in tf.data; the same elements in the same "
            "order): one Python call per chunk instead of one per item"
        )
        done = "; ".join([done, *left])
        self.summary = "; ".join(x for x in (self.summary, done) if x)
        self.warn(
            f"the generator now runs up to {CHUNK} items ahead of what the pipeline has taken (a generator that "
            "reads state the training loop changes sees it later)"
        )
        return [done]

    def _image_generators(self, tree: cst.Module) -> list[str]:
        """Why a Keras ``ImageDataGenerator`` feeding ``fit`` (``datagen.flow(...)``, or a name
        assigned one) is left alone: Keras's own loader, whose random transforms run in scipy and
        numpy under the GIL: two threads made its batches at 0.75x one thread's rate, and ``workers=4``
        on its iterator measured 1.01-1.13x on a CIFAR-sized convnet, on 2 cores (docs/fixes.md): not
        worth a trial."""
        values = assigned_values(tree)

        def assigned(test: Callable[[cst.BaseExpression], bool]) -> set[str]:
            return {name for name, vs in values.items() if any(test(v) for v in vs)}

        makers = assigned(
            lambda v: isinstance(v, cst.Call) and (call_name(v) or "").split(".")[-1] == "ImageDataGenerator"
        )
        if not makers:
            return []

        def flow(e: cst.BaseExpression) -> bool:
            return (
                isinstance(e, cst.Call)
                and (attr_name(e) or "").startswith("flow")
                and isinstance(e.func, cst.Attribute)
                and dotted(e.func.value) in makers
            )

        flows = assigned(flow)
        fed = [
            c
            for c in walk(tree)
            if isinstance(c, cst.Call)
            and attr_name(c) in ("fit", "fit_generator")
            and c.args
            and (
                flow(c.args[0].value)
                or (isinstance(c.args[0].value, cst.Name) and c.args[0].value.value in flows)
            )
        ]
        if not fed:
            return []
        return [
            f"fit() at line {self.line(fed[0])} reads a Keras ImageDataGenerator: its random transforms run "
            "in scipy and numpy under the GIL, so more threads do not make them faster (two made its batches at "
            "0.75x one's rate on a 2-core CPU; left alone); advice: Keras "
            "preprocessing layers (RandomRotation, RandomTranslation, RandomFlip) in a tf.data map with "
            "num_parallel_calls=tf.data.AUTOTUNE, or at the start of the model"
        ]

    def _pydatasets(self, tree: cst.Module) -> tuple[list[str], list[str]]:
        """Plan ``workers=N`` on the ``super().__init__()`` of each keras PyDataset/Sequence subclass
        whose instances feed ``fit``; returns what was planned (the summary says it)."""
        classes = {
            c.name.value: c
            for c in walk(tree)
            if isinstance(c, cst.ClassDef)
            and any((dotted(b.value) or "").split(".")[-1] in LOADER_BASES for b in c.bases)
        }
        if not classes:
            return [], []
        made: dict[str, str] = {}  # variable -> class
        for a in walk(tree):
            if (
                isinstance(a, cst.Assign)
                and len(a.targets) == 1
                and isinstance(a.targets[0].target, cst.Name)
                and isinstance(a.value, cst.Call)
                and isinstance(a.value.func, cst.Name)
                and a.value.func.value in classes
            ):
                made[a.targets[0].target.value] = a.value.func.value
        fed: list[str] = []
        for c in walk(tree):
            if isinstance(c, cst.Call) and attr_name(c) == "fit" and c.args:
                v = c.args[0].value
                cls = None
                if isinstance(v, cst.Name):
                    cls = made.get(v.value)
                elif isinstance(v, cst.Call) and isinstance(v.func, cst.Name):
                    cls = v.func.value if v.func.value in classes else None
                if cls is not None and cls not in fed:
                    fed.append(cls)
        done: list[str] = []
        notes: list[str] = []
        for name in fed:
            loader = classes[name]
            passes = [
                c
                for c in walk(tree)
                if isinstance(c, cst.Call) and call_name(c) == name and kwarg(c, "workers") is not None
            ]
            init = next(
                (
                    f
                    for f in loader.body.body
                    if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"
                ),
                None,
            )
            sup = None
            if init is not None:
                sup = next(
                    (
                        c
                        for c in walk(init)
                        if isinstance(c, cst.Call)
                        and attr_name(c) == "__init__"
                        and isinstance(c.func, cst.Attribute)
                        and isinstance(c.func.value, cst.Call)
                        and call_name(c.func.value) == "super"
                    ),
                    None,
                )
            if passes or (sup is not None and kwarg(sup, "workers") is not None):
                notes.append(f"{name} already sets workers: left as it is")
                continue
            starred = [  # Seq(x, **opts): workers may come in there (a second one is a TypeError)
                c
                for c in walk(tree)
                if isinstance(c, cst.Call) and call_name(c) == name and any(a.star == "**" for a in c.args)
            ]
            if starred:
                notes.append(
                    f"{name} is made with ** keyword arguments (line {self.line(starred[0])}), which may set "
                    "workers already: left as it is"
                )
                continue
            if init is None and all(
                (dotted(b.value) or "").split(".")[-1] in LOADER_BASES for b in loader.bases
            ):
                # no __init__ of its own: PyDataset.__init__ takes workers= where the instance is made
                made_at = [
                    c
                    for c in walk(tree)
                    if isinstance(c, cst.Call) and isinstance(c.func, cst.Name) and c.func.value == name
                ]
                for c in made_at:
                    self.workers[id(c)] = name
                where = ", ".join(f"line {self.line(c)}" for c in made_at)
                done.append(
                    f"workers={WORKERS} where {name} is made ({where}; it has no __init__ of its own)"
                )
            elif sup is None:
                notes.append(f"{name}.__init__ does not call super().__init__(): nowhere to set workers")
                continue
            else:
                self.workers[id(sup)] = name
                done.append(f"workers={WORKERS} in {name}'s super().__init__() (line {self.line(sup)})")
            self.warn(
                f"{name}.__getitem__ now runs in {WORKERS} threads: batches keep their order; random draws "
                "from a generator the batches share happen in a different order"
            )
        if done:
            self.summary = (
                "; ".join(done)
                + ": Keras prepares the next batches in background threads while the step trains"
            )
        return done, notes

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if id(original_node) in self.workers:
            return set_kwarg(updated_node, "workers", cst.Integer(str(WORKERS)))
        if id(original_node) in self.targets:
            return cst.Call(func=cst.Name(self.helper), args=[cst.Arg(updated_node)])
        if id(original_node) in self.chunked:
            return updated_node.with_changes(func=cst.Name(self.chunk_helper))
        return updated_node


class GeneratorPrefetch(Fix):
    """Produce the next batches while the current step trains: the Python generator runs in a thread.

    What it changes: a generator function or generator method that feeds the training loop
    (``for ... in batches(...)``, ``enumerate(self.batches())``, ``model.fit(batches(...))``, or
    ``gen = batches(...)`` assigned once and a loop taking ``next(gen)``, as ``train_on_batch`` loops
    do: then the assignment) is wrapped in
    ``tfdoctor_prefetch(...)``, a small helper added to the script that runs the generator in a
    background thread, up to 4 batches ahead (same items, same order, exceptions re-raised in the loop;
    stops when the loop stops). It overlaps input with the step where the step releases the GIL
    (TensorFlow ops do), so it pays most once the step is a tf.function.

    A class of the script whose ``__iter__`` is a generator (a hand-written ``Loader`` with ``__len__``
    and ``__iter__`` yielding batches, iterated as ``for s in tqdm(loader)`` in a trainer's method),
    instantiated in the script, when a training loop iterates something no generator call of the file
    accounts for and the run did not read tf.data: the body of ``__iter__`` moves into a nested
    ``tfdoctor_items()`` and ``__iter__`` returns ``tfdoctor_prefetch(tfdoctor_items())``, so every loop
    over an instance gets the thread and ``len(loader)`` (tqdm's total) still works. Not changed: an
    ``__iter__`` calling ``super()`` without arguments (it cannot move into a nested function).

    A ``keras.utils.PyDataset`` (or ``Sequence``) subclass fed to ``fit`` gets ``workers=4`` in its
    ``super().__init__(...)`` (with or without ``**kwargs``), or, when the class has no ``__init__`` of
    its own, where the instance is made (``Seq(workers=4)``): Keras then prepares the next batches in 4
    threads (same batches, same order; random draws from a generator they share come in a different
    order). Not changed: a class that already sets ``workers`` (or is made with it), an ``__init__``
    that never calls ``super().__init__()``; a Keras ``ImageDataGenerator`` fed to ``fit``
    (``datagen.flow(...)``), whose random transforms run in scipy and numpy under the GIL (two threads
    made its batches at 0.75x one thread's rate, and ``workers=4`` on its iterator measured 1.01-1.13x on
    a CIFAR-sized convnet, on 2 cores): the skip says so and advises Keras preprocessing layers in a
    parallel tf.data map. ``use_multiprocessing`` is left off: each epoch's worker
    processes would start from copies of one state of a random generator the batches share, and repeat
    each other's draws.

    A ``tf.data.Dataset.from_generator(gen, output_signature=...)`` (or ``output_types=`` with
    ``output_shapes=``) becomes ``tfdoctor_from_generator(gen, ...)``, a helper added to the script that
    takes the generator's items 64 at a time, stacks them in Python and unbatches them again in tf.data:
    the same elements in the same order with the same element spec (what comes after, ``.batch()``,
    ``.shuffle()``, is untouched), one Python call per 64 items instead of one per item (from_generator
    pays ~0.4 ms of Python per item on this 2-core CPU: 26 ms a batch of 64 CIFAR-sized images, 7 ms in
    chunks). Items of shapes that vary, strings, ragged or sparse items: the helper builds the pipeline as
    the script wrote it. Left alone, and said: types or shapes passed by position, ``args=``, no shapes
    given. The generator runs up to 64 items ahead of what the pipeline has taken.

    Advice (not applied): per-example Python work stays under the GIL; the lasting fix is to express it
    as tf.data ops with a parallel ``map`` (see the patch pattern in docs/fixes.md).

    Rolled back when: not faster beyond the noise band, or not sane (same examples per step, losses).
    """

    ID = "generator-prefetch"
    DESCRIPTION = "Python generator produced in a background thread, or read in chunks"
    CODEMOD = GeneratorPrefetchCodemod
    AFTER = ("tf-function",)
    PRIORITY = 30


FIX = GeneratorPrefetch
