"""TFD208 host-calls."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, ms, pct

#: keras-io's DDPG (Keras 3 version) as the harness timed it: two soft target updates a step through
#: get_weights() / set_weights(), and the actor called eagerly on one state to act (24 timed steps)
DDPG = [
    {"api": "get_weights", "site": "ddpg.py:193", "code": "target_weights = target.get_weights()"}
    | {"calls": 48, "seconds": 0.034, "timed_steps": 24},
    {"api": "get_weights", "site": "ddpg.py:194", "code": "original_weights = original.get_weights()"}
    | {"calls": 48, "seconds": 0.029, "timed_steps": 24},
    {"api": "set_weights", "site": "ddpg.py:199", "code": "target.set_weights(target_weights)"}
    | {"calls": 48, "seconds": 0.072, "timed_steps": 24},
    {"api": "call", "site": "ddpg.py:253", "code": "sampled_actions = tf.squeeze(actor_model(state))"}
    | {"calls": 24, "seconds": 0.067, "timed_steps": 24},
]

#: one get_weights() a step of a small model: 0.2 ms
SMALL = [
    {"api": "get_weights", "site": "train.py:80", "code": "w = model.get_weights()"}
    | {"calls": 24, "seconds": 0.005, "timed_steps": 24}
]

_WHAT = {
    "get_weights": "get_weights()",
    "set_weights": "set_weights()",
    "call": "an eager model call",
}


class HostCalls(Rule):
    """Keras calls between the training steps that copy weights through numpy or run a model op by op.

    What it detects:
        The harness timed, between the steps of a custom loop (after the first step, outside ``fit``,
        ``predict`` and every tf.function), the script's ``get_weights()`` / ``set_weights()`` calls and
        its eager calls of a model outside any GradientTape (``actor(state)`` to act), by line; it fires
        when they take 20 % or more of the step time in the timing window.

    Why it costs throughput:
        ``get_weights()`` copies every weight into a new numpy array and ``set_weights()`` copies them
        back, each a host round trip per variable; a model called eagerly dispatches its ops one by one.
        keras-io's DDPG, as updated for Keras 3, soft-updates its two target networks with
        ``get_weights()`` / ``set_weights()`` every environment step and acts with ``actor_model(state)``:
        8.4 ms of a 12.8 ms step here, around a 4 ms tf.function update.

    Evidence:
        Each line's calls a step and time a call, and the share of step time they take together.

    Fix:
        ``host-calls``: the function copying the weights becomes a ``@tf.function`` that reads and assigns
        the variables (``for _v, _w in zip(target.weights, ws): _v.assign(_w)``, the same arithmetic), and
        the eager model call goes through a ``@tf.function`` (``graph_call(actor_model, state)``); where a
        function needs Python (numpy, prints, a value returned), the fix says so and leaves it, and the
        change is the same by hand. Estimated saving: 80 % of the calls' share (keras-io's DDPG: the calls
        61-69 % of the step; ``--fix`` kept host-calls at 2.15x [1.61, 2.86], and the training loop ran
        1.7-2.6x faster side by side).

    Fix safety:
        The same arithmetic on the same weights; a tf.function target update runs in float32 as the
        numpy one did.
    """

    ID = "TFD208"
    NAME = "host-calls"
    HEADLINE = "Host-call-bound"
    EXAMPLES = [
        Example(
            "sample_traces/rules-well-fed",
            True,
            "keras-io's DDPG: get_weights()/set_weights() target updates and an eager actor call each step",
            facts={"host_calls": DDPG},
        ),
        Example(
            "sample_traces/rules-well-fed",
            False,
            "one get_weights() of a small model a step: 0.2 ms",
            facts={"host_calls": SMALL},
        ),
        Example("sample_traces/rules-well-fed", False, "a custom loop, no Keras host calls"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        calls = [c for c in ctx.facts.host_calls if c.calls and c.timed_steps]
        step_ms = ctx.avg_step_ms
        if not calls or step_ms <= 0:
            return None
        per_step = {c.site: 1000 * c.seconds / c.timed_steps for c in calls}
        share = min(1.0, sum(per_step.values()) / step_ms)
        if share < 0.2:
            return None
        ev = [
            Evidence(
                label=f"{_WHAT[c.api]} at {c.site}",
                value=f"{c.calls / c.timed_steps:.2g} a step, {ms(1000 * c.seconds / c.calls)} a call",
            )
            for c in sorted(calls, key=lambda c: -per_step[c.site])
        ]
        ev.append(
            Evidence(label="in the calls", value=f"{ms(sum(per_step.values()))} of each {ms(step_ms)} step")
        )
        apis = {c.api for c in calls}
        parts = []
        if apis & {"get_weights", "set_weights"}:
            parts.append(
                " / ".join(_WHAT[a] for a in ("get_weights", "set_weights") if a in apis)
                + " copy every weight through numpy: assign on the variables inside a @tf.function that "
                "takes the models (a soft target update: a.assign(b * tau + a * (1 - tau)))"
            )
        if "call" in apis:
            parts.append("a model called eagerly runs op by op: call it inside a @tf.function")
        claim = f"Keras calls between the steps take {pct(share)} of step time; " + "; ".join(parts)
        sev = "high" if share >= 0.5 else "medium"
        return self.finding(sev, claim, ev, est_saving=0.8 * share, fix_ids=["host-calls"])


RULE = HostCalls
