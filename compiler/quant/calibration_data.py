"""Calibration samples for a float model, with their labels when the source knows them.

Every source becomes one array of samples shaped like the model's single input, batch axis
first ([N, *input shape without its batch]), and, when it says each sample's class, one int64
label per sample, so the workbench and `kiln quantize --report` can show accuracy. Sources:
- a folder of .npy files, each one sample (with or without a batch axis of 1) or a stack, and
  optionally `labels.npy` beside them: one class per sample, in the files' name order;
- a folder of class folders (`cat/`, `dog/`, ...) holding .npy samples or images: the classes
  sorted by name are labels 0, 1, ... (torchvision's ImageFolder numbers them the same way);
- an .npz file: arrays `x` (the samples) and `y` (their labels), or else each array one sample
  or a stack, unlabelled;
- a folder of images (PNG, JPEG), resized to the input's spatial size, normalized as the
  caller states (`Normalization`) and laid out as the model's input is (NCHW or NHWC);
- `digits`, `digits:train` or `digits:test`: the UCI 8x8 digits (as scikit-learn ships them)
  scaled to [0, 1], split as the bundled sample CNN was trained (a quarter held out, seed 0).
A sample that does not fit the input, or labels that do not fit the samples (wrong count, not
whole numbers, not a class of the model's output), is a KilnError naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.ops import registry

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
LABELS_FILE = "labels.npy"
DIGITS_TEST_SIZE, DIGITS_SPLIT_SEED = 0.25, 0
DIGITS_FILE = Path(__file__).with_name("digits.npz")


@dataclass(frozen=True)
class Normalization:
    """How image pixels (0..255) become the model's input: (pixel * scale - mean) / std.

    `channels` is "rgb", "bgr" or "gray"; an integer input rounds and saturates the value.
    """

    scale: float = 1.0 / 255.0
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    channels: str = "rgb"


@dataclass(frozen=True)
class InputSpec:
    """What a sample must be: the model input's name, shape, element type and layout.

    `classes` is the size of the first output, whose arg-max the accuracy compares with a
    label (None when the output has a single element: nothing to classify).
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    layout: str  # "NCHW" or "NHWC" for a 4-D input, "" otherwise
    classes: int | None = None

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """One sample's shape: the input's without a batch axis of 1."""
        return self.shape[1:] if self.shape and self.shape[0] == 1 else self.shape

    def describe(self) -> str:
        """E.g. "image [1, 1, 8, 8] NCHW float32", for the dialog and messages."""
        layout = f" {self.layout}" if self.layout else ""
        return f"{self.name} {list(self.shape)}{layout} {self.dtype}"


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


def input_spec(graph: Graph) -> InputSpec:
    """The single input calibration data feeds (KilnError for a model with several)."""
    if len(graph.inputs) != 1:
        raise KilnError(f"calibration data feeds one input; the model has {len(graph.inputs)}")
    value = graph.inputs[0]
    shape = tuple(int(d) for d in value.type.shape)
    classes = None
    if graph.outputs:
        size = int(np.prod(graph.outputs[0].type.shape, dtype=np.int64))
        classes = size if size > 1 else None
    return InputSpec(value.name, shape, value.type.dtype, _layout(graph, shape), classes)


def _layout(graph: Graph, shape: tuple[int, ...]) -> str:
    """NCHW or NHWC as the operators reading a 4-D input say; guessed from the shape otherwise.

    ONNX convolutions read NCHW; tf2onnx models keep an NHWC input and transpose it (perm
    0,3,1,2) first. Shape-keeping operators in between (a Cast, a normalizing Mul) are looked
    through; with no such reader, 1 or 3 channels on axis 1 mean NCHW.
    """
    if len(shape) != 4:
        return ""
    frontier, seen = [graph.inputs[0]], 0
    while frontier and seen < 16:  # the first few readers decide; a big graph is not walked
        value = frontier.pop(0)
        for node, _ in graph.users(value):
            seen += 1
            perm = tuple(node.attrs.get("perm") or ()) if node.op == "Transpose" else ()
            if perm in ((0, 3, 1, 2), (0, 2, 3, 1)):
                return "NHWC" if perm == (0, 3, 1, 2) else "NCHW"
            opdef = registry.get(node.op)
            if opdef is not None and opdef.spatial:
                return str(node.attrs.get("layout", "NCHW"))
            frontier += [v for v in node.outputs if tuple(v.type.shape) == shape]
    return "NCHW" if shape[1] in (1, 3) and shape[3] not in (1, 3) else "NHWC"


