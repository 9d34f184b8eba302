"""8-bit element-wise kernels: binary ones by their arithmetic, one-input ones by tables.

QLinearAdd, QLinearSub and QLinearMul follow either rule, broadcasting; IntLookupTable,
QLinearLeakyRelu and QLinearSigmoid are tables.

The binary kernels repeat the reference arithmetic of compiler/ops/qlinear.py element by
element, with the multipliers derived at compile time by the same functions. A one-input
operator of an 8-bit tensor is a function of 256 codes: its table is computed at compile time
by running the operator's own reference on every code, so the kernel is one load per element
and equals the interpreter by construction.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler import ops
from compiler.codegen import requant
from compiler.codegen.elementwise import broadcast_strides
from compiler.codegen.kernel import I32, Kernel, constant_input, strides
from compiler.codegen.targets import DotProduct
from compiler.ir.graph import Node
from compiler.qmath.requant import RANGES, quantize_multiplier
from compiler.qmath.tables import codes

F32 = ir.FloatType()
I8 = ir.IntType(8)
_TABLE = 9  # the weight slot of a one-input operator's 256-entry table


def _scalar(k: Kernel, slot: int, default=0):
    data = constant_input(k, slot, "scale and zero point")
    return default if data is None else np.asarray(data).reshape(-1)[0]


def _params(k: Kernel):
    sa, za, sb, zb, sc = (_scalar(k, i) for i in (1, 2, 4, 5, 6))
    zc = _scalar(k, 7) if len(k.node.inputs) > 7 else 0
    return (np.float32(sa), int(za), np.float32(sb), int(zb), np.float32(sc), int(zc))


def _multiplier(real: float) -> tuple[int, int]:
    q, shift = quantize_multiplier(np.array([real]))
    return int(q[0]), int(shift[0])


def _vector_lanes(k: Kernel) -> int:
    """int32 lanes of the same-shape vector loop (0: scalar code). Helium: one register."""
    target = k.target
    if target is None:
        return 0
    if target.int8_dot is DotProduct.MVE:
        return 4
    return target.vector_bits // 32 if not target.mcu else 0


def emit_qbinary(k: Kernel) -> None:
    """One loop over the output; each element by the node's rule, clamped to its range."""
    node, b = k.node, k.b
    out = tuple(node.output.type.shape)
    sa, za, sb, zb, sc, zc = _params(k)
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    widen = b.sext if node.output.type.dtype == "int8" else b.zext
    rule = node.attrs.get("requant", "onnx")
    a_strides = broadcast_strides(node.inputs[0].type.shape, out)
    b_strides = broadcast_strides(node.inputs[3].type.shape, out)
    lanes = _vector_lanes(k)
    while lanes > 4 and node.output.type.numel % lanes:
        lanes //= 2
    same = node.inputs[0].type.shape == node.inputs[3].type.shape == node.output.type.shape
    if (same and lanes and node.output.type.numel % lanes == 0 and node.op != "QLinearMul"
            and (rule == "tflite" or node.op == "QLinearSub" or k.target.vector_bits >= 256)):
        _emit_add_vector(k, lanes, (sa, za, sb, zb, sc, zc), low, high)
        return
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        x = widen(k.load(k.args[0], k.index(*zip(idx, a_strides))), I32)
        y = widen(k.load(k.args[3], k.index(*zip(idx, b_strides))), I32)
        if node.op == "QLinearMul":
            value = _mul(k, x, y, (sa, za, sb, zb, sc, zc), rule)
        elif rule == "tflite" or node.op == "QLinearSub":
            value = _add_tflite(k, x, y, (sa, za, sb, zb, sc, zc),
                                -1 if node.op == "QLinearSub" else 1)
        else:
            value = _add_onnx(k, x, y, (sa, za, sb, zb, sc, zc))
        value = requant.clamp(k, value, low, high)
        k.store(b.trunc(value, I8), k.outs[0], k.index(*zip(idx, strides(out))))


