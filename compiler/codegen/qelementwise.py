"""QuantizeLinear and DequantizeLinear at the float boundaries of an 8-bit graph.

Quantize: x / scale in float32, rounded half to even (llvm.rint; the onnx rule) or half away
from zero (llvm.round; TFLite Micro's QUANTIZE), plus the zero point, saturated, NaN to the low
end, as the reference interpreter does. Dequantize: float32(q - zero_point) * scale, one
correctly rounded product, as onnxruntime and TFLite Micro compute it.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input, strides
from compiler.errors import KilnError
from compiler.ir.graph import Constant
from compiler.ops._util import normalize_axis
from compiler.qmath.requant import RANGES

F32 = ir.FloatType()


def _scalar(k: Kernel, slot: int, what: str, default=0):
    data = constant_input(k, slot, what)
    if data is None:
        return default
    if np.asarray(data).size != 1:
        raise KilnError(f"cannot generate {k.node.op} {k.node.name}: per-axis {what}s are not "
                        "supported yet")
    return np.asarray(data).reshape(-1)[0]


def _unary(k: Kernel, name: str, x: ir.Value) -> ir.Value:
    """llvm.rint or llvm.round of a float32 (inline on cores without VRINT)."""
    return requant.rint(k, x) if name == "rint" else requant.round_away(k, x)


def emit_quantize(k: Kernel) -> None:
    """Each output: saturate(round(x / scale) + zero_point)."""
    node, b = k.node, k.b
    scale = ir.Constant(F32, float(np.float32(_scalar(k, 1, "scale"))))
    zp = float(_scalar(k, 2, "zero point"))
    low, high = RANGES[node.output.type.dtype]
    rounding = "round" if node.attrs.get("requant") == "tflite" else "rint"
    with k.loop(node.output.type.numel) as i:
        q = _unary(k, rounding, b.fdiv(k.load(k.args[0], i), scale))
        q = b.fadd(q, ir.Constant(F32, zp))
        lo, hi = ir.Constant(F32, float(low)), ir.Constant(F32, float(high))
        q = b.select(b.fcmp_unordered("uno", q, q), lo, q)  # NaN saturates low
        q = b.select(b.fcmp_ordered("<", q, lo), lo, b.select(b.fcmp_ordered(">", q, hi), hi, q))
        k.store(b.fptosi(q, ir.IntType(8)) if low < 0 else b.fptoui(q, ir.IntType(8)),
                k.outs[0], i)


def emit_dequantize(k: Kernel) -> None:
    """Each output: float32(x - zero_point) * scale."""
    node, b = k.node, k.b
    scale = ir.Constant(F32, float(np.float32(_scalar(k, 1, "scale"))))
    zp = int(_scalar(k, 2, "zero point"))
    widen = b.zext if node.inputs[0].type.dtype == "uint8" else b.sext
    with k.loop(node.output.type.numel) as i:
        q = b.sub(widen(k.load(k.args[0], i), I32), I32(zp))
        k.store(b.fmul(b.sitofp(q, F32), scale), k.outs[0], i)


def emit_dynamic_quantize(k: Kernel) -> None:
    """DynamicQuantizeLinear: uint8 codes, with the scale and zero point of the data's range.

    The range always holds 0: scale = (max(0, max x) - min(0, min x)) / 255 and the zero point
    rint(-low / scale), both saturated as the reference does (a zero scale gives zeros).
    """
    b = k.b
    n = k.node.inputs[0].type.numel
    f32 = ir.FloatType()
    low, high = k.alloca(f32), k.alloca(f32)
    b.store(f32(0.0), low)
    b.store(f32(0.0), high)
    with k.loop(n) as i:
        x = k.load(k.args[0], i)
        b.store(b.select(b.fcmp_ordered("<", x, b.load(low)), x, b.load(low)), low)
        b.store(b.select(b.fcmp_ordered(">", x, b.load(high)), x, b.load(high)), high)
    scale = b.fdiv(b.fsub(b.load(high), b.load(low)), f32(255.0))
    empty = b.fcmp_ordered("==", scale, f32(0.0))
    safe = b.select(empty, f32(1.0), scale)

    def saturate(v):
        v = b.select(b.fcmp_ordered("<", v, f32(0.0)), f32(0.0), v)
        return b.select(b.fcmp_ordered(">", v, f32(255.0)), f32(255.0), v)
    zero = saturate(_unary(k, "rint", b.fdiv(b.fneg(b.load(low)), safe)))
    zero = b.select(empty, f32(0.0), zero)
    byte = ir.IntType(8)
    with k.loop(n) as i:
        q = saturate(b.fadd(_unary(k, "rint", b.fdiv(k.load(k.args[0], i), safe)), zero))
        q = b.select(empty, f32(0.0), q)
        k.store(b.fptoui(q, byte), k.outs[0], i)
    k.store(scale, k.outs[1], I32(0))
    k.store(b.fptoui(zero, byte), k.outs[2], I32(0))


def general_parameters(node) -> bool:
    """A Quantize or DequantizeLinear whose scale is not one constant.

    Per axis, blocked, or computed at run time; the per-tensor kernels above take the rest.
    """
    if node.op not in ("QuantizeLinear", "DequantizeLinear") or len(node.inputs) < 2:
        return False
    scale = node.inputs[1]
    return not isinstance(scale, Constant) or scale.type.numel != 1


def _parameter_index(k: Kernel, idx, shape, scale_shape, axis: int | None, block: int):
    """The scale's element for the element at coordinates `idx`."""
    b = k.b
    if axis is None:
        return I32(0)
    if not block:
        return idx[axis]
    steps = strides(scale_shape)
    terms = [(b.udiv(i, I32(block)) if a == axis else i, s)
             for a, (i, s) in enumerate(zip(idx, steps))]
    return k.index(*terms)


