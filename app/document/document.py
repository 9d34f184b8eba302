"""The open model and the app's state around it, with signals every panel listens to.

Besides the graph, file, problems and undo history, the document holds what the panels must
agree on: the pass pipeline (edited in the Passes panel), the target, board and arena option
(chosen in the Code panel, the Memory Timeline or the export dialog), the selected node and the
quantization (`quant`: the calibrated profile, the ranges tuned by hand, the float tensors).
Panels never ask each other: they read the document and ask the compile driver for the stages
of `compilation()`, so they all show what the export writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import onnx
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from app.quant.state import QuantState
from compiler import edit
from compiler.driver import Compilation, Options, compilation
from compiler.errors import KilnError, one_line
from compiler.fileio import atomic_write_bytes
from compiler.frontends.onnx import to_onnx
from compiler.ir.graph import Graph
from compiler.passes.pipeline import Pipeline, default_pipeline

# Each undo step keeps two graph structures (payloads are shared); past this many the oldest go.
UNDO_LIMIT = 200


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


ERROR_OVERLAY = "error"  # `Document.overlay` while the quantization error colours the canvas


class SaveError(KilnError):
    """The graph cannot be written as a valid ONNX file."""


class Document(QObject):
    """The state the user edits. Views listen to its signals; commands are its only writers.

    Signals:
        graphChanged: the graph object was replaced (load, edit, undo, redo).
        problemsChanged: the node id -> reason table was replaced.
        pathChanged: the file the document is bound to changed (load, Save As).
        dirtyChanged(bool): the graph now differs (True) or no longer differs from the file.
        modelOpened: another model replaced the document (every panel forgets the old one).
        pipelineChanged: the pass pipeline was replaced.
        optionsChanged: the target, board, inputs/outputs-in-arena option or a lowering
            pass's switch changed.
        selectionChanged(key): the selected canvas box (node id, `in:`/`out:` key, or None).
        saved(path): the graph was written to `path` (panels save what belongs beside it).
        notesChanged(key): the teacher's note on stage `key` changed (or every note: None).
        overlayChanged(name): the canvas overlay now shown ("" none, "error" the
            quantization error's, else an Overlay menu key): one at a time.
        exported(report): a bundle was exported; `last_export` holds its report.
        compareRequested(a, b): a panel asks for two operands side by side (Compare shows
            them).
        validated(run): a validation on a device ended; `last_validation` holds it.
        tuned(tuning): a kernel tuning ended; `last_tuning` holds it.
    """

    graphChanged = Signal()
    problemsChanged = Signal()
    pathChanged = Signal()
    dirtyChanged = Signal(bool)
    modelOpened = Signal()
    pipelineChanged = Signal()
    optionsChanged = Signal()
    selectionChanged = Signal(object)
    saved = Signal(object)
    notesChanged = Signal(object)
    overlayChanged = Signal(str)
    exported = Signal(object)
    compareRequested = Signal(object, object)
    validated = Signal(object)
    tuned = Signal(object)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.graph: Graph | None = None
        self.path: Path | None = None
        self.problems: dict[int, str] = {}
        self.undo_stack = QUndoStack(self)
        self.undo_stack.setUndoLimit(UNDO_LIMIT)
        self.undo_stack.cleanChanged.connect(self._clean_changed)
        self.pipeline: Pipeline = default_pipeline()
        self.target = "host"
        self.board: str | None = None
        self.io_in_arena = False
        self.disabled_lowering: frozenset[str] = frozenset()
        self.selection = None
        self.quant = QuantState(self)  # its commands share the undo history with graph edits
        # A teacher's note per pipeline stage, by stage key (`compiler.stage_notes`): what a
        # session saves, presentation mode shows and the walkthrough exports.
        self.stage_notes: dict[str, str] = {}
        self._compiled: Compilation | None = None
        self.overlay = ""  # the canvas overlay shown: "", "error" or an Overlay menu key
        self.last_export: dict | None = None  # the report of the last bundle exported
        # The last validation on a device (`app.device.state.DeviceRun`): the device overlay's.
        self.last_validation = None
        # The last kernel tuning, (target, tuning log entries): the tuned overlay's.
        self.last_tuning: tuple[str, list] | None = None
        # The graph whose content the file at `path` holds (None: no graph is, as after a
        # crash's edits came back): what tells an edited model from unsaved ranges or notes.
        self._file_graph: Graph | None = None

    def _clean_changed(self, clean: bool) -> None:
        self.dirtyChanged.emit(not clean)

    # -- state --------------------------------------------------------------------------------

    def load(self, graph: Graph, path: str | os.PathLike | None) -> None:
        """Make `graph` (just read from `path`) the document, with an empty, clean history."""
        self.undo_stack.clear()  # emits dirtyChanged(False) when there were unsaved edits
        # clear() leaves an empty history's clean state alone: the unsaved mark of a restored
        # session (`mark_unsaved`) would stay on every model opened after it.
        self.undo_stack.setClean()
        self.path = Path(path) if path is not None else None
        self._file_graph = graph
        self.select(None)
        self.quant.set_session(None)  # the last model's calibration describes nothing here
        self.set_stage_notes({})  # notes on the last model's stages
        self.last_export = None
        self.last_validation = None
        self.last_tuning = None
        self.modelOpened.emit()
        self.restore(graph, edit.problems(graph))
        self.pathChanged.emit()

    # -- what the panels share ------------------------------------------------------------------

    def set_overlay(self, name: str) -> None:
        """Show overlay `name` on the canvas from now on (the one shown before gives way)."""
        if name != self.overlay:
            self.overlay = name
            self.overlayChanged.emit(name)

    def set_last_export(self, report: dict) -> None:
        """Keep the report of the bundle just exported (the picture export reads it)."""
        self.last_export = report
        self.exported.emit(report)

    def set_last_validation(self, run) -> None:
        """Keep the validation just run on a device (the device overlay reads it)."""
        self.last_validation = run
        self.validated.emit(run)

    def set_last_tuning(self, target: str, entries: list) -> None:
        """Keep the tuning log's entries for `target` (the tuned overlay reads them)."""
        self.last_tuning = (target, list(entries))
        self.tuned.emit(self.last_tuning)

    def request_compare(self, a, b) -> None:
        """Ask for `a` beside `b` (operands, or functions making them) in the Compare window."""
        self.compareRequested.emit(a, b)

    def set_pipeline(self, pipeline: Pipeline) -> None:
        """Compile with `pipeline` from now on (a copy is kept)."""
        pipeline = Pipeline.from_json(pipeline.to_json())
        if pipeline.to_json() != self.pipeline.to_json():
            self.pipeline = pipeline
            self.pipelineChanged.emit()

    def set_target(self, target: str, board: str | None = None) -> None:
        """Compile for `target` (a target name), checked against `board`'s budget if given."""
        if (target, board) != (self.target, self.board):
            self.target, self.board = target, board
            self.optionsChanged.emit()

    def set_io_in_arena(self, on: bool) -> None:
        """Place inputs and outputs in the activation arena (or not)."""
        if on != self.io_in_arena:
            self.io_in_arena = on
            self.optionsChanged.emit()

    def set_lowering_enabled(self, name: str, on: bool) -> None:
        """Switch lowering pass `name` on or off (the plan, code and export follow)."""
        self.set_disabled_lowering(self.disabled_lowering - {name} if on
                                   else self.disabled_lowering | {name})

    def set_disabled_lowering(self, names) -> None:
        """Compile without these lowering passes (a session brings them back)."""
        names = frozenset(names)
        if names != self.disabled_lowering:
            self.disabled_lowering = names
            self.optionsChanged.emit()

    def set_stage_note(self, key: str, text: str) -> None:
        """Make `text` the note on stage `key` ("" removes it); for the undo commands."""
        if text:
            self.stage_notes[key] = text
        else:
            self.stage_notes.pop(key, None)
        self.notesChanged.emit(key)

    def set_stage_notes(self, notes: dict[str, str]) -> None:
        """Replace every note (a session brings them back; another model drops them)."""
        if notes or self.stage_notes:
            self.stage_notes = dict(notes)
            self.notesChanged.emit(None)

    def select(self, key) -> None:
        """Make `key` the selection (None: nothing selected)."""
        if key != self.selection:
            self.selection = key
            self.selectionChanged.emit(key)

    def options(self, name: str = "net", weights: str = "embedded") -> Options:
        """The driver options of the document's target and arena choice."""
        return Options(self.target, name, None, self.io_in_arena, weights,
                       disabled_lowering=self.disabled_lowering)

    def compilation(self) -> Compilation | None:
        """The compile driver's stages of the graph with the document's pipeline.

        None without a model, and for a graph with invalid nodes, which is never compiled.
        """
        if self.graph is None or self.problems:
            return None
        known = self._compiled
        if known is None or known.graph is not self.graph or \
                known.pipeline.to_json() != self.pipeline.to_json():
            # Held here while the graph and pipeline are current: every panel shares it.
            known = self._compiled = compilation(self.graph, self.pipeline)
        return known

    def restore(self, graph: Graph, problems: dict[int, str]) -> None:
        """Replace the graph and its problems (for commands; edits go through `apply`)."""
        self.graph = graph
        old_problems, self.problems = self.problems, dict(problems)
        self.graphChanged.emit()
        if old_problems or self.problems:
            self.problemsChanged.emit()

    def is_dirty(self) -> bool:
        """True when there are unsaved changes: edits, ranges, float tensors, notes."""
        return not self.undo_stack.isClean()

    def graph_edited(self) -> bool:
        """True when the graph differs from its file's (a range or a note alone is no edit).

        Edits never mutate a graph and undo brings back the very object, so identity says it.
        """
        return self.graph is not None and self.graph is not self._file_graph

    def mark_unsaved(self, graph_edited: bool) -> None:
        """Hold what no file holds yet (a crash's work brought back) as unsaved changes.

        `graph_edited`: the graph is not the one in the document's file either. Only this
        model carries the mark: `load` clears it.
        """
        if graph_edited:
            self._file_graph = None
        self.undo_stack.resetClean()

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
        if target.suffix.lower() == ".tflite":
            raise SaveError(f"cannot save {target.name}: Kiln writes ONNX, never into a .tflite "
                            "file; use Save As with an .onnx name")
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
        self._file_graph = self.graph
        self.undo_stack.setClean()
        if path_changed:
            self.pathChanged.emit()
        self.saved.emit(target)
        return target
