"""Quantize > Calibrate...: which samples, how to normalize images, which method and schema.

The choices become a `CalibrationRequest`; the quantization controller runs the profile in a
worker. For the bundled sample the digits set is preselected (its training split to calibrate,
its test split, with labels, to measure).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from compiler.quant.calibrate import METHODS, SCHEMAS
from compiler.quant.calibration_data import Normalization

DEFAULT_BINS = 2048  # fine enough for the percentile, KL and MSE searches and for dragging


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
    """The form; `request()` reads it."""

    def __init__(self, parent: QWidget | None, data: str = "", evaluate: str = ""):
        super().__init__(parent)
        self.setWindowTitle("Calibrate")
        self.setMinimumWidth(520)
        self.data = QLineEdit(data)
        self.data.setPlaceholderText("folder of .npy or images, .npz, .npy, or digits:train")
        self.evaluate = QLineEdit(evaluate)
        self.evaluate.setPlaceholderText("empty: the calibration samples")
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
        form.addRow("Calibration data:", self._with_browse(self.data))
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
        layout.addWidget(self.buttons)

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

    def _pick_file(self, edit: QLineEdit) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Samples", "", "Samples (*.npy *.npz)")
        if path:
            edit.setText(path)

    def _pick_folder(self, edit: QLineEdit) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder of samples")
        if path:
            edit.setText(path)

    def request(self) -> CalibrationRequest:
        """The choices (ValueError for a mean or std that is not numbers)."""
        normalization = Normalization(self.scale.value(), _floats(self.mean.text()) or (0.0,),
                                      _floats(self.std.text()) or (1.0,),
                                      self.channels.currentText())
        return CalibrationRequest(self.data.text().strip(), self.evaluate.text().strip(),
                                  normalization, self.method.currentText(),
                                  self.schema.currentText(), self.bins.value(),
                                  self.samples.value())
