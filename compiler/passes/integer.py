"""QDQ to integer operators: DequantizeLinear -> op -> QuantizeLinear becomes one integer node.

A quantized ONNX model stores int8 tensors and wraps float arithmetic in Dequantize/Quantize
pairs. The pairs say how each tensor is quantized; this pass reads them and runs the operator
on the integers, requantizing its accumulator by the run's rule (`PassContext.requant`).
"""

from __future__ import annotations

import numpy as np

from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Node, Value
from compiler.passes.base import PassContext, PassResult, register_pass
from compiler.passes.qdq_units import (
    Dequantized,
    dequantized,
    float_bias,
    integer_range,
    output_params,
    quantizer,
    zero_point_input,
)
from compiler.passes.rewrite import Rewriter, const
from compiler.qmath import ort_float
from compiler.qmath.accumulator import BiasDequantize, fold_bias, weight_rows
from compiler.qmath.requant import KEPT_FLOAT_KEY, RANGES
from compiler.qmath.tables import onnx_table


def _finish(rw: Rewriter, node: Node, quant: Node, new: Node) -> None:
    """`new` computes what `quant` did: its readers (and a graph output) move over."""
    rw.replace(quant.output, new.output)


def _one_input_unit(rw: Rewriter, node: Node, *, clamp: bool = False, same: bool = False
                    ) -> tuple[Dequantized, Node, tuple[float, float] | None] | None:
    """(input, QuantizeLinear, folded bounds) of DequantizeLinear -> `node` -> QuantizeLinear.

    Both sides are per tensor and of one 8-bit type; a Relu or Clip in between only when
    `clamp`, and with `same` the two sides' parameters must be equal.
    """
    x = dequantized(rw, node.inputs[0])
    if x is None or not x.per_tensor or len(node.outputs) != 1:
        return None
    quant, bounds = quantizer(rw, node.output)
    if quant is None or quant.output.type.dtype != x.integers.type.dtype:
        return None
    if (bounds is not None and not clamp) or (same and not _same_params(x, quant)):
        return None
    return x, quant, bounds


def _table_inputs(rw: Rewriter, x: Dequantized, quant: Node) -> list[Value]:
    """x, x_scale, x_zero_point, y_scale, y_zero_point: a one-input integer operator's inputs."""
    return [x.integers, x.scale, zero_point_input(rw, x, x.integers), *output_params(rw, quant)]


def _fold_bias(rw: Rewriter, x: Dequantized, w: Dequantized, output_axis: int,
               b: Dequantized | None, quant: Node, mode: str, fully_connected: bool
               ) -> tuple[str | None, Value | None]:
    """(Why the unit stays float, or None; the bias its integer operator takes, if any)."""
    zx = 0 if x.zero_point is None else int(x.zero_point.data.reshape(-1)[0])
    rows = weight_rows(w.integers.data, const(w.zero_point), output_axis)
    folded = fold_bias(rows, x.integers.type.dtype, zx, None if b is None else BiasDequantize(
        b.integers.data, b.scale.data, const(b.zero_point)), mode=mode,
        x_scale=x.scale.data.reshape(-1)[0], w_scale=w.scale.data,
        y_scale=quant.inputs[1].data.reshape(-1)[0], fully_connected=fully_connected)
    if folded.problem or b is None or not folded.changed:
        return folded.problem, None if b is None else b.integers
    return None, rw.constant(f"{b.node.name}_minus_zero_point", folded.bias)


def _bias(rw: Rewriter, value: Value, x: Dequantized | None, w: Dequantized | None
          ) -> Dequantized | None:
    """A Conv's or Gemm's bias: read through its DequantizeLinear, or float (NNCF's files)."""
    b = dequantized(rw, value)
    if b is None and x is not None and w is not None:
        b = float_bias(rw, value, x, w)
        note = (f"{value.name}: a float bias rounded to int32 at input x weight scale (the "
                "integer kernel's, as TFLite's converter does); onnxruntime adds it in float, "
                "so an output may differ from it by a step")
        if b is not None and note not in rw.notes:  # say the result may differ from the file's
            rw.note(note)
    return b


