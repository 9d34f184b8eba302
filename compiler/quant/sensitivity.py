"""Which layer hurts most: quantize all but one layer, in turn, and watch the output.

A tensor's own SQNR says how much its rounding loses, not how much of that reaches the output:
a layer followed by a softmax may lose a lot and matter little. Here each quantized tensor in
turn stays float, with the weights of the layer that makes it (directly or through a Relu or
Clip folded into its range), on a small subset of the samples; the layer whose float form
raises the output's SQNR most is the one to keep float or to calibrate by hand. The incremental
evaluator re-runs only what follows each tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from compiler.ir.graph import Graph, Value
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.incremental import IncrementalEvaluator
from compiler.quant.profile import Profile
from compiler.quant.quantize import RENAMED_KEY, Options

DEFAULT_SAMPLES = 16
_WEIGHTED = ("Conv", "Gemm", "MatMul")
_CLAMPS = ("Relu", "Clip")


@dataclass(frozen=True)
class Sensitivity:
    """The model's output SQNR with one tensor (and its layer's weights) left float."""

    tensor: str
    layer: str | None  # the Conv, Gemm or MatMul whose weights stayed float too
    output_sqnr: float
    gain: float  # dB over the fully quantized model


def _layer_of(graph: Graph, name: str) -> str | None:
    """The weighted node that makes tensor `name`, looking through a Relu or Clip."""
    producers = {v.name: n for n in graph.nodes for v in n.outputs}
    node = producers.get(name)
    if node is not None and node.op in _CLAMPS:
        source: Value | None = node.inputs[0]
        node = producers.get(source.name) if source is not None else None
    return node.name if node is not None and node.op in _WEIGHTED else None


def layer_sensitivity(graph: Graph, profile: Profile, data: CalibrationData,
                      options: Options | None = None, samples: int = DEFAULT_SAMPLES
                      ) -> list[Sensitivity]:
    """Every quantized tensor with the output SQNR its float form gives, most helpful first."""
    options = options or Options()
    live = IncrementalEvaluator(graph, profile, data, options, samples)

    def sqnr(evaluation) -> float:
        return min(evaluation.output_sqnr.values())

    base = sqnr(live.evaluation)
    found = []
    for tensor in list(live.evaluation.tensors):
        if tensor not in profile.tensors:
            continue
        inside = {shown: name for name, shown in live.qdq.metadata.get(RENAMED_KEY, {}).items()}
        layer = _layer_of(live.qdq, inside.get(tensor, tensor))
        trial = replace(options, keep_float=(*options.keep_float, tensor),
                        float_weights=(*options.float_weights, *([layer] if layer else [])))
        value = sqnr(live.set_options(trial))
        gain = value - base if math.isfinite(value) or math.isfinite(base) else 0.0
        found.append(Sensitivity(tensor, layer, value, gain))
    live.set_options(options)
    return sorted(found, key=lambda s: -s.gain if not math.isnan(s.gain) else 0.0)
