"""Integer operators: QLinearConv, QLinearMatMul, ConvInteger and MatMulInteger.

Accumulation is exact: inputs minus their zero points, multiplied and summed in float64, whose
53-bit mantissa holds every partial sum of 8-bit products for any layer a model has (|sum| <
2**53 needs over 10**11 taps), then taken as int64. The sum plus the int32 bias is then wrapped
to int32, as both runtimes' kernels accumulate (onnxruntime's MLAS adds the bias with
_mm_add_epi32 before converting to float; TFLite Micro adds it to an int32), and requantized by
the rule in the Kiln-only attribute `requant` (compiler/qmath/requant.py): `onnx`, what
onnxruntime does, or `tflite`, TFLite Micro's fixed point.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.ir.types import QuantParams, TensorType
from compiler.ops._spatial import activation_shape, layout_of, layout_shape
from compiler.ops.conv import CONV_ATTRS, conv_window, convolve
from compiler.ops.kiln import step_node
from compiler.ops.matmul import matmul_shape
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath.requant import (
    MODES,
    RANGES,
    multiply_by_quantized_multiplier,
    onnx_scale,
    quantize_multiplier,
    requantize_onnx,
    requantize_tflite,
    tflite_multiplier,
    wrap_int32,
)
from compiler.qmath.scales import SCALE_RULE, bad_scales

INTEGERS = tuple(RANGES)  # the 8-bit element types of quantized tensors

REQUANT_ATTRS = {
    "requant": Attr("string", "onnx", "Kiln only: how the int32 accumulator becomes the 8-bit "
                                      "output: onnx (float32 scale, ties to even, as "
                                      "onnxruntime) or tflite (Q31 multiplier and shift, as "
                                      "TFLite Micro)", onnx=False),
    "output_range": Attr("ints", None, "Kiln only: [low, high] the 8-bit output is clamped to "
                                       "(a Relu or Clip folded in)", onnx=False),
}


# -- checks shared by the operators ---------------------------------------------------------------

def require_integer(node, t: TensorType, what: str) -> None:
    """Refuse a tensor that is not 8-bit."""
    if t.dtype not in INTEGERS:
        fail(f"{node.op}'s {what} is {t.dtype}; it takes {' or '.join(INTEGERS)}")


def check_scale(node, t: TensorType, value, what: str, length: int = 1) -> None:
    """A float scale of one element (or `length`, per channel) that `SCALE_RULE` admits.

    float16 scales (opset 21) are widened to float32, exactly, before use.
    """
    if t.dtype not in ("float32", "float16"):
        fail(f"{node.op}'s {what} is {t.dtype}; scales are float32 or float16")
    if t.numel not in (1, length) or t.rank > 1:
        allowed = "one element" if length == 1 else f"one element or {length} (per channel)"
        fail(f"{node.op}'s {what} has shape {list(t.shape)}; it must have {allowed}")
    if value is not None:
        bad = bad_scales(value)
        if bad:
            fail(f"{node.op}'s {what} is {bad[0]}; {SCALE_RULE}")


def check_zero_point(node, t: TensorType | None, data_type: str, what: str,
                     length: int = 1) -> None:
    """A zero point of its tensor's type, one element (or `length`, per channel)."""
    if t is None:
        return
    if t.dtype != data_type:
        fail(f"{node.op}'s {what} is {t.dtype}, its tensor {data_type}; they must match")
    if t.numel not in (1, length) or t.rank > 1:
        fail(f"{node.op}'s {what} has shape {list(t.shape)}; it must have one element"
             + (f" or {length}" if length > 1 else ""))


def check_unary_params(node, ins, values) -> None:
    """The (x, x_scale, x_zero_point, y_scale, y_zero_point) inputs of a one-input operator."""
    x, xs, xz, ys, yz = ins
    require_integer(node, x, "input")
    check_scale(node, xs, values[1], "input scale")
    check_scale(node, ys, values[3], "output scale")
    check_zero_point(node, xz, x.dtype, "input zero point")
    check_zero_point(node, yz, x.dtype, "output zero point")


