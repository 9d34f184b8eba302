"""TRANSPOSE_CONV as a convolution over the input spread out by its strides.

TFLite's transposed convolution adds input[y] * filter[f] into output[y * stride - pad + f].
The same sums come from spreading the input (stride - 1 zeros between neighbours), padding it
by filter - 1 - pad, and convolving with the filter turned half a turn: each output sums the
same products, the inserted zeros contributing none. For 8 bits the zeros are the input's zero
point (real 0), so the 32-bit sums, and with them TFLite Micro's per-channel requantization
(the one CONV_2D uses), are the same integers. The padding is TFLite's: from the output size,
as a convolution from the output to the input would pad it.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import is_integer
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator, Tensor
from compiler.frontends.tflite.layers import convolution_node
from compiler.ir.graph import Value


def _fill(b: Builder, x: Tensor) -> Value:
    value = int(x.zero_point[0]) if is_integer(x) else 0
    return b.constant("zero", np.array(value, x.dtype))


def _spread(b: Builder, value: Value, x: Tensor, strides: list[int]) -> Value:
    """Spread (N, H, W, C) to (N, (H-1)sh+1, (W-1)sw+1, C), zeros between rows and columns."""
    n, h, w, c = x.shape
    sh, sw = strides
    if sh == sw == 1:
        return value
    y = b.add("Reshape", [value, b.constant("shape", np.array([n, h, 1, w, 1, c]))])
    pads = np.zeros((6, 2), np.int64)
    pads[2, 1], pads[4, 1] = sh - 1, sw - 1
    y = b.add("Pad", [y, b.constant("pads", pads.T.reshape(-1)), _fill(b, x)])
    y = b.add("Reshape", [y, b.constant("shape", np.array([n, h * sh, w * sw, c]))])
    return b.add("Slice", [y, b.constant("starts", np.array([0, 0])),
                           b.constant("ends", np.array([(h - 1) * sh + 1, (w - 1) * sw + 1])),
                           b.constant("axes", np.array([1, 2]))])


def _tflite_pad(padding: int, out: int, stride: int, kernel: int) -> int:
    """ComputePaddingHeightWidth of TFLite over the output size: the pad before, SAME or VALID."""
    if padding != 0:
        return 0
    steps = (out + stride - 1) // stride
    return max((steps - 1) * stride + kernel - out, 0) // 2


def transpose_conv(b: Builder, op: Operator) -> None:
    """TRANSPOSE_CONV(output_shape, weights OHWI, input NHWC[, bias])."""
    shape_tensor, w, x = (b.tensor(op.inputs[i]) for i in range(3))
    if shape_tensor.data is None or w.data is None:
        raise ModelError("its output shape and weights must be constants")
    out_shape = [int(v) for v in np.asarray(shape_tensor.data).reshape(-1)]
    if len(out_shape) != 4 or tuple(out_shape) != tuple(b.tensor(op.outputs[0]).shape):
        raise ModelError(f"its output shape {out_shape} is not its output tensor's "
                         f"{list(b.tensor(op.outputs[0]).shape)}")
    weights = np.asarray(w.data if is_integer(x) else w.data.astype(np.float32))
    if weights.ndim != 4 or weights.shape[3] != x.shape[3]:
        raise ModelError(f"the weights {w.name} {list(weights.shape)} are not OHWI over the "
                         f"input's {x.shape[3]} channels")
    o = op.options
    strides = [int(o.StrideH()), int(o.StrideW())] if o is not None else [1, 1]
    padding = int(o.Padding()) if o is not None else 1
    if min(strides) < 1:
        raise ModelError(f"its strides {strides} must be positive")
    kernel = list(weights.shape[1:3])
    value = _spread(b, b.value(op.inputs[2]), x, strides)
    spread = [(x.shape[1 + i] - 1) * strides[i] + 1 for i in range(2)]
    begin, end = [], []
    for i in range(2):
        pad = _tflite_pad(padding, out_shape[1 + i], strides[i], kernel[i])
        begin.append(kernel[i] - 1 - pad)
        end.append(out_shape[1 + i] + kernel[i] - 1 - spread[i] - begin[i])
    if min(begin + end) < 0:  # more padding than the filter reaches: crop the spread input
        starts = [max(-v, 0) for v in begin]
        ends = [spread[i] - max(-end[i], 0) for i in range(2)]
        value = b.add("Slice", [value, b.constant("starts", np.array(starts)),
                                b.constant("ends", np.array(ends)),
                                b.constant("axes", np.array([1, 2]))])
        begin, end = [max(v, 0) for v in begin], [max(v, 0) for v in end]
    turned = weights[:, ::-1, ::-1, :].transpose(0, 3, 1, 2).copy()
    attrs = {"strides": [1, 1], "dilations": [1, 1], "layout": "NHWC", "pads": begin + end,
             "group": 1, "kernel_shape": kernel}
    bias_index = op.inputs[3] if len(op.inputs) > 3 else -1
    convolution_node(b, op, value, x, turned, w, attrs, bias_index)


TRANSPOSE_CONV = {"TRANSPOSE_CONV": transpose_conv}