def load_calibration(source: str | Path, graph: Graph,
                     normalization: Normalization | None = None) -> CalibrationData:
    """The samples of `source` for `graph`'s input (KilnError naming the file otherwise)."""
    spec = input_spec(graph)
    text = str(source)
    norm = normalization or Normalization()
    if text.split(":")[0] == "digits":
        samples, labels = _digits(text, spec)
    else:
        path = existing(source)
        if path.is_dir():
            samples, labels = _folder(path, spec, norm)
        elif path.suffix.lower() == ".npz":
            samples, labels = _npz(path, spec)
        elif path.suffix.lower() == ".npy":
            samples, labels = fit(read_npy(path), spec, path.name), None
        else:
            raise KilnError(f"{path}: calibration data is a folder of .npy files or images, an "
                            ".npz or .npy file, or 'digits'")
    if samples.shape[0] == 0:
        raise KilnError(f"{text}: no samples found")
    return CalibrationData(spec.name, np.ascontiguousarray(samples), text, labels)


def existing(source: str | Path) -> Path:
    """`source` as a path that exists (KilnError otherwise)."""
    path = Path(source)
    if not path.exists():
        raise KilnError(f"{path}: no such file or folder")
    return path


def read_npy(path: Path, mmap: bool = False) -> np.ndarray:
    """One .npy array (memory-mapped when only a slice of it will be read)."""
    try:
        return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except (OSError, ValueError) as exc:
        raise KilnError(f"{path}: not a readable .npy file ({exc})") from None


def fit(array: np.ndarray, spec: InputSpec, where: str) -> np.ndarray:
    """`array` as a stack of samples for the input `spec` describes."""
    shape, sample = spec.shape, spec.sample_shape
    if tuple(array.shape) == tuple(shape) or tuple(array.shape) == tuple(sample):
        array = array.reshape((1, *sample))
    elif tuple(array.shape[1:]) != tuple(sample):
        raise KilnError(f"{where}: shape {list(array.shape)} fits neither the input "
                        f"{list(shape)} nor a stack of it")
    if array.dtype.kind not in "fiu" or (spec.dtype.startswith(("int", "uint"))
                                         and array.dtype.kind == "f"):
        raise KilnError(f"{where}: element type {array.dtype} does not fit the input's "
                        f"{spec.dtype}")
    return array.astype(spec.dtype)


def labels_of(array: np.ndarray, count: int, spec: InputSpec, where: str) -> np.ndarray:
    """`array` as one int64 class per sample, checked against `count` samples and the model."""
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise KilnError(f"{where}: labels are one class number per sample, not an array of "
                        f"shape {list(array.shape)}")
    if array.dtype.kind not in "iuf":
        raise KilnError(f"{where}: labels are whole class numbers, not {array.dtype} values")
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array) | (array != np.round(array))
        if bad.any():
            raise KilnError(f"{where}: labels are whole class numbers, not values like "
                            f"{array[bad][0]:g}")
    if len(array) != count:
        raise KilnError(f"{where}: {len(array):,} labels for {count:,} samples")
    labels = array.astype(np.int64)
    top = spec.classes
    wrong = (labels < 0) | (labels >= top) if top else labels < 0
    if wrong.any():
        label = labels[wrong][0]
        if top:
            raise KilnError(f"{where}: label {label} is not one of the model's {top} classes "
                            f"(0 to {top - 1})")
        raise KilnError(f"{where}: label {label} is negative; classes count from 0")
    return labels


def sample_files(folder: Path) -> list[Path]:
    """The .npy files and images of `folder`, by name (not labels.npy, not hidden files)."""
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix.lower() in (".npy", *IMAGE_SUFFIXES)
                  and p.name.lower() != LABELS_FILE and not p.name.startswith("."))


