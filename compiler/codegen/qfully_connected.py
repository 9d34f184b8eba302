"""8-bit fully connected layers (QGemm, QLinearMatMul): exact int32 sums, either rule.

The input zero point is folded into the bias at compile time (bias - zx * sum_k w[n, k] +
K zx zw[n]) and a nonzero weight zero point costs one sum of the row, so the inner loop is a
plain product of 8-bit values accumulated in int32, as CMSIS-NN's kernel sums do. When the
outputs come in vectors (8, 16 or 32 of them) the weights are stored [K, N] and one input value
times one contiguous run of weights updates a vector of accumulators held in registers; else
they stay [N, K] and each output is one dot product. The per-output requantization
parameters (Q31 multiplier and shift, or float32 scale) are weight arrays.

A QLinearMatMul follows ONNX's MatMul: a 1-D A is one row and a 1-D B one column (their
dimension dropped from the output, which leaves its bytes as they are), and batched operands
multiply matrix by matrix, their batch dimensions broadcast; each matrix of B gets its own
weights and folded bias, and a small table says which matrices of A and B make each output.
"""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input, first, splat
from compiler.errors import KilnError
from compiler.ir.graph import Node
from compiler.qmath.requant import RANGES

# Extra weight slots after the node's inputs.
_ZERO_POINTS = 9
_MULTIPLIERS, _SHIFTS, _SCALES = requant.MULTIPLIERS, requant.SHIFTS, requant.SCALES
_BIAS = 6  # the folded bias: QGemm's own bias slot (QLinearMatMul's y_scale, read as code)
_MATRICES = 14  # per output matrix of a batched product, its A and B matrix (int32 pairs)
# Input slots of the output scale and zero point, and of the bias (None: none).
_SLOTS = {"QGemm": (7, 8, 6), "QLinearMatMul": (6, 7, None)}



def _input(node: Node, slot: int | None):
    value = node.inputs[slot] if slot is not None and len(node.inputs) > slot else None
    return None if value is None else value.data


def weight_rows(node: Node) -> np.ndarray:
    """The weights as [N, K] int64 (QGemm with transB stores them so; [K, N] otherwise)."""
    w = np.asarray(node.inputs[3].data, np.int64)
    return w if node.attrs.get("transB") else w.T


def _matrix_shape(shape: tuple[int, ...], vector: str) -> tuple[int, ...]:
    """A MatMul operand's shape with a 1-D `vector` made a "row" [1, K] or a "column" [K, 1]."""
    if len(shape) == 1:
        return (1, shape[0]) if vector == "row" else (shape[0], 1)
    return tuple(shape)


def geometry(node: Node) -> tuple[int, int, int, np.ndarray]:
    """(rows M, depth K, outputs N, and per output matrix the indices of its A and B matrix).

    The indices are [count, 2]; a QGemm and a 2-D QLinearMatMul have one matrix, [[0, 0]].
    """
    if node.op == "QGemm":
        rows, depth = node.inputs[0].type.shape
        outs = node.output.type.shape[1]
        return rows, depth, outs, np.zeros((1, 2), np.int64)
    a = _matrix_shape(node.inputs[0].type.shape, "row")
    b = _matrix_shape(node.inputs[3].type.shape, "column")
    batch = np.broadcast_shapes(a[:-2], b[:-2])

    def matrices(shape):
        count = int(np.prod(shape[:-2], dtype=np.int64))
        return np.broadcast_to(np.arange(count).reshape(shape[:-2]), batch).reshape(-1)

    return a[-2], a[-1], b[-1], np.stack([matrices(a), matrices(b)], axis=1)


def weight_matrices(node: Node) -> np.ndarray:
    """B as [matrices, N, K] int64: one [N, K] block per matrix of B."""
    if node.op == "QGemm":
        return weight_rows(node)[None]
    b = np.asarray(node.inputs[3].data, np.int64)
    b = b.reshape(_matrix_shape(b.shape, "column"))
    return np.swapaxes(b.reshape(-1, *b.shape[-2:]), 1, 2)


def _lanes(count: int) -> int:
    """Outputs per vector of accumulators (32, 16 or 8), or 0 for the scalar loops."""
    return next((w for w in (32, 16, 8) if count % w == 0), 0)


