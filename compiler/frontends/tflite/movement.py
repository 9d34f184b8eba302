"""TFLite's data-movement builtins and MEAN: the same on float and 8-bit tensors.

Moving values never changes them, so an 8-bit tensor moves as its stored integers (TFLite
Micro's CONCATENATION, PAD and friends copy bytes). MEAN over the image of an NHWC tensor is
an integer global average pool for 8 bits (TFLite Micro's MEAN arithmetic).
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import float_activation, is_integer
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator
from compiler.frontends.tflite.maths import integer_reduce


def _constant(b: Builder, op: Operator, i: int, what: str) -> np.ndarray:
    if i >= len(op.inputs) or op.inputs[i] < 0 or b.tensor(op.inputs[i]).data is None:
        raise ModelError(f"its {what} must be a constant")
    return np.asarray(b.tensor(op.inputs[i]).data)


def reshape(b: Builder, op: Operator) -> None:
    """RESHAPE, SQUEEZE, EXPAND_DIMS: to the output tensor's static shape."""
    out = b.tensor(op.outputs[0])
    b.add("Reshape", [b.value(op.inputs[0]), b.constant("shape", np.array(out.shape))],
          out=op.outputs[0])


def transpose(b: Builder, op: Operator) -> None:
    """TRANSPOSE by a constant permutation."""
    perm = _constant(b, op, 1, "permutation")
    b.add("Transpose", [b.value(op.inputs[0])], {"perm": [int(p) for p in perm]},
          out=op.outputs[0])


def pad(b: Builder, op: Operator) -> None:
    """PAD (with the output's zero point for 8 bits, 0 for float) and PADV2 (a given value)."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    paddings = _constant(b, op, 1, "paddings").reshape(-1, 2)
    pads = np.concatenate([paddings[:, 0], paddings[:, 1]]).astype(np.int64)
    if op.builtin == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        value = _constant(b, op, 2, "padding value").reshape(-1)[:1].astype(x.dtype)
    elif is_integer(out):
        value = np.array([out.zero_point[0]], x.dtype)
    else:
        value = np.zeros(1, x.dtype)
    b.add("Pad", [b.value(op.inputs[0]), b.constant("pads", pads),
                  b.constant("pad_value", value.reshape(()))], out=op.outputs[0])


def concatenation(b: Builder, op: Operator) -> None:
    """CONCATENATION: the stored values joined (TFLite Micro copies 8-bit inputs as they are)."""
    axis = int(op.options.Axis()) if op.options is not None else 0
    fused = op.options is not None and int(op.options.FusedActivationFunction()) != 0
    if fused and is_integer(b.tensor(op.outputs[0])):
        raise ModelError("an 8-bit CONCATENATION with a fused activation is not supported")
    y = b.add("Concat", [b.value(i) for i in op.inputs], {"axis": axis},
              out=None if fused else op.outputs[0])
    if fused:
        float_activation(b, op, y, op.outputs[0])


def pack(b: Builder, op: Operator) -> None:
    """PACK: each input given a new axis, then joined along it."""
    axis = int(op.options.Axis()) if op.options is not None else 0
    rank = len(b.tensor(op.inputs[0]).shape) + 1
    axes = b.constant("axes", np.array([axis % rank]))
    parts = [b.add("Unsqueeze", [b.value(i), axes]) for i in op.inputs]
    b.add("Concat", parts, {"axis": axis % rank}, out=op.outputs[0])


def strided_slice(b: Builder, op: Operator) -> None:
    """STRIDED_SLICE with begin, end and strides constants, begin/end/shrink masks."""
    o = op.options
    if o is not None and (int(o.EllipsisMask()) or int(o.NewAxisMask())):
        raise ModelError("STRIDED_SLICE with an ellipsis or new-axis mask is not supported")
    x = b.tensor(op.inputs[0])
    begin, end, strides = (_constant(b, op, i, what).astype(np.int64) for i, what in
                           ((1, "begin"), (2, "end"), (3, "strides")))
    rank = len(begin)
    begin_mask = int(o.BeginMask()) if o is not None else 0
    end_mask = int(o.EndMask()) if o is not None else 0
    shrink = int(o.ShrinkAxisMask()) if o is not None else 0
    big = np.iinfo(np.int64).max
    starts, ends = begin.copy(), end.copy()
    for i in range(rank):
        if begin_mask >> i & 1:
            starts[i] = 0 if strides[i] > 0 else big
        if end_mask >> i & 1:
            ends[i] = big if strides[i] > 0 else -big
        if shrink >> i & 1:
            ends[i] = starts[i] + 1 if starts[i] != -1 else big
            strides[i] = 1
    y = b.add("Slice", [b.value(op.inputs[0]), b.constant("starts", starts),
                        b.constant("ends", ends), b.constant("axes", np.arange(rank)),
                        b.constant("steps", strides)])
    if shrink or len(x.shape) != len(b.tensor(op.outputs[0]).shape):
        reshape_to = np.array(b.tensor(op.outputs[0]).shape, np.int64)
        b.add("Reshape", [y, b.constant("shape", reshape_to)], out=op.outputs[0])
    else:
        b.values[op.outputs[0]] = y
        if tuple(y.type.shape) != b.tensor(op.outputs[0]).shape:
            raise ModelError(f"its output is stated as {list(b.tensor(op.outputs[0]).shape)} "
                             f"but the slice gives {list(y.type.shape)}")


def shape(b: Builder, op: Operator) -> None:
    """SHAPE: the static shape as a constant of the output's type."""
    out = b.tensor(op.outputs[0])
    b.values[op.outputs[0]] = b.constant(out.name, np.array(b.tensor(op.inputs[0]).shape,
                                                              out.dtype))


def mean(b: Builder, op: Operator) -> None:
    """MEAN: ReduceMean for float, TFLite Micro's integer mean for 8 bits.

    Over H and W of an NHWC image it is an integer pool; over other axes an IntReduce.
    """
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    axes = sorted(int(a) % max(len(x.shape), 1) for a in _constant(b, op, 1, "axes").reshape(-1))
    keep = bool(op.options.KeepDims()) if op.options is not None else False
    if not is_integer(x):
        b.add("ReduceMean", [b.value(op.inputs[0]), b.constant("axes", np.array(axes))],
              {"keepdims": int(keep)}, out=op.outputs[0])
        return
    if len(x.shape) != 4 or axes != [1, 2]:
        integer_reduce(b, op, axes, keep, mean=True)
        return
    inputs = [b.value(op.inputs[0]), *b.scale_and_zero_point(x), *b.scale_and_zero_point(out)]
    pooled = b.add("QLinearGlobalAveragePool", inputs, {"requant": "tflite", "layout": "NHWC"},
                   out=op.outputs[0] if keep else None)
    if not keep:
        b.add("Reshape", [pooled, b.constant("shape", np.array(out.shape))], out=op.outputs[0])


MOVEMENT = {
    "RESHAPE": reshape, "SQUEEZE": reshape, "EXPAND_DIMS": reshape, "TRANSPOSE": transpose,
    "PAD": pad, "PADV2": pad, "CONCATENATION": concatenation, "PACK": pack,
    "STRIDED_SLICE": strided_slice, "SHAPE": shape, "MEAN": mean,
}
