"""TFD001 no-steps-found."""

from __future__ import annotations

from tfdoctor.model import Evidence, Finding
from tfdoctor.rules._base import Context, Example, Rule

SAGEMAKER = "sample_traces/third_party/sagemaker-debugger/tests/profiler/resources"


class NoStepsFound(Rule):
    """The step-time rules could not run: no trace, or no training steps found in it.

    What it detects:
        The run has no analysable trace (the profile window was never reached, the trace is unreadable) or
        the trace has no step markers, no XProf ``Steps`` line, no repeated step function and no harness
        step clock to map. Every rule that reads the step-time breakdown is then listed as not evaluated,
        with the reason, instead of silently saying nothing.

    Why it costs throughput:
        It does not; it says which diagnoses are missing and why.

    Evidence:
        Why no steps were found, and the rules not evaluated.

    Fix:
        Profile again with ``tfdoctor profile`` (its harness marks steps), or let the profile window cover
        several training steps.

    Fix safety:
        Nothing is changed.
    """

    ID = "TFD001"
    NAME = "no-steps-found"
    META = True
    EXAMPLES = [
        Example(
            "sample_traces/no-steps", True, "eager ops under the plain profiler: no markers, no step function"
        ),
        Example(
            f"{SAGEMAKER}/tfprofiler_timeline_traces",
            False,
            "TF 2.3 Keras profile_batch trace.json.gz: no markers, but its one train_function call is a step",
        ),
        Example(
            "sample_traces/keras-conv2d", False, "Keras 3 TensorBoard(profile_batch=2): one 'Profiled batch'"
        ),
        Example("sample_traces/rules-well-fed", False, "steps marked by the harness"),
    ]

    def detect(self, ctx: Context) -> Finding | None:
        if not ctx.skipped_no_steps:
            return None
        if ctx.analysis is None:
            why = "no trace was analysed (the profile window was not reached or the trace was unreadable)"
        else:
            why = ctx.analysis.why_no_steps or "no steps were found in the trace"
        return self.undecided(
            why,
            claim=f"{len(ctx.skipped_no_steps)} step-time rules could not run: no training steps in the trace",
            evidence=[Evidence(label="rules not evaluated", value=", ".join(ctx.skipped_no_steps))],
        )


RULE = NoStepsFound
