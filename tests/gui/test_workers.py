"""Loading runs in a worker thread: progress arrives, the event loop stays alive, cancel works."""

import time
from pathlib import Path

import onnx
import pytest
from PySide6.QtCore import QTimer

from app.window import workers
from app.window.workers import Job, load_model
from tests.conftest import SAMPLE_MODEL

DENSENET = Path(onnx.__file__).parent / "backend/test/data/light/light_densenet121.onnx"


def test_load_reports_progress_and_keeps_the_event_loop_alive(qtbot):
    ticks = []
    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(lambda: ticks.append(1))
    progress = []
    job = Job(load_model(DENSENET, show_constants=False), "Loading")
    job.progress.connect(lambda f, text: progress.append((f, text)))
    timer.start()
    with qtbot.waitSignal(job.succeeded, timeout=30000) as blocker:
        job.start()
    timer.stop()
    loaded = blocker.args[0]
    assert len(loaded.graph.nodes) > 1000 and len(loaded.layout.boxes) > 1000
    assert loaded.problems == {}
    assert progress[0][0] == 0.0 and progress[-1][0] == 1.0
    assert any("Laying out" in text for _, text in progress)
    # The GUI thread ran its timer many times while the worker loaded.
    assert len(ticks) >= 5
    assert job.wait(5000)


def test_cancel_stops_listening_at_once_and_the_thread_ends(qtbot):
    job = Job(load_model(DENSENET, show_constants=False), "Loading")
    results = []
    job.succeeded.connect(results.append)
    job.failed.connect(results.append)
    job.start()
    with qtbot.waitSignal(job.cancelled, timeout=1000):
        job.cancel()
    assert not job.is_active()
    assert job.wait(30000)
    qtbot.wait(50)
    assert results == [] and job not in workers.running_jobs()


def test_cancel_inside_the_function_stops_it(qtbot):
    reached = []

    def work(progress):
        for i in range(1000):
            progress.report(i / 1000)
            reached.append(i)
            time.sleep(0.002)
        return "done"

    job = Job(work, "Counting").start()
    qtbot.waitUntil(lambda: len(reached) > 5, timeout=5000)
    job.cancel()
    assert job.wait(5000)
    assert len(reached) < 1000


def test_bad_file_fails_with_one_line(qtbot, tmp_path):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"\x00\xffnot a model at all" * 10)
    job = Job(load_model(bad, show_constants=False), "Loading")
    with qtbot.waitSignal(job.failed, timeout=10000) as blocker:
        job.start()
    message = blocker.args[0]
    assert "garbage.onnx" in message and "\n" not in message and "Traceback" not in message


def test_unexpected_exception_is_one_line(qtbot):
    def work(progress):
        raise ZeroDivisionError("boom")

    job = Job(work, "Thinking")
    with qtbot.waitSignal(job.failed, timeout=5000) as blocker:
        job.start()
    assert blocker.args[0] == "Thinking: unexpected ZeroDivisionError: boom"


@pytest.mark.parametrize("show_constants", [False, True])
def test_sample_loads(qtbot, show_constants):
    job = Job(load_model(SAMPLE_MODEL, show_constants), "Loading")
    with qtbot.waitSignal(job.succeeded, timeout=10000) as blocker:
        job.start()
    layout = blocker.args[0].layout
    assert any(isinstance(k, str) and k.startswith("const:") for k in layout.boxes) == \
        show_constants


def test_the_serial_worker_runs_in_order_on_one_thread(qtbot):
    import threading

    from app.window.workers import SerialWorker
    from compiler.errors import KilnError

    worker = SerialWorker("test")
    seen, errors = [], []
    worker.succeeded.connect(seen.append)
    worker.failed.connect(errors.append)
    threads = set()

    def step(i):
        threads.add(threading.get_ident())
        if i == 2:
            raise KilnError("step 2 refused\nsecond line")
        return i

    for i in range(5):
        worker.submit(lambda i=i: step(i))
    assert worker.is_busy()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=10000)
    assert seen == [0, 1, 3, 4] and errors == ["step 2 refused\\nsecond line"]  # one line
    assert len(threads) == 1 and threading.get_ident() not in threads
