"""The Explore panel with the mouse: start, watch, cancel, resume, apply a point, undo, compare.

The exploration runs as `kiln explore` in a child process (trials in that process, no Ray,
for speed); the oracles are the file it writes and `compiler.explore.apply`, which rebuilds a
point from the file alone.
"""

from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.screens import calibrate_now
from compiler.explore.apply import apply_point
from compiler.explore.config import Config
from compiler.explore.record import read_record
from compiler.ir.dump import dump
from compiler.quant.calibration_data import Normalization
from tests.gui.helpers import make_window
from views.quant_panel import KEPT_FLOAT

TRIALS = 10


def _panel(qtbot, window, evaluation="digits:test"):
    """The Explore dock shown with the sample's settings: in-process trials, a short run."""
    c = window.explore
    window.menuBar()  # the action lives in the Quantize menu
    c.action.trigger()
    p = c.panel
    p.evaluation.setText(evaluation)
    p.max_drop.setValue(0.5)
    p.trials.setValue(TRIALS)
    p.workers.setValue(0)
    return c, p


def _click_point(qtbot, scatter, number, ctrl=False):
    at = scatter.position(number)
    assert at is not None and scatter.point_at(at) == number
    modifier = Qt.KeyboardModifier.ControlModifier if ctrl else Qt.KeyboardModifier.NoModifier
    qtbot.mouseClick(scatter, Qt.MouseButton.LeftButton, modifier, QPoint(round(at.x()),
                                                                           round(at.y())))


def _distinct_points(c) -> list[int]:
    """Points the mouse can pick one by one (the last drawn of coinciding ones)."""
    s = c.panel.scatter
    return [p.number for p in s.points if s.point_at(s.position(p.number)) == p.number]


def test_explore_cancel_resume_apply_undo_and_compare(qtbot, tmp_path):
    window = make_window(qtbot)
    quant = window.quant
    calibrate_now(quant, CalibrationRequest("digits:train", "digits:test", Normalization(),
                                            method="percentile"))
    qtbot.mouseClick(quant.panel.overlay, Qt.MouseButton.LeftButton)
    before = quant.session
    before_profile = before.profile.to_json()
    before_overlay = window.canvas.overlay()
    assert before_overlay

    c, p = _panel(qtbot, window)
    output = c.output()
    assert output.parent.parent.name == "explorations" and not output.exists()
    seen = []
    c.progressed.connect(seen.append)
    qtbot.mouseClick(p.start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(s["trial"] for s in seen), timeout=120000)
    assert p.progress.text().startswith(f"{seen[-1]['done']} of {TRIALS} trials")
    assert len(c.panel.scatter.points) >= 1  # drawn as the trials land
    with qtbot.waitSignal(c.runEnded, timeout=60000) as ended:
        qtbot.mouseClick(p.cancel, Qt.MouseButton.LeftButton)
    assert ended.args == ["stopped"]
    kept = read_record(output)
    assert 1 <= len(kept["trials"]) < TRIALS and not kept["complete"]
    assert p.status.text().startswith(f"Stopped: {len(kept['trials'])} trials kept")
    assert p.resume.isEnabled()

    with qtbot.waitSignal(c.runEnded, timeout=180000) as ended:
        qtbot.mouseClick(p.resume, Qt.MouseButton.LeftButton)
    assert ended.args == ["complete"]
    doc = read_record(output)
    assert len(doc["trials"]) == TRIALS and doc["complete"]
    for old, new in zip(kept["trials"], doc["trials"]):  # read back, never measured again
        assert (new["key"], new["seconds"], new["worker"]) == (
            old["key"], old["seconds"], old["worker"])
    later = {t["worker"]["pid"] for t in doc["trials"][len(kept["trials"]):]}
    assert kept["trials"][0]["worker"]["pid"] not in later
    assert len(p.scatter.points) == TRIALS
    assert p.table.rowCount() == len(doc["front"])
    first = _distinct_points(c)[0]
    at = p.scatter.position(first)
    move = QMouseEvent(QEvent.Type.MouseMove, at, p.scatter.mapToGlobal(at),
                       Qt.MouseButton.NoButton, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(p.scatter, move)
    assert p.scatter.hover == first
    tip = p.scatter.toolTip()  # the figures and the configuration of the point
    assert tip.startswith(f"Trial {first} (")
    assert Config.from_json(doc["trials"][first]["config"]).summary() in tip

    # Click a point: it becomes the document's quantization, one undo step.
    choices = _distinct_points(c)
    floats = [n for n in choices if Config.from_json(doc["trials"][n]["config"]).keep_float]
    number = (floats or choices)[0]
    config = Config.from_json(doc["trials"][number]["config"])
    with qtbot.waitSignal(c.applied, timeout=120000):
        _click_point(qtbot, p.scatter, number)
    session = quant.session
    assert session is not before and session.graph is window.document.graph
    assert session.options.method == config.method
    assert session.options.per_channel == config.per_channel
    assert sorted(session.profile.keep_float) == sorted(config.keep_float)
    assert session.profile.equalized == config.equalize
    point = apply_point(doc, number)
    assert dump(window.document.quant.quantized()) == dump(point.qdq)
    score = 100 * doc["trials"][number]["measurement"]["score"]
    assert quant.panel.accuracy.text().startswith(f"{score:.2f} %")
    for tensor in config.keep_float:
        assert quant.panel.model.rows[quant.panel.model.row_of(tensor)].state == KEPT_FLOAT
    assert window.canvas.overlay() == quant.node_colors()
    assert p.scatter.applied == number

    window.canvas.setFocus()
    qtbot.keyClick(window.canvas, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert quant.session is before
    assert before.profile.to_json() == before_profile
    assert before.options.method == "percentile"
    assert window.canvas.overlay() == before_overlay

    # Ctrl+click two points, then Compare Two shows both in the compare window.
    a, b = choices[0], choices[-1]
    _click_point(qtbot, p.scatter, a, ctrl=True)
    _click_point(qtbot, p.scatter, b, ctrl=True)
    assert p.scatter.selection == [a, b] and p.compare.isEnabled()
    with qtbot.waitSignal(window.compare.shown, timeout=120000):
        qtbot.mouseClick(p.compare, Qt.MouseButton.LeftButton)
    view = window.compare.view
    assert f"trial {a}:" in view.title_a.text() and f"trial {b}:" in view.title_b.text()
    assert window.compare.window.isVisible()

    # Export Bundle… of the point writes the bundle `kiln explore-export` writes.
    folder = tmp_path / "bundle"
    with qtbot.waitSignal(c.exported, timeout=120000):
        c.export(number, folder)
    assert (folder / "net.h").is_file() and (folder / "net.o").is_file()


def test_a_missing_evaluation_file_is_one_sentence(qtbot, tmp_path):
    window = make_window(qtbot)
    missing = tmp_path / "missing.npz"
    c, p = _panel(qtbot, window, str(missing))
    with qtbot.waitSignal(c.runEnded, timeout=60000) as ended:
        qtbot.mouseClick(p.start, Qt.MouseButton.LeftButton)
    assert ended.args == ["failed"]
    text = p.status.text()
    assert text.startswith("The exploration failed: ") and str(missing) in text
    assert "Traceback" not in text and len(text.splitlines()) == 1
    assert p.start.isEnabled() and not p.cancel.isEnabled()
    assert not Path(c.output()).exists()
