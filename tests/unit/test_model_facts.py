"""Facts are typed: what travelled as strings in facts.extra is a field, and runs recorded before
(sample_traces/, old stores) still read the same."""

from __future__ import annotations

import json
from pathlib import Path

from tfdoctor.model import Facts

ROOT = Path(__file__).resolve().parents[2]


def test_old_extra_cpu_strings_become_fields():
    f = Facts.model_validate({"extra": {"cpu_count": "2", "cpu_flags": "avx2 fma", "seen_tape": "3"}})
    assert f.cpu_count == 2 and f.cpu_flags == ["avx2", "fma"]
    assert f.extra == {"seen_tape": "3"}


def test_fields_win_over_leftover_extra_and_round_trip():
    f = Facts.model_validate({"cpu_count": 8, "cpu_flags": ["amx_bf16"], "extra": {"cpu_count": "2"}})
    assert f.cpu_count == 8 and f.cpu_flags == ["amx_bf16"]
    again = Facts.model_validate(json.loads(f.model_dump_json()))
    assert again == f


def test_a_recorded_run_reads_its_cpu_flags():
    facts = Facts.model_validate_json((ROOT / "sample_traces/cpu-naive_loop/facts.json").read_text())
    assert facts.cpu_count and facts.cpu_count >= 1
    assert all(" " not in flag for flag in facts.cpu_flags)
    assert "cpu_flags" not in facts.extra


def test_remote_capture_hosts_are_lists():
    f = Facts(hosts=["a_1", "b_2"], hosts_without_trace=["grpc://b:2"])
    assert Facts.model_validate_json(f.model_dump_json()).hosts_without_trace == ["grpc://b:2"]


def test_findings_carry_their_family_also_when_stored_before():
    import pytest

    from tfdoctor.model import Finding, rule_family

    assert rule_family("TFD101") == "input" and rule_family("TFD604") == "distribution"
    with pytest.raises(ValueError):
        rule_family("X1")
    old = Finding.model_validate({"rule_id": "TFD301", "name": "h2d", "severity": "high", "claim": "c"})
    assert old.family == "copy"
    from tfdoctor.rules import all_rules

    for rule in all_rules():  # every rule's ID maps to a family (a new hundreds digit must be named)
        assert rule_family(rule.ID)
