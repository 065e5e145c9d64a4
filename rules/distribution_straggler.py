"""TFD606 distribution-straggler."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, ms, pct
from tfdoctor.rules._distribution import summary


class Straggler(Rule):
    """One worker or replica is slower than the others, and synchronous training waits for it.

    What it detects:
        Among the workers of a multi-host trace (or the replicas of one host), one does at least 25 %
        more own work per step (step time minus collective wait; kernels for a device) than the fastest,
        and, for workers, the others spend at least 20 % of the step more in the all-reduce than it does.

    Why it costs throughput:
        Synchronous data parallelism steps at the pace of the slowest replica: every other one waits in
        the all-reduce. Uneven input pipelines, a busier host, a slower device or an uneven shard cause it.

    Evidence:
        Each worker's step time, own work, input wait and collective wait; the input imbalance.

    Fix:
        Advice ``balance-workers`` (find what the straggler does more: its input wait, its host load, its
        shard) and, when its input wait is the difference, the input-pipeline fixes on that worker.
        Estimated saving: the others' extra collective wait.

    Fix safety:
        Advice only.
    """

    ID = "TFD606"
    NAME = "distribution-straggler"
    EXAMPLES = [
        Example("sample_traces/distribution-straggler", True, "worker 1 waits 15 ms per step for input"),
        Example("sample_traces/distribution-two-workers", False, "two even CPU workers"),
        Example("sample_traces/distribution-mirrored-cpu", False, "two even logical CPU replicas"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        s = summary(ctx)
        if s is None or not s.straggler:
            return None
        group = s.workers if any(w.name == s.straggler for w in s.workers) else s.replicas
        slow = next(r for r in group if r.name == s.straggler)
        ev = []
        for r in group:
            own = r.step_ms - r.collective_ms if r.kind == "worker" else r.busy_ms
            text = f"step {ms(r.step_ms)}, own work {ms(own)}, collective {ms(r.collective_ms)}"
            if r.kind == "worker":
                text += f", input wait {ms(r.input_wait_ms)}"
            ev.append(Evidence(label=r.name, value=text))
        if s.input_imbalance >= 0.1:
            ev.append(
                Evidence(
                    label="input imbalance", value=f"{pct(s.input_imbalance)} of the step between workers"
                )
            )
        others = [r.collective_ms for r in group if r.name != slow.name and r.active]
        wait = (sum(others) / len(others) - slow.collective_ms) if others else 0.0
        step = slow.step_ms or 1.0
        est = max(0.0, wait / step) if slow.kind == "worker" else 1 - 1 / s.straggler_ratio
        cause = "its input" if slow.kind == "worker" and s.input_imbalance >= 0.1 else "its own work"
        claim = (
            f"{slow.name} is a straggler: {s.straggler_ratio:.1f}x the fastest's own work per step "
            f"({cause}); the others wait for it in the all-reduce"
        )
        severity = "high" if est >= 0.25 else "medium"
        return self.finding(severity, claim, ev, est_saving=est, fix_ids=["balance-workers"])


RULE = Straggler
