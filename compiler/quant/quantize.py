"""Post-training quantization: a float graph and its profile become a QDQ graph.

The calibration graph (`profiler.calibration_graph`) gets a QuantizeLinear / DequantizeLinear
pair on every profiled activation (parameters from the chosen method and schema), its
convolution, Gemm and MatMul weights stored as symmetric per-channel int8 (scale max|w| / 127)
behind a DequantizeLinear, and their biases as int32 at scale x_scale * w_scale. An activation
read only by a Relu or Clip gets no pair of its own: the clamp folds into the range of its
output (as Glow folds it), unless onnxruntime would then run the operator before it in float
(`_before_clamp`). Tensors in `keep_float` stay float. The result is the QDQ form
onnxruntime's quantizer writes, so `to_integer` turns it into integer operators and
`save_onnx` writes a model onnxruntime runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler import ops
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Value
from compiler.ir.types import TensorType
from compiler.ops.registry import REQUIRED
from compiler.qmath.requant import KEPT_FLOAT_KEY, MODES, REQUANT_KEY
from compiler.qmath.scales import SMALLEST_SCALE
from compiler.quant.calibrate import QuantParams, choose_range, params_for
from compiler.quant.profile import Profile
from compiler.quant.profiler import calibration_graph

_CLAMPS = ("Relu", "Clip")
_QDQ_OPSET = 13
EQUALIZED_KEY = "kiln.quant.equalized"  # metadata: the profile's graph was equalized
RENAMED_KEY = "kiln.quant.renamed"  # metadata: float tensor renamed for its output -> its name
# Weight and bias input slots, and the weight's output-channel axis.
_WEIGHTED = {"Conv": (1, 2), "Gemm": (1, 2), "MatMul": (1, None)}
# Operators whose float constant operands are quantized per tensor (a bias added after a MatMul).
_ELEMENTWISE = ("Add", "Sub", "Mul")


@dataclass(frozen=True)
class Options:
    """How to quantize: calibration method, schema, requantization rule, what stays float."""

    method: str = "minmax"
    percentile: float = 99.99
    schema: str = "tflite"
    requant: str = "tflite"
    keep_float: tuple[str, ...] = ()
    float_weights: tuple[str, ...] = ()  # Conv, Gemm, MatMul nodes whose weights stay float
    per_channel: bool = True  # weights: one scale per output channel, or one per tensor


def activation_params(profile: Profile, options: Options) -> dict[str, QuantParams]:
    """Each profiled tensor's quantization (overrides and the method decide its range)."""
    chosen = {}
    for name, entry in profile.tensors.items():
        if name in profile.overrides:
            low, high = profile.range_of(name)
        else:
            low, high = choose_range(entry, options.method, options.percentile)
        chosen[name] = params_for(low, high, options.schema)
    return chosen


def quantize(graph: Graph, profile: Profile, options: Options = Options(),
             corrections: dict[str, np.ndarray] | None = None) -> Graph:
    """The QDQ graph of the loaded float `graph` (KilnError if the profile is another's).

    `corrections` maps a Conv or Gemm node to what to add to its float bias before it is
    quantized, one value per output channel (bias correction).
    """
    if options.requant not in MODES:
        raise KilnError(f"--requant must be one of {', '.join(MODES)}")
    base = calibration_graph(graph, profile.equalized)
    profile.check_graph(base)
    unknown = [n for n in options.keep_float if n not in profile.tensors]
    if unknown:
        raise KilnError(f"--keep-float names tensors the model does not have: {unknown}")
    out = base.snapshot()
    # Per-axis QuantizeLinear / DequantizeLinear arrived at opset 13: an older model's QDQ
    # form is saved at 13 (its other operators re-encode themselves for it).
    out.opset = max(out.opset, _QDQ_OPSET)
    out.metadata[REQUANT_KEY] = options.requant
    out.metadata[EQUALIZED_KEY] = profile.equalized
    params = activation_params(profile, options)
    keep = set(options.keep_float) | set(profile.keep_float)
    out.metadata[KEPT_FLOAT_KEY] = sorted(keep)
    users: dict[int, list] = {}
    for node in out.nodes:
        for i, value in enumerate(node.inputs):
            if value is not None:
                users.setdefault(id(value), []).append((node, i))
    scales: dict[str, float] = {}
    for value in [*out.inputs, *(v for n in list(out.nodes) for v in n.outputs)]:
        readers = users.get(id(value), [])
        if value.name not in params or value.name in keep or value.type.dtype != "float32":
            continue
        chosen = params[value.name]
        if readers and all(n.op in _CLAMPS for n, _ in readers):
            chosen = _before_clamp(readers, params, keep)
            if chosen is None:
                continue
        scales[value.name] = chosen.scale
        name = value.name
        if value in out.outputs:  # the model's output keeps its name, now after the pair
            value.name = out.unique_name(f"{name}_float")
            scales[value.name] = scales[name]
            out.metadata.setdefault(RENAMED_KEY, {})[value.name] = name
        real = _qdq(out, value, chosen, name if value.name != name else None)
        for node, i in readers:
            node.inputs[i] = real
        out.outputs = [real if v is value else v for v in out.outputs]
    for node in list(out.nodes):
        if node.op in _WEIGHTED and node.name not in options.float_weights:
            _quantize_weights(out, node, scales, (corrections or {}).get(node.name),
                              options.per_channel)
        elif node.op in _ELEMENTWISE:
            _quantize_operands(out, node, options.schema)
    out.sort()
    return out


