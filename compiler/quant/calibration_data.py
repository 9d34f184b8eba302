"""Calibration samples for profiling a float model: .npy files, an .npz, images, or digits.

Every source becomes one array of samples shaped like the model's single input, batch axis
first ([N, *input shape without its batch]). Accepted sources:
- a folder of .npy files, each one sample (with or without a batch axis of 1) or a stack;
- an .npz file, each array one sample or a stack;
- a folder of images (PNG, JPEG), resized to the input's spatial size and normalized as the
  caller states (`Normalization`: scale, mean, std, channel order, element type);
- `digits`, `digits:train` or `digits:test`: the UCI 8x8 digits (as scikit-learn ships them)
  scaled to [0, 1], split as the bundled sample CNN was trained (a quarter held out, seed 0).
A sample that does not fit the input is a KilnError naming the file and the shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.errors import KilnError
from compiler.ir.graph import Graph

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
DIGITS_TEST_SIZE, DIGITS_SPLIT_SEED = 0.25, 0
DIGITS_FILE = Path(__file__).with_name("digits.npz")


@dataclass(frozen=True)
class Normalization:
    """How image pixels (0..255) become the model's input: (pixel * scale - mean) / std.

    `channels` is "rgb", "bgr" or "gray"; `dtype` the input's element type ("float32" keeps
    the normalized value, "uint8"/"int8" round and saturate it).
    """

    scale: float = 1.0 / 255.0
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    channels: str = "rgb"


@dataclass(frozen=True)
class CalibrationData:
    """Samples for one model input, and where they came from (recorded in the profile)."""

    input_name: str
    samples: np.ndarray  # [N, *input shape[1:]]
    source: str
    labels: np.ndarray | None = None  # the class of each sample, when the source knows it

    def __len__(self) -> int:
        return int(self.samples.shape[0])

    def feeds(self, start: int, stop: int) -> list[dict[str, np.ndarray]]:
        """One feed dict per sample in [start, stop), each shaped like the input (batch 1)."""
        return [{self.input_name: self.samples[i:i + 1]} for i in range(start, stop)]


def load_calibration(source: str | Path, graph: Graph,
                     normalization: Normalization | None = None) -> CalibrationData:
    """The samples of `source` for `graph`'s input (KilnError naming the file otherwise)."""
    if len(graph.inputs) != 1:
        raise KilnError(f"calibration data feeds one input; the model has {len(graph.inputs)}")
    value = graph.inputs[0]
    shape, dtype = tuple(value.type.shape), value.type.dtype
    text = str(source)
    labels = None
    if text.split(":")[0] == "digits":
        samples, labels = _digits(text, shape)
    else:
        path = Path(source)
        if not path.exists():
            raise KilnError(f"{path}: no such file or folder")
        if path.is_dir():
            samples = _folder(path, shape, dtype, normalization or Normalization())
        elif path.suffix.lower() == ".npz":
            samples = _npz(path, shape, dtype)
        elif path.suffix.lower() == ".npy":
            samples = _fit(_read_npy(path), shape, dtype, path.name)
        else:
            raise KilnError(f"{path}: calibration data is a folder of .npy files or images, an "
                            ".npz or .npy file, or 'digits'")
    if samples.shape[0] == 0:
        raise KilnError(f"{text}: no samples found")
    return CalibrationData(value.name, np.ascontiguousarray(samples), text, labels)


def _read_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise KilnError(f"{path}: not a readable .npy file ({exc})") from None