def _add_tflite(k: Kernel, x, y, params, sign: int) -> ir.Value:
    """TFLite Micro's ADD / SUB: left shift 20, two rescales, sum, rescale, + zero point.

    `x` and `y` are int32 scalars or vectors alike.
    """
    sa, za, sb, zb, sc, zc = params
    b, c = k.b, requant.const
    twice_max = 2.0 * max(float(sa), float(sb))
    m_a, s_a = _multiplier(float(sa) / twice_max)
    m_b, s_b = _multiplier(float(sb) / twice_max)
    m_c, s_c = _multiplier(twice_max / ((1 << 20) * float(sc)))
    left = requant.mbqm(k, b.shl(b.sub(x, c(x, za)), c(x, 20)), c(x, m_a), c(x, s_a))
    right = requant.mbqm(k, b.shl(b.sub(y, c(x, zb)), c(x, 20)), c(x, m_b), c(x, s_b))
    total = b.add(left, right) if sign > 0 else b.sub(left, right)
    return b.add(requant.mbqm(k, total, c(x, m_c), c(x, s_c)), c(x, zc))


def _emit_add_vector(k: Kernel, lanes: int, params, low: int, high: int) -> None:
    """Same-shape QLinearAdd / Sub, either rule, `lanes` elements at a time."""
    node, b = k.node, k.b
    bytes_ty, ints = ir.VectorType(I8, lanes), ir.VectorType(I32, lanes)
    widen = b.sext if node.output.type.dtype == "int8" else b.zext

    def load(ptr, index):
        return b.load(b.bitcast(b.gep(ptr, [index], inbounds=True), ir.PointerType(bytes_ty)),
                      align=1)

    with k.loop(node.output.type.numel // lanes) as i:
        at = k.index((i, lanes))
        x, y = widen(load(k.args[0], at), ints), widen(load(k.args[3], at), ints)
        if node.attrs.get("requant", "onnx") == "tflite" or node.op == "QLinearSub":
            value = _add_tflite(k, x, y, params, -1 if node.op == "QLinearSub" else 1)
        else:
            value = _add_onnx(k, x, y, params)
        value = requant.clamp(k, value, low, high)
        ptr = b.bitcast(b.gep(k.outs[0], [at], inbounds=True), ir.PointerType(bytes_ty))
        b.store(b.trunc(value, bytes_ty), ptr, align=1)


def _f32(value) -> ir.Constant:
    return ir.Constant(F32, float(np.float32(value)))


def _like(x: ir.Value, scalar: ir.Type) -> ir.Type:
    return ir.VectorType(scalar, x.type.count) if isinstance(x.type, ir.VectorType) else scalar


def _fma(k: Kernel, x, y: ir.Value, z: ir.Value) -> ir.Value:
    """float32(x) * y + z rounded once: llvm.fma (the FPU's fused multiply-add, or fmaf).

    x is an int32 (or vector); y and z are float32 scalars or vectors like x.
    """
    ty = _like(x, F32)
    name = (f"llvm.fma.v{ty.count}f32" if isinstance(ty, ir.VectorType) else "llvm.fma.f32")
    module = k.fn.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ty, [ty, ty, ty]),
                                                 name)
    return k.b.call(fn, [k.b.sitofp(x, ty), y, z])


def _rint_to_int(k: Kernel, value: ir.Value) -> ir.Value:
    return k.b.fptosi(requant.rint(k, value), _like(value, I32))


