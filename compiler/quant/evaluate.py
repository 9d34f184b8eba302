"""How much a quantized model loses: per tensor, per layer and at the output, against float.

On held-out samples the float calibration graph and the QDQ graph run side by side in the
reference interpreter. Each quantized activation is compared with its float value: the range
chosen and the fraction of values it clips, the signal-to-quantization-noise ratio (SQNR, dB)
of the layer's output, and TFLite's debugger metric, the RMS error over the scale (about 0.289
when the error is only rounding). The model's outputs are compared the same way after the
integer operators run (the integer graph, bit-exact with the runtimes), with top-1 agreement
and, when the data has labels, accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from compiler.driver import compilation
from compiler.interpreter import run
from compiler.ir.graph import Graph
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.metrics import (
    noise_power,
    rmse_over_scale,
    signal_power,
    sqnr_db,
    sqnr_from_powers,
    top1_agreement,
)
from compiler.quant.profiler import calibration_graph, instrumented
from compiler.quant.quantize import EQUALIZED_KEY, RENAMED_KEY


@dataclass
class TensorReport:
    """One quantized activation against its float value."""

    name: str
    low: float
    high: float
    scale: float
    clipped: float  # fraction of float values outside [low, high]
    sqnr: float
    rmse_over_scale: float
    zero_point: int = 0


@dataclass
class QuantReport:
    """The whole comparison (JSON via `to_json`)."""

    samples: int
    output_sqnr: dict[str, float]
    top1_agreement: float
    accuracy_float: float | None
    accuracy_quantized: float | None
    tensors: list[TensorReport] = field(default_factory=list)

    def worst(self) -> TensorReport | None:
        """The tensor whose quantization loses most (lowest SQNR)."""
        return min(self.tensors, key=lambda t: t.sqnr, default=None)

    def to_json(self) -> dict:
        """Plain JSON (infinite SQNR as the string "inf")."""
        def number(x):
            return None if x is None else (x if math.isfinite(x) else str(x))
        return {"samples": self.samples,
                "output_sqnr_db": {k: number(v) for k, v in self.output_sqnr.items()},
                "top1_agreement": self.top1_agreement,
                "accuracy_float": self.accuracy_float,
                "accuracy_quantized": self.accuracy_quantized,
                "tensors": [{"name": t.name, "min": t.low, "max": t.high, "scale": t.scale,
                             "clipped": t.clipped, "sqnr_db": number(t.sqnr),
                             "rmse_over_scale": t.rmse_over_scale, "zero_point": t.zero_point}
                            for t in self.tensors]}


def tensor_report(name: str, f: np.ndarray, q: np.ndarray, scale: float, zero: int,
                  dtype: str, signal: float | None = None) -> TensorReport:
    """How the dequantized values `q` of one tensor differ from its float values `f`.

    `signal`, the sum of squares of `f`, when the caller knows it already.
    """
    qmin, qmax = (0, 255) if dtype == "uint8" else (-128, 127)
    low, high = (qmin - zero) * scale, (qmax - zero) * scale
    f = np.asarray(f).reshape(-1)
    if not f.size:
        return TensorReport(name, low, high, scale, 0.0, math.inf, 0.0, zero)
    clipped = (np.count_nonzero(f < low) + np.count_nonzero(f > high)) / f.size
    if signal is None:
        signal = signal_power(f)
    noise = noise_power(f, q)
    return TensorReport(name, low, high, scale, clipped, sqnr_from_powers(signal, noise),
                        rmse_over_scale(noise, f.size, scale), zero)


def quantized_pairs(qdq: Graph) -> dict[str, tuple[str, float, int, str]]:
    """Float tensor -> (its dequantized twin, scale, zero point, integer type), QDQ graph."""
    readers = {id(n.inputs[0]): n for n in qdq.nodes if n.op == "DequantizeLinear"}
    found = {}
    for node in qdq.nodes:
        reader = readers.get(id(node.output)) if node.op == "QuantizeLinear" else None
        if reader is not None:
            found[node.inputs[0].name] = (reader.output.name,
                                          float(np.asarray(node.inputs[1].data).reshape(-1)[0]),
                                          int(np.asarray(node.inputs[2].data).reshape(-1)[0]),
                                          node.output.type.dtype)
    return found


def evaluate(graph: Graph, qdq: Graph, data: CalibrationData, limit: int | None = None
             ) -> QuantReport:
    """Compare the float model `graph` and its QDQ form `qdq` on `data` (the first `limit`)."""
    count = len(data) if limit is None else min(limit, len(data))
    base = instrumented(calibration_graph(graph, bool(qdq.metadata.get(EQUALIZED_KEY))))
    fake = instrumented(qdq)
    integer = compilation(qdq).final
    pairs = quantized_pairs(qdq)
    renamed = qdq.metadata.get(RENAMED_KEY, {})  # a model output's float tensor, renamed
    outputs = [v.name for v in graph.outputs]
    floats: dict[str, list] = {name: [] for name in pairs}
    quants: dict[str, list] = {name: [] for name in pairs}
    out_float: dict[str, list] = {name: [] for name in outputs}
    out_int: dict[str, list] = {name: [] for name in outputs}
    for feeds in data.feeds(0, count):
        f_values = {**feeds, **run(base, feeds)}
        q_values = {**feeds, **run(fake, feeds)}
        i_values = run(integer, feeds)
        for name, (twin, _, _, _) in pairs.items():
            floats[name].append(f_values[renamed.get(name, name)].reshape(-1))
            quants[name].append(q_values[twin].reshape(-1))
        for name in outputs:
            out_float[name].append(f_values[name].reshape(-1))
            out_int[name].append(np.asarray(i_values[name], np.float64).reshape(-1))
    tensors = [tensor_report(renamed.get(name, name), np.concatenate(floats[name]),
                             np.concatenate(quants[name]), scale, zero, dtype)
               for name, (_, scale, zero, dtype) in pairs.items()]
    correct_f = correct_q = 0
    first = outputs[0]
    agree = top1_agreement(np.stack(out_float[first]), np.stack(out_int[first]))
    for i in range(count):
        f, q = out_float[first][i], out_int[first][i]
        if data.labels is not None:
            correct_f += int(np.argmax(f) == data.labels[i])
            correct_q += int(np.argmax(q) == data.labels[i])
    labelled = data.labels is not None
    return QuantReport(
        count,
        {name: sqnr_db(np.concatenate(out_float[name]), np.concatenate(out_int[name]))
         for name in outputs},
        agree, correct_f / count if labelled else None,
        correct_q / count if labelled else None, tensors)
