"""Matrix products: Gemm (2-D, with transposes, scaling and a bias) and numpy-style MatMul."""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops._util import broadcast_shape
from compiler.ops.elementwise import FLOATS, require_dtype, same_dtype
from compiler.ops.registry import Attr, OpDef, fail, register

_MATMUL_TYPES = FLOATS + ("int32", "int64", "uint32", "uint64")


def _work_dtype(dtype: np.dtype) -> np.dtype:
    """float16 products accumulate in float32 (as onnxruntime's kernels do)."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


# -- Gemm -----------------------------------------------------------------------------------------

def _gemm_mnk(node, a_shape, b_shape) -> tuple[int, int, int]:
    """(M, N, K) of a Gemm, after its transposes."""
    if len(a_shape) != 2 or len(b_shape) != 2:
        fail(f"Gemm needs 2-D A and B, got shapes {list(a_shape)} and {list(b_shape)}")
    m, k = a_shape[::-1] if node.attrs["transA"] else a_shape
    k_b, n = b_shape[::-1] if node.attrs["transB"] else b_shape
    if k != k_b:
        fail(f"Gemm's inner dimensions differ: A gives {k}, B gives {k_b} (transA="
             f"{node.attrs['transA']}, transB={node.attrs['transB']})")
    return m, n, k


def _infer_gemm(node, ins, values):
    dtype = same_dtype(node, ins)
    require_dtype(node, ins[0], FLOATS)
    m, n, _ = _gemm_mnk(node, ins[0].shape, ins[1].shape)
    c = ins[2] if len(ins) > 2 else None
    if c is not None and broadcast_shape(c.shape, (m, n)) != (m, n):
        fail(f"Gemm's C of shape {list(c.shape)} does not broadcast to the output shape "
             f"{[m, n]}")
    return [TensorType((m, n), dtype)]


def _gemm(node, a, b, c=None):
    dtype = a.dtype
    work = _work_dtype(dtype)
    a = a.astype(work, copy=False)
    b = b.astype(work, copy=False)
    if node.attrs["transA"]:
        a = a.T
    if node.attrs["transB"]:
        b = b.T
    y = a @ b
    if node.attrs["alpha"] != 1.0:
        y = y * work.type(node.attrs["alpha"])
    if c is not None and node.attrs["beta"] != 0.0:
        y = y + work.type(node.attrs["beta"]) * c.astype(work, copy=False)
    return y.astype(dtype, copy=False)


def _gemm_macs(node) -> int:
    m, n, k = _gemm_mnk(node, node.inputs[0].type.shape, node.inputs[1].type.shape)
    return m * n * k


def _gemm_to_onnx(ctx, attrs, inputs, opset):
    """C became optional at opset 11; before, a Gemm without C gets a scalar zero."""
    if opset < 11 and (len(inputs) < 3 or not inputs[2]):
        zero = np.zeros((), ctx.node.inputs[0].type.dtype)
        inputs = [*inputs[:2], ctx.constant("gemm_c", zero)]
    return attrs, inputs


register(OpDef(
    "Gemm", "matmul", _infer_gemm, _gemm, inputs=(2, 3), macs=_gemm_macs, to_onnx=_gemm_to_onnx,
    attrs={
        "alpha": Attr("float", 1.0, "scales A'B'"),
        "beta": Attr("float", 1.0, "scales C"),
        "transA": Attr("int", 0, "1: A is stored transposed (K, M)"),
        "transB": Attr("int", 0, "1: B is stored transposed (N, K)"),
    },
    doc="alpha * A' B' + beta * C for 2-D A and B; C broadcasts to the output"))


# -- MatMul ---------------------------------------------------------------------------------------

def matmul_shape(a_shape, b_shape) -> tuple[tuple[int, ...], int]:
    """Output shape and inner dimension K of numpy.matmul, including 1-D promotion."""
    if not a_shape or not b_shape:
        fail(f"MatMul needs inputs of rank 1 or more, got shapes {list(a_shape)} and "
             f"{list(b_shape)}")
    a2 = (1, *a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b2 = (*b_shape, 1) if len(b_shape) == 1 else tuple(b_shape)
    if a2[-1] != b2[-2]:
        fail(f"MatMul's inner dimensions differ: {list(a_shape)} times {list(b_shape)}")
    batch = broadcast_shape(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a_shape) == 1:
        out = out[:-2] + out[-1:]
    if len(b_shape) == 1:
        out = out[:-1]
    return out, a2[-1]


def _infer_matmul(node, ins, values):
    dtype = same_dtype(node, ins)
    require_dtype(node, ins[0], _MATMUL_TYPES)
    shape, _ = matmul_shape(ins[0].shape, ins[1].shape)
    return [TensorType(shape, dtype)]


def _matmul(node, a, b):
    work = _work_dtype(a.dtype)
    return np.asarray(np.matmul(a.astype(work, copy=False), b.astype(work, copy=False))
                      ).astype(a.dtype, copy=False)


def _matmul_macs(node) -> int:
    shape, k = matmul_shape(node.inputs[0].type.shape, node.inputs[1].type.shape)
    return int(np.prod(shape, dtype=np.int64)) * k


register(OpDef("MatMul", "matmul", _infer_matmul, _matmul, inputs=(2, 2), macs=_matmul_macs,
               doc="matrix product with numpy.matmul semantics (1-D promotion, batch broadcast)"))


def _infer_det(node, ins, values):
    t = ins[0]
    require_dtype(node, t, FLOATS)
    if t.rank < 2 or t.shape[-1] != t.shape[-2]:
        fail(f"Det needs square matrices in the last two axes, got {list(t.shape)}")
    return [TensorType(t.shape[:-2], t.dtype)]


register(OpDef("Det", "matmul", _infer_det,
               lambda node, x: np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype),
               since=11, doc="determinant of each square matrix in the last two axes"))
