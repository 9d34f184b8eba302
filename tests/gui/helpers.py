"""Helpers of the GUI tests: a window with a model open, and a graph fingerprint."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
from PySide6.QtGui import QImage

from app.window.mainwindow import MainWindow
from compiler.ir.dump import dump
from tests.conftest import SAMPLE_MODEL

DENSENET = Path(onnx.__file__).parent / "backend/test/data/light/light_densenet121.onnx"


def make_window(qtbot, model: Path | None = SAMPLE_MODEL) -> MainWindow:
    """A shown main window, with `model` loaded (None: empty); closed without prompts after."""
    window = MainWindow()
    qtbot.addWidget(window, before_close_func=lambda w: w.document.undo_stack.setClean())
    window.show()
    if model is not None:
        open_and_wait(qtbot, window, model)
    return window


def open_and_wait(qtbot, window: MainWindow, model: Path) -> None:
    """Open `model` and wait until it is on the canvas."""
    with qtbot.waitSignal(window.modelLoaded, timeout=60000):
        assert window.open_file(model) is not None


def copy_sample(tmp_path: Path) -> Path:
    """A copy of the sample model that tests may overwrite."""
    target = tmp_path / "digits_cnn.onnx"
    shutil.copy(SAMPLE_MODEL, target)
    return target


def fingerprint(graph):
    """Dump text plus every constant payload (identity and bytes): equal means the same graph."""
    payloads = {name: (id(c.data), c.data.tobytes()) for name, c in graph.constants.items()}
    return dump(graph), payloads


def node_id(window: MainWindow, name: str) -> int:
    """The id of the node named `name` in the window's graph."""
    return next(n.id for n in window.document.graph.nodes if n.name == name)


def click_row(qtbot, panel, tensor: str) -> None:
    """Click `tensor`'s row in the Quantization table (scrolled into view) with the mouse."""
    from PySide6.QtCore import Qt

    row = panel.proxy.mapFromSource(panel.model.index(panel.model.row_of(tensor), 0))
    panel.table.scrollTo(row)
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton,
                     pos=panel.table.visualRect(row).center())
    assert panel.selected_tensor() == tensor


def click_box(qtbot, window: MainWindow, key: int) -> None:
    """Centre node `key` on the canvas and click its box, as a user selects it.

    A node inside closed groups is reached as a user does: double clicking the closed group
    that shows it until its own box is there.
    """
    from PySide6.QtCore import Qt

    canvas = window.canvas
    while canvas.box_rect(key) is None:
        group = window.grouping.shown_as(key)
        assert group != key and canvas.box_rect(group) is not None, f"{key} is not shown"
        canvas.center_on(group)
        with qtbot.waitSignal(window.layoutReady, timeout=10000):
            qtbot.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                              pos=canvas.mapFromScene(canvas.box_rect(group).center()))
    canvas.center_on(key)
    qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                     pos=canvas.mapFromScene(canvas.box_rect(key).center()))
    assert canvas.selected_key() == key