def _conv(rw: Rewriter, node: Node, mode: str) -> bool | str:
    x = dequantized(rw, node.inputs[0])
    w = dequantized(rw, node.inputs[1])
    has_bias = len(node.inputs) > 2 and node.inputs[2] is not None
    b = _bias(rw, node.inputs[2], x, w) if has_bias else None
    if x is None or w is None or (has_bias and b is None) or not x.per_tensor:
        return False
    if not isinstance(w.integers, Constant) or (b is not None and (
            not isinstance(b.integers, Constant) or b.integers.type.dtype != "int32")):
        return False
    if not w.per_tensor and w.node.attrs["axis"] not in (0, -w.integers.type.rank):
        return False  # per-channel scales must follow the output channels
    quant, bounds = quantizer(rw, node.output)
    if quant is None:
        return False
    problem, bias = _fold_bias(rw, x, w, 0, b, quant, mode, fully_connected=False)
    if problem:
        return problem
    ys, yz = output_params(rw, quant)
    inputs = [x.integers, x.scale, zero_point_input(rw, x, x.integers), w.integers, w.scale,
              zero_point_input(rw, w, w.integers), ys, yz]
    if b is not None:
        inputs.append(bias)
    attrs = {k: v for k, v in node.attrs.items() if k not in ("activation", "activation_params")}
    attrs.update(requant=mode, output_range=integer_range(quant, bounds))
    new = rw.add("QLinearConv", inputs, attrs, replaces=[node, quant, x.node, w.node])
    _finish(rw, node, quant, new)
    return True


def _matmul(rw: Rewriter, node: Node, mode: str) -> bool | str:
    a = dequantized(rw, node.inputs[0])
    b = dequantized(rw, node.inputs[1])
    if a is None or b is None or not a.per_tensor or not isinstance(b.integers, Constant):
        return False
    if b.integers.type.rank != 2 or (not b.per_tensor and b.node.attrs["axis"] not in (1, -1)):
        return False
    out = node.output
    bias = None
    add = rw.sole_user(out)
    if add is not None and add.op == "Add":
        other = add.inputs[1] if add.inputs[0] is out else add.inputs[0]
        d = dequantized(rw, other)
        columns = b.integers.type.shape[1]
        if d is not None and isinstance(d.integers, Constant) and \
                d.integers.type.dtype == "int32" and d.integers.type.shape == (columns,):
            bias, out = d, add.output
    quant, bounds = quantizer(rw, out)
    if quant is None:
        return False
    problem, bias_input = _fold_bias(rw, a, b, 1, bias, quant, mode, fully_connected=True)
    if problem:
        return problem
    ys, yz = output_params(rw, quant)
    inputs = [a.integers, a.scale, zero_point_input(rw, a, a.integers), b.integers, b.scale,
              zero_point_input(rw, b, b.integers), bias_input, ys, yz]
    replaced = [node, quant, a.node, b.node] + ([add, bias.node] if bias else [])
    new = rw.add("QGemm", inputs, {"requant": mode, "output_range": integer_range(quant, bounds)},
                 replaces=replaced)
    _finish(rw, node, quant, new)
    return True


def _gemm(rw: Rewriter, node: Node, mode: str) -> bool | str:
    attrs = node.attrs
    if attrs["transA"] or attrs["alpha"] != 1.0 or attrs["beta"] != 1.0:
        return False
    a = dequantized(rw, node.inputs[0])
    b = dequantized(rw, node.inputs[1])
    has_bias = len(node.inputs) > 2 and node.inputs[2] is not None
    c = _bias(rw, node.inputs[2], a, b) if has_bias else None
    if a is None or b is None or not a.per_tensor or not isinstance(b.integers, Constant):
        return False
    channel_axis = 0 if attrs["transB"] else 1  # B's axis of output columns
    if not b.per_tensor and b.node.attrs["axis"] % 2 != channel_axis:
        return False
    if has_bias and (c is None or not isinstance(c.integers, Constant)
                     or c.integers.type.dtype != "int32"):
        return False
    quant, bounds = quantizer(rw, node.output)
    if quant is None:
        return False
    problem, bias = _fold_bias(rw, a, b, channel_axis, c, quant, mode, fully_connected=True)
    if problem:
        return problem
    ys, yz = output_params(rw, quant)
    inputs = [a.integers, a.scale, zero_point_input(rw, a, a.integers), b.integers, b.scale,
              zero_point_input(rw, b, b.integers), bias, ys, yz]
    new = rw.add("QGemm", inputs, {"transB": attrs["transB"], "requant": mode,
                                   "output_range": integer_range(quant, bounds)},
                 replaces=[node, quant, a.node, b.node] + ([c.node] if c and c.node else []))
    _finish(rw, node, quant, new)
    return True