def class_folders(folder: Path) -> list[Path]:
    """The subfolders of `folder`, sorted by name: class k is the k-th."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def read_sample(file: Path, spec: InputSpec, norm: Normalization, where: str,
                first_only: bool = False) -> np.ndarray:
    """The samples of one .npy file or image (only its first sample with `first_only`)."""
    if file.suffix.lower() != ".npy":
        return _image(file, spec, norm, where)
    array = read_npy(file, mmap=first_only)
    if first_only and array.ndim == len(spec.sample_shape) + 1 and array.shape[0] > 1:
        array = array[:1]  # a stack, memory-mapped: the preview reads one sample of it
    return fit(np.asarray(array), spec, where)


def _folder(path: Path, spec: InputSpec, norm: Normalization
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """A folder of samples (labels.npy beside them, or none), or of class folders."""
    files = sample_files(path)
    if files:
        samples = np.concatenate([read_sample(f, spec, norm, f.name) for f in files])
        labels_path = path / LABELS_FILE
        if not labels_path.is_file():
            return samples, None
        return samples, labels_of(read_npy(labels_path), len(samples), spec, str(labels_path))
    classes = class_folders(path)
    if not classes:
        raise KilnError(f"{path}: holds no .npy file and no image, nor class folders of them")
    if spec.classes and len(classes) > spec.classes:
        raise KilnError(f"{path}: {len(classes)} class folders, but the model tells "
                        f"{spec.classes} classes apart")
    parts, labels = [], []
    for index, folder in enumerate(classes):
        for file in sample_files(folder):
            part = read_sample(file, spec, norm, f"{folder.name}/{file.name}")
            parts.append(part)
            labels.append(np.full(len(part), index, np.int64))
    if not parts:
        raise KilnError(f"{path}: its class folders hold no .npy file and no image")
    return np.concatenate(parts), np.concatenate(labels)


def _npz(path: Path, spec: InputSpec) -> tuple[np.ndarray, np.ndarray | None]:
    """Arrays x and y (samples and labels), or else every array samples."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = sorted(archive.files)
            if "x" in names and "y" in names:
                samples = fit(archive["x"], spec, f"{path.name}[x]")
                return samples, labels_of(archive["y"], len(samples), spec,
                                          f"{path} (array y)")
            parts = [fit(archive[name], spec, f"{path.name}[{name}]") for name in names]
    except (OSError, ValueError) as exc:
        raise KilnError(f"{path}: not a readable .npz file ({exc})") from None
    return (np.concatenate(parts) if parts else np.zeros((0, *spec.sample_shape), spec.dtype),
            None)


def _image(path: Path, spec: InputSpec, norm: Normalization, where: str) -> np.ndarray:
    """One image resized to the input and normalized, in the input's layout."""
    from PIL import Image, UnidentifiedImageError

    shape, dtype = spec.shape, spec.dtype
    if len(shape) != 4:
        raise KilnError(f"{where}: images feed a 4-D input; this one is {list(shape)}")
    channels_first = spec.layout == "NCHW"
    channels = shape[1] if channels_first else shape[3]
    height, width = (shape[2], shape[3]) if channels_first else (shape[1], shape[2])
    try:
        with Image.open(path) as image:
            image = image.convert("L" if channels == 1 else "RGB").resize(
                (width, height), Image.BILINEAR)
            pixels = np.asarray(image, np.float32).reshape(height, width, channels)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise KilnError(f"{where}: not a readable image ({exc})") from None
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


def _digits(source: str, spec: InputSpec) -> tuple[np.ndarray, np.ndarray]:
    """`digits` of a source named 'digits', 'digits:train' or 'digits:test', fitted."""
    part = source.split(":", 1)[1] if ":" in source else ""
    if part not in ("", "train", "test"):
        raise KilnError(f"{source}: the digits data is 'digits', 'digits:train' or "
                        "'digits:test'")
    images, labels = digits(part)
    return fit(images, InputSpec(spec.name, spec.shape, "float32", spec.layout), source), labels
