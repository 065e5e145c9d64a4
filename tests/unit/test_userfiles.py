"""The user's files survive ``--apply`` (issue 16, items 1-5): a full disk, a dangling link where the
backup goes, a folder the user cannot write, CRLF line endings, a latin-1 script with its cookie."""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tfdoctor.commands import fix as fix_cmd
from tfdoctor.errors import TfdoctorError
from tfdoctor.fixes.workspace import backup_path, source_diff, unified_diff, write_copy
from tfdoctor.userfiles import (
    UserFileError,
    check_writable,
    make_backup,
    read_source,
    sha256_of,
    write_source,
)

ROOT = Path(__file__).resolve().parents[2]

LATIN1 = '# -*- coding: latin-1 -*-\r\nname = "café"\r\nfor i in range(3):\r\n    print(name, i)\r\n'.encode(
    "latin-1"
)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}


# -- item 1: a full disk leaves the script byte-identical ------------------------------------------
def _limit_file_size(limit: int):  # type: ignore[no-untyped-def]
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


APPLY_UNDER_LIMIT = """
import sys
from pathlib import Path
from tfdoctor.commands.fix import apply_patch
from tfdoctor.errors import TfdoctorError
from tfdoctor.userfiles import read_source
script = Path(sys.argv[1])
src = read_source(script)
try:
    bak = apply_patch(script, src, src.text + "# a long fix\\n" * 2000)
except TfdoctorError as e:
    print("ERROR", e)
else:
    print("APPLIED", bak)
"""


def test_a_full_disk_leaves_the_script_byte_identical_and_the_message_names_the_backup(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("x = 1\n" * 900)  # 5.4 KB: fits under the limit, the fixed 31 KB does not
    before = script.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-c", APPLY_UNDER_LIMIT, str(script)],
        preexec_fn=_limit_file_size(8192),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("ERROR"), res.stdout
    assert script.read_bytes() == before  # not truncated at 8192 bytes, not touched at all
    bak = script.with_name("train.py.tfdoctor-bak")
    assert str(bak) in res.stdout  # the one line says where the backup is
    assert bak.read_bytes() == before
    assert "Traceback" not in res.stdout + res.stderr
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in ("train.py", bak.name)]
    assert leftovers == []  # no temporary file left behind