def _binary(rw: Rewriter, node: Node, mode: str) -> bool:
    """Add or Mul of two per-tensor quantized inputs: QLinearAdd or QLinearMul."""
    a = dequantized(rw, node.inputs[0])
    b = dequantized(rw, node.inputs[1])
    if a is None or b is None or not a.per_tensor or not b.per_tensor:
        return False
    if a.integers.type.dtype != b.integers.type.dtype:
        return False
    quant, bounds = quantizer(rw, node.output)
    if quant is None or quant.output.type.dtype != a.integers.type.dtype:
        return False
    ys, yz = output_params(rw, quant)
    inputs = [a.integers, a.scale, zero_point_input(rw, a, a.integers), b.integers, b.scale,
              zero_point_input(rw, b, b.integers), ys, yz]
    new = rw.add(f"QLinear{node.op}", inputs,
                 {"requant": mode, "output_range": integer_range(quant, bounds)},
                 replaces=[node, quant, a.node, b.node])
    _finish(rw, node, quant, new)
    return True


def _covers_the_image(node: Node) -> bool:
    """Whether a pooling node averages each channel's whole image into one value."""
    if node.op == "GlobalAveragePool":
        return True
    x = node.inputs[0].type
    kernel = tuple(node.attrs.get("kernel_shape") or ())
    pads = node.attrs.get("pads") or ()
    dilations = node.attrs.get("dilations") or ()
    return (kernel == tuple(x.shape[2:]) and not any(pads) and all(d == 1 for d in dilations)
            and node.attrs.get("auto_pad", "NOTSET") in ("NOTSET", "VALID"))


def _average_pool(rw: Rewriter, node: Node, mode: str) -> bool:
    """Pooling by mean: QLinearGlobalAveragePool over whole images, else QLinearAveragePool."""
    unit = _one_input_unit(rw, node, clamp=True)
    if unit is None or node.attrs.get("layout", "NCHW") != "NCHW":
        return False
    x, quant, bounds = unit
    if x.integers.type.rank < 3:
        return False
    inputs = _table_inputs(rw, x, quant)
    attrs = {"requant": mode, "output_range": integer_range(quant, bounds)}
    if _covers_the_image(node):
        op = "QLinearGlobalAveragePool"
    elif any(d != 1 for d in node.attrs.get("dilations") or ()):
        return False  # QLinearAveragePool has no dilations
    elif mode == "tflite" and not _same_params(x, quant):
        return False  # TFLite Micro averages only between equal parameters
    else:
        op = "QLinearAveragePool"
        attrs.update({k: node.attrs[k] for k in ("kernel_shape", "pads", "strides", "auto_pad",
                                                 "ceil_mode", "count_include_pad")})
    new = rw.add(op, inputs, attrs, replaces=[node, quant, x.node])
    _finish(rw, node, quant, new)
    return True


def _mean(rw: Rewriter, node: Node, mode: str) -> bool:
    """ReduceMean over the spatial axes of an NCHW image is a global average pool.

    With keepdims 0 a Reshape drops the two unit axes after the integer pool.
    """
    unit = _one_input_unit(rw, node, clamp=True)
    if unit is None:
        return False
    x, quant, bounds = unit
    rank = x.integers.type.rank
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = const(node.inputs[1])
    if axes is None or rank != 4 or sorted(int(a) % rank for a in np.ravel(axes)) != [2, 3]:
        return False
    new = rw.add("QLinearGlobalAveragePool", _table_inputs(rw, x, quant),
                 {"requant": mode, "output_range": integer_range(quant, bounds)},
                 replaces=[node, quant, x.node])
    if not node.attrs["keepdims"]:
        shape = rw.constant(f"{node.name}_shape", np.array(x.integers.type.shape[:2], np.int64))
        new = rw.add("Reshape", [new.output, shape], replaces=[node])
    _finish(rw, node, quant, new)
    return True


