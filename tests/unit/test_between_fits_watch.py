"""The watch of the work between fit() calls (tfdoctor.capture.child.gap), without TensorFlow: which
fit() calls are in a loop, what ends the watch, what it counts. The real runs are in
tests/integration/test_between_fits.py."""

from __future__ import annotations

import os
import runpy
import sys
import time
from pathlib import Path

import pytest

from tfdoctor.capture.child.clock import StopCapture
from tfdoctor.capture.child.gap import GapWatch, in_loop

PROBE = """\
import sys
from tfdoctor.capture.child.gap import in_loop

seen = []


def fit():
    seen.append(in_loop(sys._getframe(1)))


fit()  # module level: not in a loop
for epoch in range(2):
    fit()
i = 0
while i < 1:
    i += 1
    if True:
        fit()  # nested in an if, inside the while
else:
    fit()  # a while's else runs once: not the loop's body


def main():
    fit()
    for _ in [0]:
        x = 1
    fit()  # after a loop, not in it
    for _ in [0]:
        (
            fit()  # a call over several lines in a loop's body
        )
"""


def test_which_fit_calls_are_inside_a_loop_of_the_script(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE + "\n\nmain()\n")
    seen = runpy.run_path(str(script))["seen"]
    assert seen == [False, True, True, True, False, False, False, True]


def test_an_unreadable_file_has_no_loops() -> None:
    def probe() -> bool:
        return in_loop(sys._getframe(1))

    code = compile("result = probe()", "<no such file>", "exec")
    scope: dict = {"probe": probe}
    exec(code, scope)
    assert scope["result"] is False
    assert in_loop(None) is False


def _watch(tmp_path: Path, limit: float = 30.0) -> GapWatch:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return GapWatch(limit, "train.py:12", 119, allow=[str(run_dir)], script=str(tmp_path / "busy.py"))


def test_a_write_outside_the_runs_folders_ends_the_watch_before_it(tmp_path: Path) -> None:
    watch = _watch(tmp_path)
    user = tmp_path / "model.keras"
    watch.opened(str(user), "rb", 0)  # a read: nothing
    watch.opened(str(tmp_path / "run" / "facts.json"), "w", 0)  # the run's own folder
    home = Path(os.path.expanduser("~"))
    if str(home) not in ("", "/"):
        watch.opened(str(home / ".keras" / "keras.json"), "w", 0)  # a library's dot-folder
    watch.opened(3, "w", 0)  # a file descriptor: no path to judge
    assert watch.active
    with pytest.raises(StopCapture):
        watch.opened(str(user), "wb", 0)
    assert not watch.active and watch.ended_by == "write" and watch.write_path == str(user.resolve())
    assert watch.facts()["seconds"] == 0.0  # the fit() had not returned yet: no gap timed
    watch.opened(str(user), "wb", 0)  # ended: nothing more


def test_os_open_flags_count_as_writes(tmp_path: Path) -> None:
    watch = _watch(tmp_path)
    watch.opened(str(tmp_path / "log.csv"), None, os.O_RDONLY)
    assert watch.active
    with pytest.raises(StopCapture):
        watch.opened(str(tmp_path / "log.csv"), None, os.O_WRONLY | os.O_APPEND)
    assert watch.ended_by == "write"


def test_predict_calls_are_counted_by_line_once_the_gap_began(tmp_path: Path) -> None:
    watch = _watch(tmp_path)

    def predict(rows: int) -> None:  # as the hook reports a predict() of the script's line calling it
        watch.predicted(sys._getframe(1), rows, 0.05)

    predict(1)  # the fit()'s epoch end: not the gap's
    assert watch.predicts == {}
    watch.begin()
    for rows in (1, 1, 3):
        predict(rows)
    time.sleep(0.01)
    watch.end("next_fit")
    facts = watch.facts()
    [calls] = facts["predict_calls"]
    # the line the calls were made from (the frame's line as predict() returned)
    assert calls["site"].startswith(f"{Path(__file__).name}:") and calls["code"] == "predict(rows)"
    assert calls["calls"] == 3 and calls["rows"] == 3 and calls["seconds"] == pytest.approx(0.15)
    assert facts["ended_by"] == "next_fit" and facts["seconds"] >= 0.01 and facts["fit_steps"] == 119
    watch.end("limit")  # the first end stands
    assert watch.ended_by == "next_fit"


def test_the_limit_ends_the_watch_at_a_predict_call(tmp_path: Path) -> None:
    watch = _watch(tmp_path, limit=0.0)
    watch.begin()
    with pytest.raises(StopCapture):
        watch.predicted(sys._getframe(), 1, 0.01)
    assert watch.ended_by == "limit" and watch.predicts  # the call that ran is counted


