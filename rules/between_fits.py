"""TFD207 between-fits."""

from __future__ import annotations

from tfdoctor.model import WHOLE_LOOP_SHARE, BetweenFits, Evidence, Finding
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

#: a federated-averaging loop (tests/data/shapes/fedavg.py) as the profile run saw it: between two clients'
#: fit() calls 0.2 s (scaling the weights, clear_session, a new local model built and compiled), then the
#: next client's fit() took 0.43 s to its first batch (its train function traced for the new model)
FEDAVG = {
    "seconds": 0.2,
    "ended_by": "next_fit",
    "limit_s": 30.0,
    "fit_site": "fedavg.py:161",
    "fit_steps": 38,
    "next_fit_model": "new",
    "next_fit_first_batch_s": 0.43,
}

#: keras-io's PPO (tests/data/shapes/ppo_cartpole.py) as the profile run saw it: 86 policy and value
#: updates of 1.9 ms, then 3.8 s of collection until the next update, 1,000 eager critic calls in it
PPO = {
    "seconds": 3.791,
    "ended_by": "next_step",
    "limit_s": 30.0,
    "fit_site": "ppo_cartpole.py:148",
    "fit_steps": 86,
    "loop": "steps",
    "model_calls": [
        {
            "site": "ppo_cartpole.py:251",
            "code": "value_t = critic(observation)",
            "calls": 1000,
            "seconds": 2.0812,
            "api": "call",
        }
    ],
}

#: the share of an eager model call's time a graph call saves (a small model's eager call dispatches op
#: by op): keras-io's PPO with its critic called through a @tf.function collected an epoch in 1.9-2.3 s
#: against 3.5-4.0 s, side by side (2026-12-01, 2 interleaved rounds of 4 epochs, this 2-core CPU): 89 % of
#: the eager calls' 2.08 s saved; a quarter is left for models whose eager call dispatches less
GRAPH_CALL_SAVES = 0.75

#: Keras predict()'s default batch_size: a call on no more rows runs one batch
PREDICT_BATCH = 32

