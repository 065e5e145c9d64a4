"""How the harness tells a Python generator feeding the loop: an object scan when this thread is the
only one running Python, the other threads' stacks otherwise (the object scan is unsafe then)."""

from __future__ import annotations

import gc
import queue
import subprocess
import sys
import threading

from tfdoctor.capture.child.hooks import suspended_user_generator, user_generator


def batches(n):
    for i in range(n):
        yield tuple(range(i % 7))  # builds tuples, like a generator stacking a batch


def test_a_suspended_generator_of_the_script_is_found_by_the_object_scan():
    gen = batches(10)
    next(gen)
    where = suspended_user_generator()
    assert where is not None and where.endswith(
        f"test_capture_input_kind.py:{batches.__code__.co_firstlineno}"
    )
    gen.close()


def test_alone_in_its_process_the_harness_finds_the_generator_by_the_object_scan(tmp_path):
    """user_generator() in a process whose only thread runs Python (the script's, as the harness sees
    it; pytest-xdist's worker runs an execnet thread beside the tests, so a real child is used): the
    suspended generator of the user's file is found, with gc.get_objects() the way to it."""
    script = tmp_path / "train.py"
    script.write_text(
        "import gc, threading\n"
        "from tfdoctor.capture.child import hooks\n"
        "def batches():\n"
        "    while True:\n"
        "        yield [0] * 8\n"
        "gen = batches()\n"
        "next(gen)\n"
        "assert threading.active_count() == 1\n"
        "scans = []\n"
        "real = gc.get_objects\n"
        "gc.get_objects = lambda: scans.append(1) or real()\n"
        "print(hooks.user_generator(), len(scans))\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [f"{script}:3", "1"], out.stdout


def test_with_another_thread_running_python_the_object_scan_is_not_used(monkeypatch):
    """gc.get_objects() would hand out tuples the producer thread is still building (their resize then
    fails with SystemError in the user's thread): with a producer running, it must not be called."""
    items: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()

    def produce():
        for item in batches(10**9):
            while not stop.is_set():
                try:
                    items.put(item, timeout=0.05)
                    break
                except queue.Full:
                    continue
            if stop.is_set():
                return

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        items.get(timeout=5)

        def refuse():
            raise AssertionError("gc.get_objects() called while another thread runs Python")

        monkeypatch.setattr(gc, "get_objects", refuse)
        where = user_generator()
        assert where is not None and "test_capture_input_kind.py:" in where
    finally:
        stop.set()
        t.join(timeout=5)
