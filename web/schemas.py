"""Response models of the JSON API (``/api``); OpenAPI docs at ``/docs``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tfdoctor.model import Report


class Health(BaseModel):
    app: str = "tfdoctor"
    version: str
    home: str


class RunSummary(BaseModel):
    """One row of the runs list (from the run store's index)."""

    id: str
    script: str
    created: str
    status: str
    kind: str = "profile"
    device: str | None = None
    examples_per_s: float | None = None
    steps_per_s: float | None = None
    speedup: float | None = None
    parent: str | None = None
    error: str | None = None


class Progress(BaseModel):
    """How far a run is: polled by the run page while ``status`` is ``running``."""

    run_id: str
    status: str
    phase: str = ""  # "warm-up", "timing window", "profiling", "analysing", ...
    steps_done: int = 0
    target_steps: int | None = None
    fraction: float | None = None
    last_step_ms: float | None = None
    median_step_ms: float | None = None
    last_loss: float | None = None
    updated: str | None = None
    error: str | None = None
    has_report: bool = False


class RunDetail(BaseModel):
    summary: RunSummary
    progress: Progress
    report: Report | None = None
    report_error: str | None = None  # report.json present but unreadable
    steps_truncated: bool = False  # report.steps cut to the ``max_steps`` query parameter


class TimelineFigure(BaseModel):
    figure: dict[str, Any] | None = None
    note: str = ""
    blocks: int = 0
    events: int = 0


class ErrorBody(BaseModel):
    detail: str = Field(description="what went wrong, in one line")
