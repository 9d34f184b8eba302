"""Undo commands: each holds the document state before and after one edit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QUndoCommand

from compiler.ir.graph import Graph

if TYPE_CHECKING:
    from app.document import Document

# A document state: the graph and the problems shape inference found in it (node id -> reason).
State = tuple[Graph, dict[int, str]]


class SnapshotCommand(QUndoCommand):
    """One edit as two whole-graph snapshots.

    Edits never mutate a graph, and snapshots share constant payloads, so keeping both sides is
    cheap and undo restores exactly the graph the user had, node ids and tensor order included.
    The command only touches the document; views update from the document's signals.
    """

    def __init__(self, document: Document, before: State, after: State, text: str):
        super().__init__(text)
        self._document = document
        self._before = before
        self._after = after

    def redo(self) -> None:
        """Apply the edit (QUndoStack.push calls this once when the command is pushed)."""
        self._document.restore(*self._after)

    def undo(self) -> None:
        """Bring back the graph as it was before the edit."""
        self._document.restore(*self._before)