def check_requant_scales(node, values, slots: tuple[int, int, int]) -> None:
    """Refuse constant scales (input, weight, output slots) no engine computes as defined.

    The onnx rule's float32 scale must be finite; the tflite rule's multiplier must need an
    exponent of 31 at most (TFLite Micro shifts int32 values by it, undefined in C beyond).
    """
    if not all(values[i] is not None for i in slots):
        return
    if requant_rule(node) == "onnx":
        onnx_scale(*(values[i] for i in slots))
        return
    exponent = int(np.max(tflite_multiplier(*(values[i] for i in slots))[1]))
    if exponent > 31:
        fail(f"{node.op}'s multiplier input scale x weight scale / output scale needs an "
             f"exponent of {exponent}, above 31: TFLite Micro would shift int32 values by that "
             "many bits, which C leaves undefined")


def first(array, default=0):
    """The single value of a scale or zero point (`default` when the input is omitted)."""
    return default if array is None else np.asarray(array).reshape(-1)[0]


def check_range(node, dtype: str) -> None:
    """The `output_range` attribute, when set, lies within the output type."""
    bounds = node.attrs.get("output_range")
    if bounds is None:
        return
    low, high = RANGES[dtype]
    if len(bounds) != 2 or not low <= bounds[0] <= bounds[1] <= high:
        fail(f"output_range {list(bounds)} must be [low, high] within {dtype}'s [{low}, {high}]")


def requant_rule(node) -> str:
    """The node's requantization rule, checked."""
    mode = node.attrs.get("requant", "onnx")
    if mode not in MODES:
        fail(f"requant {mode!r} is not one of {', '.join(MODES)}")
    return mode


def quantized_output_type(shape, y_zp: TensorType | None, values, scale_index: int, zp_index: int
                 ) -> TensorType:
    """The 8-bit output, with its quantization when the scale and zero point are constants."""
    dtype = y_zp.dtype if y_zp is not None else "uint8"
    scale = values[scale_index]
    zp = values[zp_index] if zp_index < len(values) else None
    known = scale is not None and (y_zp is None or zp is not None)
    quant = QuantParams.from_arrays(scale, zp, None) if known else None
    return TensorType(shape, dtype, quant)


def _zp(array, dtype_hint=np.int64):
    return np.zeros((), dtype_hint) if array is None else np.asarray(array).astype(np.int64)


def requantize(node, acc: np.ndarray, in_scale, w_scale, y_scale, y_zp, y_dtype: str,
               channel_axis: int, fully_connected: bool = False) -> np.ndarray:
    """The int64 accumulator `acc` to `y_dtype` by the node's rule, per channel on an axis.

    TFLite Micro forms a per-tensor fully connected layer's multiplier from in * w in float
    first (`fully_connected`); every other multiplier is formed in double. The accumulator
    wraps to int32 first: a bias near 2**31 overflows in both runtimes' kernels, and in Kiln's.
    """
    acc = wrap_int32(acc)
    low, high = RANGES[y_dtype]
    zp = int(first(y_zp))
    w_scale = np.asarray(w_scale, np.float32).reshape(-1)
    shape = [1] * acc.ndim
    if w_scale.size > 1:
        shape[channel_axis] = w_scale.size
    x_scale, y_scale = np.float32(first(in_scale)), np.float32(first(y_scale))
    if requant_rule(node) == "tflite":
        multiplier, shift = tflite_multiplier(
            x_scale, w_scale, y_scale, product_in_float=fully_connected and w_scale.size == 1)
        out = requantize_tflite(acc, multiplier.reshape(shape), shift.reshape(shape), zp, low,
                                high)
    else:
        out = requantize_onnx(acc, onnx_scale(x_scale, w_scale, y_scale).reshape(shape), zp,
                              low, high)
    bounds = node.attrs.get("output_range")
    if bounds is not None:
        out = np.clip(out, bounds[0], bounds[1])
    return out.astype(y_dtype)


# -- convolution ----------------------------------------------------------------------------------

