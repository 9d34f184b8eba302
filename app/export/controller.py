"""File > Export Bundle…: compile the document's graph into a bundle, off the GUI thread.

The job asks the compile driver for the document's graph and pipeline, as `kiln compile` does,
so the files are byte for byte what the command line writes; the dialog then shows the size
report.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMessageBox

from app.quant.state import model_hash
from app.window import settings
from app.window.workers import Job, Progress
from compiler.codegen.bundle import report as bundle_report
from compiler.codegen.bundle_folder import FolderInUse, check_folder
from compiler.codegen.targets import BOARDS, WEIGHT_LAYOUTS, Board, Target, get_target
from compiler.driver import (
    BuildRequest,
    Compilation,
    Options,
    build_file_name,
    compilation,
    firmware_board,
    float_fallbacks,
    pipeline_key,
)
from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.mcu.firmware_folder import run_command
from compiler.passes.pipeline import Pipeline, default_pipeline
from compiler.quant.recipe import QuantRecipe, quantize_with
from views.export_dialog import ExportDialog, ExportOptions

SHORTCUT = "Ctrl+Shift+E"
CANCELLED_BY_OPEN = " because another model was opened"
SETTINGS_KEY = "export"



def build_command(target: Target, name: str, folder: str | Path,
                  firmware: Board | None = None) -> str:
    """A command that builds a program from the bundle for `target` (to paste in a shell).

    Hosted targets link the bundle's example main.c. A Cortex-M bundle with a firmware folder
    (`firmware`: the emulated board it is linked for) builds with its Makefile and runs under
    QEMU, the commands of its README. A core no emulated board runs has no main of Kiln's: the
    line names the user's main.c and linker script as theirs to write.
    """
    where = shlex.quote(str(folder))
    if not target.mcu:  # (the host is this machine: its own compiler, never a cross one)
        cc = "cc" if target.name == "host" else target.c_compiler
        return f"cd {where} && {cc} -O2 -std=c99 -o {name}_example main.c {name}.o -lm"
    if firmware is not None:
        return f"cd {where} && make && {run_command(firmware, name)}"
    flags = " ".join(target.c_flags)
    return (f"{target.c_compiler} {flags} -O2 -std=c99 -I {where} -T YOUR_BOARD.ld "
            f"-o firmware.elf YOUR_MAIN.c {shlex.quote(str(Path(folder) / f'{name}.o'))} -lm")


@dataclass
class Exported:
    """A bundle written by the export job."""

    folder: Path
    files: list[Path]
    report: dict
    command: str
    float_report: dict | None = None  # an int8 export: the float bundle's report, to compare
    counts: dict[str, int] | None = None  # "int8" / "float" -> instructions under QEMU
    precision: str = "float32"  # what was compiled: "float32" or "int8"
    rebuild: str = ""  # the `kiln compile --build` command that writes the same bundle
    fallbacks: list[tuple[str, int]] | None = None  # int8: (layer, float bytes) left float


def _board(options: ExportOptions):
    """The board of `options` (None for none), checked against the target."""
    from compiler.codegen.targets import get_target

    board = BOARDS[options.board] if options.board else None
    if board is not None and get_target(options.target).name != board.target:
        raise KilnError(f"target {options.target} does not match board {board.name}, whose CPU "
                        f"is {board.target}")
    return board


def _check_counting(options: ExportOptions) -> None:
    """Refuse instruction counting the target cannot have, before anything is compiled."""
    if not options.count:
        return
    from compiler.mcu import firmware

    firmware.board_for(options.target)  # "no QEMU board runs host; targets with one: …"
    missing = firmware.missing_tools()
    if missing:
        raise KilnError(f"counting instructions needs {' and '.join(missing)} (Debian "
                        f"packages: {firmware.PACKAGES})")


def driver_options(options: ExportOptions) -> Options:
    """The compile driver's options for the dialog's choices (what `kiln compile` builds)."""
    return Options(options.target, options.name, None, options.io_in_arena, options.weights,
                   disabled_lowering=options.disabled_lowering,
                   lean_weights=WEIGHT_LAYOUTS.get(options.weight_layout))


def rebuild_command(model: Path | None, folder: str | Path, name: str) -> str:
    """The command that rebuilds the bundle in `folder` byte for byte (for a CI job)."""
    source = shlex.quote(str(model)) if model is not None else "MODEL.onnx"
    build = shlex.quote(str(Path(folder) / build_file_name(name)))
    return f"kiln compile {source} --build {build} -o DIR"


def export_job(compiled: Compilation | Callable[[], Compilation], options: ExportOptions,
               request: BuildRequest | Callable[[], BuildRequest] | None = None,
               floating: Compilation | None = None,
               model: Path | None = None) -> Callable[[Progress], Exported]:
    """The function of a job that compiles through the driver and writes the bundle.

    `Compilation.export` writes it, the one path `kiln compile` takes, so the files are byte
    for byte the same, NET.build.json included. `compiled` may be a function making the
    Compilation (an int8 export quantizes with the document's recipe here, off the GUI
    thread). Everything that can fail comes before the write: the options are checked first
    (board, QEMU board for counting, the folder: another bundle there needs `options.force`),
    then compiling, comparing and counting; writing is the last step and swaps the bundle in
    whole. Cancel takes effect between stages and up to the swap, so a cancelled or failed
    export leaves the folder as it was. An int8 export reports the float bundle (`floating`)
    beside it to compare. Without `request`, the float export of `compiled` is built; a
    function making it runs in the job too.
    """
    if request is None:
        request = build_request(options, compiled.pipeline, compiled.graph)
    folder = Path(options.folder)
    precision = "int8" if floating is not None else "float32"

    def work(progress: Progress) -> Exported:
        nonlocal compiled, request
        if callable(request):
            request = request()
        opts = request.options.check()
        board = _board(options)
        _check_counting(options)
        target = opts.resolved_target()
        check_folder(folder, opts.name, target.name, options.force, example=not target.mcu)
        if callable(compiled):
            progress.report(0.0, "quantizing with the document's recipe")
            compiled = compiled()
            progress.check()
        progress.report(0.05, "running passes")
        _ = compiled.prepared  # the passes: their own stage, with its own cancel point
        progress.report(0.15, "planning memory")
        plan = compiled.plan(opts)
        progress.report(0.2, f"generating code ({plan.arena.size:,} B of activations)")
        opts, _ = compiled.layout_that_fits(opts, board)  # the report names the layout
        net = compiled.net(opts)
        float_doc = None
        if floating is not None:
            progress.report(0.7, "compiling the float model to compare")
            float_doc = bundle_report(floating.net(opts), board)
        counts = None
        if options.count:
            from compiler.harness.cortex_m_bench import bench_compilation

            counts = {}
            for label, which in (("int8" if floating is not None else "float", compiled),
                                 ("float", floating)):
                if which is not None:
                    progress.report(0.75, f"counting {label} instructions under QEMU")
                    counts[label] = bench_compilation(which, options.target, peer=False,
                                                      options=opts).kiln.total
        progress.report(0.9, "writing bundle")
        existed = folder.exists()
        try:
            files, doc, _ = compiled.export(folder, request, force=options.force,
                                            check=progress.check)
        except OSError as exc:
            raise KilnError(f"cannot write the bundle to {folder}: {exc.strerror}") from None
        try:
            progress.check()
        except BaseException:
            if not existed:  # cancelled while writing: take back the folder this job made
                shutil.rmtree(folder, ignore_errors=True)
            raise
        written = {path.name for path in files}  # no firmware beside a user's own Makefile
        command = build_command(net.target, options.name, folder,
                                firmware_board(opts, request.board) if "Makefile" in written
                                else None)
        return Exported(folder, files, doc, command,
                        float_doc, counts, precision,
                        rebuild_command(model, folder, options.name), float_fallbacks(compiled))

    return work


def build_request(options: ExportOptions, pipeline: Pipeline, model: Graph,
                  recipe: QuantRecipe | None = None) -> BuildRequest:
    """What the export builds, as `kiln compile --build` reads it back.

    `model` is the float graph (its hash is checked on a rebuild); the pipeline is recorded
    only when it is not the default one, as `kiln compile` records no `--pipeline`.
    """
    known = pipeline_key(pipeline) != pipeline_key(default_pipeline())
    return BuildRequest(driver_options(options), _board(options),
                        pipeline.to_json() if known else None,
                        None if recipe is None else recipe.to_json(portable=True), {},
                        recipe.model_hash if recipe is not None and recipe.model_hash
                        else model_hash(model))


def default_bundles_folder() -> Path:
    """Where bundles go by default: a per-user folder that can be written.

    Never beside the model, whose folder may be read-only.
    """
    documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    base = Path(documents) if documents else Path.home()
    return base / "Kiln bundles"


class ExportController(QObject):
    """The Export Bundle action, its dialog and the compile job.

    Target, board and the arena option are the document's (the Code and Memory panels show the
    same); name, weights and the bundles folder are remembered between sessions.
    """

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.document = window.document
        self.dialog: ExportDialog | None = None
        self.job: Job | None = None
        self.last: Exported | None = None
        self.action = QAction("Export &Bundle…", window)
        self.action.setShortcut(QKeySequence(SHORTCUT))
        tip = "Compile the model into a bundle (object, header, report) for a target"
        self.action.setStatusTip(tip)
        self.action.setToolTip(tip)
        self.action.triggered.connect(lambda _checked=False: self.open_dialog())
        self.document.graphChanged.connect(self._update_action)
        self.document.modelOpened.connect(self._model_opened)
        # A calibration (or an edit the quantization follows) changes what int8 can export.
        self.document.quant.sessionChanged.connect(self._session_changed)
        self._note: str | None = None  # what the status bar says once another model is shown
        window.modelLoaded.connect(self._model_loaded)
        self._update_action()
        self._restore_target()

    def _restore_target(self) -> None:
        """The target, board and arena option of the last export become the document's."""
        known = self._remembered()
        if "target" in known:
            board = known.get("board")
            self.document.set_target(known["target"], board if board in BOARDS else None)
        self.document.set_io_in_arena(known.get("ioInArena", "false").lower() == "true")

    def _update_action(self) -> None:
        self.action.setEnabled(self.document.graph is not None)

    def _model_opened(self) -> None:
        """Another model: its export starts afresh (no report or folder of the previous one).

        A running export is cancelled and says so, in the dialog (which stays open, with the
        new model's options) and in the status bar; an idle dialog just closes.
        """
        running = self.job is not None and self.job.is_active()
        self.cancel()
        self.last = None
        if self.dialog is None:
            return
        if running:
            self.dialog.show_cancelled(CANCELLED_BY_OPEN)
            self.dialog.set_options(self._initial_options())
            self.dialog.set_int8_available(self._int8_available())
            self._note = f"export cancelled{CANCELLED_BY_OPEN}: nothing was written"
            self.window.statusBar().showMessage(self._note[0].upper() + self._note[1:], 10000)
            return
        self.dialog.close()
        self.dialog.deleteLater()
        self.dialog = None

    def _model_loaded(self, _path: str) -> None:
        """Say it again after the window's "Opened …", which replaces the status bar's line."""
        if self._note is not None:
            bar = self.window.statusBar()
            bar.showMessage(f"{bar.currentMessage()}; {self._note}", 10000)
            self._note = None

    def _int8_available(self) -> bool:
        """True when the document is calibrated, so that it can be exported as int8."""
        return self.document.quant.current() is not None

    def _session_changed(self, _measured: bool) -> None:
        if self.dialog is not None:
            self.dialog.set_int8_available(self._int8_available())

    # -- dialog ---------------------------------------------------------------------------------

    def open_dialog(self) -> ExportDialog | None:
        """Show the dialog (nothing without a model); returns it."""
        if self.document.graph is None:
            return None
        if self.dialog is None:
            self.dialog = ExportDialog(self.window)
            self.dialog.exportRequested.connect(self.start)
            self.dialog.cancelRequested.connect(self.cancel)
            self.dialog.rejected.connect(self.cancel)
            self.dialog.set_options(self._initial_options())
        self.dialog.set_int8_available(self._int8_available())
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def _remembered(self) -> dict[str, str]:
        if not self.window.remember:
            return {}
        store = settings.settings()
        store.beginGroup(SETTINGS_KEY)
        try:
            return {key: str(store.value(key)) for key in
                    ("target", "board", "ioInArena", "name", "weights", "parent")
                    if store.value(key) not in (None, "")}
        finally:
            store.endGroup()

    def _initial_options(self) -> ExportOptions:
        """What the dialog starts with.

        The document's target, board and arena choice; the remembered name, weights and
        bundles folder, with a subfolder named after the model.
        """
        doc, known = self.document, self._remembered()
        parent = Path(known["parent"]) if "parent" in known else default_bundles_folder()
        stem = doc.path.stem if doc.path else "model"
        board = doc.board if doc.board in BOARDS else None
        return ExportOptions(doc.target, board, known.get("name", "net"),
                             known.get("weights", "embedded"), doc.io_in_arena,
                             parent / f"{stem}_bundle",
                             disabled_lowering=doc.disabled_lowering)

    def _remember(self, options: ExportOptions) -> None:
        self.document.set_target(options.target, options.board)
        self.document.set_io_in_arena(options.io_in_arena)
        if not self.window.remember:
            return
        store = settings.settings()
        store.beginGroup(SETTINGS_KEY)
        for key, value in (("target", options.target), ("board", options.board or ""),
                           ("ioInArena", "true" if options.io_in_arena else "false"),
                           ("name", options.name), ("weights", options.weights),
                           ("parent", str(Path(options.folder).parent))):
            store.setValue(key, value)
        store.endGroup()

    # -- the job --------------------------------------------------------------------------------

    def start(self, options: ExportOptions) -> Job | None:
        """Compile the document's graph with its pipeline and `options` in a worker."""
        if self.document.graph is None or (self.job is not None and self.job.is_active()):
            return None
        self._remember(options)
        dialog = self.dialog
        compiled = self.document.compilation()
        if compiled is None:
            if dialog is not None:
                dialog.show_error("The graph has invalid nodes: fix or undo the edit before "
                                  "exporting it.")
            return None
        options = self._confirm_folder(options)
        if options is None:
            return None
        floating = None
        if options.precision != "int8":
            request = build_request(options, self.document.pipeline, self.document.graph)
        else:
            state = self.document.quant
            recipe = state.recipe()
            if recipe is None:
                if dialog is not None:
                    dialog.show_error("Calibrate the model first (Quantize > Calibrate…) to "
                                      "export it as int8.")
                return None
            source, pipeline = state.current().graph, self.document.pipeline

            def request() -> BuildRequest:  # in the job: the recipe's JSON is big
                return build_request(options, pipeline, source, recipe)
            floating = compiled

            def compiled() -> Compilation:
                return compilation(quantize_with(source, recipe), pipeline)
        job = Job(export_job(compiled, options, request, floating, self.document.path),
                  f"Exporting {options.name}", self)
        if dialog is not None:
            dialog.set_running(True)
            job.progress.connect(dialog.set_progress)
            job.failed.connect(dialog.show_error)
            job.cancelled.connect(dialog.show_cancelled)
        job.succeeded.connect(self._succeeded)
        self.job = job
        return job.start()

    def _confirm_folder(self, options: ExportOptions) -> ExportOptions | None:
        """Ask before writing into a folder that holds another bundle or files that are not one.

        Returns the options to export with (`force` set once the user agreed), or None when
        the user said no. The job checks the folder again and refuses without force, so a
        folder filled meanwhile never loses a bundle. A folder that cannot be read is the job's
        to report, as every other failure.
        """
        if options.force:
            return options
        try:
            target = get_target(options.target)
            check_folder(options.folder, options.name, target.name, example=not target.mcu)
        except FolderInUse as exc:
            conflict = exc
        except KilnError:
            return options  # a folder that cannot be used: the job says why
        else:
            return options
        if conflict.kind == "bundle":
            title = "Replace Bundle?"
            text = (f"{conflict}. Replace it with {options.name} for {target.name}? Its files "
                    "are deleted; files that are not part of a bundle are kept.")
        else:
            title = "Folder Not Empty"
            text = f"{conflict}. Write the bundle beside them? They are kept."
        parent = self.dialog or self.window
        no = QMessageBox.StandardButton.No
        answer = QMessageBox.question(parent, title, text,
                                      QMessageBox.StandardButton.Yes | no, no)
        if answer != QMessageBox.StandardButton.Yes:
            if self.dialog is not None:
                self.dialog.show_note("Not exported: the folder was left as it was.")
            return None
        return replace(options, force=True)

    def cancel(self) -> None:
        """Stop a running export (nothing is written)."""
        if self.job is not None:
            self.job.cancel()

    def _succeeded(self, exported: Exported) -> None:
        self.last = exported
        self.document.set_last_export(exported.report)
        self.window.statusBar().showMessage(f"Exported bundle to {exported.folder}", 5000)
        if self.dialog is not None:
            self.dialog.show_result(exported.report, exported.folder, exported.files,
                                    exported.command, exported.float_report, exported.counts,
                                    exported.precision, exported.rebuild, exported.fallbacks)