def test_a_backup_cut_short_by_a_full_disk_is_removed_and_nothing_is_written(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("y = 2\n" * 3000)  # 18 KB: the backup itself does not fit under 8 KB
    before = script.read_bytes()
    res = subprocess.run(
        [sys.executable, "-c", APPLY_UNDER_LIMIT, str(script)],
        preexec_fn=_limit_file_size(8192),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert res.stdout.startswith("ERROR") and "not changed" in res.stdout, res.stdout + res.stderr
    assert script.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


def test_the_write_is_atomic_keeps_the_mode_and_writes_through_a_symlinked_script(tmp_path):
    real = tmp_path / "src" / "train.py"
    real.parent.mkdir()
    real.write_text("a = 1\n")
    real.chmod(0o750)
    link = tmp_path / "train.py"
    link.symlink_to(real)
    src = read_source(link)
    write_source(link, "a = 2\n", src)
    assert link.is_symlink() and real.read_text() == "a = 2\n"
    assert real.stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in real.parent.iterdir()) == ["train.py"]


# -- item 2: backups never follow links -------------------------------------------------------------
def test_a_dangling_backup_link_is_not_written_through(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    elsewhere = tmp_path / "elsewhere" / "victim.py"
    elsewhere.parent.mkdir()
    link = tmp_path / "train.py.tfdoctor-bak"
    link.symlink_to(elsewhere)  # dangling: the target does not exist
    bak = make_backup(script)
    assert bak == tmp_path / "train.py.tfdoctor-bak.1"
    assert bak.read_text() == "print('hi')\n" and not bak.is_symlink()
    assert not elsewhere.exists()  # nothing created where the link points
    assert link.is_symlink() and os.readlink(link) == str(elsewhere)
    assert backup_path(script) == tmp_path / "train.py.tfdoctor-bak.2"


def test_a_backup_link_to_an_existing_file_is_not_overwritten(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("new\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "train.py.tfdoctor-bak").symlink_to(victim)
    (tmp_path / "train.py.tfdoctor-bak.1").write_text("older backup\n")
    bak = make_backup(script)
    assert bak.name == "train.py.tfdoctor-bak.2"
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "train.py.tfdoctor-bak.1").read_text() == "older backup\n"


# -- item 3: a folder the user cannot write fails before the loop, in one line ---------------------
@contextlib.contextmanager
def read_only_folder(folder: Path) -> Iterator[None]:
    """chmod for a normal user; root ignores modes, so as root the folder is made immutable (chattr)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    if shutil.which("chattr") is None:
        pytest.skip("running as root (modes do not stop root) and chattr is not installed")
    res = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"running as root (modes do not stop root) and chattr +i fails: {res.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_read_only_folder_is_refused_in_one_line_before_the_loop(tmp_path, monkeypatch):
    folder = tmp_path / "proj"
    folder.mkdir()
    script = folder / "train.py"
    script.write_text("print('train')\n")
    started = []

    class Loop:  # stands in for the fix loop only to see whether it was started
        def __init__(self, *a: object, **k: object) -> None:
            started.append(True)

    monkeypatch.setattr(fix_cmd, "FixLoop", Loop)
    cfg = argparse.Namespace(script=script)
    args = argparse.Namespace(apply=True)
    with read_only_folder(folder):
        with pytest.raises(TfdoctorError) as err:
            check_writable(script)
        assert str(folder) in str(err.value) and "\n" not in str(err.value)
        with pytest.raises(TfdoctorError):
            fix_cmd.run_loop(None, None, None, cfg, args, None, None)  # type: ignore[arg-type]
    assert started == []  # refused before a single fix was measured
    assert script.read_text() == "print('train')\n"


def test_profile_fix_apply_refuses_a_read_only_folder_before_the_baseline_runs(tmp_path, capsys):
    """``profile --fix --apply``: the folder is checked before the script runs at all (was: after the
    baseline profile), in one line, and no run is stored."""
    from tfdoctor.cli import main

    folder = tmp_path / "user"
    folder.mkdir()
    script = folder / "train.py"
    script.write_text("raise SystemExit('the baseline ran')\n")
    home = tmp_path / "home"
    with read_only_folder(folder):
        rc = main(["profile", str(script), "--fix", "--apply", "--home", str(home)])
    err = capsys.readouterr().err
    assert rc == 2 and str(folder) in err and "the baseline ran" not in err
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
    assert script.read_text() == "raise SystemExit('the baseline ran')\n"


def test_a_writable_folder_passes_the_check_and_leaves_nothing_behind(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    check_writable(script)
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


# -- item 4: CRLF scripts keep their line endings ---------------------------------------------------
def test_crlf_round_trip_is_byte_identical_and_apply_does_not_see_a_change(tmp_path):
    script = tmp_path / "train.py"
    raw = b"import os\r\nx = 1\r\nprint(x)\r\n"
    script.write_bytes(raw)
    src = read_source(script)
    assert src.newline == "\r\n" and src.text == "import os\nx = 1\nprint(x)\n"
    assert src.sha256 == sha256_of(script) and src.unchanged_on_disk()
    write_source(script, src.text, src)
    assert script.read_bytes() == raw
    fixed = src.text.replace("x = 1\n", "x = 1\ny = 2\n")
    bak = fix_cmd.apply_patch(script, src, fixed)  # not "changed while the fixes were measured"
    assert bak.read_bytes() == raw
    assert script.read_bytes() == b"import os\r\nx = 1\r\ny = 2\r\nprint(x)\r\n"


@pytest.mark.parametrize("tool", ["git", "patch"])
def test_the_patch_of_a_crlf_script_applies(tmp_path, tool):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    folder = tmp_path / "proj"
    folder.mkdir()
    script = folder / "train.py"
    raw = b"import os\r\n\r\ndef main():\r\n    print(1)\r\n\r\nmain()\r\n"
    script.write_bytes(raw)
    src = read_source(script)
    fixed = src.text.replace("    print(1)\n", "    print(1)\n    print(2)\n")
    patch = tmp_path / "fix.patch"
    patch.write_bytes(source_diff(src, fixed, "train.py").encode())
    cmd = ["git", "apply", str(patch)] if tool == "git" else ["patch", "-p1", "-i", str(patch)]
    res = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert script.read_bytes() == raw.replace(b"    print(1)\r\n", b"    print(1)\r\n    print(2)\r\n")


def test_mixed_line_endings_are_kept_as_they_are(tmp_path):
    script = tmp_path / "train.py"
    raw = b"a = 1\r\nb = 2\nc = 3\r\n"
    script.write_bytes(raw)
    src = read_source(script)
    assert src.newline == ""
    write_source(script, src.text.replace("b = 2", "b = 3"), src)
    assert script.read_bytes() == b"a = 1\r\nb = 3\nc = 3\r\n"


def test_the_diff_splits_lines_on_newlines_only():
    # a form feed inside a line (old sources have them) is not a line break for the patch
    before = "a = 1\n\x0c\nb = 'x\x1cy'\n"
    after = before + "c = 3\n"
    diff = unified_diff(before, after, "t.py")
    assert "+c = 3\n" in diff and diff.count("\n+") == 2  # "+++ b/t.py" and the added line


# -- item 5: a latin-1 script with its cookie -------------------------------------------------------
def test_a_latin1_script_reads_writes_and_applies_in_latin1(tmp_path):
    script = tmp_path / "train.py"
    script.write_bytes(LATIN1)
    src = read_source(script)
    assert src.encoding == "iso-8859-1" and "café" in src.text
    copy = tmp_path / "copy.py"
    write_copy(copy, src.text, src)
    assert copy.read_bytes() == LATIN1  # the work directory's copy says what the original says
    fixed = src.text + "print('fertig')\n"
    fix_cmd.apply_patch(script, src, fixed)
    assert script.read_bytes() == LATIN1 + b"print('fertig')\r\n"
    assert read_source(script).text == fixed


def test_text_the_encoding_cannot_hold_is_refused_before_anything_is_written(tmp_path):
    script = tmp_path / "train.py"
    script.write_bytes(LATIN1)
    src = read_source(script)
    with pytest.raises(UserFileError, match="cannot hold"):
        fix_cmd.apply_patch(script, src, src.text + "print('→')\n")
    assert script.read_bytes() == LATIN1
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]  # no backup either


def test_a_bom_and_a_utf8_script_round_trip(tmp_path):
    script = tmp_path / "train.py"
    raw = "\ufeffprint('héllo')\n".encode()
    script.write_bytes(raw)
    src = read_source(script)
    assert src.encoding == "utf-8-sig" and src.text == "print('héllo')\n"
    write_source(script, src.text, src)
    assert script.read_bytes() == raw


def test_an_undecodable_script_is_one_clear_error(tmp_path):
    script = tmp_path / "train.py"
    script.write_bytes(b"x = '\xff\xfe'\n")  # no cookie: utf-8, which this is not
    with pytest.raises(UserFileError, match="cannot decode"):
        read_source(script)


def test_apply_refuses_a_script_changed_since_it_was_read(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("x = 1\n"))
    src = read_source(script)
    script.write_text("x = 2\n")
    with pytest.raises(TfdoctorError, match="changed while the fixes were measured"):
        fix_cmd.apply_patch(script, src, "x = 3\n")
    assert script.read_text() == "x = 2\n"