def _before_clamp(readers: list, params: dict[str, QuantParams], keep: set[str]
                  ) -> QuantParams | None:
    """The pair a Relu's or Clip's input gets: none, or the clamp output's own parameters.

    onnxruntime runs a unit on its integer kernels only when a QuantizeLinear follows the
    operator itself. It drops a Relu whose QuantizeLinear's zero point is the type's lowest
    value, and keeps every other clamp, with the operator before it in float. Such an input
    gets the pair its clamp's output has: it changes no value (rounding is monotone, so a
    clamp commutes with it) and to_integer merges it away again.
    """
    if len(readers) != 1:
        return None
    clamp = readers[0][0]
    out = clamp.outputs[0]
    if out.name not in params or out.name in keep or out.type.dtype != "float32":
        return None
    chosen = params[out.name]
    if clamp.op == "Relu" and chosen.zero_point == np.iinfo(chosen.dtype).min:
        return None
    return chosen


def _add(graph: Graph, op: str, inputs: list, output: TensorType, name: str,
         attrs: dict | None = None, exact: bool = False) -> Value:
    """A new node with its schema's default attributes and one output.

    The output is named `name`, made unique unless `exact`.
    """
    full = {k: a.default for k, a in ops.lookup(op).attrs.items() if a.default is not REQUIRED}
    full.update(attrs or {})
    node = graph.add_node(op, inputs, [output], full,
                          output_names=[name if exact else graph.unique_name(name)])
    return node.output


def _qdq(graph: Graph, value: Value, params: QuantParams, output_name: str | None = None
         ) -> Value:
    """A QuantizeLinear and DequantizeLinear after `value`; returns the dequantized value.

    It is named `output_name` when given (a graph output keeps its name).
    """
    base = output_name or value.name
    scale = graph.add_constant(f"{base}_scale", np.array(params.scale, np.float32))
    zero = graph.add_constant(f"{base}_zero_point", np.array(params.zero_point, params.dtype))
    shape = value.type.shape
    q = _add(graph, "QuantizeLinear", [value, scale, zero], TensorType(shape, params.dtype),
             f"{base}_quantized")
    return _add(graph, "DequantizeLinear", [q, scale, zero], TensorType(shape, "float32"),
                output_name or f"{value.name}_dequantized", exact=output_name is not None)


def _weight_axis(node) -> int:
    if node.op == "Gemm":
        return 0 if node.attrs.get("transB") else 1
    return 0 if node.op == "Conv" else node.inputs[1].type.rank - 1


def _quantize_weights(graph: Graph, node, scales: dict[str, float],
                      correction: np.ndarray | None = None, per_channel: bool = True) -> None:
    """Symmetric int8 weights (per channel or per tensor) and int32 bias behind DequantizeLinear.

    Per tensor, one scale covers the whole weight: fewer parameters, coarser steps for the
    channels whose weights are small.
    """
    w_slot, b_slot = _WEIGHTED[node.op]
    weight = node.inputs[w_slot]
    x = node.inputs[0]
    x_scale = scales.get(_source_name(x))
    if x_scale is None or node.attrs.get("transA"):
        return  # an input left float: the node stays float
    axis = _weight_axis(node)
    if not isinstance(weight, Constant):  # already int8 behind a DequantizeLinear (hybrid)
        w_scale = _dequantized_scale(weight)
        if w_scale is None:
            return
        _quantize_bias(graph, node, b_slot, x_scale, w_scale, correction)
        return
    data = np.asarray(weight.data, np.float32)
    if not per_channel:
        w_scale = np.float32(max(float(np.max(np.abs(data))) / 127.0, 0.0))
        w_scale = w_scale if w_scale >= SMALLEST_SCALE else np.float32(1.0)
        q = np.clip(np.rint(data / w_scale), -127, 127).astype(np.int8)
        node.inputs[w_slot] = _dequantized_constant(graph, weight.name, q,
                                                    np.asarray(w_scale, np.float32), None)
        _quantize_bias(graph, node, b_slot, x_scale, np.asarray(w_scale, np.float32),
                       correction)
        return
    reduce = tuple(i for i in range(data.ndim) if i != axis)
    w_scale = (np.max(np.abs(data), axis=reduce) / 127.0).astype(np.float32)
    w_scale = np.where(w_scale >= SMALLEST_SCALE, w_scale, np.float32(1.0)).astype(np.float32)
    shaped = w_scale.reshape([-1 if i == axis else 1 for i in range(data.ndim)])
    q = np.clip(np.rint(data / shaped), -127, 127).astype(np.int8)
    node.inputs[w_slot] = _dequantized_constant(graph, weight.name, q, w_scale, axis)
    _quantize_bias(graph, node, b_slot, x_scale, w_scale, correction)


