"""One way to change a widget without its signals firing: a context manager that always unblocks.

A value set by the program (a document change shown, a list refilled) is not a user's edit, so
the widget's signals stay quiet meanwhile; `finally` restores them even when the update raises,
which a pair of `blockSignals` calls does not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from PySide6.QtCore import QObject


@contextmanager
def signals_blocked(*objects: QObject) -> Iterator[None]:
    """Block the signals of `objects` inside the block; their previous state is restored."""
    before = [obj.blockSignals(True) for obj in objects]
    try:
        yield
    finally:
        for obj, was in zip(objects, before):
            obj.blockSignals(was)
