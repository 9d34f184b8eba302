"""The open model: its graph, file, problems and undo history, with signals for the views."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import onnx
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack

from app.commands import SnapshotCommand
from compiler import edit
from compiler.errors import KilnError, one_line
from compiler.fileio import atomic_write_bytes
from compiler.frontends.onnx import to_onnx
from compiler.ir.graph import Graph

# Each undo step keeps two graph structures (payloads are shared); past this many the oldest go.
UNDO_LIMIT = 200


class SaveError(KilnError):
    """The graph cannot be written as a valid ONNX file."""


class Document(QObject):
    """The state the user edits. Views listen to its signals; commands are its only writers.

    Signals:
        graphChanged: the graph object was replaced (load, edit, undo, redo).
        problemsChanged: the node id -> reason table was replaced.
        pathChanged: the file the document is bound to changed (load, Save As).
        dirtyChanged(bool): the graph now differs (True) or no longer differs from the file.
    """

    graphChanged = Signal()
    problemsChanged = Signal()
    pathChanged = Signal()
    dirtyChanged = Signal(bool)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.graph: Graph | None = None
        self.path: Path | None = None
        self.problems: dict[int, str] = {}
        self.undo_stack = QUndoStack(self)
        self.undo_stack.setUndoLimit(UNDO_LIMIT)
        self.undo_stack.cleanChanged.connect(self._clean_changed)

    def _clean_changed(self, clean: bool) -> None:
        self.dirtyChanged.emit(not clean)

    # -- state --------------------------------------------------------------------------------

    def load(self, graph: Graph, path: str | os.PathLike | None) -> None:
        """Make `graph` (just read from `path`) the document, with an empty, clean history."""
        self.undo_stack.clear()  # emits dirtyChanged(False) when there were unsaved edits
        self.path = Path(path) if path is not None else None
        self.restore(graph, edit.problems(graph))
        self.pathChanged.emit()

    def restore(self, graph: Graph, problems: dict[int, str]) -> None:
        """Replace the graph and its problems (for commands; edits go through `apply`)."""
        self.graph = graph
        old_problems, self.problems = self.problems, dict(problems)
        self.graphChanged.emit()
        if old_problems or self.problems:
            self.problemsChanged.emit()

    def is_dirty(self) -> bool:
        """True when the graph has edits the file does not have."""
        return not self.undo_stack.isClean()

    def title(self) -> str:
        """The file name, or "untitled", with the dirty marker `*` when there are unsaved edits."""
        name = self.path.name if self.path else "untitled"
        return f"{name}*" if self.is_dirty() else name

    # -- editing ------------------------------------------------------------------------------

    def apply(self, edit_fn: Callable[..., Graph], text: str, *args, **kwargs) -> Graph:
        """Run `edit_fn(graph, *args)` and push it as one undoable step; returns the new graph.

        A refused edit raises KilnError (one line) and leaves the document and history as they
        were.
        """
        if self.graph is None:
            raise KilnError("there is no model to edit")
        before = (self.graph, dict(self.problems))
        new = edit_fn(self.graph, *args, **kwargs)
        self.undo_stack.push(SnapshotCommand(self, before, (new, edit.problems(new)), text))
        return new

    # -- saving -------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Write the graph as ONNX (atomically) to `path`, or to the document's own file.

        The model passes `onnx.checker` with its full check before anything is written, and the
        written file is checked again, so a saved file always opens. Graphs with invalid nodes are
        refused: fix or undo the edit first. On success the history is marked clean.
        """
        if self.graph is None:
            raise SaveError("there is no model to save")
        target = Path(path) if path is not None else self.path
        if target is None:
            raise SaveError("the model has no file yet; use Save As")
        if self.problems:
            node_id, reason = next(iter(self.problems.items()))
            name = next((n.name for n in self.graph.nodes if n.id == node_id), str(node_id))
            more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            raise SaveError(one_line(f"cannot save {target.name}: node {name} is invalid{more}: "
                                     f"{reason}; fix or undo the edit first"))
        try:
            model = to_onnx(self.graph)
            onnx.checker.check_model(model, full_check=True)
            atomic_write_bytes(target, model.SerializeToString())
            onnx.checker.check_model(str(target), full_check=True)
        except KilnError as exc:
            raise SaveError(one_line(f"cannot save {target.name}: {exc}")) from None
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SaveError(one_line(f"cannot save {target.name}: the ONNX checker refuses the "
                                     f"model: {first}")) from None
        except OSError as exc:
            raise SaveError(one_line(f"cannot save {target.name}: {exc.strerror or exc}")) \
                from None
        path_changed = target != self.path
        self.path = target
        self.undo_stack.setClean()
        if path_changed:
            self.pathChanged.emit()
        return target