def emit_quantize_general(k: Kernel) -> None:
    """Quantize or dequantize each element with its own scale and zero point."""
    node, b = k.node, k.b
    shape = node.inputs[0].type.shape
    scale_type = node.inputs[1].type
    per_tensor = scale_type.numel == 1 and scale_type.rank <= 1
    axis = None if per_tensor else normalize_axis(node.attrs["axis"], len(shape))
    block = 0 if per_tensor else node.attrs["block_size"]
    zero = k.args[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    quantize = node.op == "QuantizeLinear"
    steps = strides(shape)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in shape]
        at = k.index(*zip(idx, steps))
        p = _parameter_index(k, idx, shape, scale_type.shape, axis, block)
        scale = k.load(k.args[1], p)
        zp = F32(0.0)
        if zero is not None:
            raw = k.load(zero, p)
            signed = node.inputs[2].type.dtype not in ("uint8",)
            zp = b.sitofp(raw, F32) if signed else b.uitofp(raw, F32)
        x = k.load(k.args[0], at)
        if quantize:
            rounding = "round" if node.attrs.get("requant") == "tflite" else "rint"
            q = b.fadd(_unary(k, rounding, b.fdiv(x, scale)), zp)
            low, high = RANGES[node.output.type.dtype]
            lo, hi = F32(float(low)), F32(float(high))
            q = b.select(b.fcmp_unordered("uno", q, q), lo, q)
            q = b.select(b.fcmp_ordered("<", q, lo), lo, b.select(b.fcmp_ordered(">", q, hi),
                                                                  hi, q))
            k.store(b.fptosi(q, ir.IntType(8)) if low < 0 else b.fptoui(q, ir.IntType(8)),
                    k.outs[0], at)
        else:
            signed = node.inputs[0].type.dtype not in ("uint8",)
            wide = b.sitofp(x, F32) if signed else b.uitofp(x, F32)
            k.store(b.fmul(b.fsub(wide, zp), scale), k.outs[0], at)
