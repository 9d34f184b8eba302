"""File > Save Session / Open Session: a `.kiln` file that brings a working day back.

The session is versioned JSON: the model (its path and SHA-256), the edited graph when the
graph was edited (written beside the session as MODEL.edited.onnx, atomically; ranges, float
tensors and notes alone leave the model referenced by path and hash), the pass pipeline,
target, board and arena option, the quantization profile with every hand-tuned range and the
samples it was measured on, the teacher's notes on the pipeline's stages (version 2; a
version 1 file, without them, still opens), and the view (zoom, centre, selection, dock
layout). Opening it
checks the model against its hash first: a changed or missing file is reported with the hash
it should have, never silently replaced by another.

Saving reads the window on the GUI thread (`snapshot_session`, cheap) and writes the files in
`write_session`, which any thread may run: the autosave runs it in a worker.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PySide6.QtCore import QByteArray, QObject, QPointF, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog

from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.session import Weights, session_from_profile
from app.quant.state import session_recipe
from app.window import folders
from app.window.workers import Job
from compiler.errors import KilnError
from compiler.fileio import atomic_write_bytes
from compiler.frontends.onnx.export import to_onnx
from compiler.ir.graph import Graph
from compiler.lowir.passes import check_lowering_names
from compiler.passes import Pipeline
from compiler.quant.calibration_data import Normalization
from compiler.quant.profile import parse_profile
from compiler.quant.recipe import parse_recipe
from compiler.stage_notes import check_notes
from views.dialogs import show_error

SESSION_VERSION = 2  # 2 added the stage notes
READABLE_VERSIONS = (1, 2)
SUFFIX = ".kiln"


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _selection_json(graph, key):
    """A canvas key that survives a reload: a node by name (ids are given at load)."""
    if isinstance(key, int):
        node = next((n for n in graph.nodes if n.id == key), None)
        return None if node is None else {"node": node.name}
    return None if key is None else {"key": str(key)}


def _selection_key(graph, doc):
    if not doc:
        return None
    if "node" in doc:
        return next((n.id for n in graph.nodes if n.name == doc["node"]), None)
    return doc.get("key")


@dataclass(frozen=True)
class Snapshot:
    """A session as the window holds it now, ready to be written by any thread."""

    path: Path  # the session file
    model: Path | None  # the model file the session names
    edited: Graph | None  # the graph to write beside the session (None: the model's own)
    fields: dict  # the rest of the file's JSON (plain data, shared with nobody)


def snapshot_session(window, path: str | Path) -> Snapshot:
    """What the session file at `path` will hold (GUI thread: it reads the window)."""
    path = Path(path)
    if path.suffix != SUFFIX:
        path = path.with_name(path.name + SUFFIX)
    doc = window.document
    if doc.graph is None:
        raise KilnError("there is no model to keep in a session")
    model = doc.path
    edited = model is None or doc.graph_edited()  # else the file itself, by path and hash
    canvas = window.canvas
    centre = canvas.visible_scene_rect().center()
    qs = doc.quant.session
    fields = {
        "kiln_session": SESSION_VERSION,
        "pipeline": doc.pipeline.to_json(),
        "target": doc.target, "board": doc.board, "io_in_arena": doc.io_in_arena,
        "disabled_lowering": sorted(doc.disabled_lowering),
        "notes": check_notes(doc.stage_notes),  # blank notes dropped
        # The document's quantization is its recipe (what an export builds), with how it was
        # calibrated; a session restored from it exports the same bundle.
        "quantization": None if qs is None or qs.request is None else {
            "request": {**asdict(qs.request),
                        "normalization": asdict(qs.request.normalization)},
            "recipe": session_recipe(qs).to_json()},
        "view": {"zoom": canvas.zoom_level(), "centre": [centre.x(), centre.y()],
                 "selection": _selection_json(doc.graph, doc.selection),
                 "docks": base64.b64encode(bytes(window.saveState())).decode("ascii")},
    }
    return Snapshot(path, model, doc.graph if edited else None, fields)


def write_session(snapshot: Snapshot, compact: bool = False) -> Path:
    """Write the session (and the edited model beside it) atomically: write, fsync, rename.

    `compact` leaves out the line breaks: ten times faster for a profile's histograms, for
    files only Kiln reads (the autosave's), where the indented text would be read by no one.
    """
    path, model = snapshot.path, snapshot.model
    edited = None
    if snapshot.edited is not None:
        stem = model.stem if model is not None else "model"
        edited = path.with_name(f"{path.stem}.{stem}.edited.onnx")
        atomic_write_bytes(edited, to_onnx(snapshot.edited).SerializeToString())
    doc = {
        **snapshot.fields,
        # Absolute: a session is opened from anywhere (a file manager starts Kiln in $HOME).
        "model": {"path": os.path.abspath(model) if model else None,
                  "sha256": file_hash(model) if model and model.is_file() else None},
        "edited": None if edited is None else {"file": edited.name,
                                               "sha256": file_hash(edited)},
    }
    text = json.dumps(doc, indent=None if compact else 1, sort_keys=True)
    atomic_write_bytes(path, (text + "\n").encode())
    return path


def save_session(window, path: str | Path) -> Path:
    """Write the session now, in this thread; returns the file (`.kiln` added if missing)."""
    return write_session(snapshot_session(window, path))


def read_session(path: str | Path) -> tuple[dict, Path]:
    """The session's JSON and the model file to open, both checked (KilnError otherwise).

    Everything the window applies later is checked here too, so a damaged or hand-edited
    file is refused in one sentence before any model is opened, never half applied.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise KilnError(f"cannot read {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise KilnError(f"{path} is not a Kiln session: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kiln_session") not in READABLE_VERSIONS:
        raise KilnError(f"{path} is not a Kiln session of version "
                        f"{' or '.join(map(str, READABLE_VERSIONS))}")
    try:
        model, want = _model_of(doc, path)
        _check_settings(doc)
    except (AttributeError, KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise KilnError(f"{path} is not a readable Kiln session ({_reason(exc)})") from None
    except KilnError as exc:
        raise KilnError(f"{path} is not a readable Kiln session ({exc})") from None
    if not model.is_file():
        raise KilnError(f"{path}: its model {model} is missing (it had SHA-256 {want})")
    found = file_hash(model)
    if found != want:
        raise KilnError(f"{path}: its model {model} changed since the session was saved "
                        f"(SHA-256 {found}, the session has {want}); it was not opened")
    return doc, model


def _reason(exc: Exception) -> str:
    """A short reason for a malformed entry (a bare KeyError only names the key)."""
    return f"no {exc} entry" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__


def _model_of(doc: dict, path: Path) -> tuple[Path, str]:
    """The model file a session opens and the SHA-256 it must have."""
    model, edited = doc["model"], doc.get("edited")
    if not isinstance(model, dict):
        raise TypeError("its model entry is not an object")
    if edited:
        # A bare file name: the edits live beside the session, never elsewhere.
        name = edited["file"]
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise ValueError("the edited model's name is not a file name")
        return path.with_name(name), str(edited["sha256"])
    if not isinstance(model.get("path"), str):
        raise ValueError("it names no model file")
    return Path(model["path"]), str(model["sha256"])


def _check_settings(doc: dict) -> None:
    """Raise (KeyError, TypeError, ValueError or KilnError) if the window could not apply `doc`."""
    from compiler.codegen.targets import BOARDS, get_target

    Pipeline.from_json(doc["pipeline"], "its pipeline")
    get_target(doc["target"])
    check_lowering_names(doc.get("disabled_lowering", []))
    if doc.get("board") is not None and doc["board"] not in BOARDS:
        raise ValueError(f"unknown board {doc['board']!r}")
    view = doc["view"]
    float(view["zoom"])
    QPointF(*(float(v) for v in view["centre"]))
    base64.b64decode(view["docks"], validate=True)
    if doc.get("quantization") is not None:
        _quantization_parts(doc["quantization"])
    check_notes(doc.get("notes", {}), "its notes")


def _quantization_parts(quant: dict):
    """(profile, calibration request, weights) of a session's quantization entry.

    A session holds the document's recipe; a file from before recipes were kept holds the
    profile and the weights' choices (per channel, layers in float, bias corrections) apart,
    with the defaults when even those are missing.
    """
    request = dict(quant["request"])
    request["normalization"] = Normalization(**{
        k: tuple(v) if isinstance(v, list) else v
        for k, v in request["normalization"].items()})
    if "recipe" in quant:
        recipe = parse_recipe(quant["recipe"], "its recipe")
        weights = Weights(recipe.per_channel, recipe.float_weights,
                          dict(recipe.corrections) or None)
        return recipe.profile, CalibrationRequest(**request), weights
    corrections = quant.get("corrections") or {}
    if not isinstance(corrections, dict) or not all(
            isinstance(v, list) and all(isinstance(x, (int, float)) for x in v)
            for v in corrections.values()):
        raise KilnError("its bias corrections are not lists of numbers by layer")
    weights = Weights(bool(quant.get("per_channel", True)),
                      tuple(str(n) for n in quant.get("float_weights", ())),
                      {str(k): np.asarray(v, np.float64) for k, v in corrections.items()}
                      or None)
    return parse_profile(quant["profile"], "its profile"), CalibrationRequest(**request), weights


class SessionController(QObject):
    """The File menu's Save Session… and Open Session… and what they do.

    Signals:
        restored(): an opened session is fully applied (model, pipeline, ranges, view).
        failed(message): the session could not be read or its ranges not restored (the error
            dialog has been shown); a model that fails to load says so by `loadFailed`.
    """

    restored = Signal()
    failed = Signal(str)

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.save_action = QAction("Save Sess&ion…", window)
        self.save_action.setStatusTip("Keep the model, its edits, pipeline, ranges and view")
        self.save_action.triggered.connect(self.save_dialog)
        self.open_action = QAction("Open Sess&ion…", window)
        self.open_action.setStatusTip("Bring back a saved session")
        self.open_action.triggered.connect(self.open_dialog)
        self._pending: dict | None = None
        self._job: Job | None = None
        window.modelLoaded.connect(self._model_loaded)

    def save_dialog(self) -> bool:
        """Ask where (from the folder last used, never the model's), then save; True if saved."""
        model = self.window.document.path
        start = folders.start_folder("session") / f"{model.stem if model else 'model'}{SUFFIX}"
        path, _ = QFileDialog.getSaveFileName(self.window, "Save Session", str(start),
                                              f"Kiln sessions (*{SUFFIX})")
        if not path:
            return False
        try:
            saved = save_session(self.window, path)
        except (KilnError, OSError) as exc:
            show_error(self.window, "Save session", str(exc))
            return False
        folders.remember("session", saved)
        self.window.statusBar().showMessage(f"Saved session {saved}", 6000)
        return True

    def open_dialog(self) -> None:
        """Ask which, then open."""
        path, _ = QFileDialog.getOpenFileName(self.window, "Open Session",
                                              str(folders.start_folder("session")),
                                              f"Kiln sessions (*{SUFFIX})")
        if path:
            folders.remember("session", path)
            self.open_session(path)

    def open_session(self, path: str | Path, recovered: bool = False) -> bool:
        """Open the session's model; the rest is applied once it is on the canvas.

        A `recovered` session (autosaved before a crash) comes back as unsaved changes to
        its model's own file, edits, ranges and notes alike.
        """
        try:
            doc, model = read_session(path)
        except KilnError as exc:
            self._fail(str(exc))
            return False
        if self.window.open_file(model) is None:
            return False
        self._pending = {**doc, "recovered": recovered}
        return True

    def _model_loaded(self, _path: str) -> None:
        doc, self._pending = self._pending, None
        if doc is None:
            return
        window, document = self.window, self.window.document
        original = doc["model"].get("path")
        if doc.get("recovered"):
            edited = bool(doc.get("edited"))
            if edited and original:
                document.path = Path(original)  # Save goes to the model, not the recovery folder
                document.pathChanged.emit()
            # In no file yet: the title says so, close asks; this model only (`load` clears it).
            document.mark_unsaved(graph_edited=edited)
        document.set_pipeline(Pipeline.from_json(doc["pipeline"], "session pipeline"))
        document.set_target(doc["target"], doc.get("board"))
        document.set_io_in_arena(bool(doc.get("io_in_arena")))
        document.set_disabled_lowering(doc.get("disabled_lowering", []))
        document.set_stage_notes(check_notes(doc.get("notes", {})))  # checked when read
        view = doc["view"]
        window.restoreState(QByteArray(base64.b64decode(view["docks"])))
        window.canvas.set_zoom(float(view["zoom"]))
        window.canvas.centerOn(QPointF(*view["centre"]))
        selection = _selection_key(document.graph, view.get("selection"))
        if selection is not None:
            window.canvas.select(selection)
            document.select(selection)
        quant = doc.get("quantization")
        if quant is None:
            self.restored.emit()
            return
        self._restore_quantization(quant)

    def _restore_quantization(self, quant: dict) -> None:
        profile, request, weights = _quantization_parts(quant)  # checked when read
        document = self.window.document
        graph, bases = document.graph, document.quant.calibration_graph

        job = Job(lambda _progress: session_from_profile(
            graph, profile, request, base=bases(graph, profile.equalized), weights=weights),
                  "Restoring the quantization", self)
        job.succeeded.connect(lambda session: self._quant_restored(job, session))
        job.failed.connect(lambda message: self._quant_failed(job, message))
        self._job = job
        # Until it is current, the dock says what is coming instead of "Not calibrated".
        document.quant.set_restoring(
            f"Restoring the session's calibration ({len(profile.tensors)} tensors)…")
        job.start()

    def _fail(self, message: str) -> None:
        show_error(self.window, "Open session", message)
        self.failed.emit(message)

    def _quant_failed(self, job: Job, message: str) -> None:
        if job is self._job:
            self.window.document.quant.set_restoring("")
        self._fail(message)

    def _quant_restored(self, job: Job, session) -> None:
        document = self.window.document
        if job is not self._job:
            return  # another session's restore started since
        if session.graph is document.graph:  # else another model or an edit came meanwhile
            document.quant.set_session(session, measured=True)
        document.quant.set_restoring("")
        self.restored.emit()


def install(window) -> SessionController:
    """Add Save Session and Open Session to the File menu."""
    controller = SessionController(window)
    for top in window.menuBar().actions():
        if top.text() == "&File" and top.menu() is not None:
            menu = top.menu()
            actions = menu.actions()
            anchor = next((a for a in actions if a.text() == "&Save"), None)
            index = actions.index(anchor) if anchor in actions else len(actions) - 1
            before = actions[index] if index < len(actions) else None
            menu.insertActions(before, [controller.open_action, controller.save_action])
    return controller


def screenshots(window, save) -> None:
    """Nothing of its own to render."""
