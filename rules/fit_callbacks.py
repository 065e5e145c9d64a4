"""TFD209 fit-callbacks."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding, FitCallback
from tfdoctor.rules._base import Context, Example, Rule, ms, pct

#: tests/data/shapes/heavy_callbacks.py as the harness timed it (2026-12-02, 24 timed steps of a CNN at
#: batch 64, 17 ms a typical step): a ModelCheckpoint saving every 10 batches, a callback of the script's
#: own evaluating on held-out data every 25 batches, TensorBoard writing each batch's scalars
HEAVY = [
    {
        "name": "ModelCheckpoint",
        "settings": "save_freq=10",
        "calls": 24,
        "seconds": 0.187,
        "slowest_s": 0.079,
    },
    {
        "name": "LossHistory",
        "site": "heavy_callbacks.py:27",
        "code": "def on_train_batch_end(self, batch, logs=None):",
        "calls": 24,
        "seconds": 0.140,
        "slowest_s": 0.136,
    },
    {"name": "TensorBoard", "settings": "update_freq=1, histogram_freq=0", "calls": 48, "seconds": 0.033}
    | {"slowest_s": 0.0018},
]
HEAVY = [c | {"timed_steps": 24, "timing_s": 0.851} for c in HEAVY]

#: a callback appending logs["loss"] to a list each batch: 0.02 ms a batch of a 20 ms step
LIGHT = [
    {"name": "LossHistory", "site": "train.py:12", "code": "def on_batch_end(self, batch, logs=None):"}
    | {"calls": 24, "seconds": 0.0005, "slowest_s": 0.0001, "timed_steps": 24, "timing_s": 0.48}
]

#: what to do, by the Keras callback's class
_ADVICE = {
    "ModelCheckpoint": 'save_freq="epoch" (or a multiple of the epoch\'s batches)',
    "BackupAndRestore": 'save_freq="epoch"',
    "TensorBoard": 'update_freq="epoch" (or every few hundred batches)',
}


def _label(c: FitCallback) -> str:
    if c.site:
        return f"{c.name} (its batch hook at {c.site})"
    return f"{c.name} ({c.settings})" if c.settings else c.name


class FitCallbacks(Rule):
    """``fit()``'s callbacks work on the host after every batch and hold up the next one.

    What it detects:
        The harness timed, in the timing window, the per-batch hooks (``on_train_batch_begin`` /
        ``on_train_batch_end``, Keras 2's ``on_batch_*``, a ``LambdaCallback``'s) of the callbacks the
        script gave ``fit()``: a ``ModelCheckpoint`` with a
        ``save_freq`` in batches, ``TensorBoard(update_freq="batch")``, a callback of the script's own
        (keras-io's callbacks guide records the loss each batch; user scripts evaluate on held-out data
        every N batches). It fires when they take 10 % or more of the timing window's time. The profiled
        window's breakdown describes the *typical* step, which a save every 10 batches does not change:
        the time shows in the throughput, and here.

    Why it costs throughput:
        Keras runs batch hooks on the training thread between one batch and the next (in a thread only
        when no callback overrides them); while a checkpoint is written or an ``evaluate()`` runs, no
        training happens. tests/data/shapes/heavy_callbacks.py: a save every 10 batches (62-79 ms), an
        evaluation every 25 batches (140 ms) and TensorBoard's scalars each batch took 46 % of the timing
        window of a 17 ms step; side by side (plain ``python``, epochs 2-3, 3 interleaved rounds) the
        same script with ``save_freq="epoch"``, ``update_freq="epoch"`` and no evaluation ran its epochs
        in 1.70-2.27 s against 2.47-2.84 s, a 30 % saving (median of 6 pairs, 14-40 %): the input
        pipeline's prefetch works on during a callback, so the training time saved is about two thirds of
        the callbacks' own.

    Evidence:
        Each callback's share of the training time, its calls and its slowest call; what makes a Keras
        callback work each batch (``save_freq=10``, ``update_freq=1``).

    Fix:
        Advice ``callback-frequency`` (the callbacks are the user's choice of what to keep, so nothing
        is changed automatically): ``ModelCheckpoint(save_freq="epoch")``, ``TensorBoard(update_freq=
        "epoch")`` or every few hundred batches; in a callback of the script's own, do the work every N
        batches or in ``on_epoch_end``, and leave held-out evaluation to ``fit(validation_data=...,
        validation_freq=...)``. Estimated saving: 65 % of the callbacks' share (as measured above).

    Fix safety:
        Checkpoints and logs come less often; training itself is unchanged.
    """

    ID = "TFD209"
    NAME = "fit-callbacks"
    HEADLINE = "Callback-bound"
    NEEDS_STEPS = False
    EXAMPLES = [
        Example(
            "sample_traces/rules-keras-fit-tiny",
            True,
            "a checkpoint every 10 batches, an evaluate() every 25, TensorBoard each batch (heavy_callbacks.py)",
            facts={"fit_callbacks": HEAVY},
        ),
        Example(
            "sample_traces/rules-keras-fit-tiny",
            False,
            "a callback appending the loss to a list each batch",
            facts={"fit_callbacks": LIGHT},
        ),
        Example("sample_traces/rules-keras-fit-tiny", False, "fit without callbacks of the script's"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        cbs = [c for c in ctx.facts.fit_callbacks if c.calls and c.timing_s > 0]
        if not cbs:
            return None
        timing_s = max(c.timing_s for c in cbs)
        share = min(1.0, sum(c.seconds for c in cbs) / timing_s)
        if share < 0.1:
            return None
        cbs.sort(key=lambda c: -c.seconds)
        ev = [
            Evidence(
                label=_label(c),
                value=f"{pct(c.seconds / timing_s)} of the training time: {c.calls} calls in "
                f"{c.timed_steps} steps, the slowest {ms(1000 * c.slowest_s)}",
            )
            for c in cbs
        ]
        ev.append(
            Evidence(
                label="in the callbacks",
                value=f"{ms(1000 * sum(c.seconds for c in cbs))} of the timing window's {ms(1000 * timing_s)}",
            )
        )
        heavy = [c for c in cbs if c.seconds / timing_s >= 0.03] or cbs[:1]
        todo = []
        for c in heavy:
            if c.name in _ADVICE:
                todo.append(f"{c.name}: {_ADVICE[c.name]}")
            elif c.site:
                todo.append(f"{c.name} at {c.site}: its work every N batches or at the epoch's end")
            else:
                todo.append(f"{c.name}: less often than every batch")
        claim = (
            f"fit()'s callbacks take {pct(share)} of the training time between the batches ("
            + ", ".join(f"{c.name} {pct(c.seconds / timing_s)}" for c in heavy)
            + "); "
            + "; ".join(todo)
        )
        sev = "high" if share >= 0.3 else "medium" if share >= 0.15 else "low"
        return self.finding(sev, claim, ev, est_saving=0.65 * share, fix_ids=["callback-frequency"])


RULE = FitCallbacks
