"""The installed Qt binding keeps Python's reference counts intact.

PySide6 6.12.0 on CPython 3.11 released a reference to None on every void Qt call and to True on
every signal emission, so a long session aborted with "none_dealloc"; pyproject.toml excludes
that release. This test fails if a binding with that fault is installed again.
"""

import sys

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget


class _Emitter(QObject):
    fired = Signal(bool)


def test_void_calls_and_signals_do_not_leak_references(qtbot):
    widget = QWidget()
    qtbot.addWidget(widget)
    emitter = _Emitter()
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for width in range(200):
        widget.setMinimumWidth(width)
        emitter.fired.emit(True)
    assert abs(sys.getrefcount(None) - none_before) < 50
    assert abs(sys.getrefcount(True) - true_before) < 50
