"""One sample of a calibration source, read cheaply, so the Calibrate dialog can show it.

Reading a whole folder of images takes as long as calibrating; the dialog wants to say at
once whether a source fits the model, so this reads only its first sample (a memory-mapped
slice of a stacked .npy) and says where its labels would come from without reading them
all: `load_calibration` still checks every sample and label when the calibration runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.quant.calibration_data import (
    LABELS_FILE,
    InputSpec,
    Normalization,
    class_folders,
    existing,
    fit,
    input_spec,
    load_calibration,
    read_sample,
    sample_files,
)


@dataclass(frozen=True)
class Preview:
    """The first sample of a source, as the model's input gets it, and its labels' origin."""

    spec: InputSpec
    sample: np.ndarray  # one sample, [1, *input shape[1:]]
    labels: str  # where the labels come from ("" when the source has none)

    def describe(self) -> str:
        """One line: the sample's shape, type and range, and whether labels were found.

        A sample whose every value is the same (an all-zero file) gets a warning: ranges
        calibrated on such data clip every real input.
        """
        s = self.sample
        low, high = (float(s.min()), float(s.max())) if s.size else (0.0, 0.0)
        labels = f"labels: {self.labels}" if self.labels else "no labels (no accuracy)"
        flat = (f"; warning: every value is {low:.4g}, so ranges calibrated on it will clip "
                f"real inputs") if s.size and low == high else ""
        return (f"First sample: {list(s.shape)} {s.dtype}, min {low:.4g}, max {high:.4g}; "
                f"{labels}{flat}")

    def image(self) -> np.ndarray | None:
        """The sample as an 8-bit [H, W, C] picture (C 1 or 3), stretched to its own range.

        None when the input is not a one- or three-channel image.
        """
        layout, s = self.spec.layout, self.sample
        if not layout or s.ndim != 4:
            return None
        pixels = s[0].transpose(1, 2, 0) if layout == "NCHW" else s[0]
        if pixels.shape[2] not in (1, 3):
            return None
        pixels = pixels.astype(np.float64)
        low, high = float(pixels.min()), float(pixels.max())
        scaled = (pixels - low) * (255.0 / (high - low)) if high > low else pixels * 0
        return np.ascontiguousarray(np.clip(np.rint(scaled), 0, 255).astype(np.uint8))


def preview_calibration(source: str | Path, graph: Graph,
                        normalization: Normalization | None = None) -> Preview:
    """The first sample of `source` for `graph`'s input (KilnError naming the file otherwise)."""
    spec = input_spec(graph)
    norm = normalization or Normalization()
    text = str(source).strip()
    if text.split(":")[0] == "digits":
        data = load_calibration(text, graph)  # 1,797 tiny images: cheap
        return Preview(spec, data.samples[:1], "the digits' classes")
    path = existing(text)
    if path.is_dir():
        return _folder(path, spec, norm)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return _npz(path, spec)
    if suffix == ".npy":
        return Preview(spec, read_sample(path, spec, norm, path.name, first_only=True)[:1], "")
    raise KilnError(f"{path}: calibration data is a folder of .npy files or images, an .npz or "
                    ".npy file, or 'digits'")


def _folder(path: Path, spec: InputSpec, norm: Normalization) -> Preview:
    files = sample_files(path)
    if files:
        labels = LABELS_FILE if (path / LABELS_FILE).is_file() else ""
        return Preview(spec, read_sample(files[0], spec, norm, files[0].name, True)[:1], labels)
    classes = class_folders(path)
    for folder in classes:
        inside = sample_files(folder)
        if inside:
            names = ", ".join(c.name for c in classes[:3]) + (", …" if len(classes) > 3 else "")
            first = read_sample(inside[0], spec, norm, f"{folder.name}/{inside[0].name}", True)
            return Preview(spec, first[:1], f"{len(classes)} class folders ({names})")
    raise KilnError(f"{path}: holds no .npy file and no image, nor class folders of them")


def _npz(path: Path, spec: InputSpec) -> Preview:
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = sorted(archive.files)
            if not names:
                raise KilnError(f"{path}: holds no array")
            labelled = "x" in names and "y" in names
            name = "x" if labelled else names[0]
            sample = fit(archive[name], spec, f"{path.name}[{name}]")[:1]
    except (OSError, ValueError) as exc:
        raise KilnError(f"{path}: not a readable .npz file ({exc})") from None
    return Preview(spec, sample, "array y" if labelled else "")

