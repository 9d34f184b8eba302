"""The calibration methods' ranges of a tensor, searched in a worker thread.

The percentile, KL (entropy) and MSE methods search a tensor's histogram for the best range;
the KL search takes tens of milliseconds per tensor at 2,048 bins, enough to stall the window
if it ran on the GUI thread. The ranges a session's own method picks come with the session
(its worker computes them); the others are searched here when the user picks a method, and
each found range is kept in the session (`Session.method_ranges`) by the GUI thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from app.quant.session import Session
from app.window.workers import SerialWorker
from compiler.quant.calibrate import choose_range


@dataclass(frozen=True)
class Found:
    """The range `method` picks for `tensor` of `session`."""

    session: Session
    tensor: str
    method: str
    range: tuple[float, float]


class RangeSearch(QObject):
    """Searches ranges in its own thread, one at a time, and keeps what it found.

    Signals:
        found(Found): a range is known now (and kept in its session).
        failed(message): a search raised.
    """

    found = Signal(object)
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._worker = SerialWorker("range search", self)
        self._worker.succeeded.connect(self._deliver)
        self._worker.failed.connect(self.failed)
        self._asked: set[tuple[int, str, str]] = set()

    def known(self, session: Session, tensor: str, method: str) -> tuple[float, float] | None:
        """The range `method` picks for `tensor`, if it was found already."""
        return session.method_ranges.get((tensor, method))

    def ask(self, session: Session, tensor: str, method: str) -> None:
        """Search the range `method` picks for `tensor` (`found` says when it is known)."""
        key = (id(session), tensor, method)
        if (tensor, method) in session.method_ranges or key in self._asked:
            return
        self._asked.add(key)
        entry = session.profile.tensors[tensor]
        self._worker.submit(lambda: Found(session, tensor, method, choose_range(entry, method)))

    def is_busy(self) -> bool:
        """True while a search has not delivered its range."""
        return self._worker.is_busy()

    def _deliver(self, found: Found) -> None:
        self._asked.discard((id(found.session), found.tensor, found.method))
        found.session.method_ranges[found.tensor, found.method] = found.range
        self.found.emit(found)