def _conv_shape(node, x: TensorType, w: TensorType) -> tuple[int, ...]:
    shape = activation_shape(node, x)
    group = node.attrs["group"]
    if w.rank != len(shape):
        fail(f"weights of shape {list(w.shape)} must have the rank of the input {list(shape)}")
    if group < 1 or shape[1] % group or w.shape[0] % group or w.shape[1] * group != shape[1]:
        fail(f"weights of shape {list(w.shape)} with group {group} do not fit an input of "
             f"{shape[1]} channels")
    kernel = node.attrs.get("kernel_shape")
    if kernel is not None and tuple(kernel) != tuple(w.shape[2:]):
        fail(f"kernel_shape {list(kernel)} does not match the weights' spatial shape "
             f"{list(w.shape[2:])}")
    win = conv_window(node, shape, w.shape)
    return layout_shape((shape[0], w.shape[0], *win.out), layout_of(node))


def _integer_conv(node, x, x_zp, w, w_zp) -> np.ndarray:
    """The exact int64 accumulator of a convolution of (x - x_zp) by (w - w_zp)."""
    layout = layout_of(node)
    xf = x.astype(np.float64) - float(_zp(x_zp).reshape(-1)[0])
    wz = _zp(w_zp).reshape(-1)
    wf = w.astype(np.float64) - (wz.reshape(-1, *([1] * (w.ndim - 1))) if wz.size > 1
                                 else float(wz[0]))
    attrs = {k: node.attrs[k] for k in CONV_ATTRS}
    conv = step_node("Conv", {**attrs, "layout": layout})
    return np.rint(convolve(conv, xf, wf)).astype(np.int64)


def _infer_qlinear_conv(node, ins, values):
    x, xs, xz, w, ws, wz, ys, yz = ins[:8]
    bias = ins[8] if len(ins) > 8 else None
    require_integer(node, x, "input")
    require_integer(node, w, "weights")
    out_channels = w.shape[0] if w.rank else 0
    check_scale(node, xs, values[1], "input scale")
    check_scale(node, ws, values[4], "weight scale", out_channels)
    check_scale(node, ys, values[6], "output scale")
    check_zero_point(node, xz, x.dtype, "input zero point")
    check_zero_point(node, wz, w.dtype, "weight zero point", out_channels)
    if yz is not None:
        require_integer(node, yz, "output zero point")
    if bias is not None and (bias.dtype != "int32" or bias.shape != (out_channels,)):
        fail(f"{node.op}'s bias must be int32[{out_channels}], got {bias}")
    check_requant_scales(node, values, (1, 4, 6))
    out = quantized_output_type(_conv_shape(node, x, w), yz, values, 6, 7)
    check_range(node, out.dtype)
    return [out]


def _qlinear_conv(node, x, xs, xz, w, ws, wz, ys, yz, bias=None):
    acc = _integer_conv(node, x, xz, w, wz)
    channel_axis = 1 if layout_of(node) == "NCHW" else acc.ndim - 1
    if bias is not None:
        shape = [1] * acc.ndim
        shape[channel_axis] = -1
        acc = acc + bias.astype(np.int64).reshape(shape)
    dtype = yz.dtype.name if yz is not None else "uint8"
    return requantize(node, acc, xs, ws, ys, yz, dtype, channel_axis)


def _conv_macs(node) -> int:
    w = node.inputs[3].type
    return node.outputs[0].type.numel * math.prod(w.shape[1:])


register(OpDef(
    "QLinearConv", "conv", _infer_qlinear_conv, _qlinear_conv, inputs=(8, 9), since=10,
    spatial=True, macs=_conv_macs, attrs={**CONV_ATTRS, **REQUANT_ATTRS},
    doc="integer convolution of 8-bit tensors with int32 bias, requantized to 8 bits"))


def _infer_conv_integer(node, ins, values):
    x, w = ins[:2]
    xz = ins[2] if len(ins) > 2 else None
    wz = ins[3] if len(ins) > 3 else None
    require_integer(node, x, "input")
    require_integer(node, w, "weights")
    check_zero_point(node, xz, x.dtype, "input zero point")
    check_zero_point(node, wz, w.dtype, "weight zero point", w.shape[0] if w.rank else 1)
    return [TensorType(_conv_shape(node, x, w), "int32")]


def _conv_integer(node, x, w, x_zp=None, w_zp=None):
    return _integer_conv(node, x, x_zp, w, w_zp).astype(np.int32)


