"""TFD207 between-fits."""

from __future__ import annotations

from tfdoctor.model import BetweenFits, Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, ms, pct

#: keras-io's character-level LSTM as the profile run saw it: fit(epochs=1) of 119 steps in a loop, then
#: one predict() of one row per generated character, still going when the 30 s watch ended
CHAR_LSTM = {
    "seconds": 30.0,
    "ended_by": "limit",
    "limit_s": 30.0,
    "fit_site": "char_lstm.py:90",
    "fit_steps": 119,
    "predict_calls": [
        {
            "site": "char_lstm.py:106",
            "code": "preds = model.predict(x_pred, verbose=0)[0]",
            "calls": 520,
            "seconds": 29.7,
            "rows": 1,
        }
    ],
}

#: a loop that evaluates for a second between long fit() calls (the next fit() began)
SHORT = {
    "seconds": 1.0,
    "ended_by": "next_fit",
    "limit_s": 30.0,
    "fit_site": "train.py:40",
    "fit_steps": 4000,
}

#: Keras predict()'s default batch_size: a call on no more rows runs one batch
PREDICT_BATCH = 32

_ENDED = {
    "next_fit": "until the loop's next fit()",
    "limit": "still going when the watch ended at {limit:g} s",
    "write": "until the script opened {path} for writing (the run stopped before the write)",
    "script_end": "until the script ended",
}


class WorkBetweenFits(Rule):
    """The script's own work between the ``fit()`` calls of a fit-per-epoch loop dwarfs the training.

    What it detects:
        The script calls ``fit()`` from inside a ``for`` / ``while`` loop (``model.fit(x, y, epochs=1)``
        once per epoch, then its own work: generating samples, evaluating, plotting). The profile run's
        planned steps ended inside such a ``fit()``: tfdoctor ended that ``fit()`` there and timed what the
        script did next, until the loop's next ``fit()`` (or 30 s, the script's end, or its opening a
        file for writing, where the run stops before the write), counting its Keras ``predict()`` calls.
        It fires when that work takes 20 % or more of the loop's time (the gap against the steps one
        ``fit()`` runs at the measured step time).

    Why it costs throughput:
        None of that time is in the training steps the rest of the report (and ``--fix``) measures, yet
        the loop waits for it every epoch. keras-io's character-level LSTM generates 1,600 characters
        after each epoch with one ``predict()`` of one row each: each call builds a data adapter, a
        tf.data pipeline and an iterator (50-120 ms here, Keras 3.15) for a batch that takes about 1 ms
        with ``predict_on_batch``: minutes between epochs of seconds.

    Evidence:
        The ``fit()``'s line and the steps it runs, the gap's length and how it ended, and each line
        calling ``predict()`` in the gap with its calls, rows and time.

    Fix:
        Advice, not applied (the fix loop times training steps, and this time is outside them): call
        ``model.predict_on_batch(x)`` (or ``model(x, training=False)``) for the one-batch predictions;
        generate less often (every N epochs); move other work out of the per-epoch loop. Estimated
        saving: the ``predict()`` calls' share of the loop's time (of the loop's time, not of a step's).

    Fix safety:
        ``predict_on_batch`` returns the same numbers as ``predict`` on one batch.
    """

    ID = "TFD207"
    NAME = "between-fits"
    HEADLINE = "Bound between fit() calls"
    EXAMPLES = [
        Example(
            "sample_traces/rules-keras-fit-tiny",
            True,
            "keras-io's character-level LSTM: 520 predict() calls of one row in 30 s after a 119-step fit()",
            facts={"between_fits": CHAR_LSTM},
        ),
        Example(
            "sample_traces/rules-keras-fit-tiny",
            False,
            "a second of evaluation between fit() calls of 4000 steps",
            facts={"between_fits": SHORT},
        ),
        Example(
            "sample_traces/rules-keras-fit-tiny",
            True,
            "the same second against 4000 batches run 8 a step (steps_per_execution): 500 steps of training",
            facts={"between_fits": SHORT, "steps_per_execution": 8},
        ),
        Example("sample_traces/rules-keras-fit-tiny", False, "one fit(): nothing watched"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        gap: BetweenFits | None = ctx.facts.between_fits
        step_ms = ctx.avg_step_ms
        if gap is None or not gap.fit_steps or step_ms <= 0 or gap.seconds <= 0:
            return None
        # a step of fit() runs steps_per_execution batches; fit_steps counts batches
        spe = max(1, ctx.facts.steps_per_execution or 1)
        fit_s = -(-gap.fit_steps // spe) * step_ms / 1000
        share = gap.seconds / (gap.seconds + fit_s)
        if share < 0.2:
            return None
        at_least = gap.ended_by != "next_fit"
        ended = _ENDED[gap.ended_by].format(limit=gap.limit_s, path=gap.write_path or "a file")
        ev = [
            Evidence(
                label=f"fit() in a loop at {gap.fit_site}" if gap.fit_site else "fit() in a loop",
                value=f"{gap.fit_steps} batches a call, {fit_s:.1f} s at {ms(step_ms)} a step"
                + (f" of {spe} batches" if spe > 1 else ""),
            ),
            Evidence(
                label="between two fit() calls",
                value=f"{'≥ ' if at_least else ''}{gap.seconds:.1f} s, {ended}",
            ),
        ]
        in_calls = 0.0
        for c in gap.predict_calls:
            in_calls += c.seconds
            rows = f" of {c.rows} row{'s' if c.rows != 1 else ''}" if c.rows is not None else ""
            ev.append(
                Evidence(
                    label=f"predict() at {c.site}",
                    value=f"{c.calls} call{'s' if c.calls != 1 else ''}{rows}, {c.seconds:.1f} s "
                    f"({ms(1000 * c.seconds / max(1, c.calls))} a call)",
                )
            )
        one_batch = [c for c in gap.predict_calls if c.rows is not None and c.rows <= PREDICT_BATCH]
        if one_batch:
            advice = (
                "; predict_on_batch(x) (or model(x, training=False)) runs one batch without building a "
                "dataset per call"
            )
        elif gap.predict_calls:
            advice = ": its predict() calls take " + pct(in_calls / gap.seconds) + " of it"
        else:
            advice = " (no Keras predict() in it: the script's own code)"
        claim = (
            f"Between the fit() calls of its loop the script spends {'≥ ' if at_least else ''}"
            f"{gap.seconds:.1f} s against {fit_s:.1f} s of training in each fit(): {pct(share)} of the loop's "
            f"time is outside the training steps{advice}"
        )
        saving = 0.98 * sum(c.seconds for c in one_batch) / (gap.seconds + fit_s)
        return self.finding("high" if share >= 0.5 else "medium", claim, ev, est_saving=saving)


RULE = WorkBetweenFits
