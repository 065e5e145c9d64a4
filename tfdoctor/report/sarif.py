"""A :class:`~tfdoctor.model.Report` as SARIF 2.1.0 (``--format sarif``), for code-scanning UIs.

One SARIF run; the tool's rules are tfdoctor's rule catalog (id ``TFD101``, name, the docstring's
first paragraph); one result per decided finding, at the script's lines where the evidence names
them (``train.py:42``), else at the script itself. Severity maps to SARIF levels: high → error,
medium → warning, low and info → note. Undecided findings are left out (they claim nothing).
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path
from typing import Any

from tfdoctor import __version__
from tfdoctor.model import Finding, Report

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {"high": "error", "medium": "warning", "low": "note", "info": "note"}
INFO_URI = "https://github.com/tfdoctor/tfdoctor"
_SOURCE = re.compile(r"^(?P<path>.+?):(?P<line>\d+)$")


def _rule_descriptors() -> list[dict[str, Any]]:
    from tfdoctor.rules import all_rules

    out = []
    for rule in all_rules():
        doc = inspect.getdoc(rule) or ""
        first = doc.split("\n\n")[0].replace("\n", " ").strip() or rule.NAME
        out.append(
            {
                "id": rule.ID,
                "name": rule.NAME,
                "shortDescription": {"text": rule.NAME.replace("-", " ")},
                "fullDescription": {"text": first},
                "help": {"text": doc or first},
            }
        )
    return out


def _artifact(path: str, root: Path | None) -> dict[str, Any]:
    """An artifactLocation: relative to ``root`` (with uriBaseId %SRCROOT%) when under it."""
    p = Path(path)
    if root is not None and p.is_absolute():
        try:
            rel = p.resolve().relative_to(root.resolve())
            return {"uri": rel.as_posix(), "uriBaseId": "%SRCROOT%"}
        except ValueError:
            pass
    if p.is_absolute():
        return {"uri": p.as_uri()}
    return {"uri": p.as_posix(), "uriBaseId": "%SRCROOT%"}


def _locations(finding: Finding, report: Report, root: Path | None) -> list[dict[str, Any]]:
    seen: list[tuple[str, int]] = []
    for ev in finding.evidence:
        m = _SOURCE.match(ev.source or "")
        if m and not m["path"].startswith("<") and (m["path"], int(m["line"])) not in seen:
            seen.append((m["path"], int(m["line"])))
    locs = [
        {
            "physicalLocation": {
                "artifactLocation": _artifact(path, root),
                "region": {"startLine": max(1, line)},
            }
        }
        for path, line in seen
    ]
    if not locs and report.script and not report.script.startswith("<"):
        locs = [{"physicalLocation": {"artifactLocation": _artifact(report.script, root)}}]
    return locs


def _message(f: Finding) -> str:
    lines = [f.claim]
    lines += [f"{e.label}: {e.value}" for e in f.evidence]
    if f.fix_ids:
        lines.append("fixes: " + ", ".join(f.fix_ids))
    return "\n".join(lines)


def to_sarif(report: Report, root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The SARIF log (a dict ready for ``json.dumps``). ``root``: the source root paths are made
    relative to (default: the current directory)."""
    base = Path(root) if root is not None else Path.cwd()
    rules = _rule_descriptors()
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for f in report.findings:
        if not f.decided:
            continue
        result: dict[str, Any] = {
            "ruleId": f.rule_id,
            "level": LEVELS.get(f.severity, "note"),
            "message": {"text": _message(f)},
            "locations": _locations(f, report, base),
            "properties": {
                "severity": f.severity,
                "estimatedSaving": round(f.est_saving, 4),
                "fixIds": list(f.fix_ids),
            },
        }
        if f.rule_id in index:
            result["ruleIndex"] = index[f.rule_id]
        results.append(result)
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "tfdoctor",
                "version": __version__,
                "informationUri": INFO_URI,
                "rules": rules,
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": base.resolve().as_uri() + "/"}},
        "results": results,
        "properties": {
            "runId": report.run_id,
            "status": report.status,
            "verdict": report.verdict,
            "examplesPerSecond": report.throughput.examples_per_s if report.throughput else None,
        },
    }
    if report.status != "complete":
        run["invocations"] = [
            {
                "executionSuccessful": False,
                "toolExecutionNotifications": [
                    {"level": "error", "message": {"text": (report.error or report.status).strip()[:2000]}}
                ],
            }
        ]
    else:
        run["invocations"] = [{"executionSuccessful": True}]
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