register(OpDef(
    "ConvInteger", "conv", _infer_conv_integer, _conv_integer, inputs=(2, 4), since=10,
    spatial=True, macs=lambda node: node.outputs[0].type.numel * math.prod(
        node.inputs[1].type.shape[1:]), attrs=dict(CONV_ATTRS),
    doc="integer convolution of 8-bit tensors into int32 (no requantization)"))


# -- matrix products ------------------------------------------------------------------------------

def _integer_matmul(a, a_zp, b, b_zp) -> np.ndarray:
    """The exact int64 product of (a - a_zp) and (b - b_zp); b's zero point may be per column."""
    af = a.astype(np.float64) - _zp(a_zp).astype(np.float64)
    bz = _zp(b_zp)
    bf = b.astype(np.float64) - (bz.astype(np.float64) if bz.size > 1 else float(bz.reshape(-1)[0]))
    return np.rint(np.matmul(af, bf)).astype(np.int64)


def _infer_qlinear_matmul(node, ins, values):
    a, as_, az, b, bs, bz, ys, yz = ins
    require_integer(node, a, "input A")
    require_integer(node, b, "input B")
    columns = b.shape[-1] if b.rank else 1
    check_scale(node, as_, values[1], "A scale")
    check_scale(node, bs, values[4], "B scale", columns)
    check_scale(node, ys, values[6], "output scale")
    check_zero_point(node, az, a.dtype, "A zero point")
    check_zero_point(node, bz, b.dtype, "B zero point", columns)
    require_integer(node, yz, "output zero point")
    check_requant_scales(node, values, (1, 4, 6))
    shape, _ = matmul_shape(a.shape, b.shape)
    out = quantized_output_type(shape, yz, values, 6, 7)
    check_range(node, out.dtype)
    return [out]


def _qlinear_matmul(node, a, as_, az, b, bs, bz, ys, yz):
    acc = _integer_matmul(a, az, b, bz)
    return requantize(node, acc, as_, bs, ys, yz, yz.dtype.name, acc.ndim - 1,
                      fully_connected=True)


def _matmul_macs(node) -> int:
    shape, k = matmul_shape(node.inputs[0].type.shape, node.inputs[3].type.shape)
    return math.prod(shape) * k


register(OpDef(
    "QLinearMatMul", "matmul", _infer_qlinear_matmul, _qlinear_matmul, inputs=(8, 8), since=10,
    macs=_matmul_macs, attrs=dict(REQUANT_ATTRS),
    doc="matrix product of 8-bit tensors, requantized to 8 bits"))


def _infer_matmul_integer(node, ins, values):
    a, b = ins[:2]
    az = ins[2] if len(ins) > 2 else None
    bz = ins[3] if len(ins) > 3 else None
    require_integer(node, a, "input A")
    require_integer(node, b, "input B")
    check_zero_point(node, az, a.dtype, "A zero point", a.shape[-2] if a.rank > 1 else 1)
    check_zero_point(node, bz, b.dtype, "B zero point", b.shape[-1] if b.rank else 1)
    shape, _ = matmul_shape(a.shape, b.shape)
    return [TensorType(shape, "int32")]


def _matmul_integer(node, a, b, a_zp=None, b_zp=None):
    if a_zp is not None and np.asarray(a_zp).size > 1:  # per row of A
        a_zp = np.asarray(a_zp).reshape(-1, 1)
    return _integer_matmul(a, a_zp, b, b_zp).astype(np.int32)


register(OpDef(
    "MatMulInteger", "matmul", _infer_matmul_integer, _matmul_integer, inputs=(2, 4), since=10,
    macs=lambda node: math.prod(matmul_shape(node.inputs[0].type.shape,
                                             node.inputs[1].type.shape)[0])
    * node.inputs[0].type.shape[-1],
    doc="matrix product of 8-bit tensors into int32 (no requantization)"))


# -- QGemm: a fully connected layer with int32 bias (onnxruntime's com.microsoft operator) -------