def _softmax(rw: Rewriter, node: Node, mode: str) -> bool:
    """Softmax over one axis: onnxruntime's table, or TFLite Micro's fixed point.

    TFLite Micro's normalizes the last axis into int8 of scale 1/256 and zero point -128 only.
    """
    unit = _one_input_unit(rw, node)
    if unit is None:
        return False
    x, quant, _ = unit
    rank = x.integers.type.rank
    axis = node.attrs["axis"] % rank
    if node.attrs.get("coerce_2d") and axis != rank - 1:
        return False  # normalizes over several trailing axes
    if mode == "tflite" and not (axis == rank - 1 and _tflite_softmax_output(quant)):
        return False
    new = rw.add("QLinearSoftmax", _table_inputs(rw, x, quant),
                 {"axis": axis, "opset": 13, "requant": mode}, replaces=[node, quant, x.node])
    _finish(rw, node, quant, new)
    return True


def _tflite_softmax_output(quant: Node) -> bool:
    """Whether `quant` writes what TFLite Micro's softmax writes: int8, 1/256, zero point -128."""
    scale, zp = quant.inputs[1], quant.inputs[2] if len(quant.inputs) > 2 else None
    return (quant.output.type.dtype == "int8" and zp is not None
            and np.float32(scale.data.reshape(-1)[0]) == np.float32(1 / 256)
            and int(zp.data.reshape(-1)[0]) == -128)


def _leaky_relu(rw: Rewriter, node: Node, mode: str) -> bool:
    """A Relu or LeakyRelu between a DequantizeLinear and a QuantizeLinear: a 256-entry table."""
    unit = _one_input_unit(rw, node)
    if unit is None:
        return False
    x, quant, _ = unit
    alpha = node.attrs["alpha"] if node.op == "LeakyRelu" else 0.0
    new = rw.add("QLinearLeakyRelu", _table_inputs(rw, x, quant), {"alpha": alpha},
                 replaces=[node, quant, x.node])
    _finish(rw, node, quant, new)
    return True


def _sigmoid(rw: Rewriter, node: Node, mode: str) -> bool:
    """Sigmoid by onnxruntime's table of its float32 Sigmoid (its QLinearSigmoid)."""
    unit = _one_input_unit(rw, node)
    if mode != "onnx" or unit is None:
        return False
    x, quant, _ = unit
    new = rw.add("QLinearSigmoid", _table_inputs(rw, x, quant), replaces=[node, quant, x.node])
    _finish(rw, node, quant, new)
    return True


def _clip_function(node: Node):
    """Clip's float32 function when its bounds are constants, else None."""
    bounds = [None if i >= len(node.inputs) or node.inputs[i] is None else const(node.inputs[i])
              for i in (1, 2)]
    if any(b is None for b, i in zip(bounds, (1, 2)) if i < len(node.inputs) and node.inputs[i]):
        return None
    low, high = (np.float32(-np.inf if b is None else b.reshape(-1)[0]) for b in bounds)
    return lambda v: np.minimum(np.maximum(v, low), high)