def add_to_file_menu(window, action: QAction) -> None:
    """Put the action among the File menu's exports (before Quit's separator)."""
    for menu_action in window.menuBar().actions():
        menu = menu_action.menu()
        if menu is not None and menu_action.text().replace("&", "") == "File":
            separators = [a for a in menu.actions() if a.isSeparator()]
            before = separators[-1] if separators else None
            menu.insertAction(before, action) if before else menu.addAction(action)
            return
    window.addAction(action)  # no File menu: the shortcut still works


def install(window) -> ExportController:
    """Add File > Export Bundle… to `window`; returns the controller (`window.export`)."""
    controller = ExportController(window)
    add_to_file_menu(window, controller.action)
    return controller


def _wide_fc_graph() -> Graph:
    """A one-layer model whose 2 MiB of weights fit no small board (the "over budget" shot)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from compiler.frontends.onnx import load_onnx

    weights = np.random.default_rng(0).standard_normal((1024, 512)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W"], ["y"], name="wide_fc")], "wide_fc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 512])],
        [numpy_helper.from_array(weights, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return load_onnx(model)


def run_export(graph: Graph, options: ExportOptions, compiled: Compilation | None = None
               ) -> Exported:
    """Run the export job in this thread (scripted runs: no event loop to wait on).

    Without `compiled`, the graph is compiled with the default pipeline.
    """
    return export_job(compiled or compilation(graph), options)(Progress(lambda _f, _t: None))


def screenshots(window, save) -> None:
    """The result page for the open model on stm32f746g-disco, fitting and over budget.

    A small open model fits every board; the over-budget page then shows a wide fully
    connected layer on nrf52840-dk.
    """
    import tempfile

    graph = window.document.graph
    if graph is None:
        return
    dialog = ExportDialog(window)
    dialog.set_options(window.export._initial_options() if window.export else
                       ExportOptions("host", None, "net", "embedded", False, Path("bundle")))
    dialog.show()
    save(dialog, "export_options.png")
    dialog.close()
    dialog.deleteLater()
    with tempfile.TemporaryDirectory() as tmp:
        board = BOARDS["stm32f746g-disco"]
        options = ExportOptions(board.target, board.name, "net", "embedded", False,
                                Path(tmp) / "fits")
        shots = {}
        try:
            exported = run_export(graph, options)
            shots["fits" if exported.report["board"]["fits"] else "over"] = exported
        except KilnError:
            pass  # the open model cannot be compiled (no int8 kernels yet): the other page shows
        if "over" not in shots:
            small = BOARDS["nrf52840-dk"]
            shots["over"] = run_export(_wide_fc_graph(), ExportOptions(
                small.target, small.name, "wide_fc", "embedded", False, Path(tmp) / "over"))
        for kind, exported in shots.items():
            dialog = ExportDialog(window)
            dialog.show_result(exported.report, exported.folder, exported.files,
                               exported.command, rebuild=exported.rebuild)
            dialog.resize(820, 720)
            dialog.show()
            save(dialog, f"export_result_{kind}.png")
            dialog.close()
            dialog.deleteLater()