def test_the_timer_stops_the_script_thread_at_the_limit(tmp_path: Path) -> None:
    """Between two bytecodes of the script's thread, as ^C would: a plain Python loop of the script (run by
    runpy, as the harness runs it) is ended."""
    script = tmp_path / "busy.py"
    script.write_text(
        "import time\n\nt0 = time.perf_counter()\nwhile time.perf_counter() - t0 < 30:\n    pass\n"
    )
    watch = _watch(tmp_path, limit=0.2)
    watch.start()
    watch.begin()
    with pytest.raises(StopCapture):
        runpy.run_path(str(script))
    assert watch.ended_by == "limit" and 0.1 <= watch.seconds < 10


def test_the_timer_raises_nothing_once_the_script_has_ended(tmp_path: Path) -> None:
    """The limit passing while the harness (not the script) runs, after the script's end: nothing is
    raised there; the harness ends the watch as "script_end"."""
    watch = _watch(tmp_path, limit=0.1)
    watch.start()
    watch.begin()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.6:  # not under runpy: the harness's own code
        pass
    assert watch.active
    watch.end("script_end")
    assert watch.ended_by == "script_end"


class _Model:
    """What the watch reads of a Keras model: ``train_function`` (None until a fit()'s first batch, and
    again after compile())."""

    def __init__(self) -> None:
        self.train_function: object = None


def test_the_next_fit_is_timed_to_its_first_batch_and_its_model_named(tmp_path: Path) -> None:
    """A federated-averaging loop builds and compiles a new model for each fit(): the next call's first
    batch (its train function traced anew) is the loop's time too, and the gap is still the gap."""
    import weakref

    for how in ("new", "same", "recompiled"):
        ended = _Model()
        ended.train_function = object()
        watch = _watch(tmp_path)
        watch.model = weakref.ref(ended)
        watch.begin()
        time.sleep(0.05)
        nxt = _Model() if how == "new" else ended
        if how == "recompiled":
            ended.train_function = None  # compile() again
        watch.next_fit(nxt)
        assert not watch.running and watch.in_next_fit  # predict() inside the next fit() is not the gap's
        time.sleep(0.1)
        with pytest.raises(StopCapture):
            watch.first_batch()
        facts = watch.facts()
        assert facts["ended_by"] == "next_fit" and facts["next_fit_model"] == how, facts
        assert 0.05 <= facts["seconds"] < 0.1 and facts["next_fit_first_batch_s"] >= 0.1, facts


def test_a_limit_inside_the_next_fit_leaves_the_gap_as_it_was(tmp_path: Path) -> None:
    watch = _watch(tmp_path)
    watch.begin()
    watch.next_fit(_Model())
    watch.end("limit")  # the timer, before the next fit()'s first batch ended
    facts = watch.facts()
    assert facts["ended_by"] == "next_fit" and facts["next_fit_first_batch_s"] is None
    assert facts["next_fit_model"] is None  # the ended fit()'s model unknown: not guessed


def test_a_temporary_file_without_a_name_or_autographs_source_does_not_end_the_watch(tmp_path: Path) -> None:
    """Tracing a tf.function for the first time in the gap (PPO's value update after its policy update)
    makes autograph write its converted source through NamedTemporaryFile, whose audit event names the
    temporary folder itself: no user's file can be written that way."""
    import tempfile

    watch = _watch(tmp_path)
    temp = os.path.realpath(tempfile.gettempdir())
    watch.opened(temp, "w", os.O_WRONLY | os.O_CREAT)  # the folder itself (O_TMPFILE underneath)
    watch.opened(os.path.join(temp, "__autograph_generated_filez1x2.py"), "w", 0)
    assert watch.active
    with pytest.raises(StopCapture):  # any other file there may be the user's
        watch.opened(os.path.join(temp, "rewards.csv"), "w", 0)
    assert watch.write_path == os.path.join(temp, "rewards.csv")


def test_between_bursts_of_steps_the_next_step_ends_the_watch_with_the_bursts_length(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    watch = GapWatch(30.0, "ppo.py:148", None, allow=[str(run_dir)], loop="steps")
    watch.begin()

    def critic() -> None:  # as the hook reports an eager model call of the script's line
        watch.host_call("call", sys._getframe(1), 0.002)

    for _ in range(3):
        critic()
    with pytest.raises(StopCapture):
        watch.next_step(3.791, 86)
    facts = watch.facts()
    assert facts["loop"] == "steps" and facts["ended_by"] == "next_step"
    assert facts["seconds"] == 3.791 and facts["fit_steps"] == 86
    [calls] = facts["model_calls"]
    assert calls["api"] == "call" and calls["calls"] == 3 and calls["code"] == "critic()"
    assert calls["seconds"] == pytest.approx(0.006)
    critic()  # ended: nothing more counted
    assert watch.facts()["model_calls"][0]["calls"] == 3