def _lookup_table(rw: Rewriter, node: Node, mode: str) -> bool:
    """Tanh, HardSwish or a lone Clip: a table of onnxruntime's float32 function (IntLookupTable).

    Any function of one 8-bit value is a 256-entry table; with the onnx rule the table holds
    what onnxruntime computes for DequantizeLinear -> function -> QuantizeLinear, bit for bit.
    """
    unit = _one_input_unit(rw, node)
    fn = _clip_function(node) if node.op == "Clip" else ort_float.FUNCTIONS.get(node.op)
    if mode != "onnx" or unit is None or fn is None:
        return False
    x, quant, _ = unit
    dtype = x.integers.type.dtype
    zp_in = 0 if x.zero_point is None else int(x.zero_point.data.reshape(-1)[0])
    scale, zp = output_params(rw, quant)
    table = onnx_table(fn, dtype, x.scale.data.reshape(-1)[0], zp_in, scale.data.reshape(-1)[0],
                       int(zp.data.reshape(-1)[0]))
    table_value = rw.constant(f"{node.name}_table", table)
    new = rw.add("IntLookupTable", [x.integers, table_value, scale, zp], {"function": node.op},
                 replaces=[node, quant, x.node])
    _finish(rw, node, quant, new)
    return True


def _same_params(d: Dequantized, quant: Node) -> bool:
    """Whether `quant` quantizes exactly as `d` dequantized (same type, scale, zero point)."""
    zp_in = 0 if d.zero_point is None else int(d.zero_point.data.reshape(-1)[0])
    zp_out = quant.inputs[2] if len(quant.inputs) > 2 else None
    zp_out = 0 if zp_out is None else int(zp_out.data.reshape(-1)[0])
    return (quant.output.type.dtype == d.integers.type.dtype and zp_in == zp_out
            and np.float32(d.scale.data.reshape(-1)[0])
            == np.float32(quant.inputs[1].data.reshape(-1)[0]))


def _passthrough(rw: Rewriter, node: Node, mode: str) -> bool:
    """Run a value-moving operator (or MaxPool) on the integers when both sides agree.

    Max and data movement commute with quantization, so equal parameters change nothing.
    """
    unit = _one_input_unit(rw, node, same=True)
    if unit is None:
        return False
    x, quant, _ = unit
    new = rw.copy(node, [x.integers, *node.inputs[1:]], replaces=[quant, x.node])
    _finish(rw, node, quant, new)
    return True


def _concat(rw: Rewriter, node: Node, mode: str) -> bool:
    """Concat of integers: joined as they are, or through QLinearConcat's tables.

    Inputs that all share the output's parameters are joined as they are; otherwise (onnx rule
    only) QLinearConcat requantizes each input that differs by a 256-entry table.
    """
    parts = [dequantized(rw, v) for v in node.inputs]
    if any(d is None or not d.per_tensor for d in parts):
        return False
    quant, bounds = quantizer(rw, node.output)
    if quant is None or bounds is not None or any(
            d.integers.type.dtype != quant.output.type.dtype for d in parts):
        return False
    replaced = [quant, *(d.node for d in parts)]
    if all(_same_params(d, quant) for d in parts):
        new = rw.copy(node, [d.integers for d in parts], replaces=replaced)
    elif mode == "onnx":  # each input requantized by a table, as onnxruntime's QLinearConcat
        triples = [v for d in parts for v in (d.integers, d.scale, zero_point_input(rw, d,
                                                                                      d.integers))]
        new = rw.add("QLinearConcat", [*output_params(rw, quant), *triples],
                     {"axis": node.attrs["axis"]}, replaces=[node, *replaced])
    else:
        return False  # TFLite Micro joins only inputs of the output's parameters
    _finish(rw, node, quant, new)
    return True


def _pad(rw: Rewriter, node: Node, mode: str) -> bool:
    """Pad between equal parameters: the pad value becomes the integer that stands for it."""
    unit = _one_input_unit(rw, node, same=True)
    if unit is None:
        return False
    x, quant, _ = unit
    value = node.inputs[2] if len(node.inputs) > 2 else None
    real = 0.0 if value is None else const(value)
    if real is None:
        return False  # a pad value computed at run time
    scale = np.float32(x.scale.data.reshape(-1)[0])
    zp = 0 if x.zero_point is None else int(x.zero_point.data.reshape(-1)[0])
    q = int(np.rint(np.float32(np.asarray(real).reshape(-1)[0]) / scale)) + zp
    low, high = RANGES[x.integers.type.dtype]
    if not low <= q <= high or np.float32(scale * np.float32(q - zp)) != np.float32(
            np.asarray(real).reshape(-1)[0]):
        return False  # the pad value has no exact integer
    fill = rw.constant(f"{node.name}_pad_value", np.array(q, x.integers.type.dtype))
    inputs = [x.integers, node.inputs[1], fill, *node.inputs[3:]]
    new = rw.copy(node, inputs, replaces=[quant, x.node])
    _finish(rw, node, quant, new)
    return True


