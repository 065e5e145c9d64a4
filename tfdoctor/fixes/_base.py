"""What every fix shares: :class:`Fix` (one per module), the :class:`FixContext` it is applied in, the
:class:`FixOutcome` it returns, and :class:`FixCodemod`, the LibCST codemod base class.

A fix is a LibCST codemod (the edit the user gets as a patch) run through
:func:`libcst.codemod.transform_module`, so applying one never raises: parse errors, "pattern not found"
(``SkipFile("reason")``) and bugs all come back as an outcome with a reason. Some fixes also set a
run-time switch of the harness (``{"jit": "1"}``) when the edit is not in the script itself.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Literal

import libcst as cst
from libcst.codemod import (
    CodemodContext,
    TransformExit,
    TransformFailure,
    TransformSkip,
    TransformSuccess,
    VisitorBasedCodemodCommand,
    transform_module,
)

from tfdoctor.model import TENSOR_CORE_CC, Facts, Finding


@dataclass(frozen=True)
class Hardware:
    """What the fixes need to know about the machine the script trains on."""

    gpu_models: tuple[str, ...] = ()
    gpu_compute_capability: tuple[float, ...] = ()
    cpu_bf16: bool = False  # AVX512_BF16 or AMX-BF16: bfloat16 matmuls/convolutions in hardware

    @property
    def tensor_core_gpu(self) -> bool:
        """Every GPU has tensor cores (compute capability 7.0 or newer)."""
        return bool(self.gpu_compute_capability) and min(self.gpu_compute_capability) >= TENSOR_CORE_CC

    @classmethod
    def detect(cls, facts: Facts | None, cpuinfo: str | Path = "/proc/cpuinfo") -> Hardware:
        """From the run's facts (GPUs) and this machine's CPU flags (the child ran here)."""
        gpus = facts.gpus if facts is not None else []
        ccs = []
        for g in gpus:
            try:
                ccs.append(float(g.compute_capability or ""))
            except ValueError:
                continue
        return cls(
            gpu_models=tuple(g.model or g.name for g in gpus),
            gpu_compute_capability=tuple(ccs),
            cpu_bf16=cpu_has_bf16(cpuinfo),
        )


def cpu_has_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


@dataclass(frozen=True)
class FixContext:
    """What a fix may read besides the source: the baseline run's facts and findings, the script's
    command-line arguments, the hardware, and per-variant parameters (``{"factor": "2"}``)."""

    facts: Facts = field(default_factory=Facts)
    findings: tuple[Finding, ...] = ()
    script_args: tuple[str, ...] = ()
    hardware: Hardware = field(default_factory=Hardware)
    params: Mapping[str, str] = field(default_factory=dict)
    filename: str = "train.py"
    # the modules beside the script that it imports (relative path -> current source), where a fix
    # looks when its pattern is not in the script itself (see tfdoctor/fixes/project.py)
    project: Mapping[str, str] = field(default_factory=dict)
    # the loop judges every run on the whole loop's rate (a burst of steps and the script's work until
    # the next; tfdoctor.session.fix_loop.WHOLE_LOOP_SHARE): work between bursts is then measured
    whole_loop: bool = False


def rebuilt_every_fit(ctx: FixContext, what: str) -> str | None:
    """Why a fix that makes the train function larger or compiles it (``what``: "steps_per_execution=8",
    "XLA") is not tried, where each ``fit()`` of the script's loop trains a model built or compiled in the
    loop and that function's tracing is a large part of the loop's time (TFD207): it would be traced or
    compiled again in every call, a cost paid outside the timed steps the trials compare. A federated-
    averaging script (tests/data/shapes/fedavg.py): steps_per_execution=8 measured 1.53x on the steps
    and ran the whole script 0.86-0.92x side by side."""
    gap = ctx.facts.between_fits
    if gap is None or gap.next_fit_model not in ("new", "recompiled") or gap.next_fit_first_batch_s is None:
        return None
    found = next((f for f in ctx.findings if f.rule_id == "TFD207"), None)
    if found is None or found.est_saving < 0.25:
        return None
    built = (
        "a model built in the loop" if gap.next_fit_model == "new" else "its model compiled again in the loop"
    )
    at = f" at {gap.fit_site}" if gap.fit_site else ""
    return (
        f"each fit(){at} trains {built} ({gap.fit_steps} batches a call): its first batch takes "
        f"{gap.next_fit_first_batch_s:.2f} s, its train function traced anew, about {found.est_saving:.0%} of "
        f"the loop's time (TFD207); {what} would trace or compile a larger function again in every call, "
        "outside the steps a trial times: build and compile the model once, before the loop, first"
    )


Status = Literal["changed", "skipped", "failed"]


@dataclass(frozen=True)
class FixOutcome:
    """The result of applying one fix to one source: the new code (unchanged unless ``changed``)."""

    fix_id: str
    status: Status
    code: str
    reason: str
    warnings: tuple[str, ...] = ()  # notes on the edit (what it left alone, what it assumed)
    switches: Mapping[str, str] = field(default_factory=dict)
    examples_factor: float = 1.0  # expected examples per step relative to before (batch scaling)
    params: Mapping[str, str] = field(default_factory=dict)
    # Python side effects the fix would change (tf-function: a print or list.append in the step)
    side_effects: tuple[str, ...] = ()
    # what the user could do beyond the fix (shown with a kept fix's result)
    advice: tuple[str, ...] = ()
    # edits of the modules beside the script (relative path -> new source); ``code`` is the script's
    files: Mapping[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.status == "changed"


class FixCodemod(VisitorBasedCodemodCommand):
    """A codemod that knows its :class:`FixContext`. ``self.summary`` is the one-line "what changed"."""

    DESCRIPTION = "a tfdoctor fix"

    def __init__(self, context: CodemodContext, fix: FixContext):
        super().__init__(context)
        self.fix = fix
        self.summary = ""
        self.switches: dict[str, str] = {}
        self.examples_factor = 1.0
        self.side_effects: list[str] = []
        self.advice: list[str] = []

    def side_effect(self, msg: str) -> None:
        """A Python side effect of the code the fix changes (it would behave differently after it)."""
        if msg not in self.side_effects:
            self.side_effects.append(msg)

    def advise(self, msg: str) -> None:
        """Advice beyond the fix, for the user (not a problem with the edit)."""
        if msg not in self.advice:
            self.advice.append(msg)

    def line(self, node: cst.CSTNode) -> int:
        """Line number of an original node (needs PositionProvider in METADATA_DEPENDENCIES)."""
        from libcst.metadata import PositionProvider

        try:
            return self.get_metadata(PositionProvider, node).start.line
        except KeyError:
            return 0


class Fix:
    """Base class of a fix: subclasses set ID, DESCRIPTION, CODEMOD and the class docstring (the
    documentation: What it changes / When it applies / How it is measured / Rolled back when)."""

    ID: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""
    CODEMOD: ClassVar[type[FixCodemod] | None] = None
    #: fixes that must be tried before this one when both are candidates (xla-jit needs a tf.function)
    AFTER: ClassVar[tuple[str, ...]] = ()
    #: order among candidates no finding ranks (lower first)
    PRIORITY: ClassVar[int] = 50
    #: tried before every other candidate, whatever the findings rank: what it removes slows every step,
    #: so every other fix measured with it still there would be measured on a distorted state
    FIRST: ClassVar[bool] = False
    #: the fix changes the examples per step on purpose (batch scaling, steps per execution)
    SCALES_EXAMPLES: ClassVar[bool] = False

    def precheck(self, ctx: FixContext) -> str | None:
        """A reason not to try this fix at all here (hardware, loop kind), or None."""
        return None

    def variants(self, ctx: FixContext) -> list[dict[str, str]]:
        """Parameter sets to try in order; the loop stops at the first that does not help."""
        return [{}]

    def failure_hint(self, error: str) -> str:
        """What to do about a trial of this fix that failed with ``error`` (the script's traceback), as a
        sentence for the result's reason; "" when there is nothing to say beyond the error."""
        return ""

    def apply(self, source: str, ctx: FixContext) -> FixOutcome:
        """Run the codemod on the script's ``source`` and, where the script's own imports bring in
        modules beside it (``ctx.project``), on those too (:meth:`follow_imports`). Never raises."""
        out = self.apply_source(source, ctx)
        if not ctx.project or out.status == "failed" or self.precheck(ctx):
            return out
        try:
            return self.follow_imports(out, source, ctx)
        except Exception as e:  # pragma: no cover - a bug in following imports: the script's own result
            return replace(out, warnings=(*out.warnings, f"modules beside the script not searched: {e}"))

    def apply_module(self, rel: str, text: str, ctx: FixContext, **params: str) -> FixOutcome:
        """The codemod on the module ``rel`` beside the script (with extra ``params``)."""
        sub = replace(ctx, filename=rel, project={}, params={**ctx.params, **params})
        return self.apply_source(text, sub)

    def follow_imports(self, out: FixOutcome, source: str, ctx: FixContext) -> FixOutcome:
        """Where the script does not hold the fix's pattern, the first module it imports that does:
        the model, its compile() or the pipeline built in ``model.py``. Fixes that edit the script *and*
        a module (mixed precision: the policy here, the output layer there) override this."""
        if out.changed:
            return out
        for rel, text in ctx.project.items():
            sub = self.apply_module(rel, text, ctx)
            if sub.changed:
                return replace(sub, code=source, files={rel: sub.code}, reason=f"{rel}: {sub.reason}")
        return out

    def apply_source(self, source: str, ctx: FixContext) -> FixOutcome:
        """Run the codemod on one source. Never raises."""
        why = self.precheck(ctx)
        if why:
            return FixOutcome(self.ID, "skipped", source, why, params=dict(ctx.params))
        if self.CODEMOD is None:  # pragma: no cover - every fix has a codemod
            return FixOutcome(self.ID, "skipped", source, "no source transform", params=dict(ctx.params))
        cctx = CodemodContext(filename=ctx.filename, full_module_name=Path(ctx.filename).stem)
        codemod = self.CODEMOD(cctx, ctx)
        result = transform_module(codemod, source)
        warnings = tuple(getattr(result, "warning_messages", ()) or ())
        params = dict(ctx.params)
        side_effects, advice = tuple(codemod.side_effects), tuple(codemod.advice)
        if isinstance(result, TransformSuccess):
            if result.code == source and not codemod.switches:
                return FixOutcome(
                    self.ID,
                    "skipped",
                    source,
                    codemod.summary or "nothing to change",
                    warnings,
                    params=params,
                    side_effects=side_effects,
                    advice=advice,
                )
            return FixOutcome(
                self.ID,
                "changed",
                result.code,
                codemod.summary or self.DESCRIPTION,
                warnings,
                switches=dict(codemod.switches),
                examples_factor=codemod.examples_factor,
                params=params,
                side_effects=side_effects,
                advice=advice,
            )
        if isinstance(result, TransformSkip):
            reason = result.skip_description or str(result.skip_reason)
            return FixOutcome(self.ID, "skipped", source, reason, warnings, params=params)
        if isinstance(result, TransformFailure):
            err = result.error
            if isinstance(err, cst.ParserSyntaxError):
                msg = _one_line(str(err))
                return FixOutcome(self.ID, "skipped", source, f"cannot parse the script: {msg}", warnings)
            return FixOutcome(
                self.ID,
                "failed",
                source,
                f"the transform crashed: {type(err).__name__}: {err}",
                warnings,
                params=params,
            )
        assert isinstance(result, TransformExit)  # pragma: no cover
        return FixOutcome(self.ID, "failed", source, "the transform was interrupted", warnings, params=params)


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return re.sub(r"\s+", " ", lines[0] if lines else text)[:200]