def qgemm_weights(node: Node) -> dict[int, np.ndarray]:
    """Weights, folded bias, weight zero points, the rule's data and any table of matrices.

    Per matrix of B: its weights [N, K] int8 and its folded int32 bias [N].
    """
    w = weight_matrices(node)
    n, depth = w.shape[1:]
    y_scale_slot, _, bias_slot = _SLOTS[node.op]
    zx = int(first(_input(node, 2)))
    zw_data = _input(node, 5)
    zw = np.asarray(0 if zw_data is None else zw_data, np.int64).reshape(-1)
    w_scale = np.asarray(node.inputs[4].data, np.float32).reshape(-1)
    if zw.size not in (1, n) or w_scale.size not in (1, n):
        raise KilnError(f"cannot generate {node.op} {node.name}: its B scale has "
                        f"{w_scale.size} values and its B zero point {zw.size}, for {n} "
                        "column(s) of B")
    zw = np.broadcast_to(zw, (n,))
    bias_data = _input(node, bias_slot)
    bias = np.zeros(n, np.int64) if bias_data is None else np.asarray(bias_data, np.int64)
    folded = bias - zx * w.sum(axis=2) + depth * zx * zw
    x_scale = np.float32(first(node.inputs[1].data))
    y_scale = np.float32(first(node.inputs[y_scale_slot].data))
    # [K, N] when a vector of outputs can run along a row of it, else [N, K].
    stored = np.swapaxes(w, 1, 2) if _lanes(n) else w
    arrays = {3: np.ascontiguousarray(stored.reshape(-1, stored.shape[-1]))
              .astype(node.inputs[3].type.dtype),
              _BIAS: folded.reshape(-1).astype(np.int32),
              _ZERO_POINTS: zw.astype(np.int32)}
    arrays.update(requant.channel_arrays(node, x_scale, w_scale, y_scale, n,
                                         fully_connected=True))
    matrices = geometry(node)[3]
    if len(matrices) > 1:
        arrays[_MATRICES] = matrices.astype(np.int32).reshape(-1)
    return arrays


def emit_qgemm(k: Kernel) -> None:
    """y[m, n] = requant(bias'[n] + sum_k x[m, k] w[n, k] - zw[n] sum_k x[m, k]).

    A batched product loops over its output matrices, each reading the matrices of A and B
    its table names.
    """
    rows, depth, outs, matrices = geometry(k.node)
    if len(matrices) == 1:
        _emit_product(k, rows, depth, outs, None)
        return
    b = k.b
    with k.loop(len(matrices)) as o:
        pair = k.index((o, 2))
        a_matrix = k.load(k.args[_MATRICES], pair)
        b_matrix = k.load(k.args[_MATRICES], b.add(pair, I32(1)))
        _emit_product(k, rows, depth, outs, (
            b.mul(a_matrix, I32(rows * depth)), b.mul(b_matrix, I32(depth * outs)),
            b.mul(b_matrix, I32(outs)), k.index((o, rows * outs))))


def _emit_product(k: Kernel, rows: int, depth: int, outs: int, bases) -> None:
    """One matrix product, from the element offsets `bases` (None: the only one, at 0).

    `bases` are the offsets of its matrix of A, its weights, its bias and its output.
    """
    node = k.node
    x_type, y_type = node.inputs[0].type, node.output.type
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

    def at(which: int, index):
        return index if bases is None else b.add(bases[which], index)
    x_at, w_at, bias_at, out_at = (functools.partial(at, i) for i in range(4))

    def finish(acc, n, m):
        if need_row_sum:
            acc = b.sub(acc, b.mul(k.load(k.args[_ZERO_POINTS], n), b.load(sum_slot)))
        if node.attrs.get("requant", "onnx") == "tflite":
            value = requant.tflite(k, acc, k.load(k.args[_MULTIPLIERS], n),
                                   k.load(k.args[_SHIFTS], n), zp, low, high)
        else:
            value = requant.onnx(k, acc, k.load(k.args[_SCALES], n), zp, low, high)
        k.store(b.trunc(value, ir.IntType(8)), k.outs[0], out_at(k.index((m, outs), (n, 1))))

    with k.loop(rows) as m:
        if need_row_sum:
            b.store(I32(0), sum_slot)
            with k.loop(depth) as d:
                x = widen(k.load(k.args[0], x_at(k.index((m, depth), (d, 1)))), I32)
                b.store(b.add(b.load(sum_slot), x), sum_slot)
        if lanes:  # a vector of outputs; weights stored [K, N]
            with k.loop(outs // lanes) as chunk:
                n0 = k.index((chunk, lanes))
                b.store(_vector_load(k, k.args[_BIAS], bias_at(n0), I32, lanes), vec_slot)
                with k.loop(depth) as d:
                    x = widen(k.load(k.args[0], x_at(k.index((m, depth), (d, 1)))), I32)
                    w = _vector_load(k, k.args[3], w_at(b.add(k.index((d, outs)), n0)),
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
                out = b.bitcast(b.gep(k.outs[0], [out_at(b.add(k.index((m, outs)), n0))],
                                      inbounds=True),
                                ir.PointerType(ir.VectorType(ir.IntType(8), lanes)))
                b.store(b.trunc(values, ir.VectorType(ir.IntType(8), lanes)), out, align=1)
        else:  # one output at a time; weights stored [N, K]
            with k.loop(outs) as n:
                b.store(k.load(k.args[_BIAS], bias_at(n)), acc_slot)
                with k.loop(depth) as d:
                    x = widen(k.load(k.args[0], x_at(k.index((m, depth), (d, 1)))), I32)
                    w = w_widen(k.load(k.args[3], w_at(k.index((n, depth), (d, 1)))), I32)
                    b.store(b.add(b.load(acc_slot), b.mul(x, w)), acc_slot)
                finish(b.load(acc_slot), n, m)


def _vector_load(k: Kernel, ptr, index, element, lanes: int):
    """`lanes` consecutive elements of `ptr` from `index`, as one vector."""
    cast = k.b.bitcast(k.b.gep(ptr, [index], inbounds=True),
                       ir.PointerType(ir.VectorType(element, lanes)))
    return k.b.load(cast, align=1)