_MOVES = ("MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze")


def _dequantize_later(rw: Rewriter) -> bool:
    """A MaxPool or move whose result is not quantized again runs on the integers first.

    NNCF's files quantize a pool's or a flatten's input only: DequantizeLinear -> MaxPool ->
    Conv. Max and data movement commute with a per-tensor dequantization of positive scale,
    so the DequantizeLinear moves after them, where the next unit reads it.
    """
    moved = False
    kept = set(rw.graph.metadata.get(KEPT_FLOAT_KEY, ()))  # the user's float tensors stay so
    for node in rw.nodes(*_MOVES):
        if len(node.outputs) != 1 or node.output.type.dtype != "float32" or not rw.live(node):
            continue
        if node.output.name in kept:
            continue
        x = dequantized(rw, node.inputs[0])
        if x is None or not x.per_tensor or not x.scale.data.reshape(-1)[0] > 0:
            continue
        if quantizer(rw, node.output)[0] is not None:
            continue  # a unit of its own (_passthrough)
        inner = rw.copy(node, [x.integers, *node.inputs[1:]])
        params = [x.scale] + ([x.zero_point] if x.zero_point is not None else [])
        after = rw.add("DequantizeLinear", [inner.output, *params], replaces=[node, x.node])
        rw.replace(node.output, after.output)
        moved = True
    return moved


def _merge_requantized_clamps(rw: Rewriter) -> bool:
    """Merge the pair `quantize` writes before a clamp back into the unit before it.

    QuantizeLinear -> DequantizeLinear -> Relu or Clip -> QuantizeLinear, all with one set of
    parameters, loses its first pair. `quantize` writes that pair where onnxruntime would
    otherwise run the unit in float (its QDQ fusion wants the QuantizeLinear right after the
    operator). With equal parameters the pair changes nothing: rounding is monotone, so the
    clamp commutes with it.
    """
    merged = False
    for node in rw.nodes("Relu", "Clip"):
        if not rw.live(node):
            continue
        x = dequantized(rw, node.inputs[0])
        if x is None or x.node is None or not x.per_tensor or \
                rw.sole_user(x.node.output) is not node:
            continue
        first = rw.producer(x.integers, "QuantizeLinear")
        if first is None or rw.sole_user(first.output) is not x.node or \
                not isinstance(first.inputs[1], Constant) or first.inputs[1].data.size != 1:
            continue
        quant, _ = quantizer(rw, node.output)
        if quant is None or not _same_params(x, quant) or not _same_params(x, first):
            continue
        rw.set_input(node, 0, first.inputs[0])
        merged = True
    return merged


_UNITS = {"Conv": _conv, "MatMul": _matmul, "Gemm": _gemm, "Add": _binary, "Mul": _binary,
          "AveragePool": _average_pool, "GlobalAveragePool": _average_pool, "ReduceMean": _mean,
          "Softmax": _softmax,
          "Relu": _leaky_relu, "LeakyRelu": _leaky_relu, "Sigmoid": _sigmoid,
          "Tanh": _lookup_table, "HardSwish": _lookup_table, "Clip": _lookup_table,
          "Concat": _concat, "Pad": _pad, **{op: _passthrough for op in _MOVES}}


