"""The versioned JSON Schema of tfdoctor's report (``report.v<N>.json``, N = ``Report.schema_version``).

Generated from the pydantic :class:`~tfdoctor.model.Report`; shipped in the package so that CI
consumers of ``--json`` can validate against it. Regenerate after a model change with
``python -m tfdoctor.schema`` (a test fails while the shipped file is not current).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tfdoctor.model import SCHEMA_VERSION, Report

HERE = Path(__file__).resolve().parent


def schema_path(version: int = SCHEMA_VERSION) -> Path:
    return HERE / f"report.v{version}.json"


def report_schema() -> dict[str, Any]:
    """The JSON Schema of the current Report model, with its id and version."""
    schema = Report.model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://tfdoctor.dev/schema/report.v{SCHEMA_VERSION}.json",
        "x-tfdoctor-schema-version": SCHEMA_VERSION,
        **schema,
    }


def render() -> str:
    return json.dumps(report_schema(), indent=2, sort_keys=True) + "\n"


def load(version: int = SCHEMA_VERSION) -> dict[str, Any]:
    return json.loads(schema_path(version).read_text(encoding="utf-8"))
