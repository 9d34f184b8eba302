"""One sample's activations: every value of a graph on one input, as the canvas's edges show.

The reference interpreter runs the displayed graph keeping every intermediate value. When the
model has a quantized version, its integer graph (what the int8 bundle computes) runs on the
same input, and each of its int8 tensors is paired with the float value it quantizes
(`compiler.activations.pairs`), so a value shows float, int8 dequantized and their difference.
Everything a panel shows of one value (statistics, histogram, heat maps) comes from
`activation`; `export_npy` writes the interpreter's tensor itself.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.activations.layout import channel_maps, derived_layouts, layout_of
from compiler.activations.pairs import Int8Value, dequantize, pair_int8
from compiler.errors import KilnError
from compiler.fileio import atomic_write_bytes
from compiler.inputs import random_inputs
from compiler.interpreter import run
from compiler.ir.graph import Graph
from compiler.quant.calibration_data import load_calibration
from compiler.quant.metrics import sqnr_db
from compiler.stats import TensorStats, tensor_stats

RANDOM = "random"  # the sample source of seeded random inputs (any model)


@dataclass(frozen=True)
class SampleSpec:
    """Which input to run, and the sample's index in its source (the seed for `random`).

    The source is a calibration source (`digits:test`, a .npy or .npz file, a folder) or
    `random`.
    """

    source: str
    index: int = 0

    def describe(self) -> str:
        """E.g. "digits:test #3", for the panel and messages."""
        name = Path(self.source).name if os.sep in self.source else self.source
        return f"{name} #{self.index}" if self.source != RANDOM else f"random (seed {self.index})"


def sample_feeds(graph: Graph, spec: SampleSpec) -> dict[str, np.ndarray]:
    """The graph's inputs for `spec` (KilnError naming the source when they do not fit).

    A model with several inputs takes an .npz holding one array per input name.
    """
    if spec.index < 0:
        raise KilnError(f"{spec.source}: a sample index cannot be negative")
    if spec.source == RANDOM:
        return random_inputs(graph, spec.index)
    if len(graph.inputs) != 1:
        return _named_feeds(graph, spec)
    data = load_calibration(spec.source, graph)
    if spec.index >= len(data):
        raise KilnError(f"{spec.source}: there is no sample {spec.index} (it holds "
                        f"{len(data):,} sample{'s' * (len(data) != 1)})")
    return data.feeds(spec.index, spec.index + 1)[0]


def _named_feeds(graph: Graph, spec: SampleSpec) -> dict[str, np.ndarray]:
    path = Path(spec.source)
    if path.suffix.lower() != ".npz" or not path.is_file():
        raise KilnError(f"{spec.source}: the model has {len(graph.inputs)} inputs; give an .npz "
                        f"file with one array per input name")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}
    except (OSError, ValueError) as exc:
        raise KilnError(f"{path.name}: not a readable .npz file ({exc})") from None
    feeds = {}
    for value in graph.inputs:
        if value.name not in arrays:
            raise KilnError(f"{path.name}: no array named {value.name!r} for that input")
        array, shape = arrays[value.name], value.type.shape
        if tuple(array.shape) != shape:  # a stack of samples: take the index-th
            if tuple(array.shape[1:]) != shape[1:] or spec.index >= array.shape[0]:
                raise KilnError(f"{path.name}: array {value.name!r} of shape "
                                f"{list(array.shape)} has no sample {spec.index} of shape "
                                f"{list(shape)}")
            array = array[spec.index:spec.index + 1]
        feeds[value.name] = array.astype(value.type.dtype)
    return feeds


@dataclass
class SampleRun:
    """Every value of `graph` on one sample, and the int8 values paired with them.

    Attributes:
        graph: The graph that ran (the canvas's).
        spec: The sample.
        values: Value name -> the interpreter's array (inputs, constants, every node output).
        int8: Float value name -> its int8 counterpart in the quantized model's integer graph.
        layouts: 4-D value name -> its derived layout (others are guessed by `layout_of`).
    """

    graph: Graph
    spec: SampleSpec
    values: dict[str, np.ndarray]
    int8: dict[str, Int8Value] = field(default_factory=dict)
    layouts: dict[str, str] = field(default_factory=dict)


def run_sample(graph: Graph, spec: SampleSpec, integer: Graph | None = None,
               quantized: Graph | None = None,
               check: Callable[[], None] | None = None) -> SampleRun:
    """Run `spec` through `graph`, and through `integer` when given, keeping every value.

    `integer` is the quantized model's integer graph and `quantized` the QDQ graph it was
    compiled from (its QuantizeLinear nodes name the float values). `check` is called after
    every node, so a cancelled worker stops there.
    """
    observer = (lambda _node, _arrays: check()) if check is not None else None
    feeds = sample_feeds(graph, spec)
    values = run(graph, feeds, observer=observer, keep_all=True)
    result = SampleRun(graph, spec, values, layouts=derived_layouts(graph))
    if integer is not None and quantized is not None:
        int_values = run(integer, feeds, observer=observer, keep_all=True)
        result.int8 = pair_int8(graph, quantized, integer, int_values, result.layouts)
    return result


@dataclass(frozen=True)
class Difference:
    """How far the int8 values (dequantized) are from the float ones."""

    max_abs: float
    mean_abs: float
    rmse: float
    sqnr_db: float  # infinity when they are equal


@dataclass
class Activation:
    """What the panel shows of one value.

    Attributes:
        name: The value's name.
        array: The interpreter's tensor, exactly (what `export_npy` writes).
        layout: "NCHW" or "NHWC" for a 4-D value, "" otherwise.
        maps: Heat maps [channels, rows, columns] of `array` (of its real values when it is
            quantized: `real`).
        stats: Statistics and histogram of `array`.
        real: `array` dequantized, for an int8 value with a scale and zero point.
        int8: The quantized model's counterpart, arranged as `array`.
        difference: int8 dequantized minus float, arranged as `array`.
    """

    name: str
    array: np.ndarray
    layout: str
    maps: np.ndarray
    stats: TensorStats
    real: np.ndarray | None = None
    real_stats: TensorStats | None = None
    int8: Int8Value | None = None
    int8_stats: TensorStats | None = None
    int8_maps: np.ndarray | None = None
    difference: np.ndarray | None = None
    difference_maps: np.ndarray | None = None
    error: Difference | None = None

    @property
    def channels(self) -> int:
        """Number of heat maps."""
        return int(self.maps.shape[0])


def activation(result: SampleRun, name: str, bins: int = 40) -> Activation:
    """Everything shown of value `name` of the run (KeyError when the run has no such value)."""
    array = result.values[name]
    layout = layout_of(result.graph, name, result.layouts)
    quant = result.graph.value(name).type.quant
    real = dequantize(array, quant) if quant is not None and array.dtype.kind in "iu" else None
    shown = real if real is not None else array
    out = Activation(name, array, layout, channel_maps(shown, layout),
                     tensor_stats(array, bins), real,
                     tensor_stats(real, bins) if real is not None else None)
    pair = result.int8.get(name)
    if pair is not None:
        reference = np.asarray(shown, np.float64)
        diff = pair.dequantized - reference
        out.int8, out.int8_stats = pair, tensor_stats(pair.dequantized, bins)
        out.int8_maps = channel_maps(pair.dequantized, layout)
        out.difference, out.difference_maps = diff, channel_maps(diff, layout)
        absolute = np.abs(diff)
        out.error = Difference(float(absolute.max()) if diff.size else 0.0,
                               float(absolute.mean()) if diff.size else 0.0,
                               math.sqrt(float(np.mean(diff * diff))) if diff.size else 0.0,
                               sqnr_db(reference, pair.dequantized))
    return out


def export_npy(path: str | os.PathLike, array: np.ndarray) -> Path:
    """Write `array` as it is to `path` (.npy, atomically: a temporary file, then a rename)."""
    target = Path(path)
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    try:
        atomic_write_bytes(target, buffer.getvalue())
    except OSError as exc:
        raise KilnError(f"cannot write {target.name}: {exc.strerror or exc}") from None
    return target

