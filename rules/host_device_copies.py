"""TFD301 host-device-copies."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule, ms, pct

PFE = "../shared/traces/PFE_TensorFlow_Profiler/applications/cnn/logs_load"


class HostDeviceCopies(Rule):
    """Host↔device copies stall the step instead of overlapping compute.

    What it detects:
        On a GPU trace: host→device plus device→host copies take 10 % or more of step time (time in which
        the GPU does nothing else). Named when visible: the batch is fed from numpy every step (the harness
        saw ``fit(numpy)`` / numpy input), the copies do not overlap compute (not prefetched to the device).
        Input transfer counts as a copy: the device's MemcpyH2D and the host's sends of the batch to the
        device (``IteratorGetNext/_N:_Send`` in Keras ``fit`` traces), which are not kernel launches.

    Why it costs throughput:
        A synchronous copy of the batch at the start of each step keeps the GPU waiting; copies from
        pageable (non-pinned) host memory are slower still. Prefetching batches to the device
        (tf.data ``prefetch`` feeding the step; ``prefetch_to_device``) overlaps the copy with the
        previous step's compute.

    Evidence:
        Copy share of step time, H2D and D2H milliseconds per step, the share of H2D time overlapping
        compute, the input kind, the steps with the most copy time.

    Fix:
        ``tfdata-prefetch`` (feed the step from a tf.data pipeline ending in ``prefetch``), advice
        ``prefetch-to-device`` (``tf.data.experimental.prefetch_to_device``). Estimated saving: the
        non-overlapped part of the copy share.

    Fix safety:
        Safe: the same data reaches the model; prefetching uses device memory for one or two more batches.
    """

    ID = "TFD301"
    NAME = "host-device-copies"
    DEVICE = True
    EXAMPLES = [
        Example(
            f"{PFE}/download512-20210202-131913",
            True,
            "fit(numpy), batch 512: ~22 % MemcpyH2D",
            {"input_kind": "numpy"},
        ),
        Example(
            f"{PFE}/download8-20210202-122657", False, "batch 8: copies are tiny", {"input_kind": "numpy"}
        ),
        Example("sample_traces/rules-well-fed", False, "CPU-only run: no GPU rules"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        h2d, d2h = ctx.share.get("h2d", 0.0), ctx.share.get("d2h", 0.0)
        share = h2d + d2h
        if share < 0.1:
            return None
        d = ctx.details
        causes = []
        if ctx.facts.input_kind == "numpy":
            causes.append("the batch is fed from numpy every step")
        if d.h2d_overlap < 0.2:
            causes.append("copies are not prefetched to the device (they do not overlap compute)")
        ranges = ctx.worst_steps("h2d") if h2d >= d2h else ctx.worst_steps("d2h")
        ev = [
            Evidence(
                label="copies",
                value=f"{pct(share)} of step time ({pct(h2d)} H2D, {pct(d2h)} D2H)",
                time_ranges_ms=ranges,
            ),
            Evidence(label="per step", value=f"H2D {ms(d.h2d_ms_per_step)}, D2H {ms(d.d2h_ms_per_step)}"),
            Evidence(label="H2D overlapping compute", value=pct(d.h2d_overlap)),
            Evidence(
                label="batch sends (IteratorGetNext _Send)",
                value=f"{pct(_send_share(ctx))} of step time, counted as H2D (input transfer)",
            ),
            Evidence(label="input", value=ctx.facts.input_kind, source=ctx.source("fit", "dataset", "input")),
        ]
        claim = f"{pct(share)} of step time is host↔device copies ({ms(d.h2d_ms_per_step)} H2D per step)"
        if causes:
            claim += "; " + ", ".join(causes)
        est = share * (1.0 - d.h2d_overlap)
        sev = "high" if share >= 0.2 else "medium"
        return self.finding(sev, claim, ev, est_saving=est, fix_ids=["tfdata-prefetch", "prefetch-to-device"])


def _send_share(ctx: Context) -> float:
    """Share of step time the host spends sending the batch to the device (``IteratorGetNext/_N:_Send``)."""
    from tfdoctor.analysis import intervals as iv

    res = ctx.analysis.result if ctx.analysis is not None else None
    st = ctx.analysis.steps if ctx.analysis is not None else None
    if res is None or st is None:
        return 0.0
    send = res.sets.get("input_send", iv.EMPTY)
    span = float((st.ends - st.starts).sum()) or 1.0
    return float(iv.per_window(send, st.starts, st.ends).sum()) / span


RULE = HostDeviceCopies
