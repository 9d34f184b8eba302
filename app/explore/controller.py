"""Quantize > Explore…: search quantization and compile options, then use the points found.

The Explore dock runs `kiln explore` as a child process (`app.explore.run`), watches its
progress, and draws every measured trial as it lands in EXPLORE.json. The file is kept per
document in the user's data folder (a folder named after the model and a hash of its bytes)
unless the user picks another; Cancel keeps what was measured and Resume goes on from it.
The form starts from the document's own calibration data (its evaluation samples, else the
calibration ones), never another model's. Clicking a point, in the scatter or as a row of
the front, applies it: its quantization becomes the document's, one undo step. Export
Bundle… writes the point last clicked with its compile options; two Ctrl+clicked points open
side by side in the compare view.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.explore.jobs import apply_job, bundle_job, compare_sides
from app.explore.run import ExploreRun, Settings
from app.explore.sources import document_sources, hint, missing_data
from app.window.actions import menu_before_help
from app.window.workers import Job
from compiler.errors import KilnError
from compiler.explore import points as shown
from compiler.explore.record import read_record
from views.explore_panel import ExplorePanel

NOTE = ("Apply makes a point the document's quantization in one undo step: method, schema, "
        "per-tensor ranges, float tensors and layers, per-channel weights, equalization and "
        "bias correction. Its compile options (target, I/O in arena, lowering, weight layout, "
        "kernel inlining) go with Export Bundle….")


def explorations_dir() -> Path:
    """The per-user folder of explorations (beside the recovery sessions)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kiln" / "explorations"


