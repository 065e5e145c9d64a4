"""Reports with realistic values for the web / HTML tests, built from the model (no TF needed).

Figures are those of a real eager custom loop on this 2-core CPU (about 6 ms per step, batch 32,
dispatch-heavy) and of the same loop after the tf.function + AUTOTUNE fixes.
"""

from __future__ import annotations

import json
from pathlib import Path

from tfdoctor.model import (
    CATEGORIES,
    Breakdown,
    DatasetStage,
    Device,
    Evidence,
    Facts,
    Finding,
    FixSummary,
    FixTrial,
    Report,
    StepBreakdown,
    StepTiming,
    Throughput,
)
from tfdoctor.rundir import RunDir
from tfdoctor.store import RunStore

HOSTILE = "<script>alert(1)</script>"

PATCH = """--- a/train.py
+++ b/train.py
@@ -10,7 +10,8 @@ def make_dataset():
-    ds = ds.map(augment)
+    ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
+    ds = ds.prefetch(tf.data.AUTOTUNE)
     return ds
@@ -30,3 +31,4 @@ model = build()
+@tf.function
 def train_step(x, y):
"""


def breakdown(n: int, ms: dict[str, float], *, jitter: float = 0.03, first_step: int = 13) -> Breakdown:
    rows = []
    t = 0.0
    for i in range(n):
        f = 1.0 + jitter * ((i * 7919) % 11 - 5) / 5
        row = {c: round(ms.get(c, 0.0) * f, 6) for c in CATEGORIES}
        total = sum(row.values())
        rows.append(StepBreakdown(step=first_step + i, start_ms=t, total_ms=total, ms=row))
        t += total + 0.01
    tot = sum(r.total_ms for r in rows)
    share = {c: sum(r.ms[c] for r in rows) / tot for c in CATEGORIES}
    return Breakdown(
        source="tfdoctor markers",
        device_kind="CPU",
        steps=rows,
        share=share,
        avg_step_ms=tot / n,
        notes=["CPU-only run: op kernels count as device compute"],
    )


