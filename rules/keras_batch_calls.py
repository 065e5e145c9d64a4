"""TFD206 keras-batch-calls."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, ms, pct

#: a predict() on 10000 rows (a validation set's) in each of the sample's 24 timed steps, 3 s in all
BIG = [
    {
        "api": "predict",
        "site": "dqn_agent.py:81",
        "code": "q = model.predict(x_val)",
        "calls": 24,
        "rows": 10000,
    }
    | {"seconds": 3.0, "timed_steps": 24}
]


class KerasBatchCalls(Rule):
    """Keras ``predict()`` in the training loop, or ``fit()`` once per batch, on one batch each call.

    What it detects:
        The harness saw the script call Keras's ``predict()`` between its training steps, or ``fit()`` once
        per batch (a deep Q-learning agent: ``model.predict(state)`` to act and to build targets,
        ``model.fit(state, target, epochs=1, verbose=0)`` per sample), each call on no more rows than one
        batch, and those calls take 20 % or more of the step time in the timing window.

    Why it costs throughput:
        Each ``predict()`` / ``fit()`` call builds a data adapter, a tf.data pipeline (tracing its
        functions) and an iterator for its arrays, and runs the callbacks: 100-130 ms a call here for one
        row of a small network (Keras 3.15), where the one batch itself takes about 1 ms
        (``predict_on_batch``) or 3 ms (``train_on_batch``).

    Evidence:
        Each call's line in the script, its calls per timed step, its time per call and rows, and the
        share of step time the calls take together.

    Fix:
        ``keras-on-batch``: ``predict_on_batch(x)`` and ``train_on_batch(x, y)`` at those lines (the same
        numbers: one batch of the same rows). Estimated saving: the calls' share of step time, less what
        the one-batch calls still take (about 2 %).

    Fix safety:
        The same computation; ``train_on_batch`` returns the loss where ``fit`` returned a History, so a
        ``fit()`` whose result is used, or that passes callbacks or validation data, is left as it is.
    """

    ID = "TFD206"
    NAME = "keras-batch-calls"
    HEADLINE = "Keras-call-bound"
    EXAMPLES = [
        Example(
            "sample_traces/rules-keras-batch-calls",
            True,
            "keon/deep-q-learning's agent: two predict() and a fit() of one row per step, ~365 ms steps",
        ),
        Example(
            "sample_traces/rules-keras-batch-calls",
            False,
            "a predict() on 10000 rows each step (a validation set's): not one batch a call",
            facts={"keras_batch_calls": BIG},
        ),
        Example("sample_traces/rules-keras-fit-tiny", False, "one fit() over many batches"),
        Example("sample_traces/rules-well-fed", False, "a custom loop, no Keras calls"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        calls = [
            c
            for c in ctx.facts.keras_batch_calls
            if c.calls and c.timed_steps and c.rows is not None and c.rows <= c.batch_size
        ]
        step_ms = ctx.avg_step_ms
        if not calls or step_ms <= 0:
            return None
        per_step_ms = sum(1000 * c.seconds / c.timed_steps for c in calls)
        share = min(1.0, per_step_ms / step_ms)
        if share < 0.2:
            return None
        ev = [
            Evidence(
                label=f"{c.api}() at {c.site}",
                value=f"{c.calls / c.timed_steps:.2g} call{'' if c.calls == c.timed_steps else 's'} a step, "
                f"{ms(1000 * c.seconds / c.calls)} a call"
                + (f" on {c.rows} row{'s' if c.rows != 1 else ''}" if c.rows is not None else ""),
            )
            for c in calls
        ]
        ev.append(Evidence(label="in the calls", value=f"{ms(per_step_ms)} of each {ms(step_ms)} step"))
        names = " and ".join(sorted({f"{c.api}()" for c in calls}))
        claim = (
            f"Keras {names} called on one batch at a time take {pct(share)} of step time: each call builds "
            "a dataset and an iterator for its arrays"
        )
        sev = "high" if share >= 0.5 else "medium"
        return self.finding(sev, claim, ev, est_saving=0.98 * share, fix_ids=["keras-on-batch"])


RULE = KerasBatchCalls