def _infer_qgemm(node, ins, values):
    a, as_, az, b, bs, bz = ins[:6]
    bias = ins[6] if len(ins) > 6 else None
    ys = ins[7] if len(ins) > 7 else None
    yz = ins[8] if len(ins) > 8 else None
    if ys is None or yz is None:
        fail("QGemm without an output scale and zero point (a float output) is not supported")
    if node.attrs["transA"] or node.attrs["alpha"] != 1.0:
        fail("QGemm with transA or an alpha other than 1 is not supported")
    require_integer(node, a, "input A")
    require_integer(node, b, "input B")
    if a.rank != 2 or b.rank != 2:
        fail(f"QGemm needs 2-D A and B, got shapes {list(a.shape)} and {list(b.shape)}")
    k, n = b.shape[::-1] if node.attrs["transB"] else b.shape
    if a.shape[1] != k:
        fail(f"QGemm's A {list(a.shape)} and B {list(b.shape)} do not fit")
    check_scale(node, as_, values[1], "A scale")
    check_scale(node, bs, values[4], "B scale", n)
    check_scale(node, ys, values[7], "output scale")
    check_zero_point(node, az, a.dtype, "A zero point")
    check_zero_point(node, bz, b.dtype, "B zero point", n)
    require_integer(node, yz, "output zero point")
    if bias is not None and (bias.dtype != "int32" or bias.shape not in ((n,), (1, n))):
        fail(f"QGemm's bias must be int32[{n}], got {bias}")
    check_requant_scales(node, values, (1, 4, 7))
    out = quantized_output_type((a.shape[0], n), yz, values, 7, 8)
    check_range(node, out.dtype)
    return [out]


def _qgemm(node, a, as_, az, b, bs, bz, bias=None, ys=None, yz=None):
    if node.attrs["transB"]:
        b = b.T
        bz = None if bz is None else np.asarray(bz)
    acc = _integer_matmul(a, az, b, bz)
    if bias is not None:
        acc = acc + bias.astype(np.int64).reshape(1, -1)
    return requantize(node, acc, as_, bs, ys, yz, yz.dtype.name, 1, fully_connected=True)


register(OpDef(
    "QGemm", "matmul", _infer_qgemm, _qgemm, inputs=(6, 9), domain="com.microsoft",
    macs=lambda node: math.prod(node.outputs[0].type.shape) * node.inputs[0].type.shape[1],
    attrs={"alpha": Attr("float", 1.0, "scales A'B' (only 1 is supported)"),
           "transA": Attr("int", 0, "1: A is stored transposed (not supported)"),
           "transB": Attr("int", 0, "1: B is stored transposed (N, K)"), **REQUANT_ATTRS},
    doc="fully connected layer of 8-bit tensors with int32 bias, requantized to 8 bits "
        "(onnxruntime's com.microsoft QGemm)"))


# -- QLinearAdd (onnxruntime's com.microsoft operator) --------------------------------------------

def _infer_qlinear_add(node, ins, values):
    a, as_, az, b, bs, bz, cs = ins[:7]
    cz = ins[7] if len(ins) > 7 else None
    require_integer(node, a, "input A")
    require_integer(node, b, "input B")
    if b.dtype != a.dtype or (cz is not None and cz.dtype != a.dtype):
        fail(f"{node.op}'s inputs and output must share one 8-bit type, got {a.dtype}, "
             f"{b.dtype} and {cz.dtype if cz is not None else a.dtype}")
    for t, value, what in ((as_, values[1], "A scale"), (bs, values[4], "B scale"),
                           (cs, values[6], "output scale")):
        check_scale(node, t, value, what)
    check_zero_point(node, az, a.dtype, "A zero point")
    check_zero_point(node, bz, b.dtype, "B zero point")
    known = all(values[i] is not None for i in (1, 4, 6))
    if requant_rule(node) == "onnx" and known:
        check_onnx_reach(node, *(first(values[i]) for i in (1, 2, 4, 5, 6)),
                         first(values[7] if len(values) > 7 else None))
    elif node.op == "QLinearMul" and known:  # TFLite Micro's MUL: one multiplier and shift
        real = float(np.float32(first(values[1]))) * float(np.float32(first(values[4]))) / \
            float(np.float32(first(values[6])))
        exponent = int(quantize_multiplier(real)[1])
        if exponent > 31:
            fail(f"QLinearMul's multiplier A*B/C = {real:g} needs an exponent of {exponent}, "
                 "above 31: TFLite Micro would shift int32 values by that many bits, which C "
                 "leaves undefined")
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = quantized_output_type(shape, cz if cz is not None else TensorType((), a.dtype),
                                values, 6, 7)
    check_range(node, out.dtype)
    return [out]