def _dequantized_scale(weight: Value) -> np.ndarray | None:
    """The scales of a weight the model already stores as int8 behind a DequantizeLinear."""
    node = weight.producer
    if (node is None or node.op != "DequantizeLinear" or not isinstance(node.inputs[0], Constant)
            or not isinstance(node.inputs[1], Constant)):
        return None
    zero = node.inputs[2] if len(node.inputs) > 2 else None
    if zero is not None and np.asarray(zero.data).any():
        return None
    return np.asarray(node.inputs[1].data, np.float32).reshape(-1)


def _quantize_bias(graph: Graph, node, b_slot, x_scale: float, w_scale: np.ndarray,
                   correction: np.ndarray | None = None) -> None:
    """The bias as int32 at scale x_scale * w_scale behind a DequantizeLinear.

    A `correction` is added first; a node without a bias gets one to hold it.
    """
    bias = node.inputs[b_slot] if b_slot is not None and len(node.inputs) > b_slot else None
    if correction is not None and b_slot is not None and (
            bias is None or isinstance(bias, Constant) and np.asarray(bias.data).ndim == 1):
        base = np.zeros(len(correction)) if bias is None else np.asarray(bias.data, np.float64)
        name = f"{node.name}_bias" if bias is None else bias.name
        bias = graph.add_constant(f"{name}_corrected", (base + correction).astype(np.float32))
        node.inputs[b_slot:] = [bias]
    if isinstance(bias, Constant) and np.asarray(bias.data).ndim == 1:
        b_scale = (np.float32(x_scale) * w_scale).astype(np.float32)
        b = np.asarray(bias.data, np.float64)
        qb = np.clip(np.rint(b / b_scale), -(2 ** 31), 2 ** 31 - 1).astype(np.int32)
        node.inputs[b_slot] = _dequantized_constant(graph, bias.name, qb, b_scale,
                                                    0 if b_scale.ndim else None)


def _quantize_operands(graph: Graph, node, schema: str) -> None:
    """Float constant operands of an element-wise operator as 8-bit behind DequantizeLinear.

    Per tensor, over the constant's own range, so the operator can become integer.
    """
    for i, value in enumerate(node.inputs):
        if isinstance(value, Constant) and np.asarray(value.data).dtype == np.float32:
            data = np.asarray(value.data, np.float32)
            p = params_for(float(data.min()), float(data.max()), schema)
            info = np.iinfo(p.dtype)
            q = np.clip(np.rint(data / np.float32(p.scale)) + p.zero_point, info.min,
                        info.max).astype(p.dtype)
            node.inputs[i] = _dequantized_constant(graph, value.name, q,
                                                   np.array(p.scale, np.float32), None,
                                                   p.zero_point)


def _source_name(value: Value) -> str:
    """The name of the activation a DequantizeLinear output reads back (or its own)."""
    producer = value.producer
    if producer is not None and producer.op == "DequantizeLinear":
        quantize_node = producer.inputs[0].producer
        if quantize_node is not None and quantize_node.op == "QuantizeLinear":
            return quantize_node.inputs[0].name
    return value.name


def _dequantized_constant(graph: Graph, name: str, q: np.ndarray, scale: np.ndarray,
                          axis: int | None, zero_point: int = 0) -> Value:
    """Integer constant `q` behind a DequantizeLinear (per axis when `axis` is given)."""
    stored = graph.add_constant(f"{name}_quantized", q)
    scales = graph.add_constant(f"{name}_scale", scale)
    zeros = graph.add_constant(f"{name}_zero_point", np.full(scale.shape, zero_point, q.dtype))
    attrs = {"axis": axis} if axis is not None else {}
    return _add(graph, "DequantizeLinear", [stored, scales, zeros],
                TensorType(q.shape, "float32"), f"{name}_dequantized", attrs)
