"""Quantize > Calibrate...: which samples, how to normalize images, which method and schema.

The choices become a `CalibrationRequest`; the quantization controller runs the profile in a
worker. For the bundled sample the digits set is preselected (its training split to calibrate,
its test split, with labels, to measure). The dialog says what the model's input expects and
shows the first sample of the chosen source (read by a function the controller hands it, so
the dialog reads no file itself); an empty or unfitting source keeps it open with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.window import settings
from compiler.errors import KilnError, one_line
from compiler.ir.graph import Graph
from compiler.quant.calibrate import METHODS, SCHEMAS
from compiler.quant.calibration_data import InputSpec, Normalization, input_spec
from compiler.quant.calibration_preview import Preview, preview_calibration
from compiler.quant.histogram import DEFAULT_BINS
from views import style

Previewer = Callable[[str, Normalization], Preview]  # KilnError when the source does not fit
THUMBNAIL = 64  # pixels: the preview image's longest side


@dataclass(frozen=True)
class CalibrationRequest:
    """What the dialog asks for."""

    data: str
    evaluate: str  # "" : the calibration samples themselves
    normalization: Normalization
    method: str = "minmax"
    schema: str = "tflite"
    bins: int = DEFAULT_BINS
    samples: int = 100  # how many samples the live evaluation uses


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(part) for part in text.split(",") if part.strip())


class CalibrateDialog(QDialog):
    """The form; `request()` reads it.

    `spec` is the model input the samples must fit and `preview` reads a source's first
    sample; `folder` is where the file pickers start when the fields name no file. With
    `remember`, an accepted form's sources and folder are kept for the next dialog.
    """

    def __init__(self, parent: QWidget | None, data: str = "", evaluate: str = "", *,
                 spec: InputSpec | None = None, preview: Previewer | None = None,
                 folder: str = "", remember: bool = False):
        super().__init__(parent)
        self.setWindowTitle("Calibrate")
        self.setMinimumWidth(520)
        self.previewer, self.folder, self.remember = preview, folder, remember
        self.unusable = ""  # why no samples can feed this model, if so
        self.data = QLineEdit(data)
        self.data.setPlaceholderText("folder of .npy or images, .npz, .npy, or digits:train")
        self.data.setToolTip("Labels give the accuracy: a folder of class folders (classes "
                             "sorted by name), an .npz with arrays x and y, or labels.npy "
                             "beside the .npy samples")
        self.evaluate = QLineEdit(evaluate)
        self.evaluate.setPlaceholderText("empty: the calibration samples")
        self.expects = QLabel(_expects(spec) if spec is not None else "unknown")
        self.expects.setWordWrap(True)
        self.preview_text = QLabel()
        self.preview_text.setWordWrap(True)
        self.preview_text.setStyleSheet(f"color: {style.TEXT_MUTED};")
        self.preview_image = QLabel()
        self.preview_image.setFixedSize(THUMBNAIL, THUMBNAIL)
        self.preview_text.setMinimumHeight(THUMBNAIL)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet(f"color: {style.PROBLEM};")
        # The preview and the error keep their room while empty or hidden: the buttons stay
        # where the pointer is when a preview or a message appears.
        for label in (self.preview_image, self.error):
            policy = label.sizePolicy()
            policy.setRetainSizeWhenHidden(True)
            label.setSizePolicy(policy)
        self.error.setMinimumHeight(2 * self.error.fontMetrics().lineSpacing())
        self.preview_image.hide()
        self.error.hide()
        self.method = QComboBox()
        self.method.addItems(METHODS)
        self.schema = QComboBox()
        self.schema.addItems(SCHEMAS)
        self.bins = QSpinBox()
        self.bins.setRange(16, 65536)
        self.bins.setValue(DEFAULT_BINS)
        self.samples = QSpinBox()
        self.samples.setRange(1, 100000)
        self.samples.setValue(100)
        self.scale = QDoubleSpinBox()
        self.scale.setDecimals(6)
        self.scale.setRange(1e-6, 1e6)
        self.scale.setValue(1 / 255)
        self.mean, self.std = QLineEdit("0"), QLineEdit("1")
        self.channels = QComboBox()
        self.channels.addItems(["rgb", "bgr", "gray"])
        form = QFormLayout()
        form.addRow("Model input:", self.expects)
        form.addRow("Calibration data:", self._with_browse(self.data))
        preview = QHBoxLayout()
        preview.addWidget(self.preview_image)
        preview.addWidget(self.preview_text, 1)
        form.addRow("", preview)
        form.addRow("Evaluate on:", self._with_browse(self.evaluate))
        form.addRow("Method:", self.method)
        form.addRow("Schema:", self.schema)
        form.addRow("Histogram bins:", self.bins)
        form.addRow("Samples evaluated live:", self.samples)
        images = QGroupBox("Images (PNG, JPEG)")
        image_form = QFormLayout(images)
        image_form.addRow("Pixel (0..255) times:", self.scale)
        image_form.addRow("Mean (per channel):", self.mean)
        image_form.addRow("Std (per channel):", self.std)
        image_form.addRow("Channel order:", self.channels)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Calibrate")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(images)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        self.data.editingFinished.connect(self.show_preview)
        for edit in (self.mean, self.std):  # they change how images read
            edit.editingFinished.connect(self.show_preview)
        self.scale.editingFinished.connect(self.show_preview)
        self.channels.activated.connect(lambda _i: self.show_preview())
        if data:
            self.show_preview()

    @classmethod
    def for_graph(cls, parent: QWidget | None, graph: Graph, sample: bool,
                  remember: bool) -> CalibrateDialog:
        """The dialog for `graph`: its input described and previewed, the last sources filled.

        With nothing remembered, the bundled `sample` gets its digits. A model calibration
        data cannot feed (several inputs) gets a dialog that says why and never accepts.
        """
        data, evaluate, folder = settings.calibration_sources() if remember else ("", "", "")
        if not data and sample:
            data, evaluate = "digits:train", "digits:test"
        try:
            spec = input_spec(graph)
        except KilnError as exc:
            dialog = cls(parent, data, evaluate, folder=folder, remember=remember)
            dialog.unusable = str(exc)
            dialog._refuse(dialog.unusable)
            return dialog
        return cls(parent, data, evaluate, spec=spec, folder=folder, remember=remember,
                   preview=lambda text, norm: preview_calibration(text, graph, norm))

    def _with_browse(self, edit: QLineEdit) -> QWidget:
        row = QWidget()
        box = QHBoxLayout(row)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(edit, 1)
        for text, pick in (("File…", self._pick_file), ("Folder…", self._pick_folder)):
            button = QPushButton(text)
            button.clicked.connect(lambda _=False, e=edit, p=pick: p(e))
            box.addWidget(button)
        return row

    def _start_folder(self, edit: QLineEdit) -> str:
        """Where a picker opens: beside the source the field names, else the last folder."""
        text = edit.text().strip()
        if text and Path(text).exists():
            return str(Path(text).parent)
        return self.folder

    def _pick_file(self, edit: QLineEdit) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Samples", self._start_folder(edit),
                                              "Samples (*.npy *.npz)")
        self._picked(edit, path)

    def _pick_folder(self, edit: QLineEdit) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder of samples",
                                                self._start_folder(edit))
        self._picked(edit, path)

    def _picked(self, edit: QLineEdit, path: str) -> None:
        if not path:
            return
        edit.setText(path)
        self.folder = str(Path(path).parent)
        if edit is self.data:
            self.show_preview()

    def show_preview(self) -> bool:
        """Show the first sample of the calibration data; False (and why) if it does not fit."""
        self.preview_image.hide()
        text = self.data.text().strip()
        if self.previewer is None or not text:
            self.preview_text.clear()
            return True
        try:
            preview = self.previewer(text, self.normalization())
        except (KilnError, OSError, ValueError) as exc:
            self.preview_text.clear()
            self._refuse(str(exc))
            return False
        self.error.hide()
        self.preview_text.setText(preview.describe())
        picture = preview.image()
        if picture is not None:
            self.preview_image.setPixmap(_thumbnail(picture))
            self.preview_image.show()
        return True

    def _refuse(self, message: str) -> None:
        self.error.setText(one_line(message))
        self.error.show()

    def accept(self) -> None:  # noqa: D102 (Qt override: refuses a form it cannot run)
        if self.unusable:
            self._refuse(self.unusable)
            return
        if not self.data.text().strip():
            self._refuse("Choose the calibration data: a folder of samples, an .npz or .npy "
                         "file, or digits:train.")
            self.data.setFocus()
            return
        try:
            self.normalization()
        except ValueError:
            self._refuse(f"Mean and std take numbers separated by commas, not "
                         f"{self.mean.text()!r} and {self.std.text()!r}.")
            return
        if not self.show_preview():
            self.data.setFocus()
            return
        if self.remember:
            settings.remember_calibration_sources(self.data.text().strip(),
                                                  self.evaluate.text().strip(), self.folder)
        super().accept()

    def normalization(self) -> Normalization:
        """How images become input values (ValueError for a mean or std that is not numbers)."""
        return Normalization(self.scale.value(), _floats(self.mean.text()) or (0.0,),
                             _floats(self.std.text()) or (1.0,), self.channels.currentText())

    def request(self) -> CalibrationRequest:
        """The choices (ValueError for a mean or std that is not numbers)."""
        return CalibrationRequest(self.data.text().strip(), self.evaluate.text().strip(),
                                  self.normalization(), self.method.currentText(),
                                  self.schema.currentText(), self.bins.value(),
                                  self.samples.value())


def _expects(spec: InputSpec) -> str:
    """What the samples must be, in the model input's own terms."""
    layout = f", layout {spec.layout}" if spec.layout else ""
    sample = list(spec.sample_shape)
    return (f"{spec.name}: shape {list(spec.shape)}{layout}, {spec.dtype} (each .npy one "
            f"sample {sample} or a stack [N, {', '.join(map(str, sample))}])")


def _thumbnail(picture) -> QPixmap:
    """An 8-bit [H, W, 1 or 3] array as a pixmap, its pixels kept sharp when enlarged."""
    height, width, channels = picture.shape
    kind = QImage.Format.Format_Grayscale8 if channels == 1 else QImage.Format.Format_RGB888
    raw = picture.tobytes()  # alive until the copy: QImage only points at it
    image = QImage(raw, width, height, width * channels, kind).copy()
    return QPixmap.fromImage(image).scaled(THUMBNAIL, THUMBNAIL,
                                           Qt.AspectRatioMode.KeepAspectRatio,
                                           Qt.TransformationMode.FastTransformation)
