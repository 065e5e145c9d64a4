"""Load a rule's :class:`~tfdoctor.rules._base.Example` fixture: the analysis of its trace and its facts.

A fixture is a run directory (``facts.json``, ``steps.jsonl``, ``logdir/``) or any TensorBoard logdir /
trace file; ``Example.facts`` overrides or supplies facts. Used by the tests and scripts/document_rules.py.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from tfdoctor.model import Facts, Finding, StepTiming
from tfdoctor.rules._base import REPO, Context, Example, Rule
from tfdoctor.rundir import FACTS, RunDir

if TYPE_CHECKING:
    from tfdoctor.analysis import Analysis


def example_path(ex: Example) -> Path:
    return (REPO / ex.path).resolve()


@lru_cache(maxsize=64)
def _load(path: str) -> tuple[Analysis | None, dict, str | None]:
    """(analysis or None, recorded facts, why there is no analysis) for a fixture directory."""
    from tfdoctor.analysis import analyze
    from tfdoctor.errors import TraceError
    from tfdoctor.trace import load

    p = Path(path)
    facts: dict = {}
    steps: list[StepTiming] = []
    target = p
    if p.is_dir() and (p / FACTS).exists():
        run = RunDir(p)
        facts = run.read_json(FACTS, {}) or {}
        steps = run.steps()
        target = run.logdir
    try:
        trace = load(target)
    except TraceError as e:
        return None, facts, str(e)
    return analyze(trace, steps or None), facts, None


def load_example(ex: Example) -> tuple[Analysis | None, Facts]:
    path = example_path(ex)
    if not path.exists():
        raise FileNotFoundError(f"fixture {ex.path} not found at {path}")
    analysis, facts, _ = _load(str(path))
    merged = {**facts, **ex.facts}
    if "extra" in ex.facts:
        merged["extra"] = {**facts.get("extra", {}), **ex.facts["extra"]}
    return analysis, Facts.model_validate(merged)


def run_example(rule: Rule, ex: Example) -> list[Finding]:
    """Evaluate the whole catalog on the fixture; return the findings of ``rule`` (decided or not)."""
    from tfdoctor.rules import run_rules

    analysis, facts = load_example(ex)
    found = run_rules(Context(analysis=analysis, facts=facts))
    return [f for f in found if f.rule_id == rule.ID]
