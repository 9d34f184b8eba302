"""The float and int8 models' answers over many samples, from compiled host code.

The quantization workbench shows the accuracy `kiln quantize --report` would print for the
current ranges. Interpreting the integer graph sample by sample takes seconds; its compiled host
code gives the same bytes (the int8 kernels are checked bit-exact against the interpreter) in
milliseconds, and an unchanged network comes from the object cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.host import HostNet
from compiler.driver import Options, compilation
from compiler.ir.graph import Graph
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.metrics import sqnr_db, top1_agreement


@dataclass(frozen=True)
class Answers:
    """Top-1 classes of a model over samples, and their accuracy when labels are known."""

    classes: np.ndarray
    accuracy: float | None


def answers(graph: Graph, data: CalibrationData, name: str = "net") -> Answers:
    """Run `graph` (float or QDQ: its integer form runs) compiled for the host over `data`."""
    runner = HostNet(compilation(graph).net(Options("host", name)))
    try:
        first = graph.outputs[0].name
        classes = np.empty(len(data), np.int64)
        for i, feeds in enumerate(data.feeds(0, len(data))):
            runner.set_inputs(feeds)
            runner.call()
            classes[i] = int(np.argmax(runner.output_views()[first]))
    finally:
        runner.close()
    accuracy = None
    if data.labels is not None:
        accuracy = float(np.mean(classes == np.asarray(data.labels)[:len(classes)]))
    return Answers(classes, accuracy)


@dataclass(frozen=True)
class IntegerFigures:
    """The output SQNR and top-1 agreement of the compiled integer model on samples.

    What the exported host bundle measures on the same samples: its own code, not the float
    simulation of quantize-dequantize pairs (which rounds nothing in between).
    """

    output_sqnr: dict[str, float]  # output tensor -> dB against the float model
    top1_agreement: float
    samples: int


def integer_figures(graph: Graph, data: CalibrationData, count: int,
                    reference: dict[str, np.ndarray]) -> IntegerFigures:
    """Run the QDQ `graph` compiled for the host on the first `count` samples of `data`.

    `reference` holds the float model's outputs on the same samples, stacked (output name ->
    array of `count` samples).
    """
    runner = HostNet(compilation(graph).net(Options("host", "int8")))
    names = [v.name for v in graph.outputs]
    try:
        got: dict[str, list[np.ndarray]] = {n: [] for n in names}
        for feeds in data.feeds(0, count):
            runner.set_inputs(feeds)
            runner.call()
            views = runner.output_views()
            for n in names:
                got[n].append(np.array(views[n], np.float64).reshape(-1))
    finally:
        runner.close()
    outputs = {n: np.stack(v) for n, v in got.items()}
    sqnr = {n: sqnr_db(reference[n], outputs[n]) for n in names}
    first = names[0]
    agree = top1_agreement(np.asarray(reference[first]).reshape(count, -1),
                           outputs[first].reshape(count, -1))
    return IntegerFigures(sqnr, agree, count)