def _add_onnx(k: Kernel, x, y, params) -> ir.Value:
    """QLinearAdd as onnxruntime: float32 ratios, fused multiply-adds, ties to even.

    `x` and `y` are int32 scalars, or vectors when both sides have the output's shape.
    """
    sa, za, sb, zb, sc, zc = params
    b = k.b

    def f32(value) -> ir.Constant:  # a float32 constant shaped like x
        return requant.const(x, float(np.float32(value)), F32)

    r_ac, r_bc = np.float32(sa / sc), np.float32(sb / sc)
    fixed = np.float32(np.float32(zc) - np.float32(np.float32(r_ac * np.float32(za))
                                                   + np.float32(r_bc * np.float32(zb))))
    node = k.node
    if node.op != "QLinearAdd":  # a fused residual: both sides have the output's shape
        return _rint_to_int(k, _fma(k, x, f32(r_ac), _fma(k, y, f32(r_bc), f32(fixed))))
    if node.inputs[0].type.numel == 1 and node.inputs[3].type.numel != 1:
        # A scalar side joins the fixed part first, as the reference does.
        joined = b.fadd(f32(fixed), b.fmul(b.sitofp(x, F32), f32(r_ac)))
        return _rint_to_int(k, _fma(k, y, f32(r_bc), joined))
    if node.inputs[3].type.numel == 1 and node.inputs[0].type.numel != 1:
        joined = b.fadd(f32(fixed), b.fmul(b.sitofp(y, F32), f32(r_bc)))
        return _rint_to_int(k, _fma(k, x, f32(r_ac), joined))
    return _rint_to_int(k, _fma(k, x, f32(r_ac), _fma(k, y, f32(r_bc), f32(fixed))))


def add_residual(k: Kernel, values: ir.Value, at: ir.Value) -> ir.Value:
    """A QLinearConv's requantized results joined to the residual of its fused QLinearAdd.

    `values` are the int32 results (scalar or vector) for the elements from `at`; the sum
    follows the Add's rule and is clamped to its range. The residual is read before the caller
    stores there, so the result may overwrite it.
    """
    add, b = k.act_node, k.b
    count = values.type.count if isinstance(values.type, ir.VectorType) else 0
    stored = ir.VectorType(I8, count) if count else I8
    ptr = b.bitcast(b.gep(k.residual, [at], inbounds=True), ir.PointerType(stored))
    widen = b.sext if add.output.type.dtype == "int8" else b.zext
    residual = widen(b.load(ptr, align=1), _like(values, I32))
    params = tuple(np.asarray(add.inputs[i].data).reshape(-1)[0]
                   if i < len(add.inputs) and add.inputs[i] is not None else 0
                   for i in (1, 2, 4, 5, 6, 7))
    sa, za, sb, zb, sc, zc = params
    params = (np.float32(sa), int(za), np.float32(sb), int(zb), np.float32(sc), int(zc))
    x, y = (values, residual) if add.inputs[0] is k.node.output else (residual, values)
    if add.attrs.get("requant", "onnx") == "tflite":
        value = _add_tflite(k, x, y, params, 1)
    else:
        value = _add_onnx(k, x, y, params)
    low, high = add.attrs.get("output_range") or RANGES[add.output.type.dtype]
    return requant.clamp(k, value, low, high)


def _mul(k: Kernel, x, y, params, rule: str) -> ir.Value:
    sa, za, sb, zb, sc, zc = params
    b = k.b
    product = b.mul(b.sub(x, I32(za)), b.sub(y, I32(zb)))
    if rule == "tflite":
        m, s = _multiplier(float(sa) * float(sb) / float(sc))
        return b.add(requant.mbqm(k, product, I32(m), I32(s)), I32(zc))
    ratio = np.float32(np.float32(np.float32(sa) * np.float32(sb)) / np.float32(sc))
    value = b.fadd(b.fmul(b.sitofp(product, F32), _f32(ratio)), _f32(zc))
    return _rint_to_int(k, value)


# -- one-input operators as tables -----------------------------------------------------------

def table_weights(node: Node) -> dict[int, np.ndarray]:
    """The 256 results of the node's reference, indexed by the input's uint8 bit pattern."""
    dtype = node.inputs[0].type.dtype
    every = codes(dtype).astype(dtype)
    arrays = [every] + [None if v is None else getattr(v, "data", None) for v in node.inputs[1:]]
    result = ops.lookup(node.op).run(node, arrays)[0]
    return {_TABLE: np.asarray(result).reshape(-1).astype(node.output.type.dtype)}


def emit_table(k: Kernel) -> None:
    """Each output element is table[x & 0xFF]."""
    b = k.b
    with k.loop(k.node.output.type.numel) as i:
        index = b.zext(k.load(k.args[0], i), I32)
        k.store(k.load(k.args[_TABLE], index), k.outs[0], i)

