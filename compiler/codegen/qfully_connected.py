"""8-bit fully connected layers (QGemm, 2-D QLinearMatMul): exact int32 sums, either rule.

The input zero point is folded into the bias at compile time (bias - zx * sum_k w[n, k] +
K zx zw[n]) and a nonzero weight zero point costs one sum of the row, so the inner loop is a
plain product of 8-bit values accumulated in int32, as CMSIS-NN's kernel sums do. When the
outputs come in vectors (8, 16 or 32 of them) the weights are stored [K, N] and one input value
times one contiguous run of weights updates a vector of accumulators held in registers; else
they stay [N, K] and each output is one dot product. The per-output requantization
parameters (Q31 multiplier and shift, or float32 scale) are weight arrays.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input, first, splat
from compiler.errors import KilnError
from compiler.ir.graph import Node
from compiler.quant.requant import RANGES

# Extra weight slots after the node's inputs.
_ZERO_POINTS = 9
_MULTIPLIERS, _SHIFTS, _SCALES = requant.MULTIPLIERS, requant.SHIFTS, requant.SCALES
_BIAS = 6  # the folded bias: QGemm's own bias slot (QLinearMatMul's y_scale, read as code)
# Input slots of the output scale and zero point, and of the bias (None: none).
_SLOTS = {"QGemm": (7, 8, 6), "QLinearMatMul": (6, 7, None)}



def _input(node: Node, slot: int | None):
    value = node.inputs[slot] if slot is not None and len(node.inputs) > slot else None
    return None if value is None else value.data


def weight_rows(node: Node) -> np.ndarray:
    """The weights as [N, K] int64 (QGemm with transB stores them so; [K, N] otherwise)."""
    w = np.asarray(node.inputs[3].data, np.int64)
    return w if node.attrs.get("transB") else w.T


def _lanes(count: int) -> int:
    """Outputs per vector of accumulators (32, 16 or 8), or 0 for the scalar loops."""
    return next((w for w in (32, 16, 8) if count % w == 0), 0)


def qgemm_weights(node: Node) -> dict[int, np.ndarray]:
    """Weights [N, K] int8, the folded int32 bias, the weight zero points and the rule's data."""
    w = weight_rows(node)
    n, depth = w.shape
    y_scale_slot, _, bias_slot = _SLOTS[node.op]
    zx = int(first(_input(node, 2)))
    zw_data = _input(node, 5)
    zw = np.broadcast_to(np.asarray(0 if zw_data is None else zw_data, np.int64).reshape(-1),
                         (n,))
    bias_data = _input(node, bias_slot)
    bias = np.zeros(n, np.int64) if bias_data is None else np.asarray(bias_data, np.int64)
    folded = bias - zx * w.sum(axis=1) + depth * zx * zw
    x_scale = np.float32(first(node.inputs[1].data))
    w_scale = np.asarray(node.inputs[4].data, np.float32).reshape(-1)
    y_scale = np.float32(first(node.inputs[y_scale_slot].data))
    # [K, N] when a vector of outputs can run along a row of it, else [N, K].
    stored = w.T if _lanes(n) else w
    arrays = {3: np.ascontiguousarray(stored).astype(node.inputs[3].type.dtype),
              _BIAS: folded.astype(np.int32),
              _ZERO_POINTS: zw.astype(np.int32)}
    arrays.update(requant.channel_arrays(node, x_scale, w_scale, y_scale, n,
                                         fully_connected=True))
    return arrays


