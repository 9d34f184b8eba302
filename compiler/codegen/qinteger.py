"""ConvInteger and MatMulInteger: 8-bit products summed in int32, no requantization.

The weights' zero points are folded into the weights at compile time (int16 = w - w_zero_point,
per output channel or column where the zero point is per axis), so the loop is one multiply-add
of (x - x_zero_point) by a prepared weight. A runtime right-hand side of MatMulInteger keeps
its (scalar) zero point in the loop.
"""

from __future__ import annotations

import numpy as np

from compiler.codegen.kernel import I32, Kernel, constant_input
from compiler.codegen.window import window
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Node

_ROW_ZERO_POINTS = 2  # MatMulInteger's a_zero_point slot: prepared as one int32 per row


def _data(node: Node, slot: int) -> np.ndarray | None:
    value = node.inputs[slot] if len(node.inputs) > slot else None
    return value.data if isinstance(value, Constant) else None


def _folded(weights: np.ndarray, zero_point: np.ndarray | None, axis: int) -> np.ndarray:
    """int16 weights minus their zero point, broadcast along `axis` when it is per axis."""
    zp = np.zeros(1, np.int64) if zero_point is None else np.asarray(zero_point, np.int64)
    if zp.size > 1:
        shape = [1] * weights.ndim
        shape[axis] = zp.size
        zp = zp.reshape(shape)
    else:
        zp = zp.reshape(-1)[0]
    return (weights.astype(np.int64) - zp).astype(np.int16)


def integer_weights(node: Node) -> dict[int, np.ndarray]:
    """The weights minus their zero points, and MatMulInteger's row zero points.

    ConvInteger: weights [O, C/g, kh, kw], zero point per O. MatMulInteger: a constant
    right-hand side [K, N], zero point per column.
    """
    if node.op == "ConvInteger":
        return {1: _folded(node.inputs[1].data, _data(node, 3), 0)}
    prepared = {}
    if isinstance(node.inputs[1], Constant):
        prepared[1] = _folded(node.inputs[1].data, _data(node, 3), 1)
    rows = node.inputs[0].type.shape[-2]
    a_zp = _data(node, 2)
    prepared[_ROW_ZERO_POINTS] = np.broadcast_to(
        np.zeros(1, np.int32) if a_zp is None else np.asarray(a_zp, np.int32).reshape(-1),
        (rows,)).astype(np.int32)
    return prepared


def _widen(k: Kernel, value, dtype: str):
    return (k.b.zext if dtype == "uint8" else k.b.sext)(value, I32)


def emit_matmul_integer(k: Kernel) -> None:
    """y[..., m, n] = sum_k (a[..., m, k] - a_zp[m]) * (b[k, n] - b_zp[n]) in int32."""
    node, b = k.node, k.b
    a_shape, b_shape = node.inputs[0].type.shape, node.inputs[1].type.shape
    if len(b_shape) != 2 or len(a_shape) < 2:
        raise KilnError(f"cannot generate {node.op} {node.name}: only a [.., M, K] by [K, N] "
                        "product is supported")
    *_, rows, depth = a_shape
    columns = b_shape[1]
    batch = node.output.type.numel // (rows * columns)
    constant_b = isinstance(node.inputs[1], Constant)
    b_zp = None if constant_b else constant_input(k, 3, "zero point")
    if b_zp is not None and np.asarray(b_zp).size != 1:
        raise KilnError(f"cannot generate {node.op} {node.name}: a per-column zero point needs "
                        "a constant right-hand side")
    b_zp = 0 if b_zp is None else int(np.asarray(b_zp).reshape(-1)[0])
    a_dtype, b_dtype = node.inputs[0].type.dtype, node.inputs[1].type.dtype
    total = k.alloca(I32)
    with k.loop(batch) as n, k.loop(rows) as m, k.loop(columns) as j:
        a_zp = k.load(k.args[_ROW_ZERO_POINTS], m)
        b.store(I32(0), total)
        with k.loop(depth) as i:
            x = b.sub(_widen(k, k.load(k.args[0], k.index((n, rows * depth), (m, depth),
                                                          (i, 1))), a_dtype), a_zp)
            w = k.load(k.args[1], k.index((i, columns), (j, 1)))
            w = b.sext(w, I32) if constant_b else b.sub(_widen(k, w, b_dtype), I32(b_zp))
            b.store(b.add(b.load(total), b.mul(x, w)), total)
        k.store(b.load(total), k.outs[0], k.index((n, rows * columns), (m, columns), (j, 1)))


def emit_conv_integer(k: Kernel) -> None:
    """NHWC: y[n, oh, ow, o] = sum over taps and the group's channels of (x - x_zp) * w'."""
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    groups = int(node.attrs.get("group") or 1)
    per_group, out_per_group = channels // groups, out_c // groups
    kh_n, kw_n = node.inputs[1].type.shape[2:]
    x_zp = constant_input(k, 2, "zero point")
    x_zp = 0 if x_zp is None else int(np.asarray(x_zp).reshape(-1)[0])
    dtype = node.inputs[0].type.dtype
    total = k.alloca(I32)
    with k.loop(batch) as n, k.loop(out_h) as oh, k.loop(out_w) as ow, k.loop(out_c) as o:
        b.store(I32(0), total)
        first = b.mul(b.udiv(o, I32(out_per_group)), I32(per_group))
        with window(k, node, oh, ow) as (ih, iw, kh, kw), k.loop(per_group) as c:
            x = k.load(k.args[0], b.add(k.index((n, height * width * channels),
                                                (ih, width * channels), (iw, channels),
                                                (c, 1)), first))
            x = b.sub(_widen(k, x, dtype), I32(x_zp))
            w = b.sext(k.load(k.args[1], k.index((o, per_group * kh_n * kw_n),
                                                 (c, kh_n * kw_n), (kh, kw_n), (kw, 1))), I32)
            b.store(b.add(b.load(total), b.mul(x, w)), total)
        k.store(b.load(total), k.outs[0], k.index((n, out_h * out_w * out_c),
                                                  (oh, out_w * out_c), (ow, out_c), (o, 1)))
