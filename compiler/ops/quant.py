"""Linear quantization: QuantizeLinear and DequantizeLinear, per tensor, per axis or blocked."""

from __future__ import annotations

import math

import numpy as np

from compiler.errors import ModelError
from compiler.ir.types import DTYPE_OF_ONNX, ONNX_ELEM_TYPES, QuantParams, TensorType
from compiler.ops._util import normalize_axis
from compiler.ops.elementwise import FLOATS, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath.requant import wrap_int32
from compiler.qmath.scales import SCALE_RULE, bad_scales

# Integer element types a quantized tensor may have, with their saturation range. Kiln's
# integer operators and kernels are 8-bit: 16-bit (and 4-bit, float8) quantization is refused.
_RANGES = {"int8": (-128, 127), "uint8": (0, 255)}


def _granularity(node, x, scale, zero_point) -> tuple[int | None, int]:
    """(axis, block_size) of the scale: (None, 0) per tensor, (axis, 0) per axis, or blocked.

    A scale with one element is per tensor whatever the attributes say, as in ONNX's reference.
    """
    require_dtype(node, scale, FLOATS, "scale")
    if zero_point is not None and zero_point.shape != scale.shape and not (
            zero_point.numel == scale.numel == 1):
        fail(f"{node.op}'s zero point has shape {list(zero_point.shape)}, its scale "
             f"{list(scale.shape)}; they must match")
    if scale.numel == 1 and scale.rank <= 1:
        return None, 0
    axis = normalize_axis(node.attrs["axis"], x.rank)
    block = node.attrs["block_size"]
    if block <= 0:
        if scale.rank != 1 or scale.shape[0] != x.shape[axis]:
            fail(f"{node.op}'s per-axis scale must be 1-D of length {x.shape[axis]} (axis {axis} "
                 f"of {list(x.shape)}), it has shape {list(scale.shape)}")
        return axis, 0
    expected = tuple(math.ceil(d / block) if i == axis else d for i, d in enumerate(x.shape))
    if scale.shape != expected:
        fail(f"{node.op}'s blocked scale must have shape {list(expected)} (block_size {block} on "
             f"axis {axis} of {list(x.shape)}), it has shape {list(scale.shape)}")
    return axis, block


def check_scale_values(node, scale, dtype: str) -> None:
    """Refuse a known scale of `dtype` values that `SCALE_RULE` does not admit, naming it."""
    if scale is None:
        return
    bad = bad_scales(scale, dtype)
    if bad:
        fail(f"{node.op}'s scale is {bad[0]}; {SCALE_RULE} (here {dtype})")


def _expand(param: np.ndarray, shape: tuple[int, ...], axis: int | None, block: int):
    """A scale or zero point reshaped (and, blocked, repeated) to broadcast to `shape`."""
    if axis is None:
        return param.reshape(())
    if block:
        return np.repeat(param, block, axis=axis).take(range(shape[axis]), axis=axis)
    return param.reshape([-1 if i == axis else 1 for i in range(len(shape))])


def _float_dtype(code: int, what: str) -> str:
    dtype = DTYPE_OF_ONNX.get(code)
    if dtype not in FLOATS:
        fail(f"{what}={code} is not a floating-point element type Kiln supports")
    return dtype


# -- QuantizeLinear -------------------------------------------------------------------------------

def _quantized_dtype(node, zero_point: TensorType | None) -> str:
    """The output type: the zero point's, else `output_dtype`, else uint8 (ONNX's rule)."""
    code = node.attrs["output_dtype"]
    wanted = None
    if code:
        wanted = DTYPE_OF_ONNX.get(code)
        if wanted not in _RANGES:
            fail(f"QuantizeLinear output_dtype={code} is not supported (Kiln quantizes to "
                 f"{' or '.join(_RANGES)}: its integer operators are 8-bit)")
    if zero_point is None:
        return wanted or "uint8"
    if zero_point.dtype not in _RANGES:
        fail(f"QuantizeLinear's zero point is {zero_point.dtype}; Kiln quantizes to "
             f"{' or '.join(_RANGES)} (its integer operators are 8-bit)")
    if wanted and wanted != zero_point.dtype:
        fail(f"QuantizeLinear output_dtype={code} ({wanted}) differs from its zero point's type "
             f"{zero_point.dtype}")
    return zero_point.dtype