class ExploreController(QObject):
    """Owns the Explore dock, the `kiln explore` process and the jobs on its points.

    Signals:
        progressed(dict): a progress line arrived (and the scatter shows the file).
        runEnded(str): the tool ended: "complete", "stopped" or "failed".
        applied(int): a point is the document's quantization.
        exported(object): a point's bundle was written (`app.explore.jobs.Bundled`).
    """

    progressed = Signal(dict)
    runEnded = Signal(str)
    applied = Signal(int)
    exported = Signal(object)

    def __init__(self, window):
        super().__init__(window)
        self.window, self.document = window, window.document
        self.panel = ExplorePanel()
        self.panel.note.setText(NOTE)
        self.dock = window.add_panel_dock("Explore", self.panel,
                                          Qt.DockWidgetArea.LeftDockWidgetArea, scrolled=True)
        palette = window.docks.get("palette")
        if palette is not None:
            window.tabifyDockWidget(palette, self.dock)
        self.dock.hide()
        self.run = ExploreRun(self)
        self.record: dict | None = None
        self.path: Path | None = None  # the EXPLORE.json shown (None: the document's default)
        self.job: Job | None = None
        self.applied_number: int | None = None
        self.chosen: int | None = None  # the point Apply and Export Bundle… act on
        self.typed = False  # the user edited the data fields: the document's stop filling them
        # The graph the document's file holds (opened or saved), held weakly: a closed model
        # must be freed.
        self._on_file = lambda: None
        self.action = QAction("&Explore…", window)
        self.action.setStatusTip("Search quantization and compile options for the fastest "
                                 "points within an accuracy bound")
        self.action.triggered.connect(self.show_panel)
        self._menu(window).addAction(self.action)
        p = self.panel
        p.scatter.describe = self.describe
        p.start.clicked.connect(lambda: self.start())
        p.cancel.clicked.connect(self.cancel)
        p.resume.clicked.connect(lambda: self.resume())
        p.choose_file.clicked.connect(self.choose_file)
        p.scatter.applyRequested.connect(self.apply)
        p.scatter.selectionChanged.connect(self._selection_changed)
        p.table.cellClicked.connect(self._row_clicked)
        p.apply.clicked.connect(lambda: self.chosen is not None and self.apply(self.chosen))
        p.export.clicked.connect(lambda: self.chosen is not None and self.export(self.chosen))
        p.compare.clicked.connect(lambda: self.compare())
        for edit in (p.calibration, p.evaluation):
            edit.textEdited.connect(lambda _text: setattr(self, "typed", True))
        window.document.quant.sessionChanged.connect(lambda _measured: self._fill_sources())
        self.run.progress.connect(self._progressed)
        self.run.finished.connect(self._finished)
        window.document.modelOpened.connect(self._model_opened)
        window.document.saved.connect(lambda _path: self._remember_file())
        self._update_buttons()

    def _remember_file(self) -> None:
        """The document's graph is what its file holds now (opened or just saved)."""
        graph = self.document.graph
        self._on_file = weakref.ref(graph) if graph is not None else (lambda: None)

    @staticmethod
    def _menu(window):
        for action in window.menuBar().actions():
            if action.text() == "&Quantize" and action.menu() is not None:
                action.menu().addSeparator()
                return action.menu()
        return menu_before_help(window, "&Quantize")

    # -- where the exploration is kept ---------------------------------------------------------

    def _file_holds_graph(self) -> bool:
        """Whether the document's file holds its graph (opened or saved, not edited since).

        A quantization edit (an applied point) leaves the graph, and so the file, as it was.
        """
        doc = self.document
        return (doc.path is not None and doc.graph is not None and doc.graph is self._on_file()
                and doc.path.is_file())

    def _model_bytes(self) -> bytes | None:
        """The model as a file: the document's own when it holds the graph, else ONNX."""
        doc = self.document
        if doc.graph is None:
            return None
        if self._file_holds_graph():
            return doc.path.read_bytes()
        from compiler.frontends.onnx.export import to_onnx

        return to_onnx(doc.graph).SerializeToString()

    def default_path(self) -> Path | None:
        """The document's EXPLORE.json: a folder per model and content, in the data folder."""
        data = self._model_bytes()
        if data is None:
            return None
        stem = self.document.path.stem if self.document.path else "untitled"
        digest = hashlib.sha256(data).hexdigest()[:12]
        return explorations_dir() / f"{stem}-{digest}" / "EXPLORE.json"

    def output(self) -> Path | None:
        """Where the exploration is kept: the file picked, else the document's."""
        return self.path or self.default_path()

    def model_file(self, output: Path) -> Path:
        """The model file the tool reads (the edited graph is written beside `output`)."""
        if self._file_holds_graph():
            return self.document.path.resolve()
        from compiler.fileio import atomic_write_bytes

        # Named as the user's file, so every message of the tool names it.
        stem = self.document.path.stem if self.document.path else "untitled"
        model = output.with_name(f"{stem}.onnx")
        atomic_write_bytes(model, self._model_bytes())
        return model

    # -- running -------------------------------------------------------------------------------

    def show_panel(self) -> None:
        """Show the dock with the document's exploration, if it has one."""
        self.dock.show()
        self.dock.raise_()
        if not self.dock.isFloating():  # room for the scatter beside the canvas
            width = self.window.width()
            self.window.resizeDocks([self.dock], [max(self.dock.width(), int(width * 0.36))],
                                    Qt.Orientation.Horizontal)
        if self.record is None and not self.run.is_running():
            self.load(self.output(), quiet=True)

    def _fill_sources(self) -> None:
        """The data fields from the document, unless the user typed or a file's run shows."""
        if self.typed or self.record is not None or self.run.is_running():
            return
        p = self.panel
        data, evaluation = document_sources(self.document)
        p.calibration.setText(data)
        p.evaluation.setText(evaluation)
        p.set_hint(hint(data, evaluation))

    def settings(self, output: Path, model: Path) -> Settings:
        """The panel's form as the tool's settings (existing files as absolute paths).

        The tool runs in the project's folder, not the one a relative path was typed in.
        """
        def absolute(text: str) -> str:
            return str(Path(text).resolve()) if text and Path(text).exists() else text
        p = self.panel
        return Settings(model, absolute(p.calibration.text().strip()),
                        absolute(p.evaluation.text().strip()),
                        p.target.currentText(), p.chosen_board(), p.max_drop.value(),
                        p.trials.value(), p.chosen_workers(), output)

    def start(self, ask: bool = True) -> bool:
        """Explore from scratch (after asking, when the file holds trials)."""
        output = self.output()
        if output is None or self.run.is_running():
            return False
        if ask and self.record is not None and self.record.get("trials"):
            answer = QMessageBox.question(
                self.window, "Start Over?",
                f"{output} holds {len(self.record['trials'])} trials. Start over and replace "
                "them? (Resume goes on with them instead.)",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No)
            if answer != QMessageBox.StandardButton.Yes:
                return False
        return self._launch(output, fresh=True)

    def resume(self) -> bool:
        """Go on with the file's exploration: the tool measures only what it lacks."""
        output = self.output()
        if output is None or self.run.is_running():
            return False
        return self._launch(output, fresh=False)

    def _launch(self, output: Path, fresh: bool) -> bool:
        p = self.panel
        missing = missing_data(p.calibration.text(), p.evaluation.text())
        if missing:
            self._say(missing)
            return False
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            model = self.model_file(output)
        except OSError as exc:
            self._say(f"Cannot keep the exploration in {output.parent}: {exc.strerror}.")
            return False
        if not fresh and self.record is not None:
            model = Path(self.record["problem"]["model"])  # resumes the file's own problem
        self.run.start(self.settings(output, model), fresh)
        self.panel.set_warnings([])
        self.panel.set_running(True, False)
        self.panel.bar.setRange(0, 0)
        self.panel.progress.setText("Starting kiln explore…")
        self._say("")
        return True

    def cancel(self) -> None:
        """Stop the tool: every trial it measured stays in the file."""
        if self.run.is_running():
            self.panel.progress.setText("Stopping after the trials under way…")
            self.run.cancel()

    def _progressed(self, progress: dict) -> None:
        p = self.panel
        p.progress.setText(shown.progress_text(progress))
        p.bar.setRange(0, max(1, progress["total"]))
        p.bar.setValue(progress["done"])
        if progress.get("warnings"):
            p.set_warnings(progress["warnings"])
        if progress.get("trial") is not None:
            self.load(self.output(), quiet=True)
        self.progressed.emit(progress)

    def _finished(self, state: str, message: str) -> None:
        output = self.output()
        self.load(output, quiet=True)
        kept = len(self.record["trials"]) if self.record else 0
        if state == "failed":
            self._say(f"The exploration failed: {message}")
            self.window.statusBar().showMessage(f"Explore failed: {message}", 10000)
        elif state == "stopped":
            self._say(f"Stopped: {kept} trials kept in {output.name}; Resume goes on.")
        else:
            self._say(f"Done: {kept} trials in {output}.")
        self.panel.set_running(False, self._resumable())
        self.runEnded.emit(state)

    def _resumable(self) -> bool:
        return self.record is not None and not self.record.get("complete")

    # -- the file ------------------------------------------------------------------------------

    def choose_file(self) -> None:
        """Keep the exploration in a file the user picks (an existing one is shown)."""
        start = str(self.output() or "")
        path, _ = QFileDialog.getSaveFileName(self.window, "Exploration File", start,
                                              "Explorations (*.json)",
                                              options=QFileDialog.Option.DontConfirmOverwrite)
        if path:
            self.use_file(Path(path))

    def use_file(self, path: Path) -> None:
        """Show and continue the exploration in `path` (a new file starts empty)."""
        self.path = Path(path)
        self.record = None
        self.typed = False
        self.load(self.path, quiet=not self.path.exists())

    def load(self, path: Path | None, quiet: bool = False) -> None:
        """Read EXPLORE.json at `path` and show it (a missing file shows nothing)."""
        p = self.panel
        p.set_file(path)
        if path is None or not path.exists():
            self.record = None
        else:
            try:
                self.record = read_record(path)
            except KilnError as exc:
                self.record = None
                if not quiet:
                    self._say(str(exc))
        self._show_record(path)

    def _show_record(self, path: Path | None) -> None:
        p, doc = self.panel, self.record
        if doc is None:
            p.scatter.set_points([], None, "instructions", "accuracy (%)",
                                 "No exploration yet: Start measures the first points.")
            p.set_rows([], "accuracy")
            self._fill_sources()
        else:
            score = shown.score_name(doc)
            p.scatter.set_points(shown.points_of(doc), shown.floor_of(doc),
                                 f"instructions on {doc['problem']['target']} (QEMU)",
                                 f"{score} (%)")
            p.set_rows(shown.front_rows(doc), score)
            if not self.run.is_running():
                p.progress.setText(shown.record_text(doc, path))
                self._fill_form(doc)
                p.set_warnings(doc.get("warnings", []))
        p.set_running(self.run.is_running(), self._resumable())
        self._update_buttons()

    def _fill_form(self, doc: dict) -> None:
        """The form takes the file's settings, so Resume continues the same problem."""
        p, problem = self.panel, doc["problem"]
        p.calibration.setText(problem["calibration"])
        p.evaluation.setText(problem["evaluation"])
        p.target.setCurrentText(problem["target"])
        p.board.setCurrentText(problem["board"] or "(none)")
        p.max_drop.setValue(100 * problem["max_drop"])
        p.trials.setValue(max(p.trials.value(), len(doc.get("trials", []))))

    def describe(self, number: int) -> str:
        """The tooltip of point `number`."""
        return "" if self.record is None else shown.describe_point(self.record, number)

    # -- points --------------------------------------------------------------------------------

    def _row_clicked(self, row: int, _column: int) -> None:
        """A row of the front applies its point, as a click on the scatter does."""
        number = self.panel.row_number(row)
        if number is not None:
            self.apply(number)

    def _selection_changed(self, numbers: list) -> None:
        if numbers:
            self.chosen = numbers[-1]
        self._update_buttons()

    def _update_buttons(self) -> None:
        p = self.panel
        p.apply.setEnabled(self.chosen is not None and self.record is not None)
        p.export.setEnabled(self.chosen is not None and self.record is not None)
        p.compare.setEnabled(len(p.scatter.selection) == 2)

    def _busy(self) -> bool:
        if self.job is not None and self.job.is_active():
            self._say("Wait for the point being prepared.")
            return True
        return False

    def apply(self, number: int) -> Job | None:
        """Make trial `number` the document's quantization (in a worker, then one undo step)."""
        doc, record = self.document, self.record
        if record is None or doc.graph is None or self._busy():
            return None
        self.chosen = number
        self._update_buttons()
        graph = doc.graph
        job = Job(apply_job(record, number, graph, doc.quant.calibration_graph),
                  f"Applying trial {number}", self)
        job.succeeded.connect(lambda session: self._take(number, session))
        job.failed.connect(lambda message: self._say(f"Cannot apply trial {number}: "
                                                     f"{message}"))
        self._say(f"Quantizing the model as trial {number}…")
        self.job = job
        return job.start()

    def _take(self, number: int, session) -> None:
        if session.graph is not self.document.graph:
            self._say("The model changed meanwhile: apply the point again.")
            return
        self.document.quant.replace_session(session, f"Apply exploration trial {number}")
        self.applied_number = number
        self.panel.scatter.set_applied(number)
        self._say(f"Trial {number} is the document's quantization (Edit > Undo restores "
                  "the one before).")
        self.window.statusBar().showMessage(f"Applied exploration trial {number}", 8000)
        self.applied.emit(number)

    def export(self, number: int, folder: Path | None = None) -> Job | None:
        """Write trial `number` as a bundle with its compile options (asks for the folder)."""
        if self.record is None or self._busy():
            return None
        if folder is None:
            chosen = QFileDialog.getExistingDirectory(self.window, "Export Bundle of the Point")
            if not chosen:
                return None
            folder = Path(chosen)
        force = self._confirm(Path(folder), number)
        if force is None:
            return None
        job = Job(bundle_job(self.record, number, Path(folder), force),
                  f"Exporting trial {number}", self)
        job.succeeded.connect(self._exported)
        job.failed.connect(lambda message: self._say(f"Export failed: {message}"))
        self._say(f"Exporting trial {number}…")
        self.job = job
        return job.start()

    def _confirm(self, folder: Path, number: int) -> bool | None:
        """Whether to replace what the folder holds: False (nothing to replace), True, None."""
        from compiler.codegen.bundle_folder import FolderInUse, check_folder
        from compiler.explore.config import Config
        from compiler.explore.measure import compile_options

        trial = shown.trial_json(self.record, number)
        if trial is None or "config" not in trial:
            return False  # the job says why
        options = compile_options(Config.from_json(trial["config"]),
                                  self.record["problem"]["target"])
        try:
            check_folder(folder, options.name, options.target,
                         example=not options.resolved_target().mcu)
        except FolderInUse as exc:
            answer = QMessageBox.question(
                self.window, "Replace Bundle?" if exc.kind == "bundle" else "Folder Not Empty",
                f"{exc}. Write trial {number}'s bundle there?",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No)
            if answer != QMessageBox.StandardButton.Yes:
                self._say("Not exported: the folder was left as it was.")
                return None
            return True
        except KilnError:
            return False  # a folder that cannot be used: the job says why
        return False

    def _exported(self, bundled) -> None:
        self._say(f"Wrote trial {bundled.number}'s bundle to {bundled.folder} "
                  f"({len(bundled.files)} files).")
        self.exported.emit(bundled)

    def compare(self) -> None:
        """The two selected points side by side in the compare view (made in its job)."""
        numbers = self.panel.scatter.selection
        if self.record is None or len(numbers) != 2:
            self._say("Ctrl+click two points to compare them.")
            return
        a, b = compare_sides(self.record, (numbers[0], numbers[1]))
        self._say(f"Comparing trials {numbers[0]} and {numbers[1]}…")
        self.document.request_compare(a, b)  # the Compare window shows them

    # -- the document --------------------------------------------------------------------------

    def _model_opened(self) -> None:
        """Another model: its own exploration (a run of the last one stops, keeping its trials)."""
        self.run.cancel()
        self._remember_file()
        self.path, self.record = None, None
        self.typed = False
        self.panel.set_warnings([])
        self.applied_number = self.chosen = None
        self.panel.scatter.set_applied(None)
        self.panel.scatter.set_selection([])
        if self.dock.isVisible():
            self.load(self.output(), quiet=True)

    def _say(self, text: str) -> None:
        self.panel.status.setText(text)


