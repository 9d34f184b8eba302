"""GUI tests run offscreen on a desktop-sized screen, with settings in a temporary folder and
message boxes recorded."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
if os.environ["QT_QPA_PLATFORM"] == "offscreen":  # Qt's default screen is 800x800
    from tests.gui.screens import DESKTOP, screen_platform

    os.environ["QT_QPA_PLATFORM"] = screen_platform(*DESKTOP)

import pytest  # noqa: E402
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402


@pytest.fixture(autouse=True)
def recovery_home(tmp_path_factory, monkeypatch):
    """Autosaved sessions go to a temporary folder, never the user's recovery folder."""
    path = tmp_path_factory.mktemp("data")
    monkeypatch.setenv("XDG_DATA_HOME", str(path))
    return path


@pytest.fixture(autouse=True)
def settings_dir(tmp_path_factory):
    """A fresh settings folder per test, so tests never read or write the user's settings."""
    path = tmp_path_factory.mktemp("settings")
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(path))
    return path


class MessageBoxes:
    """Message boxes shown during a test: (kind, title, text); `answer` replies to questions."""

    def __init__(self):
        self.shown: list[tuple[str, str, str]] = []
        self.answer = QMessageBox.StandardButton.Cancel

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.shown]


@pytest.fixture(autouse=True)
def message_boxes(monkeypatch):
    """No modal box ever blocks a test: each is recorded and answered at once."""
    boxes = MessageBoxes()

    def fake(kind):
        def show(parent, title, text, *args, **kwargs):
            boxes.shown.append((kind, title, text))
            if kind == "question":
                return boxes.answer
            return QMessageBox.StandardButton.Ok
        return staticmethod(show)

    for kind in ("critical", "warning", "information", "question", "about"):
        monkeypatch.setattr(QMessageBox, kind, fake(kind))
    return boxes


@pytest.fixture(autouse=True)
def no_window_outlives_its_test(qtbot):
    """Every top-level widget a test left is deleted after it, and the garbage collected.

    A window that outlives its test keeps its timers, shortcuts and models: the next test's
    Ctrl+F or Alt+Up may reach it instead, and its heap slows the collector that a worker
    thread runs while holding the interpreter (the event-loop tests count the GUI's ticks).
    """
    yield
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent
    from PySide6.QtWidgets import QApplication

    for widget in QApplication.topLevelWidgets():
        widget.hide()
        widget.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    QApplication.processEvents()
    gc.collect()
    gc.freeze()  # what earlier tests keep (caches, modules) is not traversed again