@register_pass("to_integer", "lower")
def to_integer(graph: Graph, context: PassContext) -> PassResult:
    """Turn quantized Conv, MatMul (+ bias Add), Gemm, Add, Mul, pooling, Softmax into integers.

    A unit is DequantizeLinear -> operator (-> Relu or Clip: the output's integer range, after
    merging away a pair with the clamp's own parameters) -> QuantizeLinear, with int8 weights
    and an int32 bias, requantized by the graph's rule (onnx or tflite); MaxPool and data
    movement between equal parameters run on the integers, and a one-input function (Sigmoid,
    Tanh, HardSwish, LeakyRelu, a lone Relu or Clip) becomes a 256-entry table. Any other unit
    stays float, as does one whose int32 accumulator could wrap (a bias near 2**31) where the
    float graph does not.
    """
    mode = context.requant
    rw = Rewriter(graph)
    changed = _follow_the_rule(rw, mode)
    if not any(node.op == "DequantizeLinear" for node in graph.nodes):
        return PassResult(changed, rw.notes)  # nothing in float between Dequantize, Quantize
    changed |= _dequantize_later(rw)
    changed |= _merge_requantized_clamps(rw)
    for node in rw.nodes(*_UNITS):
        if node.output.type.dtype != "float32" or not rw.live(node):
            continue
        try:  # True, False, or the reason it stays float
            fused = _UNITS[node.op](rw, node, mode)
        except KilnError as exc:  # the integer operator refuses these parameters
            fused = str(exc)
        if fused is True:
            changed = True
        elif _touches_quantization(rw, node):
            why = fused or _why_float(rw, node, mode)
            rw.note(f"{node.name} ({node.op}) stays float: {why}")
    rw.finish()
    return PassResult(changed, rw.notes, rebases_numerics=changed)


# Integer operators a file may already hold (QOperator ONNX, TFLite) whose arithmetic exists
# under both rules: they follow the graph's rule when the user chose one (--requant).
_EITHER_RULE = ("QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearMul",
                "QLinearAveragePool", "QLinearGlobalAveragePool", "QuantizeLinear")


def _follow_the_rule(rw: Rewriter, mode: str) -> bool:
    """Give loaded integer operators the run's rule; say which cannot follow it and why."""
    graph, moved = rw.graph, 0
    for node in rw.nodes(*_EITHER_RULE):
        was = node.attrs.get("requant", "onnx")
        if was == mode:
            continue
        node.attrs["requant"] = mode
        try:
            rw.retype(node)
            moved += 1
        except KilnError as exc:
            node.attrs["requant"] = was
            rw.note(f"{node.name} ({node.op}) keeps the {was} rule: {exc}")
    if moved:
        rw.note(f"{moved} integer operators of the file follow the {mode} rule")
    kept = sorted({n.op for n in graph.nodes if n.op not in _EITHER_RULE
                   and n.attrs.get("requant", mode) != mode})
    if kept:
        rw.note(f"{', '.join(kept)} keep their rule: their arithmetic exists under one only")
    return bool(moved)


def _touches_quantization(rw: Rewriter, node: Node) -> bool:
    """Whether a DequantizeLinear feeds `node` (a float model's nodes are not worth a note)."""
    return any(rw.producer(v, "DequantizeLinear") is not None for v in node.inputs)


def _why_float(rw: Rewriter, node: Node, mode: str) -> str:
    """The first reason found why `node` did not become an integer operator."""
    for i, value in enumerate(node.inputs):
        if value is None:
            continue
        d = dequantized(rw, value)
        if d is None and not isinstance(value, Constant):
            return f"input {i} ({value.name}) is not read through a DequantizeLinear"
        if d is not None and i == 0 and not d.per_tensor:
            return f"input {i} ({value.name}) is quantized per channel"
        if d is not None and i > 0 and not isinstance(d.integers, Constant) and \
                node.op in ("Conv", "Gemm", "MatMul"):
            return f"its weights ({value.name}) are computed at run time"
    quant, _ = quantizer(rw, node.output)
    if quant is None:
        return "its result is not quantized by one per-tensor QuantizeLinear"
    if node.op == "Softmax" and mode == "tflite":
        return ("TFLite Micro's softmax normalizes the last axis into int8 of scale 1/256 and "
                "zero point -128")
    if node.op in ("Sigmoid", "Tanh", "HardSwish", "Clip", "Concat") and mode != "onnx":
        return f"the integer {node.op} of the tflite rule comes with the TFLite front end"
    return "its quantization parameters do not allow an exact integer operator"
