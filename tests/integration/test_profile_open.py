"""`tfdoctor profile ... --open`: the run is served on 127.0.0.1 and its page answers until ^C."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_profile_open_serves_the_run_page(tmp_path):
    port = _free_port()
    env = {**os.environ, "TFDOCTOR_HOME": str(tmp_path / "home"), "BROWSER": "true"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tfdoctor",
            "profile",
            str(SCRIPTS / "tiny_train.py"),
            "--steps",
            "12",
            "--run-id",
            "opened",
            "--open",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        page = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/runs/opened", timeout=2)
                if r.status_code == 200:
                    page = r.text
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        assert page is not None, proc.stdout.read() if proc.poll() is not None else "no page in time"
        assert "tiny_train.py" in page
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert "Run page: http://127.0.0.1:" in out
        assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
