"""TFD205 unexplained-step-time."""

from __future__ import annotations

import numpy as np

from tfdoctor.analysis import intervals as iv
from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, ms, pct

E4040 = "../shared/traces/e4040-2023fall-assign2-hd2551/logs/fit/20231107-181856"
PFE = "../shared/traces/PFE_TensorFlow_Profiler/applications/cnn/logs_load"

#: share of step time in which neither the device nor a traced host activity explains the step
THRESHOLD = 0.15


class UnexplainedStepTime(Rule):
    """Much of the step is time nothing in the trace accounts for: host work between steps.

    What it detects:
        On a GPU run, 15 % or more of step time in which the device runs nothing, no batch is fetched or
        sent, no op is dispatched or launched and the training thread is not inside a traced event: the
        breakdown's "other". It is what XProf calls *All Others* time and reads as "POTENTIALLY
        input-bound": Python between the step functions (Keras callbacks, metrics, logging, summaries,
        checkpoints), I/O, or host threads the tracer does not see. (On a CPU-only run the main thread's
        untraced time is host compute, read by TFD203.)

    Why it costs throughput:
        The device idles while the host does work that is not the step; every step pays it.

    Evidence:
        The unexplained share of step time and milliseconds per step, the steps with the most of it, and
        the host events overlapping it the longest (where the host tracer recorded any), with how much of
        the unexplained time they cover.

    Fix:
        Advice ``host-work-outside-step``: find the Python between steps (profile with
        ``python_tracer_level=1``; look at per-batch callbacks, ``.numpy()`` calls, logging) and move it
        out of the per-step path (every N steps, or into the tf.function). Estimated saving: half the
        unexplained share.

    Fix safety:
        Depends on the work moved; nothing is changed automatically.
    """

    ID = "TFD205"
    NAME = "unexplained-step-time"
    HEADLINE = "Host-bound"
    DEVICE = True
    EXAMPLES = [
        Example(
            E4040, True, "T4, Keras fit, one profiled step: 16 % of it unexplained (XProf: 24 % All Others)"
        ),
        Example(f"{PFE}/download512-20210202-131913", False, "RTX 5000, 20 steps: every instant explained"),
        Example("sample_traces/rules-well-fed", False, "CPU-only run: no device rules"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        other = ctx.share.get("other", 0.0)
        if other < THRESHOLD:
            return None
        a = ctx.analysis
        assert a is not None and a.steps is not None and a.result is not None
        st = a.steps
        gap = a.result.sets.get("unexplained", iv.EMPTY)
        gap_ps = iv.measure(gap) or 1
        # host events overlapping the unexplained time the longest (any host thread but tf.data's)
        best: dict[str, int] = {}
        for plane in a.trace.host_planes():
            for ln in plane.lines:
                if not len(ln) or ln.name.startswith("tf_data"):
                    continue
                s, e = ln.start_ps, ln.end_ps
                near = (e > st.starts.min()) & (s < st.ends.max())
                if not near.any():
                    continue
                names = plane.names_of(ln)[near]
                for nm, a0, b0 in zip(names.tolist(), s[near].tolist(), e[near].tolist(), strict=True):
                    ov = iv.measure(iv.intersect(gap, (np.array([a0]), np.array([b0]))))
                    if ov > 0:
                        best[nm] = best.get(nm, 0) + ov
        top = sorted(best.items(), key=lambda kv: -kv[1])[:3]
        n = max(len(st), 1)
        ev = [
            Evidence(
                label="unexplained",
                value=f"{pct(other)} of step time ({ms(other * ctx.avg_step_ms)} per step)",
                time_ranges_ms=ctx.worst_steps("other"),
            ),
        ]
        if top:
            ev.append(
                Evidence(
                    label="host events overlapping it",
                    value=", ".join(f"{nm} {ms(ov / 1e9 / n)}/step ({pct(ov / gap_ps)})" for nm, ov in top),
                )
            )
        else:
            ev.append(
                Evidence(
                    label="host events overlapping it",
                    value="none: the host tracer recorded nothing then (untraced Python: callbacks, logging)",
                )
            )
        claim = (
            f"{pct(other)} of each {ms(ctx.avg_step_ms)} step is unexplained: the device idles and no traced "
            "host activity accounts for it (Python between steps: callbacks, metrics, logging)"
        )
        sev = "high" if other >= 0.4 else "medium" if other >= 0.25 else "low"
        return self.finding(sev, claim, ev, est_saving=0.5 * other, fix_ids=["host-work-outside-step"])


RULE = UnexplainedStepTime