def throughput(
    steps_per_s: float, batch: int | None = 32, wins: tuple[float, ...] = (0.97, 1.0, 1.02, 0.99, 1.03)
):
    w = [steps_per_s * x for x in wins]
    med = sorted(w)[len(w) // 2]
    return Throughput(
        examples_per_s=med * batch if batch else None,
        steps_per_s=med,
        step_ms_median=1000 / med,
        windows=w,
        spread=(max(w) - min(w)) / med,
        n_steps=50,
    )


def steps(n: int, t0: int = 1_795_300_000_000_000_000, ms: float = 6.0) -> list[StepTiming]:
    out = []
    t = t0
    for i in range(n):
        window = "warmup" if i < 3 else ("timing" if i < n - 8 else "profile")
        d = int(ms * 1e6)
        out.append(
            StepTiming(
                index=i,
                window=window,
                start_ns=t,
                end_ns=t + d,
                input_wait_ns=80_000,
                loss=2.3 - 0.01 * i,
                examples=32,
            )
        )
        t += d + 10_000
    return out


FACTS = Facts(
    tf_version="2.21.0",
    keras_version="3.15.1",
    python_version="3.11.7",
    platform="Linux-6.1-x86_64",
    hostname="vm",
    devices=[Device(name="/physical_device:CPU:0", kind="CPU")],
    loop_kind="custom",
    step_kind="eager",
    step_counter="apply_gradients",
    input_kind="tf.data",
    batch_size=32,
    dtype_policy="float32",
    jit_compile=False,
    optimizer="SGD",
    learning_rate=0.01,
    dataset=[DatasetStage(op="map", parallel=False), DatasetStage(op="batch"), DatasetStage(op="repeat")],
    source={"step_fn": "train.py:31"},
)

BEFORE_MS = {"input_wait": 0.9, "host_compute": 2.1, "dispatch": 2.4, "device_compute": 0.5}
AFTER_MS = {"input_wait": 0.05, "host_compute": 0.3, "dispatch": 0.2, "device_compute": 0.45}


def findings(op_name: str = "dense/MatMul:MatMul") -> list[Finding]:
    return [
        Finding(
            rule_id="TFD201",
            name="eager-dispatch",
            severity="high",
            claim="64 ops per step are dispatched one by one from Python; dispatch and Python take 76 % of step time",
            evidence=[
                Evidence(label="eager ops per step", value="64"),
                Evidence(
                    label="slowest op",
                    value=op_name,
                    time_ranges_ms=[(6.1, 6.4), (12.2, 12.5)],
                    source="train.py:31",
                ),
            ],
            est_saving=0.62,
            fix_ids=["tf-function"],
        ),
        Finding(
            rule_id="TFD101",
            name="input-stall",
            severity="medium",
            claim="the step waits 0.9 ms (15 %) for the next batch; map runs sequentially",
            evidence=[Evidence(label="input wait", value="15 %", time_ranges_ms=[(0.0, 0.9)])],
            est_saving=0.14,
            fix_ids=["tfdata-autotune"],
        ),
        Finding(
            rule_id="TFD401",
            name="small-batch",
            severity="info",
            claim="could not tell whether a larger batch helps",
            decided=False,
            why_not="batch size is fixed by the dataset",
        ),
    ]


def report(
    run_id: str = "20261121-101500-train-ab12",
    *,
    script: str = "examples/train.py",
    n_steps: int = 8,
    with_fix: bool = True,
    after_run_id: str | None = None,
    status: str = "complete",
    op_name: str = "dense/MatMul:MatMul",
    error: str | None = None,
    created: str = "2026-11-21T10:15:00+00:00",
) -> Report:
    fix = None
    if with_fix:
        base = throughput(160.0)
        fix = FixSummary(
            baseline=base,
            trials=[
                FixTrial(
                    fix_id="tf-function",
                    description="wrap the train step in tf.function",
                    status="kept",
                    reason="×4.1 beyond the noise band (±3 %)",
                    throughput=throughput(656.0),
                    speedup=4.1,
                    patch=PATCH,
                    run_id=after_run_id,
                ),
                FixTrial(
                    fix_id="xla",
                    description="jit_compile=True",
                    status="rejected",
                    reason="×0.98: within noise",
                    throughput=throughput(157.0),
                    speedup=0.98,
                ),
            ],
            combined=throughput(700.0),
            combined_speedup=4.375,
            patch=PATCH,
            kept=["tf-function"],
        )
    return Report(
        run_id=run_id,
        script=script,
        args=["--epochs", "1"],
        created=created,
        status=status,
        error=error,
        facts=FACTS,
        throughput=throughput(160.0),
        steps=steps(20),
        breakdown=breakdown(n_steps, BEFORE_MS),
        findings=findings(op_name),
        verdict="Dispatch-bound: 76 % of each step is Python and eager op dispatch; the step is not a tf.function.",
        fix=fix,
        trace_files=["logdir/plugins/profile/2026_11_21_10_15_00/vm.xplane.pb"],
        logdir="logdir",
    )


def after_report(run_id: str = "20261121-101600-train-fix1") -> Report:
    return Report(
        run_id=run_id,
        script="examples/train.py",
        created="2026-11-21T10:16:00+00:00",
        status="complete",
        facts=FACTS,
        throughput=throughput(700.0),
        breakdown=breakdown(8, AFTER_MS),
        verdict="Balanced.",
    )


def save(store: RunStore, r: Report, *, meta: dict | None = None) -> RunDir:
    """Put ``r`` in ``store`` as a finished run (meta.json, index row, report.json)."""
    run = store.new_run(r.script, r.args, run_id=r.run_id)
    fields = {"status": r.status, "created": r.created}
    if r.error:
        fields["error"] = r.error
    fields.update(meta or {})
    store.update(run, **fields)
    run.write_report(r)
    with open(run.file("steps.jsonl"), "w", encoding="utf-8") as f:
        for s in r.steps:
            f.write(s.model_dump_json() + "\n")
    return run


def write_steps(run: RunDir, items: list[StepTiming]) -> None:
    with open(Path(run.path) / "steps.jsonl", "w", encoding="utf-8") as f:
        for s in items:
            f.write(json.dumps(s.model_dump()) + "\n")
