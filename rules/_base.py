"""What every rule shares: the :class:`Rule` base, the :class:`Context` a rule reads, and :class:`Example`.

A rule module defines ``RULE = <a Rule subclass>``; the class docstring is the user documentation
(headings: What it detects / Why it costs throughput / Evidence / Fix / Fix safety) and ``EXAMPLES``
are hit/miss fixtures that the tests run and ``docs/rules.md`` shows. Nothing here imports TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tfdoctor.model import Evidence, Facts, Finding, Severity, rule_family

if TYPE_CHECKING:
    from tfdoctor.analysis import Analysis, Details

#: the repository root: EXAMPLES paths are relative to it
REPO = Path(__file__).resolve().parents[1]

SEVERITY_RANK: dict[str, int] = {"high": 0, "medium": 1, "low": 2, "info": 3}

#: fix ids the fixer (tfdoctor.fixes) applies and measures
FIX_IDS: frozenset[str] = frozenset(
    {
        "tfdata-parallel-map",
        "tfdata-prefetch",
        "tfdata-cache",
        "generator-prefetch",
        "generator-cache",
        "tf-function",
        "steps-per-execution",
        "xla-jit",
        "batch-scale",
        "mixed-precision",
        "keras-on-batch",
        "host-calls",
    }
)
#: advice-only fix ids: shown with the finding, never applied automatically
ADVICE_IDS: frozenset[str] = frozenset(
    {
        "tfdata-service",
        "gpu-private-threads",
        "multi-step-function",
        "reduce-retracing",
        "prefetch-to-device",
        "static-shapes",
        "mirrored-strategy",
        "distribute-dataset",
        "global-batch-loss",
        "overlap-allreduce",
        "balance-workers",
        "host-work-outside-step",
        "callback-frequency",
    }
)

#: policies under which the model computes in 16 bit
MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16", "float16", "bfloat16")


@dataclass(frozen=True)
class Example:
    """A fixture a rule is tested on: a run directory or a TensorBoard logdir, relative to the repo.

    ``facts`` overrides (or supplies, for traces recorded without tfdoctor) what the harness records.
    """

    path: str
    fires: bool
    note: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


class Rule:
    """Base class of a rule: subclasses set ID, NAME, the docstring, EXAMPLES and implement detect()."""

    ID: ClassVar[str] = ""
    NAME: ClassVar[str] = ""
    #: needs the steps and breakdown of a trace (False: decides from the run's facts alone)
    NEEDS_STEPS: ClassVar[bool] = True
    #: a GPU/TPU rule: says nothing on a CPU-only run, cannot decide without device events
    DEVICE: ClassVar[bool] = False
    #: a meta rule runs after the others and reports on what they could not evaluate
    META: ClassVar[bool] = False
    #: the verdict's label when this rule's finding heads it ("Input-bound"); "" = its family's label
    HEADLINE: ClassVar[str] = ""
    EXAMPLES: ClassVar[list[Example]] = []

    def detect(self, ctx: Context) -> Finding | None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- building findings ------------------------------------------------------------------------
    def finding(
        self,
        severity: Severity | str,  # checked by Finding (a Literal): rules compute it as a str
        claim: str,
        evidence: list[Evidence] | None = None,
        est_saving: float = 0.0,
        fix_ids: list[str] | None = None,
    ) -> Finding:
        return Finding(
            rule_id=self.ID,
            name=self.NAME,
            family=rule_family(self.ID),
            severity=severity,  # type: ignore[arg-type]
            claim=claim,
            evidence=evidence or [],
            est_saving=round(max(0.0, min(1.0, est_saving)), 4),
            fix_ids=fix_ids or [],
        )

    def undecided(self, why_not: str, claim: str | None = None, evidence: list[Evidence] | None = None):
        return Finding(
            rule_id=self.ID,
            name=self.NAME,
            family=rule_family(self.ID),
            severity="info",
            claim=claim or f"{self.NAME}: could not decide",
            evidence=evidence or [],
            decided=False,
            why_not=why_not,
        )


def pct(x: float) -> str:
    """0.384 -> '38 %' (one decimal under 10 %)."""
    v = 100.0 * x
    return f"{v:.1f} %" if 0 < abs(v) < 10 else f"{v:.0f} %"


def ms(x: float) -> str:
    return f"{x:.2f} ms" if x < 10 else f"{x:.1f} ms"


def us(x: float) -> str:
    return f"{x:.0f} µs" if x >= 10 else f"{x:.1f} µs"


def severity_for(value: float, high: float, medium: float, low: float | None = None) -> Severity | None:
    if value >= high:
        return "high"
    if value >= medium:
        return "medium"
    if low is not None and value >= low:
        return "low"
    return None


@dataclass
class Context:
    """Everything a rule reads: the analysis of the trace (None when there is none), the run's facts,
    and what the runner decided not to evaluate (for the meta rules)."""

    analysis: Analysis | None
    facts: Facts
    skipped_no_steps: list[str] = field(default_factory=list)  # rule ids not evaluated: no steps
    skipped_cpu: list[str] = field(default_factory=list)  # device rules not evaluated: CPU-only run
    skipped_no_device_trace: list[str] = field(default_factory=list)  # GPU run, empty device plane
    cache: dict[str, Any] = field(default_factory=dict)  # figures computed once per evaluation

    # -- the run ----------------------------------------------------------------------------------
    @property
    def has_steps(self) -> bool:
        return (
            self.analysis is not None
            and self.analysis.steps is not None
            and self.analysis.breakdown is not None
        )

    @property
    def share(self) -> dict[str, float]:
        return self.analysis.share if self.analysis is not None else {}

    @property
    def details(self) -> Details:
        assert self.analysis is not None
        return self.analysis.details

    @property
    def n_steps(self) -> int:
        return len(self.analysis.steps) if self.has_steps else 0  # type: ignore[arg-type, union-attr]

    @property
    def avg_step_ms(self) -> float:
        # the unprofiled step where the profiler's cost was significant (as ``share``)
        return self.analysis.step_ms if self.has_steps else 0.0  # type: ignore[union-attr]

    @property
    def has_device_trace(self) -> bool:
        """The trace holds GPU/TPU activity (kernels, copies) inside the steps' time."""
        return self.analysis is not None and self.analysis.details.n_devices > 0

    @property
    def is_accelerator_run(self) -> bool:
        """The run had a GPU/TPU: the harness saw one, or the trace has a GPU/TPU plane (even empty)."""
        if any(d.kind in ("GPU", "TPU") for d in self.facts.devices):
            return True
        if self.analysis is None:
            return False
        return any(p.device_kind in ("GPU", "TPU") for p in self.analysis.trace.device_planes())

    @property
    def compute_capability(self) -> float | None:
        if self.analysis is not None and self.analysis.details.compute_capability:
            return self.analysis.details.compute_capability
        for d in self.facts.gpus:
            if d.compute_capability:
                try:
                    return float(d.compute_capability)
                except ValueError:
                    continue
        return None

    @property
    def mixed_policy(self) -> bool:
        return (self.facts.dtype_policy or "") in MIXED_POLICIES

    @property
    def batch_size(self) -> int | None:
        return self.facts.batch_size

    @property
    def cpu_count(self) -> int | None:
        return self.facts.cpu_count or None

    @property
    def cpu_flags(self) -> set[str]:
        return set(self.facts.cpu_flags)

    def source(self, *roles: str) -> str | None:
        """The user's source line for the first role the harness recorded ("train.py:42")."""
        for r in roles:
            if self.facts.source.get(r):
                return self.facts.source[r]
        return None

    def stage_ops(self) -> list[str]:
        return [s.op.lower() for s in self.facts.dataset]

    # -- time ranges ------------------------------------------------------------------------------
    def worst_steps(self, category: str, n: int = 3) -> list[tuple[float, float]]:
        """Time ranges (ms into the profiled window) of the ``n`` steps with the most ``category`` time."""
        if not self.has_steps:
            return []
        rows = self.analysis.breakdown.steps  # type: ignore[union-attr]
        ranked = sorted(rows, key=lambda r: -r.ms.get(category, 0.0))[:n]
        return [
            (round(r.start_ms, 3), round(r.start_ms + r.total_ms, 3))
            for r in sorted(ranked, key=lambda r: r.start_ms)
            if r.ms.get(category, 0.0) > 0
        ]

    def step_window_ms(
        self, starts_ps: np.ndarray, ends_ps: np.ndarray, n: int = 3
    ) -> list[tuple[float, float]]:
        """Trace intervals (ps) as ms into the profiled window (the first step's start), longest ``n``."""
        if not self.has_steps or not starts_ps.size:
            return []
        t0 = int(self.analysis.steps.starts.min())  # type: ignore[union-attr]
        order = np.argsort(-(ends_ps - starts_ps))[:n]
        return sorted(
            (round((int(starts_ps[i]) - t0) / 1e9, 3), round((int(ends_ps[i]) - t0) / 1e9, 3)) for i in order
        )
