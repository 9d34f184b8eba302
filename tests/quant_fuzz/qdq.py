"""QDQ graphs built from scratch for the hostile-model campaign (`test_quant_fuzz`).

Each unit is DequantizeLinear, a float operator (Conv of 1 to 3 spatial dimensions, MatMul
with a bias Add, Gemm, Add, Mul, pools, Sigmoid, Tanh, LeakyRelu, Softmax, Concat, MaxPool,
Reshape, Transpose), maybe a Relu or Clip, and QuantizeLinear: the form onnxruntime's
quantizer writes, which Kiln's `to_integer` and onnxruntime's integer path both fuse. Weights
are int8 initializers read through DequantizeLinear, per tensor or per channel; biases are
int32 with the product scale (and now and then a zero point, or values near the int32 limits).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from tests.quant_fuzz.qoperator import Builder, QTensor, concat_operand_shape, start, window


def dq(b: Builder, q: QTensor, axis: int | None = None, scale=None, zp=None) -> str:
    """`q` read through a DequantizeLinear (per axis when `scale` is an array)."""
    out = b.name(q.name + "_f")
    inputs = [q.name, b.operand("s", np.float32(q.scale) if scale is None else scale),
              b.operand("z", np.array(q.zp, q.dtype) if zp is None else zp)]
    b.node("DequantizeLinear", inputs, [out], **({} if axis is None else {"axis": axis}))
    return out


def quantize(b: Builder, real: str, shape, dtype, clamp: bool = True) -> QTensor:
    """`real` quantized to a fresh tensor, through a Relu or Clip now and then."""
    q = b.fresh("q", shape, dtype)
    if clamp and b.chance(0.25):
        clipped = b.name("act")
        if b.chance(0.5):
            b.node("Relu", [real], [clipped])
        else:
            bounds = sorted(float(np.float32(v)) for v in b.rng.uniform(-2, 8, 2))
            b.node("Clip", [real, b.operand("lo", np.float32(bounds[0])),
                            b.operand("hi", np.float32(bounds[1]))], [clipped])
        real = clipped
    b.node("QuantizeLinear", [real, b.operand("s", np.float32(q.scale)),
                              b.operand("z", np.array(q.zp, dtype))], [q.name])
    return q


def _weights(b: Builder, shape, per_channel: bool) -> tuple[str, np.ndarray]:
    """An int8 initializer read through DequantizeLinear, and its scales (one per channel)."""
    count = shape[0] if per_channel else 1
    scales = np.array([b.scale() for _ in range(count)], np.float32)
    w = QTensor(b.name("w"), tuple(shape), np.int8, float(scales[0]), 0)
    b.inits.append(onnx.numpy_helper.from_array(b.integers(shape, np.int8, True), w.name))
    if per_channel:
        return dq(b, w, 0, scales, np.zeros(count, np.int8)), scales
    return dq(b, w), scales


def _bias(b: Builder, count: int, scales: np.ndarray, x: QTensor, axis_ok: bool = True) -> str:
    """An int32 bias through DequantizeLinear with scale x_scale * w_scale (zero point 0)."""
    values = b.bias(count)
    with np.errstate(over="ignore", under="ignore"):  # extreme scales make extreme products
        scale = (np.float32(x.scale) * scales).astype(np.float32)
    bq = QTensor(b.name("bias"), (count,), np.int32, float(scale[0]), 0)
    b.inits.append(onnx.numpy_helper.from_array(values, bq.name))
    zp = None
    if b.chance(0.08):
        b.notes.append("bias with a non-zero zero point")
        bq.zp = int(b.rng.integers(-1000, 1000))
    if scale.size > 1 and axis_ok:
        zp = np.full(count, bq.zp, np.int32)
        return dq(b, bq, 0, scale, zp)
    return dq(b, bq)


def conv(b: Builder, x: QTensor) -> QTensor | None:
    n, c, *sizes = x.shape
    win = window(b, sizes)
    if win is None:
        return None
    group = c if c > 1 and b.chance(0.3) else 1
    m = group * int(b.rng.integers(1, 3)) if group > 1 else int(b.rng.integers(1, 7))
    b.u8s8 |= x.dtype == np.uint8
    w, scales = _weights(b, (m, c // group, *win["kernel_shape"]), b.chance(0.6))
    inputs = [dq(b, x), w]
    if b.chance(0.8):
        inputs.append(_bias(b, m, np.broadcast_to(scales, (m,)) if scales.size > 1 else scales,
                            x))
    out = b.name("conv")
    attrs = {k: v for k, v in win.items() if k != "out"}
    b.node("Conv", inputs, [out], group=group, **attrs)
    b.notes.append(f"QDQ Conv {len(sizes)}-D{' depthwise' if group > 1 else ''}")
    return quantize(b, out, (n, m, *win["out"]), x.dtype)


def matmul(b: Builder, a: QTensor) -> QTensor | None:
    k, n = a.shape[-1], int(b.rng.integers(1, 9))
    b.u8s8 |= a.dtype == np.uint8
    if b.chance(0.2):
        other = b.fresh("B", (k, n), np.int8)
        other.zp = 0
        name = b.operand("B", b.integers((k, n), np.int8, True), True)
        weights, scales = dq(b, QTensor(name, (k, n), np.int8, other.scale, 0)), \
            np.float32([other.scale])
        b.notes.append("QDQ MatMul with a runtime B")
    else:
        weights, scales = _weights(b, (k, n), False)
        b.notes.append("QDQ MatMul")
    out = b.name("mm")
    b.node("MatMul", [dq(b, a), weights], [out])
    if b.chance(0.6):
        biased = b.name("mmb")
        b.node("Add", [out, _bias(b, n, scales, a)], [biased])
        out = biased
    return quantize(b, out, (*a.shape[:-1], n), a.dtype)


def gemm(b: Builder, a: QTensor) -> QTensor | None:
    if len(a.shape) != 2:
        return None
    k, n = a.shape[1], int(b.rng.integers(1, 9))
    b.u8s8 |= a.dtype == np.uint8
    w, scales = _weights(b, (n, k), b.chance(0.4))
    inputs = [dq(b, a), w]
    if b.chance(0.7):
        inputs.append(_bias(b, n, scales, a))
    out = b.name("gemm")
    b.node("Gemm", inputs, [out], transB=1)
    b.notes.append("QDQ Gemm")
    return quantize(b, out, (a.shape[0], n), a.dtype)


def binary(b: Builder, a: QTensor) -> QTensor | None:
    op = b.pick(["Add", "Mul"])
    shape = b.pick([a.shape, (a.shape[-1],), (1,)])
    other = b.fresh("o", shape, a.dtype)
    runtime = b.chance(0.5)
    other.name = b.operand("o", b.integers(shape, a.dtype), runtime)
    out = b.name(op.lower())
    b.node(op, [dq(b, a), dq(b, other)], [out])
    b.notes.append(f"QDQ {op} with a {'runtime' if runtime else 'constant'} operand")
    return quantize(b, out, a.shape, a.dtype)


def pool(b: Builder, x: QTensor) -> QTensor | None:
    n, c, *sizes = x.shape
    out = b.name("pool")
    if b.chance(0.4):
        b.node("GlobalAveragePool", [dq(b, x)], [out])
        b.notes.append("QDQ GlobalAveragePool")
        return quantize(b, out, (n, c) + (1,) * len(sizes), x.dtype, clamp=False)
    win = window(b, sizes, dilate=False)
    if win is None:
        return None
    op = b.pick(["AveragePool", "MaxPool"])
    attrs = {k: win[k] for k in ("kernel_shape", "strides", "pads")}
    if op == "AveragePool":
        attrs["count_include_pad"] = int(b.chance(0.5))
    b.node(op, [dq(b, x)], [out], **attrs)
    b.notes.append(f"QDQ {op} {len(sizes)}-D")
    same = op == "MaxPool" and b.chance(0.7)
    y = quantize(b, out, (n, c, *win["out"]), x.dtype, clamp=False)
    if same:  # the form whose integers pass through unchanged
        _same_params(b, x, y)
    return y


def _same_params(b: Builder, x: QTensor, y: QTensor) -> None:
    """Give the QuantizeLinear just added (`y`) `x`'s scale and zero point: the form whose
    integers pass through unchanged."""
    b.inits[-2].CopyFrom(onnx.numpy_helper.from_array(np.float32(x.scale), b.inits[-2].name))
    b.inits[-1].CopyFrom(onnx.numpy_helper.from_array(np.array(x.zp, x.dtype),
                                                      b.inits[-1].name))
    y.scale, y.zp = x.scale, x.zp


def activation(b: Builder, x: QTensor) -> QTensor | None:
    op = b.pick(["Sigmoid", "Tanh", "LeakyRelu", "Softmax", "Relu"])
    out = b.name(op.lower())
    attrs = {"alpha": float(np.float32(b.pick([0.1, 0.3, -0.2])))} if op == "LeakyRelu" else {}
    if op == "Softmax":
        attrs = {"axis": -1}
    b.node(op, [dq(b, x)], [out], **attrs)
    b.notes.append(f"QDQ {op}")
    y = quantize(b, out, x.shape, x.dtype, clamp=False)
    if op in ("Softmax", "Sigmoid") and b.chance(0.4):  # the fixed output parameters
        b.inits[-2].CopyFrom(onnx.numpy_helper.from_array(np.float32(1 / 256),
                                                          b.inits[-2].name))
        low = int(np.iinfo(x.dtype).min)
        b.inits[-1].CopyFrom(onnx.numpy_helper.from_array(np.array(low, x.dtype),
                                                          b.inits[-1].name))
        y.scale, y.zp = 1 / 256, low
        if b.chance(0.3):  # the denormal scale an audit found after a softmax
            b.inits[-2].CopyFrom(onnx.numpy_helper.from_array(np.float32(1e-40),
                                                              b.inits[-2].name))
            y.scale = float(np.float32(1e-40))
            b.notes.append("denormal scale after the activation")
    return y


def concat(b: Builder, a: QTensor) -> QTensor | None:
    axis, extra = concat_operand_shape(b, a)
    other = b.fresh("c", extra, a.dtype)
    other.name = b.operand("c", b.integers(extra, a.dtype), b.chance(0.5))
    out = b.name("cat")
    b.node("Concat", [dq(b, a), dq(b, other)], [out], axis=axis)
    shape = list(a.shape)
    shape[axis] += extra[axis]
    b.notes.append(f"QDQ Concat axis {axis}")
    return quantize(b, out, shape, a.dtype, clamp=False)


def move(b: Builder, x: QTensor) -> QTensor | None:
    out = b.name("mv")
    if b.chance(0.5):
        perm = [int(p) for p in b.rng.permutation(len(x.shape))]
        b.node("Transpose", [dq(b, x)], [out], perm=perm)
        shape = [x.shape[p] for p in perm]
        b.notes.append("QDQ Transpose")
    else:
        shape = [x.shape[0], int(np.prod(x.shape[1:]))]
        b.node("Reshape", [dq(b, x), b.operand("shape", np.array([x.shape[0], -1], np.int64))],
               [out])
        b.notes.append("QDQ Reshape")
    y = quantize(b, out, shape, x.dtype, clamp=False)
    if b.chance(0.7):
        _same_params(b, x, y)
    return y


IMAGE_UNITS = [conv, conv, conv, pool, binary, concat, activation, move]
MATRIX_UNITS = [matmul, matmul, gemm, gemm, binary, concat, activation, move]


def qdq_graph(rng: np.random.Generator) -> tuple[onnx.ModelProto, Builder]:
    """A chain of one to three QDQ units on an int8 or uint8 tensor."""
    b = Builder(rng)
    x, first = start(b, b.chance(0.6))
    b.notes.insert(0, first)
    for _ in range(int(rng.integers(1, 4))):
        units = IMAGE_UNITS if len(x.shape) >= 3 else MATRIX_UNITS
        for _attempt in range(4):
            y = b.pick(units)(b, x)
            if y is not None:
                x = y
                break
    if b.chance(0.3):
        out = dq(b, x)
        b.notes.append("dequantized output")
        return b.model([(out, TensorProto.FLOAT, x.shape)], b.pick([13, 13, 17, 19, 21])), b
    elem = TensorProto.INT8 if x.dtype == np.int8 else TensorProto.UINT8
    return b.model([(x.name, elem, x.shape)], b.pick([13, 13, 17, 19, 21])), b
