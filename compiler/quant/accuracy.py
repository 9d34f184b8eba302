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
