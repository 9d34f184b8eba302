"""The Export Bundle dialog: the `kiln compile` options, progress with cancel, then the report.

The dialog only collects options and shows state; the controller (app.export.controller) runs
the compile job, so the dialog never touches the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QRegularExpression, QSize, Qt, QUrl, Signal
from PySide6.QtGui import (
    QDesktopServices,
    QFontDatabase,
    QGuiApplication,
    QRegularExpressionValidator,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from compiler.codegen.targets import BOARDS, target_names
from compiler.mcu.firmware import emulated_targets
from views import screen_fit, style
from views.size_report import ComparisonTable, SizeReport

WEIGHTS = (("embedded", "Embedded in NET.o (read-only data)"),
           ("external", "External: NET.weights.bin for the caller to place"))
PRECISIONS = {"float32": "float32", "int8": "int8 (quantized with the document's recipe)"}
LAYOUTS = (("auto", "Automatic (bytes when pairs would crowd the core's flash)"),
           ("int8", "int8 bytes, widened in the kernel (half the flash)"),
           ("int16", "int16 pairs, ready for SMLAD (fewer instructions)"))
RESULT_SIZE = (760, 680)  # the result page's preferred size, within the screen's height


@dataclass(frozen=True)
class ExportOptions:
    """What `kiln compile` takes: --target, --board, --name, --weights, --io-in-arena, -o."""

    target: str
    board: str | None
    name: str
    weights: str
    io_in_arena: bool
    folder: Path
    precision: str = "float"  # or "int8": quantized with the document's recipe
    count: bool = False  # Cortex-M: count one inference's instructions under QEMU
    force: bool = False  # the user agreed to replace another bundle in the folder
    disabled_lowering: frozenset[str] = frozenset()  # switched off in the Passes panel
    weight_layout: str = "auto"  # int8 weights on DSP cores: "auto", "int8" or "int16"

    def cli_args(self) -> list[str]:
        """The same float export as `kiln compile` arguments (after the model).

        An int8 export's quantization is its recipe, which only its NET.build.json carries
        whole: `kiln compile MODEL --build NET.build.json` rebuilds any export.
        """
        args = ["--target", self.target, "-o", str(self.folder), "--name", self.name,
                "--weights", self.weights]
        if self.board:
            args += ["--board", self.board]
        if self.io_in_arena:
            args.append("--io-in-arena")
        if self.weight_layout != "auto":
            args += ["--weight-layout", self.weight_layout]
        for name in sorted(self.disabled_lowering):
            args += ["--disable-lowering", name]
        if self.force:
            args.append("--force")
        return args


def fallback_text(fallbacks: list[tuple[str, int]]) -> str:
    """The warning for layers an int8 model computes in float (empty when there are none)."""
    if not fallbacks:
        return ""
    total = sum(b for _, b in fallbacks)
    names = ", ".join(f"{layer} ({b:,} B)" for layer, b in fallbacks)
    return (f"Warning: {len(fallbacks)} layer{'s' if len(fallbacks) > 1 else ''} of this int8 "
            f"model stay{'' if len(fallbacks) > 1 else 's'} float: {names}; {total:,} B of "
            f"float32 weights, {total - total // 4:,} B more than int8.")


class ExportDialog(QDialog):
    """Options page (with progress while compiling) and result page (the size report).

    Signals:
        exportRequested(options): the user pressed Export with valid options.
        cancelRequested(): the user cancelled a running export.
    """

    exportRequested = Signal(object)
    cancelRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Export Bundle")
        self.setObjectName("ExportDialog")
        self.folder_path: Path | None = None
        self.command = ""
        self._running = False
        self.pages = QStackedWidget()
        self.pages.addWidget(self._options_page())
        self.pages.addWidget(self._result_page())
        column = QVBoxLayout(self)
        column.addWidget(self.pages)
        self.show_page(0)
        self.resize(600, self.sizeHint().height())

    def show_page(self, index: int) -> None:
        """Show the options (0) or result (1) page; only the shown page sets the minimum size."""
        for i in range(self.pages.count()):
            policy = (QSizePolicy.Policy.Preferred if i == index
                      else QSizePolicy.Policy.Ignored)
            self.pages.widget(i).setSizePolicy(policy, policy)
        previous = self.pages.currentIndex()
        self.pages.setCurrentIndex(index)
        if index == 0 and previous != 0:
            self.adjustSize()  # back from the report: shrink to the options again

    # -- options page ---------------------------------------------------------------------------

    def _options_page(self) -> QWidget:
        page = QWidget()
        self.target = QComboBox()
        self.target.addItems(target_names())
        self.target.setToolTip("CPU to generate code for; 'host' is this machine")
        self.board = QComboBox()
        self.board.addItem("None (no budget check)", None)
        for board in BOARDS.values():
            self.board.addItem(f"{board.name}  ({board.target}, flash {board.flash // 1024} KiB, "
                               f"RAM {board.ram // 1024} KiB)", board.name)
        self.board.setToolTip("Check flash and RAM use against this board; selects its CPU")
        self.name = QLineEdit("net")
        self.name.setValidator(QRegularExpressionValidator(
            QRegularExpression("[A-Za-z_][A-Za-z0-9_]*"), self.name))
        self.name.setToolTip("Entry point and file names: NET.o, NET.h (a C identifier)")
        self.weights = QComboBox()
        for key, text in WEIGHTS:
            self.weights.addItem(text, key)
        self.io_in_arena = QCheckBox("Inputs and outputs live in the activation arena")
        self.layout = QComboBox()
        for key, text in LAYOUTS:
            self.layout.addItem(text, key)
        self.layout.setToolTip("How int8 weights are stored on DSP cores (Cortex-M4, M7, M33); "
                               "other cores read bytes")
        self.precision = QComboBox()
        self.precision.addItem(PRECISIONS["float32"], "float")
        self.precision.addItem(PRECISIONS["int8"], "int8")
        self._int8_available = True
        # Lowering passes the Passes panel switched off: the bundle is built without them too.
        self._disabled_lowering: frozenset[str] = frozenset()
        self.lowering_note = QLabel()
        self.lowering_note.setWordWrap(True)
        self.lowering_note.hide()
        self.set_int8_available(False)
        self.count = QCheckBox("Count one inference's instructions under QEMU (Cortex-M)")
        self.folder = QLineEdit()
        self.folder.setPlaceholderText("folder for the bundle (created if needed)")
        self.browse = browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder, 1)
        folder_row.addWidget(browse)

        form = QFormLayout()
        form.addRow("&Target:", self.target)
        form.addRow("&Board:", self.board)
        form.addRow("&Network name:", self.name)
        form.addRow("&Weights:", self.weights)
        form.addRow("&Precision:", self.precision)
        form.addRow("Weight &layout:", self.layout)
        form.addRow("", self.count)
        form.addRow("", self.io_in_arena)
        form.addRow("", self.lowering_note)
        folder_label = QLabel("&Output folder:")
        folder_label.setBuddy(self.folder)
        form.addRow(folder_label, folder_row)

        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet(f"color: {style.PROBLEM};")
        self.error.hide()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status = QLabel()
        self.status.setStyleSheet(f"color: {style.TEXT_MUTED};")
        self.export_button = QPushButton("Export")
        self.export_button.setDefault(True)
        self.export_button.clicked.connect(self.request_export)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self._cancel_or_close)
        buttons = QHBoxLayout()
        buttons.addWidget(self.status, 1)
        buttons.addWidget(self.export_button)
        buttons.addWidget(self.cancel_button)

        column = QVBoxLayout(page)
        column.addLayout(form)
        column.addWidget(self.error)
        column.addStretch(1)
        column.addWidget(self.progress)
        column.addLayout(buttons)
        self.progress.hide()
        self.board.currentIndexChanged.connect(self._board_changed)
        self.target.currentTextChanged.connect(self._target_changed)
        self._offer_boards_of(self.target.currentText())
        self._update_applicable()
        return page

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Output Folder", self.folder.text())
        if folder:
            self.folder.setText(folder)

    def _board_changed(self) -> None:
        name = self.board.currentData()
        if name is not None:
            self.target.setCurrentText(BOARDS[name].target)

    def _target_changed(self, target: str) -> None:
        name = self.board.currentData()
        if name is not None and BOARDS[name].target != target:
            self.board.setCurrentIndex(0)  # the board's CPU differs: no budget to check
        self._offer_boards_of(target)
        self._update_applicable()

    def _offer_boards_of(self, target: str) -> None:
        """List only the boards with the chosen target's core (and "None")."""
        view = self.board.view()
        for row in range(1, self.board.count()):
            view.setRowHidden(row, BOARDS[self.board.itemData(row)].target != target)

    def offered_boards(self) -> list[str]:
        """The boards the list offers now, in order (without "None")."""
        view = self.board.view()
        return [self.board.itemData(row) for row in range(1, self.board.count())
                if not view.isRowHidden(row)]

    def _update_applicable(self) -> None:
        """Disable (and clear) the options the chosen target cannot have.

        Only targets with a QEMU board can have their instructions counted; a ticked box
        for the host would only fail the export.
        """
        target = self.target.currentText()
        emulated = emulated_targets()
        countable = target in emulated
        self.count.setEnabled(countable and not self._running)
        if not countable:
            self.count.setChecked(False)
        self.count.setToolTip(
            "What `kiln bench --target` measures, per layer; float and int8 when exporting int8"
            if countable else f"No QEMU board runs {target}: targets with one: "
            f"{', '.join(emulated)}")

    def set_int8_available(self, available: bool) -> None:
        """Offer int8 only when the document has been calibrated (Quantize > Calibrate…).

        When int8 becomes available it is chosen: the user calibrated in order to export it.
        Later calls keep whatever precision the user picked since.
        """
        item = self.precision.model().item(1)
        item.setEnabled(available)
        item.setToolTip("" if available else "Calibrate the model first (Quantize > Calibrate…)")
        if not available:
            self.precision.setCurrentIndex(0)
        elif not self._int8_available:
            self.precision.setCurrentIndex(1)
        self._int8_available = available

    def set_options(self, options: ExportOptions) -> None:
        """Fill the fields (remembered settings, or tests)."""
        self.board.setCurrentIndex(max(0, self.board.findData(options.board)))
        if options.target in target_names():
            self.target.setCurrentText(options.target)
        self.name.setText(options.name)
        self.weights.setCurrentIndex(max(0, self.weights.findData(options.weights)))
        self.io_in_arena.setChecked(options.io_in_arena)
        self.layout.setCurrentIndex(max(0, self.layout.findData(options.weight_layout)))
        self.folder.setText(str(options.folder))
        self._disabled_lowering = options.disabled_lowering
        self.lowering_note.setText("Built without the lowering passes switched off in the "
                                   "Passes panel: " + ", ".join(sorted(options.disabled_lowering)))
        self.lowering_note.setVisible(bool(options.disabled_lowering))

    def options(self) -> ExportOptions:
        """The options as entered; raises ValueError with a one-line reason when invalid."""
        name = self.name.text().strip()
        if not name.isidentifier():
            raise ValueError("The network name must be a C identifier (letters, digits, _).")
        folder = self.folder.text().strip()
        if not folder:
            raise ValueError("Choose an output folder.")
        return ExportOptions(self.target.currentText(), self.board.currentData(), name,
                             self.weights.currentData(), self.io_in_arena.isChecked(),
                             Path(folder).expanduser(), self.precision.currentData(),
                             count=self.count.isChecked() and self.count.isEnabled(),
                             disabled_lowering=self._disabled_lowering,
                             weight_layout=self.layout.currentData())

    def request_export(self) -> None:
        """Validate and ask the controller to export."""
        try:
            options = self.options()
        except ValueError as exc:
            self.show_error(str(exc))
            return
        self.error.hide()
        self.exportRequested.emit(options)

    # -- running --------------------------------------------------------------------------------

    def set_running(self, running: bool) -> None:
        """Show progress and turn Cancel into "cancel the export" while a job runs."""
        self._running = running
        self.progress.setVisible(running)
        self.export_button.setEnabled(not running)
        for widget in (self.target, self.board, self.name, self.weights, self.io_in_arena,
                       self.layout, self.precision, self.count, self.folder, self.browse):
            widget.setEnabled(not running)
        self.cancel_button.setText("Cancel Export" if running else "Cancel")
        self._update_applicable()
        if running:
            self.progress.setValue(0)
            self.show_page(0)

    def is_running(self) -> bool:
        """True while an export job runs."""
        return self._running

    def set_progress(self, fraction: float, text: str) -> None:
        """Progress of the running export."""
        self.progress.setValue(round(1000 * fraction))
        self.status.setText(text)

    def show_error(self, message: str) -> None:
        """A one-line error under the options."""
        self.set_running(False)
        self.show_page(0)
        self.status.setText("")
        self.error.setText(message)
        self.error.show()

    def show_note(self, text: str) -> None:
        """A line beside the buttons (an export the user declined, for one)."""
        self.error.hide()
        self.status.setText(text)

    def show_cancelled(self, why: str = "") -> None:
        """The export was cancelled (`why`, when not by the user); nothing was written."""
        self.set_running(False)
        self.status.setText(f"Export cancelled{why}: nothing was written.")

    def _cancel_or_close(self) -> None:
        if self._running:
            self.cancelRequested.emit()
        else:
            self.reject()

    # -- result page ----------------------------------------------------------------------------

    def _result_page(self) -> QWidget:
        page = QWidget()
        self.written = QLabel()
        self.written.setWordWrap(True)
        self.written.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.precision_label = QLabel()
        self.report_view = SizeReport()
        self.comparison = ComparisonTable()
        self.command_line = QLineEdit()
        self.command_line.setReadOnly(True)
        self.command_line.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.open_button = QPushButton("Open Folder")
        self.open_button.clicked.connect(self.open_folder)
        self.copy_button = QPushButton("Copy Build Command")
        self.copy_button.clicked.connect(self.copy_command)
        back = QPushButton("Change Options…")
        back.clicked.connect(lambda: self.show_page(0))
        close = QPushButton("Close")
        close.clicked.connect(self.accept)
        buttons = QHBoxLayout()
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.copy_button)
        buttons.addStretch(1)
        buttons.addWidget(back)
        buttons.addWidget(close)
        command_row = QHBoxLayout()
        command_row.addWidget(QLabel("Build:"))
        command_row.addWidget(self.command_line, 1)
        self.rebuild_line = QLineEdit()
        self.rebuild_line.setReadOnly(True)
        self.rebuild_line.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.copy_rebuild = QPushButton("Copy")
        self.copy_rebuild.setToolTip("Copy the command a CI job rebuilds this bundle with")
        self.copy_rebuild.clicked.connect(
            lambda: QGuiApplication.clipboard().setText(self.rebuild_line.text()))
        rebuild_row = QHBoxLayout()
        rebuild_row.addWidget(QLabel("Rebuild in CI:"))
        rebuild_row.addWidget(self.rebuild_line, 1)
        rebuild_row.addWidget(self.copy_rebuild)
        self.fallback_label = QLabel()
        self.fallback_label.setWordWrap(True)
        self.fallback_label.setObjectName("warning")
        # Dark red on the dialog's light grey: readable, and as loud as the over-budget line.
        self.fallback_label.setStyleSheet(f"color: {style.PROBLEM}; font-weight: bold;")
        # The report scrolls; the build command and the buttons stay in view. An int8 report
        # (comparison, layers, sections) is taller than many screens.
        content = QWidget()
        inner = QVBoxLayout(content)
        inner.setContentsMargins(0, 0, 0, 0)
        inner.addWidget(self.written)
        inner.addWidget(self.fallback_label)
        inner.addWidget(self.precision_label)
        inner.addWidget(self.comparison)
        inner.addWidget(self.report_view, 1)
        self.result_scroll = QScrollArea()
        self.result_scroll.setWidget(content)
        self.result_scroll.setWidgetResizable(True)
        self.result_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.result_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        column = QVBoxLayout(page)
        column.addWidget(self.result_scroll, 1)
        column.addLayout(command_row)
        column.addLayout(rebuild_row)
        column.addLayout(buttons)
        return page

    def show_result(self, report: dict, folder: Path, files: list[Path], command: str,
                    float_report: dict | None = None,
                    counts: dict[str, int] | None = None, precision: str = "float32",
                    rebuild: str = "", fallbacks: list[tuple[str, int]] | None = None
                    ) -> None:
        """Switch to the result page for a bundle written to `folder`.

        With `float_report` (an int8 export), float and int8 sizes side by side first; with
        `counts` (precision -> instructions of one inference under QEMU), those too.
        `precision` is what was compiled ("float32" or "int8"); `rebuild` the `kiln compile
        --build` command that writes the same bundle; `fallbacks` the (layer, float weight
        bytes) an int8 model left in float, shown as a warning.
        """
        self.set_running(False)
        self.comparison.set_reports(float_report, report, counts)
        for table in (self.comparison.table, self.comparison.layers):
            # In the scroll area a table would take its generic preferred height: keep it to
            # the rows it has, so the size report follows right under it.
            table.setMaximumHeight(table.minimumHeight())
        self.status.setText("")
        self.folder_path = Path(folder)
        self.command = command
        counted = "".join(f"; one {label} inference: {n:,} instructions under QEMU"
                          for label, n in (counts or {}).items())
        self.written.setText(f"Wrote {len(files)} files to {folder}: "
                             + ", ".join(p.name for p in files) + counted)
        self.precision_label.setText(f"Precision: {PRECISIONS.get(precision, precision)}")
        self.report_view.set_report(report)
        self.command_line.setText(command)
        self.command_line.setCursorPosition(0)
        self.command_line.setToolTip(command)
        self.rebuild_line.setText(rebuild)
        self.rebuild_line.setCursorPosition(0)
        self.rebuild_line.setToolTip(rebuild)
        self.fallback_label.setText(fallback_text(fallbacks or []))
        self.fallback_label.setVisible(bool(fallbacks))
        self.copy_button.setText("Copy Build Command")
        self.show_page(1)
        self._fit_result()

    def _fit_result(self) -> None:
        """Grow to the result page's size, never past the screen (the report scrolls)."""
        width, height = RESULT_SIZE
        wanted = QSize(max(self.width(), width), max(self.height(), height))
        # Its frame and the desktop's panels included: the buttons stay on the screen.
        self.resize(screen_fit.fitted_size(wanted, screen_fit.room(self), self.minimumSize()))
        if self.isVisible():
            screen_fit.fit_window(self)

    def folder_url(self) -> QUrl:
        """The URL "Open Folder" opens."""
        return QUrl.fromLocalFile(str(self.folder_path or ""))

    def open_folder(self) -> bool:
        """Show the bundle folder in the desktop's file manager."""
        return bool(self.folder_path) and QDesktopServices.openUrl(self.folder_url())

    def copy_command(self) -> None:
        """Put the build command on the clipboard."""
        QGuiApplication.clipboard().setText(self.command)
        self.copy_button.setText("Copied")
