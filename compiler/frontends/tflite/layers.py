"""TFLite builtins as Kiln operators, NHWC from the start, with TFLite Micro's arithmetic.

Float builtins become the float operators (layout NHWC, weights in Kiln's OIHW). 8-bit ones
become the integer operators with the `tflite` requantization rule: CONV_2D and
DEPTHWISE_CONV_2D QLinearConv, FULLY_CONNECTED QGemm, AVERAGE_POOL_2D QLinearAveragePool (or
the global pool over a whole image), SOFTMAX QLinearSoftmax, and a fused activation the
integer output range TFLite Micro computes for it. Int8 weights of a float model (hybrid) are
dequantized at load.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import (
    activation_name,
    float_activation,
    is_integer,
    output_range,
)
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator, Tensor


def _float_weights(b: Builder, t: Tensor) -> np.ndarray:
    """Float weights; int8 weights of a hybrid model dequantized per channel."""
    if t.data is None:
        raise ModelError(f"the weights {t.name} are computed at run time; Kiln needs constants")
    if t.dtype == "float32":
        return t.data
    if t.dtype in ("int8", "uint8") and t.quantized:
        shape = [1] * t.data.ndim
        if t.scale.size > 1:
            shape[t.axis] = t.scale.size
        scale, zp = t.scale.reshape(shape), t.zero_point.reshape(shape)
        return (scale.astype(np.float64) * (t.data.astype(np.int64) - zp)).astype(np.float32)
    raise ModelError(f"the weights {t.name} are {t.dtype}; a float layer takes float32 or "
                     "quantized int8 weights")


def _pads(op: Operator, x: Tensor, kernel: tuple[int, int], strides, dilations) -> list[int]:
    """ONNX pads [top, left, bottom, right] of TFLite's SAME (the odd one at the end) or VALID."""
    if int(op.options.Padding()) != 0:
        return [0, 0, 0, 0]
    before, after = [], []
    for size, k, s, d in zip(x.shape[1:3], kernel, strides, dilations):
        extent = (k - 1) * d + 1
        out = (size + s - 1) // s
        total = max((out - 1) * s + extent - size, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return before + after


def _spatial_attrs(op: Operator, x: Tensor, kernel, dilated: bool = True) -> dict:
    o = op.options
    strides = [int(o.StrideH()), int(o.StrideW())]
    dilations = [int(o.DilationHFactor()), int(o.DilationWFactor())] if dilated else [1, 1]
    if min(strides + dilations) < 1:
        raise ModelError(f"strides {strides} and dilations {dilations} must be positive")
    return {"strides": strides, "dilations": dilations, "layout": "NHWC",
            "pads": _pads(op, x, kernel, strides, dilations)}


def _convolution(b: Builder, op: Operator, oihw: np.ndarray, w: Tensor, group: int) -> None:
    x = b.tensor(op.inputs[0])
    attrs = {**_spatial_attrs(op, x, oihw.shape[2:]), "group": group,
             "kernel_shape": list(oihw.shape[2:])}
    bias_index = op.inputs[2] if len(op.inputs) > 2 else -1
    convolution_node(b, op, b.value(op.inputs[0]), x, oihw, w, attrs, bias_index)


def convolution_node(b: Builder, op: Operator, value, x: Tensor, oihw: np.ndarray, w: Tensor,
                     attrs: dict, bias_index: int) -> None:
    """The convolution of `value` into the operator's output, its fused activation applied.

    Float gives a Conv, 8 bits a QLinearConv with TFLite's requantization.
    """
    out = b.tensor(op.outputs[0])
    bias = None if bias_index < 0 else b.tensor(bias_index)
    if is_integer(x):
        if not w.quantized or w.dtype != "int8":
            raise ModelError(f"an 8-bit convolution needs int8 quantized weights; {w.name} is "
                             f"{w.dtype}")
        channels = oihw.shape[0]
        ws = np.broadcast_to(w.scale, (channels,)) if w.scale.size == 1 else w.scale
        inputs = [value, *b.scale_and_zero_point(x),
                  b.constant(w.name, oihw), b.constant(f"{w.name}_scale", ws.astype(np.float32)),
                  b.constant(f"{w.name}_zero_point", np.zeros(channels, np.int8)),
                  *b.scale_and_zero_point(out)]
        if bias is not None:
            inputs.append(b.value(bias_index))
        b.add("QLinearConv", inputs, {**attrs, "requant": "tflite",
                                      "output_range": output_range(op, out)}, out=op.outputs[0])
        return
    inputs = [value, b.constant(w.name, oihw)]
    if bias is not None:
        inputs.append(b.constant(bias.name, _float_weights(b, bias)))
    fused = activation_name(op) != "NONE"
    y = b.add("Conv", inputs, attrs, out=None if fused else op.outputs[0])
    float_activation(b, op, y, op.outputs[0])


def _weights_array(b: Builder, op: Operator) -> tuple[Tensor, np.ndarray]:
    w = b.tensor(op.inputs[1])
    if w.data is None:
        raise ModelError(f"the weights {w.name} are computed at run time; Kiln needs constants")
    x = b.tensor(op.inputs[0])
    data = w.data if is_integer(x) else _float_weights(b, w)
    return w, data


def conv_2d(b: Builder, op: Operator) -> None:
    """CONV_2D: weights OHWI -> OIHW; groups when the input has more channels than a filter."""
    w, data = _weights_array(b, op)
    if data.ndim != 4:
        raise ModelError(f"the weights {w.name} have shape {list(data.shape)}; CONV_2D takes OHWI")
    in_channels = b.tensor(op.inputs[0]).shape[-1]
    if data.shape[3] == 0 or in_channels % data.shape[3]:
        raise ModelError(f"weights of {data.shape[3]} input channels do not divide the input's "
                         f"{in_channels}")
    _convolution(b, op, data.transpose(0, 3, 1, 2), w, in_channels // data.shape[3])


def depthwise_conv_2d(b: Builder, op: Operator) -> None:
    """DEPTHWISE_CONV_2D: weights [1, H, W, C*M] -> [C*M, 1, H, W], one group per input channel."""
    w, data = _weights_array(b, op)
    if data.ndim != 4 or data.shape[0] != 1:
        raise ModelError(f"the weights {w.name} have shape {list(data.shape)}; "
                         "DEPTHWISE_CONV_2D takes [1, H, W, C*M]")
    in_channels = b.tensor(op.inputs[0]).shape[-1]
    if in_channels == 0 or data.shape[3] % in_channels:
        raise ModelError(f"{data.shape[3]} output channels are not a multiple of the input's "
                         f"{in_channels}")
    multiplier = int(op.options.DepthMultiplier()) if op.options is not None else 0
    if multiplier * in_channels != data.shape[3]:
        # TFLite's kernels loop over the multiplier, not the weights' channels: they would
        # read and write outside the tensors.
        raise ModelError(f"its depth multiplier {multiplier} times the input's {in_channels} "
                         f"channels is not its weights' {data.shape[3]} output channels")
    _convolution(b, op, data[0].transpose(2, 0, 1)[:, None], w, in_channels)


def fully_connected(b: Builder, op: Operator) -> None:
    """FULLY_CONNECTED: weights [out, in]; the input flattened to rows of `in` first."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    w, data = _weights_array(b, op)
    if data.ndim != 2 or data.shape[1] == 0 or int(np.prod(x.shape)) % data.shape[1]:
        raise ModelError(f"weights of shape {list(data.shape)} do not fit an input of "
                         f"{list(x.shape)}")
    rows = int(np.prod(x.shape)) // data.shape[1]
    value = b.value(op.inputs[0])
    if x.shape != (rows, data.shape[1]):
        value = b.add("Reshape", [value, b.constant("shape", np.array([rows, data.shape[1]]))])
    bias_index = op.inputs[2] if len(op.inputs) > 2 else -1
    reshaped = out.shape != (rows, data.shape[0])
    target = None if reshaped else op.outputs[0]
    if is_integer(x):
        scale = w.scale.astype(np.float32)
        inputs = [value, *b.scale_and_zero_point(x), b.constant(w.name, data),
                  b.constant(f"{w.name}_scale", scale),
                  b.constant(f"{w.name}_zero_point", np.zeros(scale.size, np.int8)),
                  None if bias_index < 0 else b.value(bias_index), *b.scale_and_zero_point(out)]
        y = b.add("QGemm", inputs, {"transB": 1, "requant": "tflite",
                                    "output_range": output_range(op, out)}, out=target)
    else:
        inputs = [value, b.constant(w.name, data)]
        if bias_index >= 0:
            inputs.append(b.constant(b.tensor(bias_index).name,
                                     _float_weights(b, b.tensor(bias_index))))
        fused = activation_name(op) != "NONE"
        y = b.add("Gemm", inputs, {"transB": 1}, out=None if fused else target)
        y = float_activation(b, op, y, target)
    if reshaped:
        b.add("Reshape", [y, b.constant("shape", np.array(out.shape))], out=op.outputs[0])


def pool_attributes(op: Operator, x: Tensor) -> dict:
    """The pooling attributes (window, strides, pads, NHWC) of a Pool2DOptions operator."""
    o = op.options
    kernel = [int(o.FilterHeight()), int(o.FilterWidth())]
    attrs = {**_spatial_attrs(op, x, kernel, dilated=False), "kernel_shape": kernel}
    del attrs["dilations"]
    return attrs


def pool_2d(b: Builder, op: Operator) -> None:
    """AVERAGE_POOL_2D (padding excluded from the count) and MAX_POOL_2D."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    attrs = pool_attributes(op, x)
    kernel = list(attrs["kernel_shape"])
    average = op.builtin == "AVERAGE_POOL_2D"
    if average:
        attrs["count_include_pad"] = 0
    if is_integer(x):
        if average:
            inputs = [b.value(op.inputs[0]), *b.scale_and_zero_point(x),
                      *b.scale_and_zero_point(out)]
            common = {"requant": "tflite", "output_range": output_range(op, out)}
            if tuple(kernel) == tuple(x.shape[1:3]) and not any(attrs["pads"]):
                b.add("QLinearGlobalAveragePool", inputs, {**common, "layout": "NHWC"},
                      out=op.outputs[0])  # the whole image: the same arithmetic, one window
            else:
                b.add("QLinearAveragePool", inputs, {**attrs, **common}, out=op.outputs[0])
            return
        bounds = output_range(op, out)
        y = b.add("MaxPool", [b.value(op.inputs[0])], attrs,
                  out=None if bounds else op.outputs[0])
        if bounds:
            b.add("Clip", [y, b.constant("low", np.array(bounds[0], x.dtype)),
                           b.constant("high", np.array(bounds[1], x.dtype))], out=op.outputs[0])
        return
    fused = activation_name(op) != "NONE"
    y = b.add("AveragePool" if average else "MaxPool", [b.value(op.inputs[0])], attrs,
              out=None if fused else op.outputs[0])
    float_activation(b, op, y, op.outputs[0])


def softmax(b: Builder, op: Operator) -> None:
    """SOFTMAX over the last axis; beta scales the input (TFLite Micro's fixed point for 8 bits)."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    beta = float(op.options.Beta()) if op.options is not None else 1.0
    if is_integer(x):
        inputs = [b.value(op.inputs[0]), *b.scale_and_zero_point(x),
                  *b.scale_and_zero_point(out)]
        b.add("QLinearSoftmax", inputs, {"axis": -1, "opset": 13, "requant": "tflite",
                                         "beta": beta}, out=op.outputs[0])
        return
    value = b.value(op.inputs[0])
    if beta != 1.0:
        value = b.add("Mul", [value, b.constant("beta", np.array(beta, np.float32))])
    b.add("Softmax", [value], {"axis": -1}, out=op.outputs[0])


LAYERS = {
    "CONV_2D": conv_2d, "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "FULLY_CONNECTED": fully_connected, "AVERAGE_POOL_2D": pool_2d, "MAX_POOL_2D": pool_2d,
    "SOFTMAX": softmax,
}