def _fit(array: np.ndarray, shape: tuple[int, ...], dtype: str, where: str) -> np.ndarray:
    """`array` as a stack of samples for an input of `shape` and `dtype`."""
    sample = shape[1:] if shape and shape[0] == 1 else shape
    if tuple(array.shape) == tuple(shape) or tuple(array.shape) == tuple(sample):
        array = array.reshape((1, *sample))
    elif tuple(array.shape[1:]) != tuple(sample):
        raise KilnError(f"{where}: shape {list(array.shape)} fits neither the input "
                        f"{list(shape)} nor a stack of it")
    if array.dtype.kind not in "fiu" or (dtype.startswith(("int", "uint"))
                                         and array.dtype.kind == "f"):
        raise KilnError(f"{where}: element type {array.dtype} does not fit the input's {dtype}")
    return array.astype(dtype)


def _npz(path: Path, shape, dtype) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as archive:
            parts = [_fit(archive[name], shape, dtype, f"{path.name}[{name}]")
                     for name in sorted(archive.files)]
    except (OSError, ValueError) as exc:
        raise KilnError(f"{path}: not a readable .npz file ({exc})") from None
    return np.concatenate(parts) if parts else np.zeros((0, *shape[1:]), dtype)


def _folder(path: Path, shape, dtype, normalization: Normalization) -> np.ndarray:
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".npy", *IMAGE_SUFFIXES))
    if not files:
        raise KilnError(f"{path}: holds no .npy file and no image")
    parts = []
    for file in files:
        if file.suffix.lower() == ".npy":
            parts.append(_fit(_read_npy(file), shape, dtype, file.name))
        else:
            parts.append(_image(file, shape, dtype, normalization))
    return np.concatenate(parts)


def _image(path: Path, shape, dtype, norm: Normalization) -> np.ndarray:
    """One image resized to the input and normalized; NCHW or NHWC by where the channels are."""
    from PIL import Image, UnidentifiedImageError

    if len(shape) != 4:
        raise KilnError(f"{path.name}: images feed a 4-D input; this one is {list(shape)}")
    channels_first = shape[1] in (1, 3) and shape[3] not in (1, 3)
    channels = shape[1] if channels_first else shape[3]
    height, width = (shape[2], shape[3]) if channels_first else (shape[1], shape[2])
    try:
        with Image.open(path) as image:
            image = image.convert("L" if channels == 1 else "RGB").resize(
                (width, height), Image.BILINEAR)
            pixels = np.asarray(image, np.float32).reshape(height, width, channels)
    except (OSError, UnidentifiedImageError) as exc:
        raise KilnError(f"{path.name}: not a readable image ({exc})") from None
    if norm.channels == "bgr" and channels == 3:
        pixels = pixels[..., ::-1]
    values = (pixels * np.float32(norm.scale) - np.asarray(norm.mean, np.float32)) \
        / np.asarray(norm.std, np.float32)
    if channels_first:
        values = values.transpose(2, 0, 1)
    if dtype != "float32":
        info = np.iinfo(dtype)
        values = np.clip(np.rint(values), info.min, info.max)
    return values.astype(dtype)[None]


def digits(part: str = "") -> tuple[np.ndarray, np.ndarray]:
    """The 8x8 digits as float32 [N, 1, 8, 8] in [0, 1], and their int64 labels.

    The whole set (""), or the sample CNN's "train" or "test" split: the data its training
    script (tools/train_digits_cnn.py) learns from and is measured on, stored in digits.npz
    (written by tools/write_digits_data.py from scikit-learn's copy).
    """
    with np.load(DIGITS_FILE) as data:
        order = data[part] if part else slice(None)
        images = data["images"][order].astype(np.float32) / np.float32(16.0)
        labels = data["labels"][order].astype(np.int64)
    return images.reshape(-1, 1, 8, 8), labels


def _digits(source: str, shape) -> tuple[np.ndarray, np.ndarray]:
    """`digits` of a source named 'digits', 'digits:train' or 'digits:test', fitted."""
    part = source.split(":", 1)[1] if ":" in source else ""
    if part not in ("", "train", "test"):
        raise KilnError(f"{source}: the digits data is 'digits', 'digits:train' or "
                        "'digits:test'")
    images, labels = digits(part)
    return _fit(images, shape, "float32", source), labels
