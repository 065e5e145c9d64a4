"""A fix trial's write guard (tfdoctor/capture/child/guard.py): a trial works on a copy of the script's
folder and never changes a file of the user's. The guard's decisions on real files, then the audit
hook itself in a real Python process (open, os.open, zipfile, numpy, h5py), then which folder a trial
copies."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfdoctor.capture.child.guard import MARK, WriteGuard, changed_links, link_states, truncates, writes
from tfdoctor.fixes.workspace import MAX_ROOT_FILES, make_workspace, workspace_root


def _user_and_copy(tmp_path: Path) -> tuple[Path, Path]:
    """A user's folder with a big checkpoint, and a trial's copy where it is a link."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "train.py").write_text("print('hi')\n")
    (user / "best.keras").write_bytes(b"USER" * 1024)
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print('hi')\n")
    os.symlink(user / "best.keras", work / "best.keras")
    return user, work


def test_modes_that_write_and_that_truncate() -> None:
    assert writes("w", 0) and writes("ab", 0) and writes("r+", 0) and writes("x", 0) and not writes("rb", 0)
    assert writes(None, os.O_WRONLY | os.O_CREAT) and not writes(None, os.O_RDONLY)
    assert truncates("w", 0) and truncates("wb", 0) and not truncates("a", 0) and not truncates("r+", 0)
    assert not truncates("w+", 0)  # w+ truncates too, but it may read: copied to be safe
    assert truncates(None, os.O_WRONLY | os.O_TRUNC) and not truncates(None, os.O_WRONLY | os.O_APPEND)


def test_a_write_to_a_linked_file_breaks_the_link_and_leaves_the_users_file(tmp_path: Path) -> None:
    user, work = _user_and_copy(tmp_path)
    guard = WriteGuard(str(work), time.time_ns())
    guard.check(str(work / "best.keras"), "wb", 0)  # truncating: the link goes, nothing copied
    assert not (work / "best.keras").exists()
    (work / "best.keras").write_bytes(b"TRIAL")
    assert (user / "best.keras").read_bytes() == b"USER" * 1024
    os.unlink(work / "best.keras")
    os.symlink(user / "best.keras", work / "best.keras")
    guard.check(str(work / "best.keras"), "ab", 0)  # appending: the user's contents copied first
    assert not (work / "best.keras").is_symlink()
    assert (work / "best.keras").read_bytes() == b"USER" * 1024
    with open(work / "best.keras", "ab") as f:
        f.write(b"+")
    assert (user / "best.keras").read_bytes() == b"USER" * 1024
    # reading through a link is left alone
    os.unlink(work / "best.keras")
    os.symlink(user / "best.keras", work / "best.keras")
    guard.check(str(work / "best.keras"), "rb", 0)
    assert (work / "best.keras").is_symlink()


def test_an_existing_file_outside_the_copy_is_refused_a_new_one_is_not(tmp_path: Path) -> None:
    user, work = _user_and_copy(tmp_path)
    guard = WriteGuard(
        str(work), time.time_ns() + 10**9, temp=False
    )  # the user's files are older than the loop
    with pytest.raises(PermissionError) as e:
        guard.check(str(user / "best.keras"), "wb", 0)
    assert MARK in str(e.value) and str(user / "best.keras") in str(e.value)
    with pytest.raises(PermissionError):
        guard.check(str(user / "train.py"), None, os.O_WRONLY | os.O_TRUNC)
    guard.check(str(user / "new_log.csv"), "w", 0)  # nothing of the user's is lost
    guard.check(str(user / "best.keras"), "rb", 0)  # reading is fine
    guard.check(str(work / "out.csv"), "w", 0)  # inside the copy
    # a file made after the loop started is an earlier trial's: the next trial may overwrite it
    late = WriteGuard(str(work), 0, temp=False)
    late.check(str(user / "best.keras"), "wb", 0)


def test_library_caches_and_temporary_files_are_writable(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    (home / ".keras").mkdir(parents=True)
    (home / ".keras" / "keras.json").write_text("{}")
    (home / "models").mkdir()
    (home / "models" / "m.keras").write_text("x")
    monkeypatch.setenv("HOME", str(home))
    guard = WriteGuard(
        str(tmp_path / "work"), time.time_ns() + 10**9, allow=[str(tmp_path / "run")], temp=False
    )
    guard.check(str(home / ".keras" / "keras.json"), "w", 0)
    with pytest.raises(PermissionError):
        guard.check(str(home / "models" / "m.keras"), "w", 0)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "steps.jsonl").write_text("")
    guard.check(str(tmp_path / "run" / "steps.jsonl"), "a", 0)