def run_and_kill(script: str, model: Path) -> int:
    """Run `script` (a Python program given `model`) until it prints "saved", then SIGKILL it.

    Returns the killed child's PID (its recovery file is named after it).
    """
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(root)}
    child = subprocess.Popen([sys.executable, "-c", script, str(model)], cwd=root, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 120
        while "saved" not in line and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line and child.poll() is not None:
                raise AssertionError(child.stderr.read())
        assert "saved" in line
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    return child.pid


def drag(qtbot, widget, start_x: float, end_x: float, steps: int = 8, pause_ms: int = 0) -> None:
    """Press at `start_x` (mid-height of a histogram's plot), move in steps to `end_x`, release.

    With `pause_ms`, the event loop runs that long after each move, as between a real mouse's
    reports.
    """
    import numpy as np
    from PySide6.QtCore import QPoint, Qt

    y = int(widget.plot_rect().center().y())
    qtbot.mousePress(widget, Qt.MouseButton.LeftButton, pos=QPoint(int(round(start_x)), y))
    for x in np.linspace(start_x, end_x, steps)[1:]:
        qtbot.mouseMove(widget, pos=QPoint(int(round(x)), y))
        if pause_ms:
            qtbot.wait(pause_ms)
    qtbot.mouseRelease(widget, Qt.MouseButton.LeftButton, pos=QPoint(int(round(end_x)), y))


class StallMeter:
    """The longest the GUI thread went without running a 5 ms timer: its worst stall.

    Used as a context manager around what a user does; a healthy event loop ticks every 5 ms.
    `worst_ms` is the longest wall-clock gap between two ticks. On a machine shared with other
    busy programs the kernel also keeps the GUI thread waiting for a CPU; `worst_own_ms` takes
    that wait out (Linux's per-thread scheduler statistics measure it), leaving what the
    process itself caused: work on the GUI thread and waits for the interpreter lock its own
    workers held. `worst_busy_ms` is the GUI thread's CPU time alone.
    """

    def __init__(self, interval_ms: int = 5):
        from PySide6.QtCore import Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self.worst_ms = self.worst_own_ms = self.worst_busy_ms = 0.0
        self.ticks = 0
        self._last = (0.0, 0.0, 0.0)

    def __enter__(self) -> StallMeter:
        self._last = self._now()
        self.timer.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._tick()
        self.timer.stop()

    @staticmethod
    def _now() -> tuple[float, float, float]:
        """(wall clock, this thread's CPU time, its time waiting for a CPU), in seconds."""
        import threading
        import time

        try:
            with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as stats:
                waited = int(stats.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):  # not Linux: count the wait as a stall
            waited = 0.0
        return time.perf_counter(), time.thread_time(), waited

    def _tick(self) -> None:
        now = self._now()
        wall, cpu, waited = (1000 * (a - b) for a, b in zip(now, self._last))
        self.worst_ms = max(self.worst_ms, wall)
        self.worst_own_ms = max(self.worst_own_ms, wall - waited)
        self.worst_busy_ms = max(self.worst_busy_ms, cpu)
        self._last = now
        self.ticks += 1


# The start of a child Kiln process's script (`run_and_kill`): a window on the model named by
# argv[1], loaded; the script goes on from there with `window`, `edit`, `calibrate_now`.
CHILD_OPENS_MODEL = """
import sys, time
from PySide6.QtWidgets import QApplication
from PySide6.QtCore import QEventLoop, QTimer
app = QApplication([])
from app.window.mainwindow import MainWindow
from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.screens import calibrate_now
from compiler import edit
from compiler.quant.calibration_data import Normalization
window = MainWindow(remember=False)
window.show()
loop = QEventLoop(); window.modelLoaded.connect(loop.quit)
window.open_file(sys.argv[1]); loop.exec()
"""


def _distinct_colours(path) -> int:
    image = QImage(str(path))
    step_x, step_y = max(1, image.width() // 40), max(1, image.height() // 40)
    return len({image.pixel(x, y) for x in range(0, image.width(), step_x)
                for y in range(0, image.height(), step_y)})


def check_pictures(folder, names) -> None:
    """Each named PNG in `folder` is there, of a real size, and not one flat colour."""
    for name in names:
        path = folder / f"{name}.png"
        assert path.is_file(), name
        image = QImage(str(path))
        assert image.width() >= 100 and image.height() >= 20, name
        assert _distinct_colours(path) >= 3, f"{name} is blank"


def run_gui_fresh(args, cwd, env_changes, config):
    """Run `run_gui(args)` in a fresh interpreter, with its settings folder at `config`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["XDG_CONFIG_HOME"] = str(config)
    env.update(env_changes)
    if env.get("QT_QPA_PLATFORM") == "offscreen":  # the tests' desktop-sized screen
        env["QT_QPA_PLATFORM"] = os.environ.get("QT_QPA_PLATFORM", "offscreen")
    code = f"import sys; from app.window.gui import run_gui; sys.exit(run_gui({args!r}))"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def refuse_file_dialogs(monkeypatch) -> None:
    """Make any file dialog fail the test: one no test answers would wait forever."""
    from PySide6.QtWidgets import QFileDialog

    def refuse(*args, **kwargs):
        raise AssertionError(f"a file dialog opened: {args[1] if len(args) > 1 else args}")

    for name in ("getSaveFileName", "getOpenFileName", "getExistingDirectory"):
        monkeypatch.setattr(QFileDialog, name, staticmethod(refuse))