def _infer_quantize(node, ins, values):
    x, scale = ins[:2]
    zp = ins[2] if len(ins) > 2 else None
    require_dtype(node, x, FLOATS + ("int32",))
    dtype = _quantized_dtype(node, zp)
    if node.attrs["precision"]:
        _float_dtype(node.attrs["precision"], "QuantizeLinear precision")
    axis, block = _granularity(node, x, scale, zp)
    check_scale_values(node, values[1], dtype)
    quant = None
    zp_value = values[2] if len(values) > 2 else None
    if values[1] is not None and (zp is None or zp_value is not None) and not block:
        quant = QuantParams.from_arrays(values[1], zp_value, axis)
    return [TensorType(x.shape, dtype, quant)]


def _quantize(node, x, scale, zero_point=None):
    in_types = [TensorType.of(a) if a is not None else None for a in (x, scale, zero_point)]
    dtype = _quantized_dtype(node, in_types[2])
    axis, block = _granularity(node, *in_types)
    if node.attrs["precision"]:
        work = np.dtype(_float_dtype(node.attrs["precision"], "precision"))
    else:  # float16 divides in float32, as onnxruntime does
        work = np.result_type(np.float32, scale.dtype, *([x.dtype] if x.dtype.kind == "f" else []))
    with np.errstate(all="ignore"):
        q = x.astype(work) / _expand(scale, x.shape, axis, block).astype(work)
        if node.attrs.get("requant") == "tflite":  # TFLite Micro rounds half away from zero
            wide = q.astype(np.float64)  # exact; + 0.5 in float32 could round up
            q = (np.sign(wide) * np.floor(np.abs(wide) + 0.5)).astype(work)
        else:
            q = np.rint(q)
    if zero_point is not None:
        q = q + _expand(zero_point, x.shape, axis, block).astype(work)
    low, high = _RANGES[dtype]
    # rint rounds half to even; NaN saturates low, as onnxruntime's kernel does.
    return np.clip(np.nan_to_num(q, nan=low), low, high).astype(dtype)


def _quantize_to_onnx(ctx, attrs, inputs, opset):
    """Before opset 21 the output type can only come from a zero point: write a zero one."""
    if opset >= 21 or not attrs["output_dtype"]:
        return attrs, inputs
    code = attrs["output_dtype"]
    if len(inputs) < 3 or not inputs[2]:
        zero = np.zeros(ctx.node.inputs[1].type.shape, DTYPE_OF_ONNX[code])
        inputs = [*inputs[:2], ctx.constant("zero_point", zero)]
    return {**attrs, "output_dtype": 0}, inputs


register(OpDef(
    "QuantizeLinear", "quant", _infer_quantize, _quantize, inputs=(2, 3), since=10,
    to_onnx=_quantize_to_onnx,
    attrs={
        "axis": Attr("int", 1, "the quantized axis (per-axis and blocked scales)"),
        "saturate": Attr("int", 1, "float8 outputs only; no effect on integer outputs"),
        "block_size": Attr("int", 0, "blocked quantization: elements per scale along axis"),
        "output_dtype": Attr("int", 0, "ONNX element type of the output when no zero point"),
        "precision": Attr("int", 0, "ONNX float type of the division (0: the scale's)"),
        "requant": Attr("string", "onnx", "Kiln only: onnx rounds half to even, tflite (TFLite "
                                          "Micro's QUANTIZE) half away from zero", onnx=False),
    },
    doc="saturate(round_half_even(x / scale) + zero_point) to an 8-bit integer"))


# -- DequantizeLinear -----------------------------------------------------------------------------