def test_changed_links_sees_a_write_below_python(tmp_path: Path) -> None:
    user, work = _user_and_copy(tmp_path)
    before = link_states(str(work))
    assert list(before) == [str((user / "best.keras").resolve())]
    assert changed_links(before) == []
    time.sleep(0.01)
    (user / "best.keras").write_bytes(b"CLOBBERED")
    assert changed_links(before) == [str((user / "best.keras").resolve())]


HOOKED = """
import os, sys, time, zipfile
import numpy as np
from tfdoctor.capture.child import guard
g = guard.install({work!r}, time.time_ns() + 10**9, temp=False)
import h5py
guard.guard_h5py(g, h5py)
# inside the copy, through links: each write lands in the copy
with zipfile.ZipFile("best.keras", "w") as z:  # Keras 3's .keras save
    z.writestr("config.json", "{{}}")
np.save("weights.npy", np.zeros(3))
with h5py.File("model.weights.h5", "w") as f:
    f["x"] = np.ones(2)
fd = os.open("log.txt", os.O_WRONLY | os.O_APPEND)
os.write(fd, b"trial\\n")
os.close(fd)
# outside the copy: refused
for how in ("open", "h5py"):
    try:
        if how == "open":
            open({outside!r}, "w").write("trial")
        else:
            h5py.File({outside_h5!r}, "w")
    except PermissionError as e:
        print("refused", how, guard.MARK in str(e))
"""


def test_the_audit_hook_in_a_real_process(tmp_path: Path) -> None:
    pytest.importorskip("h5py")
    user, work = _user_and_copy(tmp_path)
    for name, data in (("weights.npy", b"N" * 64), ("model.weights.h5", b"H" * 64), ("log.txt", b"user\n")):
        (user / name).write_bytes(data)
        os.symlink(user / name, work / name)
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("user's")
    outside_h5 = tmp_path / "elsewhere.h5"
    outside_h5.write_bytes(b"user's")
    script = HOOKED.format(work=str(work), outside=str(outside), outside_h5=str(outside_h5))
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=work, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["refused open True", "refused h5py True"]
    assert (user / "best.keras").read_bytes() == b"USER" * 1024
    assert (user / "weights.npy").read_bytes() == b"N" * 64
    assert (user / "model.weights.h5").read_bytes() == b"H" * 64
    assert (user / "log.txt").read_bytes() == b"user\n"
    assert (work / "log.txt").read_bytes() == b"user\ntrial\n"  # appended to the copy's own copy
    assert outside.read_text() == "user's" and outside_h5.read_bytes() == b"user's"
    for name in ("best.keras", "weights.npy", "model.weights.h5", "log.txt"):
        assert not (work / name).is_symlink(), name


def test_the_copy_starts_at_a_working_directory_above_the_script(tmp_path: Path, monkeypatch) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "data").mkdir()
    (repo / "src" / "train.py").write_text("x = 1\n")
    (repo / "data" / "train.csv").write_text("1,2\n")
    script = repo / "src" / "train.py"
    assert workspace_root(script, repo) == repo  # python src/train.py from the repository's root
    assert workspace_root(script, repo / "src") == repo / "src"
    assert workspace_root(script, tmp_path / "elsewhere") == repo / "src"
    monkeypatch.setenv("HOME", str(repo))
    assert workspace_root(script, repo) == repo / "src"  # never the whole home folder
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    copied = make_workspace(script, tmp_path / "copy", workspace_root(script, repo))
    assert copied == tmp_path / "copy" / "src" / "train.py" and copied.read_text() == "x = 1\n"
    assert (tmp_path / "copy" / "data" / "train.csv").read_text() == "1,2\n"
    many = repo / "many"
    many.mkdir()
    for i in range(MAX_ROOT_FILES + 1):
        (many / f"{i}.txt").touch()
    assert workspace_root(script, repo) == repo / "src"  # too big to copy for every trial
