"""The in-script API's faces without TensorFlow: lazy exports, option checks, the fix command line.
(The API profiling real training: tests/integration/test_api_inscript.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tfdoctor
from tfdoctor.errors import UsageError
from tfdoctor.session.inscript import DEFAULT_STEPS, ScriptSession

ROOT = Path(__file__).resolve().parents[2]


def test_import_tfdoctor_and_the_api_import_neither_tensorflow_nor_keras() -> None:
    code = (
        "import sys, tfdoctor; p = tfdoctor.profile; P = tfdoctor.Profile; "
        "assert callable(p) and P.__name__ == 'Profile'; "
        "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tfdoctor.nope  # noqa: B018


def test_default_steps_match_the_cli() -> None:
    import argparse

    from tfdoctor.commands.profile import ProfileCommand

    p = argparse.ArgumentParser()
    ProfileCommand.add_options(p)
    # None: config() plans DEFAULT_STEPS, and a --steps the user gave is told apart (no re-run to fit)
    assert p.parse_args([]).steps is None
    from tfdoctor.commands import profile

    assert profile.DEFAULT_STEPS == DEFAULT_STEPS


def test_impossible_step_counts_are_a_usage_error_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="leaves no timing window"):
        tfdoctor.profile(steps=4, warmup=3, home=tmp_path)
    assert not (tmp_path / "runs").exists()


def test_a_session_is_used_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = ScriptSession(steps=10, home=tmp_path)
    monkeypatch.setattr("tfdoctor.session.inscript.capture_active", lambda: True)
    s.start()
    assert s.nested and s.run is None and not s.stop(None)
    with pytest.raises(UsageError, match="already used"):
        s.start()


def test_fix_command_is_the_cli_fix_loop_on_this_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["train.py", "--epochs", "3"])
    s = ScriptSession(steps=30, warmup=5, home=tmp_path, location=(str(tmp_path / "train.py"), 7), fix=True)
    cmd = s.fix_command()
    assert cmd[1:6] == ["-m", "tfdoctor", "profile", str(tmp_path / "train.py"), "--fix"]
    assert cmd[cmd.index("--steps") + 1] == "30" and cmd[cmd.index("--warmup") + 1] == "5"
    assert cmd[-3:] == ["--", "--epochs", "3"]
