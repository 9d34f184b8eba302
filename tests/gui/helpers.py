"""Helpers of the GUI tests: a window with a model open, and a graph fingerprint."""

import shutil
from pathlib import Path

import onnx

from app.mainwindow import MainWindow
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
