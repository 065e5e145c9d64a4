"""docs/fixes.md documents every fix, and the CLI exposes the fix verb and profile --fix."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from tfdoctor.cli import main
from tfdoctor.fixes import all_fixes

DOC = Path(__file__).resolve().parents[2] / "docs" / "fixes.md"


def test_every_fix_has_its_section_with_its_docstring() -> None:
    text = DOC.read_text()
    for f in all_fixes():
        assert f"### `{f.ID}`" in text, f.ID
        first = (inspect.getdoc(type(f)) or "").splitlines()[0]
        assert first in text, f.ID


def test_fix_command_refuses_a_missing_run_and_a_run_with_results(tfd_home, tmp_path, capsys) -> None:
    assert main(["fix", "no-such-run"]) == 2
    assert "no run 'no-such-run'" in capsys.readouterr().err
    from tfdoctor.model import FixSummary, Report
    from tfdoctor.store import RunStore

    store = RunStore(tfd_home)
    run = store.new_run("train.py", run_id="done")
    run.write_report(
        Report(
            run_id="done", script="train.py", created="x", status="complete", fix=FixSummary(baseline=None)
        )
    )
    assert main(["fix", "done"]) == 6
    assert "already has fix results" in capsys.readouterr().err
    assert main(["fix", "done", "--only", "no-such-fix", "--force"]) == 2
    assert "unknown fix id(s) no-such-fix" in capsys.readouterr().err


@pytest.mark.parametrize("verb", [["fix", "--help"], ["profile", "--help"]])
def test_help_lists_the_fix_options(verb: list[str], capsys) -> None:
    with pytest.raises(SystemExit):
        main(verb)
    out = capsys.readouterr().out
    assert "--apply" in out and "--only" in out
