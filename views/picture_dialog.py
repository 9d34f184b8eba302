"""The Export Picture dialog: what to draw, SVG or PNG, the PNG's scale and the file.

The dialog only collects the choice and shows the outcome; the controller (app.export.picture)
draws and writes the picture.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from views import style
from views.vector_export import MAX_SCALE, MIN_SCALE

# (key, label) of what can be exported, in the order the list shows them.
SUBJECTS = (("canvas", "Canvas: the whole graph"),
            ("visible", "Canvas: the part in view"),
            ("selection", "Canvas: the selected node"),
            ("group", "Canvas: the open group around the selection"),
            ("matches", "Canvas: the search matches"),
            ("timeline", "Memory timeline"),
            ("size_report", "Size report of the last exported bundle"))
FORMATS = (("svg", "SVG (vector; text stays text)"), ("png", "PNG (pixels, at a chosen scale)"))


@dataclass(frozen=True)
class PictureRequest:
    """One export: what, as which format, the PNG scale, and the file."""

    subject: str
    format: str
    scale: float
    path: Path


class PictureDialog(QDialog):
    """Choose a view, SVG or PNG (and its scale) and a file; Export writes it."""

    exportRequested = Signal(object)  # PictureRequest

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Export Picture")
        self.subject = QComboBox()
        for key, label in SUBJECTS:
            self.subject.addItem(label, key)
        self.format = QComboBox()
        for key, label in FORMATS:
            self.format.addItem(label, key)
        self.scale = QDoubleSpinBox()
        self.scale.setRange(MIN_SCALE, MAX_SCALE)
        self.scale.setSingleStep(0.5)
        self.scale.setDecimals(1)
        self.scale.setSuffix(" ×")
        self.scale.setValue(2.0)
        self.scale.setToolTip("Device pixels per screen pixel of the PNG (2 × for print and "
                              "high-density screens)")
        self.path = QLineEdit()
        self.browse = QPushButton("Browse…")
        self.browse.clicked.connect(self._browse)
        where = QHBoxLayout()
        where.addWidget(self.path, 1)
        where.addWidget(self.browse)
        form = QFormLayout()
        form.addRow("Picture of", self.subject)
        form.addRow("Format", self.format)
        form.addRow("PNG scale", self.scale)
        form.addRow("File", where)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.export_button = QPushButton("Export")
        self.export_button.setDefault(True)
        self.export_button.clicked.connect(self._export)
        close = QPushButton("Close")
        close.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.export_button)
        buttons.addWidget(close)
        column = QVBoxLayout(self)
        column.addLayout(form)
        column.addWidget(self.message)
        column.addLayout(buttons)
        self.format.currentIndexChanged.connect(self._format_changed)
        self._format_changed()
        self.resize(560, self.sizeHint().height())

    # -- state set by the controller -------------------------------------------------------------

    def set_available(self, reasons: dict[str, str | None]) -> None:
        """Enable each subject whose reason is None; a disabled one says why in its tooltip."""
        model = self.subject.model()
        for row in range(self.subject.count()):
            reason = reasons.get(self.subject.itemData(row))
            model.item(row).setEnabled(reason is None)
            self.subject.setItemData(row, reason or "", Qt.ItemDataRole.ToolTipRole)
        if not model.item(self.subject.currentIndex()).isEnabled():
            for row in range(self.subject.count()):
                if model.item(row).isEnabled():
                    self.subject.setCurrentIndex(row)
                    break

    def choose(self, subject: str | None = None, fmt: str | None = None,
               scale: float | None = None, path: str | Path | None = None) -> None:
        """Set some of the choices (the controller's defaults; scripted screenshots)."""
        if subject is not None:
            self.subject.setCurrentIndex(self.subject.findData(subject))
        if fmt is not None:
            self.format.setCurrentIndex(self.format.findData(fmt))
        if scale is not None:
            self.scale.setValue(scale)
        if path is not None:
            self.path.setText(str(path))

    def request(self) -> PictureRequest:
        """The choices as a request; the file takes the format's suffix."""
        fmt = self.format.currentData()
        text = self.path.text().strip()
        path = Path(text).expanduser() if text else Path()
        if text and path.suffix.lower() != f".{fmt}":
            path = path.with_suffix(f".{fmt}") if path.suffix.lower() in (".svg", ".png") \
                else path.with_name(f"{path.name}.{fmt}")
        return PictureRequest(self.subject.currentData(), fmt, self.scale.value(), path)

    def show_error(self, text: str) -> None:
        """Say what went wrong (nothing was written)."""
        self.message.setStyleSheet(f"color: {style.PROBLEM};")
        self.message.setText(text)

    def show_note(self, text: str) -> None:
        """Say what happened."""
        self.message.setStyleSheet("")
        self.message.setText(text)

    # -- reactions -------------------------------------------------------------------------------

    def _format_changed(self) -> None:
        fmt = self.format.currentData()
        self.scale.setEnabled(fmt == "png")
        text = self.path.text().strip()
        if text and Path(text).suffix.lower() in (".svg", ".png"):
            self.path.setText(str(Path(text).with_suffix(f".{fmt}")))

    def _browse(self) -> None:
        fmt = self.format.currentData()
        chosen, _ = QFileDialog.getSaveFileName(
            self, "Export Picture", self.path.text(),
            "SVG pictures (*.svg)" if fmt == "svg" else "PNG pictures (*.png)")
        if chosen:
            self.path.setText(chosen)

    def _export(self) -> None:
        request = self.request()
        if not request.path.name:
            self.show_error("Choose a file to write the picture to.")
            return
        self.path.setText(str(request.path))
        self.exportRequested.emit(request)