def emit_qgemm(k: Kernel) -> None:
    """y[m, n] = requant(bias'[n] + sum_k x[m, k] w[n, k] - zw[n] sum_k x[m, k])."""
    node = k.node
    x_type, y_type = node.inputs[0].type, node.output.type
    if x_type.rank != 2:
        raise KilnError(f"cannot generate {node.op} {node.name}: its input has rank "
                        f"{x_type.rank}; the 8-bit kernel takes rows of a matrix")
    rows, depth, outs = x_type.shape[0], x_type.shape[1], y_type.shape[1]
    signed = x_type.dtype == "int8"
    b = k.b
    zp = int(first(constant_input(k, _SLOTS[node.op][1], "output zero point")))
    low, high = node.attrs.get("output_range") or RANGES[y_type.dtype]
    zw = np.asarray(constant_input(k, 5, "weight zero point") if node.inputs[5] is not None
                    else 0).reshape(-1)
    need_row_sum = bool(np.any(zw != 0))
    widen = b.sext if signed else b.zext
    w_widen = b.sext if node.inputs[3].type.dtype == "int8" else b.zext
    acc_slot = k.alloca(I32)
    sum_slot = k.alloca(I32)
    lanes = _lanes(outs)
    vec = ir.VectorType(I32, lanes) if lanes else None
    vec_slot = k.alloca(vec) if lanes else None

    def finish(acc, n, m):
        if need_row_sum:
            acc = b.sub(acc, b.mul(k.load(k.args[_ZERO_POINTS], n), b.load(sum_slot)))
        if node.attrs.get("requant", "onnx") == "tflite":
            value = requant.tflite(k, acc, k.load(k.args[_MULTIPLIERS], n),
                                   k.load(k.args[_SHIFTS], n), zp, low, high)
        else:
            value = requant.onnx(k, acc, k.load(k.args[_SCALES], n), zp, low, high)
        k.store(b.trunc(value, ir.IntType(8)), k.outs[0], k.index((m, outs), (n, 1)))

    with k.loop(rows) as m:
        if need_row_sum:
            b.store(I32(0), sum_slot)
            with k.loop(depth) as d:
                x = widen(k.load(k.args[0], k.index((m, depth), (d, 1))), I32)
                b.store(b.add(b.load(sum_slot), x), sum_slot)
        if lanes:  # a vector of outputs; weights stored [K, N]
            with k.loop(outs // lanes) as chunk:
                n0 = k.index((chunk, lanes))
                b.store(_vector_load(k, k.args[_BIAS], n0, I32, lanes), vec_slot)
                with k.loop(depth) as d:
                    x = widen(k.load(k.args[0], k.index((m, depth), (d, 1))), I32)
                    w = _vector_load(k, k.args[3], b.add(k.index((d, outs)), n0),
                                     k.args[3].type.pointee, lanes)
                    w = b.sext(w, vec) if node.inputs[3].type.dtype == "int8" else \
                        b.zext(w, vec)
                    b.store(b.add(b.load(vec_slot), b.mul(splat(k, x, vec), w)), vec_slot)
                accs = b.load(vec_slot)
                if need_row_sum:
                    zw_vec = _vector_load(k, k.args[_ZERO_POINTS], n0, I32, lanes)
                    accs = b.sub(accs, b.mul(zw_vec, splat(k, b.load(sum_slot), vec)))
                if node.attrs.get("requant", "onnx") == "tflite":
                    values = requant.tflite(
                        k, accs, _vector_load(k, k.args[_MULTIPLIERS], n0, I32, lanes),
                        _vector_load(k, k.args[_SHIFTS], n0, I32, lanes), zp, low, high)
                else:
                    values = requant.onnx(
                        k, accs, _vector_load(k, k.args[_SCALES], n0, ir.FloatType(), lanes),
                        zp, low, high)
                out = b.bitcast(b.gep(k.outs[0], [b.add(k.index((m, outs)), n0)],
                                      inbounds=True),
                                ir.PointerType(ir.VectorType(ir.IntType(8), lanes)))
                b.store(b.trunc(values, ir.VectorType(ir.IntType(8), lanes)), out, align=1)
        else:  # one output at a time; weights stored [N, K]
            with k.loop(outs) as n:
                b.store(k.load(k.args[_BIAS], n), acc_slot)
                with k.loop(depth) as d:
                    x = widen(k.load(k.args[0], k.index((m, depth), (d, 1))), I32)
                    w = w_widen(k.load(k.args[3], k.index((n, depth), (d, 1))), I32)
                    b.store(b.add(b.load(acc_slot), b.mul(x, w)), acc_slot)
                finish(b.load(acc_slot), n, m)


def _vector_load(k: Kernel, ptr, index, element, lanes: int):
    """`lanes` consecutive elements of `ptr` from `index`, as one vector."""
    cast = k.b.bitcast(k.b.gep(ptr, [index], inbounds=True),
                       ir.PointerType(ir.VectorType(element, lanes)))
    return k.b.load(cast, align=1)