def _fma32(x, y, z) -> np.ndarray:
    """float32 x * y + z rounded once, as a fused multiply-add.

    The product of an 8-bit x and a float32 y is exact in float64. Their sum with z is rounded
    to float64 with its error kept (TwoSum) and, when inexact, moved to the neighbour with an
    odd last bit (round to odd), so the final rounding to float32 is the single correct one.
    """
    product = np.asarray(x, np.float64) * np.float64(y)
    z = np.asarray(z, np.float64)
    total = product + z
    virtual = total - z
    error = (product - virtual) + (z - (total - virtual))
    total, error = np.broadcast_arrays(np.asarray(total, np.float64), error)
    even = (total.view(np.int64) & 1) == 0
    towards = np.where(error > 0, np.inf, -np.inf)
    odd = np.where((error != 0) & even, np.nextafter(total, towards), total)
    return odd.astype(np.float32)


def _add_onnx(a, b, sa, za, sb, zb, sc, zc) -> np.ndarray:
    """As onnxruntime's QLinearAdd (AVX2): float32 ratios, fused multiply-adds, ties to even."""
    r_ac = np.float32(np.float32(sa) / np.float32(sc))
    r_bc = np.float32(np.float32(sb) / np.float32(sc))
    fixed = np.float32(np.float32(zc) - np.float32(np.float32(r_ac * np.float32(za))
                                                  + np.float32(r_bc * np.float32(zb))))
    a = a.astype(np.float32)
    b = b.astype(np.float32)
    if a.size == 1:  # a scalar side joins the fixed part first, multiplied then added
        fixed = np.float32(fixed + np.float32(a.reshape(-1)[0] * r_ac))
        value = _fma32(b, r_bc, fixed)
    elif b.size == 1:
        fixed = np.float32(fixed + np.float32(b.reshape(-1)[0] * r_bc))
        value = _fma32(a, r_ac, fixed)
    else:
        value = _fma32(a, r_ac, _fma32(b, r_bc, fixed))
    return np.rint(value).astype(np.int64)


def _add_tflite(a, b, sa, za, sb, zb, sc, zc, sign: int = 1) -> np.ndarray:
    """TFLite Micro's int8 ADD, or SUB with `sign` -1.

    The inputs are left-shifted by 20, rescaled, summed (or subtracted) and rescaled.
    """
    twice_max = 2.0 * max(float(np.float32(sa)), float(np.float32(sb)))
    m_a, s_a = quantize_multiplier(float(np.float32(sa)) / twice_max)
    m_b, s_b = quantize_multiplier(float(np.float32(sb)) / twice_max)
    m_c, s_c = quantize_multiplier(twice_max / ((1 << 20) * float(np.float32(sc))))
    left = (a.astype(np.int64) - int(za)) << 20
    right = (b.astype(np.int64) - int(zb)) << 20
    total = (multiply_by_quantized_multiplier(left, m_a, s_a)
             + sign * multiply_by_quantized_multiplier(right, m_b, s_b))
    return multiply_by_quantized_multiplier(total, m_c, s_c) + int(zc)