def _dequantized_dtype(node, scale: TensorType) -> str:
    code = node.attrs["output_dtype"]
    return _float_dtype(code, "DequantizeLinear output_dtype") if code else scale.dtype


def _infer_dequantize(node, ins, values):
    x, scale = ins[:2]
    zp = ins[2] if len(ins) > 2 else None
    require_dtype(node, x, (*_RANGES, "int32"))
    if zp is not None and zp.dtype != x.dtype:
        fail(f"DequantizeLinear's zero point is {zp.dtype}, its input {x.dtype}; they must match")
    _granularity(node, x, scale, zp)
    check_scale_values(node, values[1], x.dtype)
    return [TensorType(x.shape, _dequantized_dtype(node, scale))]


def _dequantize(node, x, scale, zero_point=None):
    types = [TensorType.of(a) if a is not None else None for a in (x, scale, zero_point)]
    axis, block = _granularity(node, *types)
    q = x.astype(np.int64)
    if zero_point is not None:
        q = q - _expand(zero_point, x.shape, axis, block).astype(np.int64)
        if x.dtype == np.int32:  # subtracted in int32, wrapping, as onnxruntime and the kernel do
            q = wrap_int32(q)
    work = np.result_type(np.float32, scale.dtype)  # float16 multiplies in float32
    with np.errstate(over="ignore"):  # a scale known only at run time: IEEE infinity, as C
        y = q.astype(work) * _expand(scale, x.shape, axis, block).astype(work)
        return np.asarray(y).astype(_dequantized_dtype(node, types[1]), copy=False)


def _dequantize_to_onnx(ctx, attrs, inputs, opset):
    """Before opset 23 the output has the scale's type: `output_dtype` must agree with it."""
    if opset >= 23 or not attrs["output_dtype"]:
        return attrs, inputs
    scale = ctx.node.inputs[1].type.dtype
    if ONNX_ELEM_TYPES[scale] != attrs["output_dtype"]:
        raise ModelError(f"DequantizeLinear cannot be saved at opset {opset} because its output "
                         f"type (output_dtype={attrs['output_dtype']}) differs from its scale's "
                         f"({scale}), which opsets before 23 cannot express")
    return {**attrs, "output_dtype": 0}, inputs


register(OpDef(
    "DequantizeLinear", "quant", _infer_dequantize, _dequantize, inputs=(2, 3), since=10,
    to_onnx=_dequantize_to_onnx,
    attrs={
        "axis": Attr("int", 1, "the quantized axis (per-axis and blocked scales)"),
        "block_size": Attr("int", 0, "blocked quantization: elements per scale along axis"),
        "output_dtype": Attr("int", 0, "ONNX float type of the output (0: the scale's)"),
    },
    doc="(x - zero_point) * scale, from an 8-bit or int32 integer to float"))


# -- DynamicQuantizeLinear ----------------------------------------------------------------------

def _infer_dynamic_quantize(node, ins, values):
    require_dtype(node, ins[0], ("float32",))
    return [TensorType(ins[0].shape, "uint8"), TensorType((), "float32"),
            TensorType((), "uint8")]


def _dynamic_quantize(node, x):
    # The range always holds 0 so that 0 is exact; scale and zero point come from it.
    low = min(float(np.min(x, initial=0.0)), 0.0)
    high = max(float(np.max(x, initial=0.0)), 0.0)
    scale = np.float32((high - low) / 255)
    if scale == 0:
        return np.zeros(x.shape, np.uint8), scale, np.uint8(0)
    zero_point = np.uint8(np.clip(np.rint(-low / scale), 0, 255))
    with np.errstate(all="ignore"):
        q = np.rint(x / scale) + zero_point
    return np.clip(q, 0, 255).astype(np.uint8), np.asarray(scale), np.asarray(zero_point)


register(OpDef("DynamicQuantizeLinear", "quant", _infer_dynamic_quantize, _dynamic_quantize,
               outputs=(3, 3), since=11,
               doc="uint8 quantization with a scale and zero point taken from the data's range"))