def install(window) -> ExploreController:
    """Add Quantize > Explore… and the Explore dock; returns the controller."""
    return ExploreController(window)


def screenshots(window, save) -> None:
    """explore.png: a short exploration of the sample model, a point applied, two selected."""
    import importlib.util
    import tempfile

    from compiler.explore.engine import Exploration
    from compiler.explore.executors import InProcess
    from compiler.explore.problem import ProblemSpec

    controller: ExploreController = window.explore
    doc = window.document
    if doc.path is None or doc.path.name != "digits_cnn.onnx":
        return  # the shot needs samples: the sample model has them built in
    if importlib.util.find_spec("optuna") is None:
        return  # without the extra (the standalone build) there is no exploration to show
    with tempfile.TemporaryDirectory(prefix="kiln-explore-shot-") as folder:
        output = Path(folder) / "EXPLORE.json"
        spec = ProblemSpec(str(doc.path), "digits:train", "digits:test", "cortex-m7", None,
                           0.005)
        # In this process, one trial after another (no Ray): a scripted run has no event loop.
        Exploration(spec, output, 8, executor=InProcess()).run()
        controller.use_file(output)
        controller.show_panel()
        record = controller.record
        front = record["front"]
        numbers = [t["number"] for t in record["trials"] if "measurement" in t]
        from app.explore.jobs import session_of_point

        first = front[0] if front else numbers[0]
        session = session_of_point(record, first, doc.graph, doc.quant.calibration_graph)
        controller._take(first, session)
        controller.panel.scatter.set_selection(numbers[-2:])
        # Beside the other left docks the panel is narrow: render it floating, readable.
        floating = controller.dock.isFloating()
        controller.dock.setFloating(True)
        controller.dock.resize(760, 820)
        save(controller.dock, "explore.png")
        controller.dock.setFloating(floating)
        window.workspaces.switch("Explore")  # applying the point showed the Quantize one
        controller.dock.raise_()
        from PySide6.QtWidgets import QApplication

        QApplication.processEvents()  # the docks laid out again before the window is drawn
        save(window, "explore_window.png")