def check_onnx_reach(node, sa, za, sb, zb, sc, zc) -> None:
    """Refuse scales that requantize some pair of 8-bit inputs beyond int32 by the onnx rule.

    onnxruntime converts the float32 result to int32 before it saturates: beyond int32 that
    conversion is undefined in C, and its vector and scalar loops answer differently.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        if node.op == "QLinearMul":
            ratio = np.float32(np.float32(np.float32(sa) * np.float32(sb)) / np.float32(sc))
            reach, what = 255.0 * 255.0 * float(ratio) + abs(float(zc)), f"A*B/C = {ratio:g}"
        else:
            r_ac, r_bc = np.float32(np.float32(sa) / np.float32(sc)), \
                np.float32(np.float32(sb) / np.float32(sc))
            fixed = float(zc) - float(r_ac) * float(za) - float(r_bc) * float(zb)
            reach = 255.0 * (float(r_ac) + float(r_bc)) + abs(fixed)
            what = f"A/C = {r_ac:g} and B/C = {r_bc:g}"
    if not reach < 2.0**31:
        fail(f"{node.op}'s scale ratios {what} requantize 8-bit inputs beyond int32, where "
             "onnxruntime's result is undefined")


def _qlinear_add(node, a, sa, za, b, sb, zb, sc, zc=None):
    dtype = a.dtype.name
    args = (first(sa), first(za), first(sb), first(zb), first(sc), first(zc))
    if node.op == "QLinearAdd" and requant_rule(node) == "onnx":
        check_onnx_reach(node, *args)
    a, b = np.broadcast_arrays(a, b) if a.size > 1 and b.size > 1 else (a, b)
    if node.op == "QLinearSub":
        value = _add_tflite(a, b, *args, sign=-1)
    else:
        rule = _add_tflite if requant_rule(node) == "tflite" else _add_onnx
        value = rule(a, b, *args)
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    low, high = node.attrs.get("output_range") or RANGES[dtype]
    return np.clip(np.broadcast_to(value, shape), low, high).astype(dtype)


register(OpDef(
    "QLinearAdd", "elementwise", _infer_qlinear_add, _qlinear_add, inputs=(7, 8),
    domain="com.microsoft", attrs=dict(REQUANT_ATTRS),
    doc="sum of two 8-bit tensors requantized to 8 bits (onnxruntime's com.microsoft "
        "QLinearAdd)"))


def _infer_qlinear_sub(node, ins, values):
    if requant_rule(node) != "tflite":
        fail("QLinearSub is TFLite Micro's SUB: it takes the tflite rule only")
    return _infer_qlinear_add(node, ins, values)


register(OpDef(
    "QLinearSub", "elementwise", _infer_qlinear_sub, _qlinear_add, inputs=(7, 8), onnx=False,
    attrs={**REQUANT_ATTRS, "requant": Attr("string", "tflite", REQUANT_ATTRS["requant"].doc,
                                            onnx=False)},
    doc="Kiln only: difference of two 8-bit tensors requantized to 8 bits (TFLite Micro's "
        "SUB, inputs laid out as QLinearAdd's)"))


# -- QLinearMul (onnxruntime's com.microsoft operator) --------------------------------------------

def _mul_onnx(a, b, sa, za, sb, zb, sc, zc) -> np.ndarray:
    """As onnxruntime's QLinearMul (SSE2): the integer product times a float32 ratio, + zp."""
    ratio = np.float32(np.float32(np.float32(sa) * np.float32(sb)) / np.float32(sc))
    product = (a.astype(np.int64) - int(za)) * (b.astype(np.int64) - int(zb))
    value = (product.astype(np.float32) * ratio).astype(np.float32) + np.float32(zc)
    return np.rint(value.astype(np.float32)).astype(np.int64)


def _mul_tflite(a, b, sa, za, sb, zb, sc, zc) -> np.ndarray:
    """TFLite Micro's int8 MUL: MultiplyByQuantizedMultiplier of the integer product."""
    real = float(np.float32(sa)) * float(np.float32(sb)) / float(np.float32(sc))
    multiplier, shift = quantize_multiplier(real)
    product = (a.astype(np.int64) - int(za)) * (b.astype(np.int64) - int(zb))
    return multiply_by_quantized_multiplier(product, multiplier, shift) + int(zc)


def _qlinear_mul(node, a, sa, za, b, sb, zb, sc, zc=None):
    dtype = a.dtype.name
    rule = _mul_tflite if requant_rule(node) == "tflite" else _mul_onnx
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    args = (first(sa), first(za), first(sb), first(zb), first(sc), first(zc))
    if rule is _mul_onnx:
        check_onnx_reach(node, *args)
    value = rule(a, b, *args)
    low, high = node.attrs.get("output_range") or RANGES[dtype]
    return np.clip(value, low, high).astype(dtype)


register(OpDef(
    "QLinearMul", "elementwise", _infer_qlinear_add, _qlinear_mul, inputs=(7, 8),
    domain="com.microsoft", attrs=dict(REQUANT_ATTRS),
    doc="product of two 8-bit tensors requantized to 8 bits (onnxruntime's com.microsoft "
        "QLinearMul)"))
