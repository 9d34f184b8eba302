"""Empirical bias correction (Nagel et al., 2019): fold each layer's mean error into its bias.

Quantized weights shift the mean of a layer's output: E[W_q x] differs from E[W x] per output
channel, and a ReLU after it turns that shift into a loss. On calibration samples the shift is
measured directly, the QDQ model's convolution (or Gemm) output against the float model's, and
subtracted from that layer's float bias before it is quantized. Layers are corrected in order,
each measured after the ones before it were corrected (the incremental evaluator re-runs only
what follows), so a later layer sees inputs as they will be.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.graph import Graph
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.incremental import IncrementalEvaluator
from compiler.quant.profile import Profile
from compiler.quant.quantize import RENAMED_KEY, Options

DEFAULT_SAMPLES = 128
_CORRECTED = ("Conv", "Gemm")


def _channel_axis(op: str, rank: int) -> int:
    return 1 if op == "Conv" else rank - 1


def bias_corrections(graph: Graph, profile: Profile, data: CalibrationData,
                     options: Options | None = None, samples: int = DEFAULT_SAMPLES
                     ) -> dict[str, np.ndarray]:
    """What to add to each Conv and Gemm bias (by node name), measured on `data`."""
    live = IncrementalEvaluator(graph, profile, data, options, samples)
    corrections: dict[str, np.ndarray] = {}
    weighted = [n.name for n in live.qdq.nodes if n.op in _CORRECTED
                and n.inputs[1].producer is not None  # a weight left float: nothing to correct
                and not (n.op == "Gemm" and n.attrs.get("transA"))]
    for node_name in weighted:
        node = next(n for n in live.qdq.nodes if n.name == node_name)
        name = node.output.name
        renamed = live.qdq.metadata.get(RENAMED_KEY, {})  # a model output, renamed for its pair
        reference = live.float_value(renamed.get(name, name))
        shifted = live.quantized_value(name)
        rank = len(node.output.type.shape)
        axis = _channel_axis(node.op, rank) + 1  # stacked: axis 0 is the sample
        reduce = tuple(i for i in range(rank + 1) if i != axis)
        error = np.mean(shifted.astype(np.float64) - reference, axis=reduce)
        corrections[node_name] = corrections.get(node_name, 0.0) - error
        live.set_corrections(corrections)
    return corrections
