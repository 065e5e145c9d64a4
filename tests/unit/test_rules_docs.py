"""docs/rules.md is generated from the rule docstrings and examples, and is committed up to date."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("document_rules", ROOT / "scripts" / "document_rules.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_rules_md_is_up_to_date() -> None:
    doc = _script()
    assert (ROOT / "docs" / "rules.md").read_text(encoding="utf-8") == doc.render(), (
        "docs/rules.md is stale: run python scripts/document_rules.py"
    )


def test_rules_md_lists_every_rule_with_its_sections_and_examples() -> None:
    from tfdoctor.rules import all_rules

    text = _script().render()
    for r in all_rules():
        assert f"### {r.ID} {r.NAME}" in text
        for ex in r.EXAMPLES:
            assert f"`{ex.path}`" in text
    assert text.count("**Fix safety.**") == len(all_rules())
