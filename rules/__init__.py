"""The rule catalog (importable as ``tfdoctor.rules``).

``evaluate(analysis, facts) -> (findings, verdict)`` is what the pipeline calls.
(The catalog itself is being written: see issue 3.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfdoctor.model import Facts, Finding

if TYPE_CHECKING:
    from tfdoctor.analysis import Analysis


def evaluate(analysis: Analysis | None, facts: Facts) -> tuple[list[Finding], str]:
    return [], ""
