"""A step that takes derivatives of the model's output with respect to its inputs (a physics-informed
loss, a gradient penalty) before the loss's gradient: those ``tape.gradient`` calls are inside the step.
They used to end it (the first of them decided the loop counted tape gradients: 4 "steps" an update,
the throughput 4x too high) and to name the derivative's function as the step, where the tf-function fix
then went (0.60x measured on the PINN shape). And the dataset ``predict()`` makes of its arrays for a
logged error is not the loop's input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tfdoctor.capture.runner import CaptureConfig, run_capture
from tfdoctor.store import RunStore

pytestmark = pytest.mark.integration
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pinn_loop.py"


def _line(pattern: str) -> int:
    lines = SCRIPT.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if re.search(pattern, text))


def test_derivatives_inside_the_step_neither_end_it_nor_name_it(tfd_home):
    run = RunStore(tfd_home).new_run(str(SCRIPT), [])
    cfg = CaptureConfig(
        script=SCRIPT,
        args=[],
        steps=40,  # more than the script makes: it ends first, with every step it made
        warmup=2,
        profile=False,
        timeout_s=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    res = run_capture(cfg, run)
    assert res.facts is not None, (res.message, res.error, res.stderr_tail)
    # one step an optimizer update (warm-up steps included): 14 (4 an update before, 40 in all)
    assert len(res.steps) == 14, len(res.steps)
    src = res.facts.source
    assert src["step_fn"].endswith(f"pinn_loop.py:{_line(r'^def grad')}"), src
    assert src["gradient"].endswith(f"pinn_loop.py:{_line(r'return loss, tape.gradient')}"), src
    assert res.facts.input_kind == "numpy", res.facts.input_kind