_ENDED = {
    "next_fit": "until the loop's next fit()",
    "next_step": "until the next burst of steps",
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
        file for writing, where the run stops before the write), counting its Keras ``predict()`` calls,
        and then that next ``fit()`` up to the end of its first batch, noting whether it trains the same
        model, a new one (built in the loop) or the same one compiled again. It fires when that work
        takes 20 % or more of the loop's time (the gap, and the next first batch beyond a step, against
        the steps one ``fit()`` runs at the measured step time).

        A custom loop's steps (tf.function or eager) may come in bursts the same way (keras-io's PPO collects
        4,000 environment steps, each with an eager ``critic(observation)`` call, then runs 80 policy and
        80 value updates): where the planned steps end inside a burst, the run goes on unprofiled to the
        burst's end and times the script's work until a step begins after a pause (0.5 s and 20 steps'
        time at least), with the Keras model calls made in it. It fires at the same 20 %.

    Why it costs throughput:
        None of that time is in the training steps the rest of the report (and ``--fix``) measures, yet
        the loop waits for it every epoch. keras-io's character-level LSTM generates 1,600 characters
        after each epoch with one ``predict()`` of one row each: each call builds a data adapter, a
        tf.data pipeline and an iterator (50-120 ms here, Keras 3.15) for a batch that takes about 1 ms
        with ``predict_on_batch``: minutes between epochs of seconds. A federated-averaging script builds,
        compiles and fits a new local model for each client in each round: every ``fit()`` traces its
        train function again before its first batch (0.4 s here for 38 batches of 2 ms).

    Evidence:
        The ``fit()``'s line and the steps it runs, the gap's length and how it ended, the next
        ``fit()``'s first batch and its model, and each line calling ``predict()`` in the gap with its
        calls, rows and time; for bursts of steps, the burst's steps and each line calling a model
        eagerly (or ``get_weights`` / ``set_weights``) in the gap.

    Fix:
        Advice, not applied (the fix loop times training steps, and this time is outside them): call
        ``model.predict_on_batch(x)`` (or ``model(x, training=False)``) for the one-batch predictions;
        generate less often (every N epochs); move other work out of the per-epoch loop. Where each
        ``fit()`` trains a model built or compiled in the loop: build and compile it once, before the
        loop, and load the weights each pass with ``set_weights()`` (for a fresh optimizer state, assign
        zeros to its step count and slot variables, not to its learning rate, which Keras 3 keeps among
        ``optimizer.variables`` too, rather than compiling again, which discards the traced function).
        Between bursts of steps: call the model inside a ``@tf.function`` (the ``host-calls`` fix, offered
        where the loop spends half its time or more between bursts: ``--fix`` then judges every run on the
        whole loop, a burst and the work until the next); estimated saving three quarters of the eager
        calls' time (PPO's critic called through a tf.function saved 89 % of it, side by side: an epoch's
        collection 1.9-2.3 s against 3.5-4.0 s).
        Estimated saving: the one-batch ``predict()`` calls' share of the loop's time, and the next first
        batch's time beyond a step where the model was built or compiled in the loop (of the loop's
        time, not of a step's; part of that first batch, the ``fit()``'s own set-up, remains).

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
        Example(
            "sample_traces/rules-keras-fit-tiny",
            True,
            "federated averaging: a new local model per client, its first batch 0.43 s against 38 batches",
            facts={"between_fits": FEDAVG},
        ),
        Example(
            "sample_traces/rules-keras-fit-tiny",
            False,
            "the same model fitted again: a first batch of 50 ms after 4000 batches",
            facts={"between_fits": {**SHORT, "next_fit_model": "same", "next_fit_first_batch_s": 0.05}},
        ),
        Example("sample_traces/rules-keras-fit-tiny", False, "one fit(): nothing watched"),
        Example(
            "sample_traces/full-batch-loop",
            True,
            "keras-io's PPO: 86 updates, then 3.8 s of collection with 1,000 eager critic calls",
            facts={"between_fits": PPO},
        ),
        Example(
            "sample_traces/full-batch-loop",
            False,
            "a custom loop pausing 0.6 s (an evaluation) between bursts of 4000 steps",
            facts={"between_fits": {**PPO, "seconds": 0.6, "fit_steps": 4000, "model_calls": []}},
        ),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        gap: BetweenFits | None = ctx.facts.between_fits
        step_ms = ctx.avg_step_ms
        if gap is None or not gap.fit_steps or step_ms <= 0 or gap.seconds <= 0:
            return None
        # a step of fit() runs steps_per_execution batches; fit_steps counts batches
        spe = max(1, ctx.facts.steps_per_execution or 1)
        # the next fit()'s first batch beyond a step: its setup, and a train function traced anew for a
        # model built (or compiled) in the loop, every call
        if gap.loop == "steps":
            return self._bursts(gap, step_ms)
        outside, fit_s, setup = gap.loop_time(step_ms, spe)
        first = gap.next_fit_first_batch_s
        rebuilt = gap.next_fit_model in ("new", "recompiled") and setup > 0
        share = outside / (outside + fit_s)
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
        if rebuilt and first is not None:
            built = (
                "a model built in the loop"
                if gap.next_fit_model == "new"
                else "the same model compiled again"
            )
            ev.append(
                Evidence(
                    label="the next fit()'s first batch",
                    value=f"{first:.2f} s from its call against {ms(step_ms)} a step ({built}: its train "
                    "function traced anew)",
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
        if rebuilt:
            what = "builds a new model" if gap.next_fit_model == "new" else "compiles its model again"
            advice = (
                f"; each pass {what}, whose first batch takes {first:.2f} s (its train function traced "
                "anew): build and compile it once, before the loop, and load its weights each pass "
                "(set_weights(); for a fresh optimizer state zero its step count and slots, not its "
                "learning rate, rather than compile() again)"
                + (advice if one_batch or gap.predict_calls else "")
            )
        claim = (
            f"Between the fit() calls of its loop the script spends {'≥ ' if at_least else ''}"
            f"{outside:.1f} s against {fit_s:.1f} s of training in each fit(): {pct(share)} of the loop's "
            f"time is outside the training steps{advice}"
        )
        saving = (0.98 * sum(c.seconds for c in one_batch) + (setup if rebuilt else 0.0)) / (outside + fit_s)
        return self.finding("high" if share >= 0.5 else "medium", claim, ev, est_saving=saving)

    def _bursts(self, gap: BetweenFits, step_ms: float) -> Finding | None:
        """A custom loop whose steps come in bursts (``loop`` "steps"): the script's own work between two
        bursts against the burst's steps at the measured step time."""
        assert gap.fit_steps
        outside, steps_s, _ = gap.loop_time(step_ms)
        share = outside / (outside + steps_s)
        if share < 0.2:
            return None
        at_least = gap.ended_by != "next_step"
        ended = _ENDED[gap.ended_by].format(limit=gap.limit_s, path=gap.write_path or "a file")
        where = (
            f" ({gap.fit_site.rpartition(':')[0]} line {gap.fit_site.rpartition(':')[2]})"
            if gap.fit_site
            else ""
        )
        ev = [
            Evidence(
                label="training steps in bursts"
                + (f", the step function at {gap.fit_site}" if gap.fit_site else ""),
                value=f"{gap.fit_steps} steps a burst, {steps_s:.2f} s at {ms(step_ms)} a step",
            ),
            Evidence(
                label="between two bursts", value=f"{'≥ ' if at_least else ''}{gap.seconds:.1f} s, {ended}"
            ),
        ]
        eager = 0.0
        for c in gap.model_calls:
            if c.api == "call":
                eager += c.seconds
            what = "model called eagerly" if c.api == "call" else f"{c.api}()"
            ev.append(
                Evidence(
                    label=f"{what} at {c.site}",
                    value=f"{c.calls} call{'s' if c.calls != 1 else ''}, {c.seconds:.2f} s "
                    f"({ms(1000 * c.seconds / max(1, c.calls))} a call): {c.code}",
                )
            )
        whole = share >= WHOLE_LOOP_SHARE and gap.ended_by == "next_step"
        if eager:
            advice = (
                f"; its model calls outside every tf.function (op by op) take {pct(eager / gap.seconds)} of "
                "it: call the model inside a @tf.function ("
                + (
                    "tfdoctor's host-calls fix does so, and --fix judges this loop whole: a burst and the "
                    "work until the next)"
                    if whole
                    else "tfdoctor's host-calls fix does so where the calls fall between the steps it times)"
                )
            )
        elif gap.model_calls:
            advice = "; its Keras weight copies through numpy are in it"
        else:
            advice = " (no Keras model call in it: the script's own code)"
        claim = (
            f"Between the bursts of its training steps{where} the script spends {'≥ ' if at_least else ''}"
            f"{outside:.1f} s against {steps_s:.2f} s of training in each burst: {pct(share)} of the loop's "
            f"time is outside the training steps{advice}"
        )
        saving = GRAPH_CALL_SAVES * eager / (outside + steps_s)
        fixes = (
            ["host-calls"] if whole and any(c.api != "predict" and c.calls for c in gap.model_calls) else None
        )
        return self.finding("high" if share >= 0.5 else "medium", claim, ev, est_saving=saving, fix_ids=fixes)


RULE = WorkBetweenFits
