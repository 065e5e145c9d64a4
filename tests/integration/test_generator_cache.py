"""generator-cache on the real naive loop: the transformed examples/naive_loop.py trains with the same losses
as the original (real TensorFlow, two short epochs), and its cache saw every example the generator made."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfdoctor.fixes import FixContext, get_fix

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STEPS, BATCH = 4, 32

#: runs a script as __main__ with arguments, then prints the memo counts of every cached function it defines
DRIVER = """
import json, runpy, sys
path, args = sys.argv[1], sys.argv[2:]
sys.argv = [path, *args]
g = runpy.run_path(path, run_name="__main__")
memo = {k: v.tfdoctor_memo for k, v in g.items() if isinstance(getattr(v, "tfdoctor_memo", None), dict)}
print("MEMO " + json.dumps(memo))
"""


def _run(script: Path) -> tuple[list[float], dict[str, dict[str, object]]]:
    args = ["--epochs", "2", "--steps-per-epoch", str(STEPS), "--batch-size", str(BATCH)]
    env = {**os.environ, "TF_DETERMINISTIC_OPS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=script.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses = [float(m) for m in re.findall(r"^epoch \d+: loss ([0-9.]+)", proc.stdout, re.M)]
    memo = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("MEMO "))[5:])
    return losses, memo


def test_the_cached_naive_loop_trains_with_the_same_losses(tmp_path: Path) -> None:
    src = (EXAMPLES / "naive_loop.py").read_text()
    out = get_fix("generator-cache").apply(src, FixContext(filename="naive_loop.py"))
    assert out.status == "changed", out.reason
    original, cached = tmp_path / "original" / "naive_loop.py", tmp_path / "cached" / "naive_loop.py"
    for path, code in ((original, src), (cached, out.code)):
        path.parent.mkdir()
        path.write_text(code)

    want, no_memo = _run(original)
    got, memo = _run(cached)
    assert no_memo == {}
    assert len(want) == len(got) == 2
    assert got == pytest.approx(want, abs=2e-4), (got, want)
    counts = memo["_preprocess_prefix"]
    # the loop breaks after STEPS batches, so the generator made STEPS + 1 per epoch
    assert counts["hits"] + counts["misses"] == 2 * (STEPS + 1) * BATCH  # type: ignore[operator]
    assert counts["bypass"] == 0 and counts["full"] is False
    assert counts["bytes"] == counts["misses"] * 32 * 32 * 3 * 4  # type: ignore[operator]
