"""File > Export Report…: the open model's page, written by a worker, asked before replacing."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox, QPushButton

from compiler.codegen.bundle import report
from tests.gui.helpers import make_window


def _trigger(window, monkeypatch, path: Path):
    """Choose File > Export Report… with the file dialog answering `path`; the job started."""
    file_menu = next(a.menu() for a in window.menuBar().actions()
                     if a.text().replace("&", "") == "File")
    action = window.report.action
    assert action in file_menu.actions() and action.isEnabled()
    asked = []

    def choose(parent, title, start, *args, **kwargs):
        asked.append(start)
        return str(path), "HTML report (*.html)"

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(choose))
    action.trigger()
    assert asked and asked[0].endswith("digits_cnn_host_report.html")
    return window.report.job


def test_export_writes_the_document_report(qtbot, tmp_path, monkeypatch, message_boxes):
    window = make_window(qtbot)
    path = tmp_path / "digits.html"
    job = _trigger(window, monkeypatch, path)
    assert job is not None
    with qtbot.waitSignal(job.succeeded, timeout=60000):
        pass
    page = path.read_text()
    compiled, options = window.document.compilation(), window.document.options()
    assert f'id="arena" data-value="{compiled.plan(options).arena.size}"' in page
    symbols = re.findall(r'<tr class="layer">.*?<code>([^<]+)</code>', page)
    assert symbols == [la["symbol"] for la in report(compiled.net(options))["layers"]]
    assert "http" not in page
    assert "digits.html" in window.statusBar().currentMessage()
    assert not list(tmp_path.glob(".*"))  # the atomic write left no temporary file

    message_boxes.answer = QMessageBox.StandardButton.No
    path.write_text("mine")
    assert _trigger(window, monkeypatch, path) is job  # no new job
    assert path.read_text() == "mine" and message_boxes.kinds() == ["question"]
    message_boxes.answer = QMessageBox.StandardButton.Yes
    again = _trigger(window, monkeypatch, path)
    assert again is not job
    with qtbot.waitSignal(again.succeeded, timeout=60000):
        pass
    assert path.read_text().startswith("<!DOCTYPE html>")


def test_cancel_writes_nothing(qtbot, tmp_path, monkeypatch, message_boxes):
    window = make_window(qtbot)
    path = tmp_path / "r.html"
    job = _trigger(window, monkeypatch, path)
    dialog = window.report.progress
    dialog.show()  # (it shows itself after 300 ms)
    with qtbot.waitSignal(job.cancelled, timeout=5000):
        qtbot.mouseClick(dialog.findChild(QPushButton), Qt.MouseButton.LeftButton)
    job.wait()
    assert not path.exists()
    assert "nothing was written" in window.statusBar().currentMessage()
