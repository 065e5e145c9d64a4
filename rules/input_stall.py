"""TFD101 input-stall."""

from __future__ import annotations

from tfdoctor.model import PYTHON_WORK_ADVICE, Evidence, Finding
from tfdoctor.rules import _figures as fig
from tfdoctor.rules._base import Context, Example, Rule, pct, severity_for, us

SHARED = "../shared/traces/PFE_TensorFlow_Profiler/applications/cnn"
SLOW_GETNEXT_US = 50.0  # XProf's tf.data bottleneck analysis: a GetNext over 50 µs means the pipeline is slow


class InputStall(Rule):
    """The training step waits for its next batch.

    What it detects:
        The share of step time spent waiting for input (tf.data ``GetNext``, a Python generator, host-side
        batch preparation) with XProf's cut-offs: 20 % or more is *high* (XProf: "highly input-bound"),
        5 % or more *medium* ("moderately input-bound"). The cause is named when the trace or the harness
        shows it: a Python generator as the source, a ``map`` without ``num_parallel_calls``, no
        ``prefetch``, and the slowest tf.data stage by its own time (XProf's tf.data bottleneck idea: a
        ``GetNext`` slower than 50 µs means the pipeline, not the model, sets the pace).

    Why it costs throughput:
        While the step waits, the model computes nothing. A pipeline that produces batches in parallel
        and ahead of time (prefetch) hides the wait behind the previous step.

    Evidence:
        Input-wait share of step time, ``GetNext`` mean and p90, the slowest tf.data stage and its time per
        step, the dataset's stages as the harness saw them, the steps with the longest wait (time ranges),
        the user's ``map``/generator source line.

    Fix:
        ``tfdata-parallel-map`` (``num_parallel_calls=tf.data.AUTOTUNE``), ``tfdata-prefetch``
        (``.prefetch(tf.data.AUTOTUNE)``), ``generator-prefetch`` (run the generator ahead of the step;
        a ``from_generator``'s generator read 64 items at a time), ``generator-cache`` (compute the
        deterministic start of the generator's per-example function once per example, from memory
        afterwards), or cache the deterministic part of a tf.data pipeline (see
        TFD102). A Python source's per-example work runs under the GIL, which no prefetch spreads over
        cores: the finding advises writing it as tf.data ops (a parallel ``map``), a rewrite of the user's
        data code that no codemod makes safely. Estimated saving: the input-wait share (an upper bound: the wait disappears when input is
        produced ahead of the step).

    Fix safety:
        Safe: parallel map and prefetch keep the order of elements (``deterministic`` stays on) and do not
        change what the model sees; they use more host memory and threads. ``generator-cache`` caches only
        what tfdoctor proves deterministic and hands out copies (same values bit for bit); it holds the
        cached results in memory (up to 1 GiB) and pays from the second pass over the data.
    """

    ID = "TFD101"
    NAME = "input-stall"
    EXAMPLES = [
        Example(
            "sample_traces/rules-input-sequential-map",
            True,
            "map() without num_parallel_calls: ~70 % input wait",
        ),
        Example(
            "sample_traces/rules-input-generator", True, "from_generator over Python/numpy work: ~85 % wait"
        ),
        Example("sample_traces/rules-input-autotuned-saturated", True, "AUTOTUNE map, still ~75 % wait"),
        Example("sample_traces/rules-well-fed", False, "cache + parallel map + prefetch: under 5 % wait"),
        Example(
            "sample_traces/third_party/sagemaker-debugger/tests/profiler/resources/tfprofiler_timeline_traces",
            True,
            "TF 2.3 CPU, Keras profile_batch: one train_function call, GetNext 42 % of it (XProf: HIGHLY, 61 %)",
        ),
        Example(
            "sample_traces/walkthrough-metrics",
            False,
            "the custom training walkthrough's shape: metric updates with a second forward pass between steps"
            " (14 ms a step), the batch fetched in 0.5 ms: not input-bound",
        ),
        Example(
            "sample_traces/full-batch-loop",
            False,
            'TensorFlow\'s "Basic training loops" shape: a full-batch loop that fetches nothing; the '
            "assign_sub update after the tape and the loss evaluated each epoch are the loop's work",
        ),
        Example(f"{SHARED}/logs_load/download8-20210202-122657", False, "GPU, fit(numpy): under 1 % wait"),
    ]

    def _causes(self, ctx: Context) -> tuple[list[str], list[str], list[Evidence]]:
        d = ctx.details
        ops = ctx.stage_ops()
        causes: list[str] = []
        fixes: list[str] = []
        ev: list[Evidence] = []
        gen_src = ctx.source("dataset_source", "generator")
        if ctx.facts.input_kind == "python_generator" or "from_generator" in ops or self._py_in_trace(ctx):
            causes.append("the batches come from a Python generator")
            fixes += ["generator-prefetch", "generator-cache"]
            ev.append(
                Evidence(
                    label="source", value="Python generator (from_generator / py_function)", source=gen_src
                )
            )
            ev.append(
                Evidence(
                    label="advice", value=PYTHON_WORK_ADVICE.format(who="the Python source"), source=gen_src
                )
            )
        seq_map = [
            s for s in ctx.facts.dataset if s.op.lower() in ("map", "interleave") and s.parallel is False
        ]
        if seq_map or d.sequential_map:
            causes.append(
                f"the {seq_map[0].op if seq_map else 'map'} stage runs sequentially (no num_parallel_calls)"
            )
            fixes.append("tfdata-parallel-map")
            ev.append(
                Evidence(
                    label="sequential stage",
                    value=seq_map[0].detail or f"{seq_map[0].op}(num_parallel_calls=None)"
                    if seq_map
                    else "Map",
                    source=ctx.source("dataset_map", "dataset"),
                )
            )
        if (ops and "prefetch" not in ops) or (not ops and not d.has_prefetch and d.getnext_count):
            causes.append("nothing is prefetched")
            fixes.append("tfdata-prefetch")
            ev.append(Evidence(label="prefetch", value="none in the pipeline", source=ctx.source("dataset")))
        if d.getnext_count and d.getnext_mean_us > SLOW_GETNEXT_US:
            ev.append(
                Evidence(
                    label="GetNext",
                    value=f"mean {us(d.getnext_mean_us)}, p90 {us(d.getnext_p90_us)} "
                    f"(over {SLOW_GETNEXT_US:.0f} µs: the pipeline is slow)",
                )
            )
        slow = fig.tfdata_self_times(ctx)
        if slow and slow[0][2] > 0:
            name, path, per_step = slow[0]
            ev.append(
                Evidence(label="slowest tf.data stage", value=f"{name}: {per_step:.2f} ms/step ({path})")
            )
            if not causes:
                causes.append(f"the slowest stage is {name}")
        return causes, fixes, ev

    @staticmethod
    def _py_in_trace(ctx: Context) -> bool:
        """The trace shows Python in the pipeline (a ``Generator`` stage or a ``PyFunc``).

        When the harness walked the pipeline and found no ``from_generator``, a ``Generator`` stage alone
        is tf.distribute's: its multi-device iterator reads each device's batches through a
        GeneratorDataset of its own (``Iterator::Root::Prefetch::Generator``), not the user's Python."""
        d = ctx.details
        if not d.python_generator:
            return False
        if not ctx.facts.dataset or ctx.facts.input_kind != "tf.data":
            return True
        return any("PyFunc" in n for hp in ctx.analysis.trace.host_planes() for n in hp.event_names)  # type: ignore[union-attr]

    def detect(self, ctx: Context) -> Finding | None:
        share = ctx.share.get("input_wait", 0.0)
        sev = severity_for(share, 0.20, 0.05)
        if sev is None:
            return None
        causes, fixes, ev = self._causes(ctx)
        ranges = ctx.worst_steps("input_wait")
        ev.insert(
            0,
            Evidence(
                label="input wait",
                value=f"{pct(share)} of step time ({share * ctx.avg_step_ms:.2f} ms of {ctx.avg_step_ms:.2f} ms/step)",
                time_ranges_ms=ranges,
            ),
        )
        if ctx.facts.dataset:
            ev.append(Evidence(label="dataset", value=" → ".join(s.op for s in ctx.facts.dataset)))
        claim = f"{pct(share)} of step time waits for input"
        if causes:
            claim += "; " + ", ".join(causes[:2])
        return self.finding(sev, claim, ev, est_saving=share, fix_ids=fixes)


RULE = InputStall
