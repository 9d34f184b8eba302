"""Opening models: by path, by drag and drop, from recent files; a bad file; the worker."""

import warnings

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QTimer, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from app.window import settings
from app.window.mainwindow import MainWindow
from tests.conftest import SAMPLE_MODEL
from tests.gui.helpers import DENSENET, make_window, open_and_wait


def test_open_by_path_shows_the_graph_and_statistics(qtbot):
    window = make_window(qtbot)
    doc = window.document
    assert doc.path == SAMPLE_MODEL and len(doc.graph.nodes) == 9
    assert window.windowTitle() == "digits_cnn.onnx — Kiln"
    layout = window.canvas.graph_layout()
    assert {k for k in layout.boxes if isinstance(k, int)} == {n.id for n in doc.graph.nodes}
    assert "in:image" in layout.boxes and "out:logits" in layout.boxes
    assert window.stats_label.text().startswith("9 nodes · 6.14k parameters")
    assert "118k MACs" in window.stats_label.text()
    assert not window.progress.isVisible()


def _mime(path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    return mime


def _drag_enter(widget, mime) -> QDragEnterEvent:
    with warnings.catch_warnings():  # PySide marks Qt's only constructor (QPoint) deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        event = QDragEnterEvent(QPoint(50, 50), Qt.DropAction.CopyAction, mime,
                                Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, event)
    return event


def _drag_and_drop(widget, path) -> QDropEvent:
    """What a drop from a file manager delivers: DragEnter (which picks the target), then Drop."""
    mime = _mime(path)
    assert _drag_enter(widget, mime).isAccepted()
    event = QDropEvent(QPointF(50, 50), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, event)
    return event


def test_open_by_drop_on_the_window(qtbot):
    window = make_window(qtbot, model=None)
    with qtbot.waitSignal(window.modelLoaded, timeout=30000):
        event = _drag_and_drop(window, SAMPLE_MODEL)
    assert event.isAccepted()
    assert window.document.path == SAMPLE_MODEL


def test_open_by_drop_on_the_canvas(qtbot):
    window = make_window(qtbot, model=None)
    with qtbot.waitSignal(window.modelLoaded, timeout=30000):
        _drag_and_drop(window.canvas.viewport(), SAMPLE_MODEL)
    assert window.document.path == SAMPLE_MODEL


def test_drag_enter_accepts_models_only(qtbot, tmp_path):
    window = make_window(qtbot, model=None)
    assert _drag_enter(window, _mime(SAMPLE_MODEL)).isAccepted()
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert not _drag_enter(window, _mime(text)).isAccepted()


def test_bad_file_shows_a_one_line_error_and_keeps_the_model(qtbot, tmp_path, message_boxes):
    window = make_window(qtbot)
    before = window.document.graph
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"\x08\x07garbage\xff\xfe" * 50)
    with qtbot.waitSignal(window.loadFailed, timeout=30000) as blocker:
        window.open_file(bad)
    kind, title, text = message_boxes.shown[-1]
    assert kind == "critical" and title == "Cannot open model"
    assert text == blocker.args[0]
    assert text.startswith("garbage.onnx: ") and "\n" not in text and "Traceback" not in text
    assert window.document.graph is before and window.document.path == SAMPLE_MODEL
    assert not window.progress.isVisible()


def test_missing_file_error(qtbot, tmp_path, message_boxes):
    window = make_window(qtbot, model=None)
    with qtbot.waitSignal(window.loadFailed, timeout=30000):
        window.open_file(tmp_path / "absent.onnx")
    assert "absent.onnx" in message_boxes.shown[-1][2]


def test_loading_a_big_model_keeps_the_window_responsive(qtbot):
    window = make_window(qtbot, model=None)
    # The new window's own first paint (its figures' deferred draws) runs before the load, so
    # only the load is measured.
    qtbot.wait(300)
    ticks = []
    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(lambda: ticks.append(window.progress.isVisible()))
    progress = []
    timer.start()
    job = window.open_file(DENSENET)
    job.progress.connect(lambda fraction, _text: progress.append(fraction))
    assert window.progress.isVisible() and window.cancel_button.isVisible()
    with qtbot.waitSignal(window.modelLoaded, timeout=60000):
        pass
    timer.stop()
    assert len(window.document.graph.nodes) > 1000
    assert progress and progress[-1] == 1.0
    assert sum(ticks) >= 5  # the event loop ran while the progress bar was up
    assert not window.progress.isVisible()


def test_cancel_loading_keeps_the_current_model(qtbot):
    window = make_window(qtbot)
    before = window.document.graph
    job = window.open_file(DENSENET)
    with qtbot.waitSignal(job.cancelled, timeout=5000):
        window.cancel_button.click()
    assert not window.is_loading() and not window.progress.isVisible()
    assert job.wait(30000)
    qtbot.wait(100)
    assert window.document.graph is before and window.document.path == SAMPLE_MODEL


def test_recent_files_and_geometry_are_remembered(qtbot):
    window = make_window(qtbot)
    assert settings.recent_files() == [str(SAMPLE_MODEL.resolve())]
    window.resize(1000, 700)  # within the tests' offscreen screen, above the minimum
    window.close()
    again = MainWindow()
    qtbot.addWidget(again)
    assert (again.width(), again.height()) == (1000, 700)
    recent = again.actions_.recent
    recent.aboutToShow.emit()
    texts = [a.text() for a in recent.actions()]
    assert texts[0] == "&1 digits_cnn.onnx" and "Clear Menu" in texts
    with qtbot.waitSignal(again.modelLoaded, timeout=30000):
        recent.actions()[0].trigger()
    assert again.document.path == SAMPLE_MODEL


def test_reopening_replaces_the_model(qtbot):
    window = make_window(qtbot)
    open_and_wait(qtbot, window, DENSENET)
    assert window.document.path == DENSENET
    assert window.windowTitle() == "light_densenet121.onnx — Kiln"
