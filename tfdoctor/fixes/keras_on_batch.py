"""``keras-on-batch``: a Keras ``predict()`` in the training loop, or a ``fit()`` per batch, on one batch."""

from __future__ import annotations

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext
from tfdoctor.fixes._cst import kwarg, walk
from tfdoctor.model import KerasBatchCall

#: fit() keywords train_on_batch takes as they are
_PASSED = {"x", "y", "sample_weight", "class_weight"}
#: fit() / predict() keywords that change nothing for one batch of one epoch (dropped)
_DROPPED = {"verbose", "batch_size", "shuffle"}


def _one_batch(call: KerasBatchCall) -> bool:
    return call.rows is not None and 0 < call.rows <= call.batch_size


class KerasOnBatchCodemod(FixCodemod):
    DESCRIPTION = "predict() and fit() of one batch made predict_on_batch() and train_on_batch()"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        calls = [c for c in self.fix.facts.keras_batch_calls if _one_batch(c)]
        lines = tree.code.splitlines()
        self.targets: dict[int, str] = {}  # id(call node) -> its new method
        # each call the run saw: the statements holding its line's text (a statement may span lines); where
        # the text is in several places, the one at the line the run saw it at, if the file has it there
        spans: list[tuple[cst.SimpleStatementLine, int, int, set[str]]] = []
        for stmt in walk(tree):
            if isinstance(stmt, cst.SimpleStatementLine):
                pos = self.get_metadata(PositionProvider, stmt)
                first, last = pos.start.line, pos.end.line
                texts = {lines[n - 1].strip() for n in range(first, last + 1) if 0 < n <= len(lines)}
                spans.append((stmt, first, last, texts))
        done: list[tuple[int, str]] = []
        skipped: list[tuple[int, str]] = []
        for c in calls:
            at = [(stmt, first, last) for stmt, first, last, texts in spans if c.code in texts]
            seen = c.site.rpartition(":")[2]
            exact = [m for m in at if seen.isdigit() and m[1] <= int(seen) <= m[2]]
            for stmt, line, _ in exact if len(at) > 1 and exact else at:
                for node in walk(stmt):
                    if not (
                        isinstance(node, cst.Call)
                        and isinstance(node.func, cst.Attribute)
                        and node.func.attr.value == c.api
                    ):
                        continue
                    why = self._why_not(stmt, node, c)
                    if why:
                        skipped.append((line, f"{c.api}() at line {line}: {why}"))
                    elif id(node) not in self.targets:
                        new = "predict_on_batch" if c.api == "predict" else "train_on_batch"
                        self.targets[id(node)] = new
                        done.append((line, f"{c.api}() -> {new}() at line {line} ({c.rows} row(s) a call)"))
        if not self.targets:
            if skipped:
                raise SkipFile("; ".join(m for _, m in sorted(set(skipped))))
            raise SkipFile(
                "the calls the run saw ("
                + ", ".join(f"{c.api}() at {c.site}" for c in calls)
                + ") are not in this file as the run read them"
            )
        left = "; ".join(m for _, m in sorted(set(skipped)))
        self.summary = "; ".join(m for _, m in sorted(done)) + (f"; left as they are: {left}" if left else "")
        return super().transform_module_impl(tree)

    @staticmethod
    def _why_not(stmt: cst.SimpleStatementLine, call: cst.Call, c: KerasBatchCall) -> str | None:
        """Why this call cannot be made its one-batch form, or None."""
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in call.args):
            return "its arguments are unpacked (*args / **kwargs)"
        keywords = {a.keyword.value for a in call.args if a.keyword is not None}
        if c.api == "predict":
            if len(positional) > 1 or (positional and "x" in keywords) or not (positional or "x" in keywords):
                return "its arguments are not one input array"
            other = keywords - {"x"} - _DROPPED
            return f"it passes {', '.join(sorted(other))}" if other else None
        if len(positional) > 2:
            return "it passes more than x and y by position"
        other = keywords - _PASSED - _DROPPED - {"epochs"}
        if other:
            return f"it passes {', '.join(sorted(other))}, which train_on_batch does not take"
        epochs = kwarg(call, "epochs")
        if epochs is not None and not (isinstance(epochs.value, cst.Integer) and epochs.value.value == "1"):
            return "it trains more than one epoch"
        body = stmt.body[0] if len(stmt.body) == 1 else None
        if not (isinstance(body, cst.Expr) and body.value is call):
            return "its History is used (train_on_batch returns the loss)"
        return None

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        new = self.targets.get(id(original_node))
        if new is None or not isinstance(updated_node.func, cst.Attribute):
            return updated_node
        keep = {"x"} if new == "predict_on_batch" else _PASSED
        args = [a for a in updated_node.args if a.keyword is None or a.keyword.value in keep]
        if args:  # the call's own last comma, if any, and the layout before its ")"
            args[-1] = args[-1].with_changes(comma=updated_node.args[-1].comma)
        return updated_node.with_changes(func=updated_node.func.with_changes(attr=cst.Name(new)), args=args)


class KerasOnBatch(Fix):
    """Run a Keras ``predict()`` in the training loop, or a ``fit()`` per batch, as one batch.

    What it changes: ``model.predict(x)`` becomes ``model.predict_on_batch(x)`` and ``model.fit(x, y,
    epochs=1, verbose=0)`` becomes ``model.train_on_batch(x, y)``, at the lines where the run saw them
    called with at most one batch of rows (``verbose``, ``batch_size`` and ``shuffle`` dropped;
    ``sample_weight`` and ``class_weight`` kept). Each ``predict()`` and ``fit()`` call builds a data
    adapter, a tf.data pipeline and an iterator for its arrays and runs Keras's callbacks: for one row of
    a small network that is 120-130 ms here (Keras 3.15), where ``predict_on_batch`` takes about 1 ms and
    ``train_on_batch`` about 3 ms. A deep Q-learning agent (keon/deep-q-learning's ``dqn.py``) calls
    them several times per environment step. The numbers are the same: one batch of the same rows, the
    same train step; ``predict_on_batch`` returns the same numpy array.

    When it applies: the harness saw the calls in the timing window (``keras_batch_calls`` in the facts:
    the script's line, the calls, the most rows one call had), with no more rows than the call's
    ``batch_size``; a ``fit()`` whose ``History`` is used, that trains more than one epoch or passes
    callbacks, validation data or other options ``train_on_batch`` does not take is left as it is, with
    the reason. Found by the line's text, so edits above it by other fixes do not lose it.

    Rolled back when: not faster beyond the noise band, or not sane (same losses).
    """

    ID = "keras-on-batch"
    DESCRIPTION = "predict() and fit() of one batch made predict_on_batch() and train_on_batch()"
    CODEMOD = KerasOnBatchCodemod
    PRIORITY = 6
    FIRST = True

    def precheck(self, ctx: FixContext) -> str | None:
        calls = ctx.facts.keras_batch_calls
        if not calls:
            return "no Keras predict() in the training loop and no fit() per batch in the run"
        if not any(_one_batch(c) for c in calls):
            return "the predict() / fit() calls in the loop had more rows than one batch each"
        return None


FIX = KerasOnBatch
