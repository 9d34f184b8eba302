"""Kernels that pick, convert or copy: arg-extremes, Cast, Expand, gathers, scatters, CumSum...

ArgMax keeps the first extreme (the last with select_last_index), comparing floats ordered
(a NaN is never an extreme) and integers by their type's sign. Cast converts as C does: floats
truncate toward zero, integers wrap or extend by sign, bools are 0 or 1 and anything nonzero
becomes true. A Gather whose indices arrive at run time counts negative ones from the end and
clamps the rest into the axis: compiled code must not read outside its tensor, where the
interpreter refuses such an index.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.codetables import table
from compiler.codegen.elementwise import broadcast_strides
from compiler.codegen.kernel import I32, Kernel, llvm_type, strides
from compiler.errors import KilnError
from compiler.ops import lookup as op_lookup

_SIGNED = ("int8", "int16", "int32", "int64")


def emit_arg_extreme(k: Kernel) -> None:
    """ArgMax / ArgMin along one axis, as int64 or int32 indices."""
    node = k.node
    shape = node.inputs[0].type.shape
    axis = int(node.attrs["axis"]) % len(shape)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    dim = shape[axis]
    dtype = node.inputs[0].type.dtype
    index_ty = llvm_type(node.output.type.dtype)
    sign = ">" if node.op == "ArgMax" else "<"
    if node.attrs.get("select_last_index"):
        sign += "="

    def better(x, best):
        if dtype == "float32":
            return k.b.fcmp_ordered(sign, x, best)
        if dtype in _SIGNED:
            return k.b.icmp_signed(sign, x, best)
        return k.b.icmp_unsigned(sign, x, best)

    best_value = k.alloca(llvm_type(dtype))
    best_index = k.alloca(I32)
    with k.loop(outer) as o, k.loop(inner) as i:
        k.b.store(k.load(k.args[0], k.index((o, dim * inner), (i, 1))), best_value)
        k.b.store(I32(0), best_index)
        with k.loop(dim - 1) as j:
            at = k.b.add(j, I32(1))
            x = k.load(k.args[0], k.index((o, dim * inner), (at, inner), (i, 1)))
            take = better(x, k.b.load(best_value))
            k.b.store(k.b.select(take, x, k.b.load(best_value)), best_value)
            k.b.store(k.b.select(take, at, k.b.load(best_index)), best_index)
        result = k.b.load(best_index)
        if index_ty.width != 32:
            result = k.b.zext(result, index_ty)
        k.store(result, k.outs[0], k.index((o, inner), (i, 1)))


def _convert(k: Kernel, x: ir.Value, source: str, target: str) -> ir.Value:
    b = k.b
    ty = llvm_type(target)
    if source == target or (source, target) in (("int8", "uint8"), ("uint8", "int8")):
        return x
    if target == "bool":
        if source == "float32":
            return b.zext(b.fcmp_unordered("une", x, ir.Constant(x.type, 0.0)), ty)
        return b.zext(b.icmp_unsigned("!=", x, ir.Constant(x.type, 0)), ty)
    if source == "float32":
        return b.fptosi(x, ty) if target in _SIGNED else b.fptoui(x, ty)
    if target == "float32":
        return b.sitofp(x, ty) if source in _SIGNED else b.uitofp(x, ty)
    if ty.width < x.type.width:
        return b.trunc(x, ty)
    return b.sext(x, ty) if source in _SIGNED else b.zext(x, ty)


def emit_cast(k: Kernel) -> None:
    """Each element converted to the output's type, C's way."""
    source = k.node.inputs[0].type.dtype
    target = k.node.output.type.dtype
    with k.loop(k.node.output.type.numel) as i:
        k.store(_convert(k, k.load(k.args[0], i), source, target), k.outs[0], i)


def emit_expand(k: Kernel) -> None:
    """The input broadcast to the output's shape (a repeated axis reads with stride 0)."""
    node = k.node
    out = tuple(node.output.type.shape)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        steps = broadcast_strides(node.inputs[0].type.shape, out)
        x = k.load(k.args[0], k.index(*zip(idx, steps)))
        k.store(x, k.outs[0], k.index(*zip(idx, strides(out))))


def emit_gather_runtime(k: Kernel) -> None:
    """y[o, j, i] = x[o, clamp(idx[j]), i], the indices read from a tensor at run time."""
    node = k.node
    shape = node.inputs[0].type.shape
    axis = int(node.attrs.get("axis", 0)) % len(shape)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    dim, count = shape[axis], node.inputs[1].type.numel
    if node.inputs[1].type.dtype not in ("int32", "int64"):
        raise KilnError(f"cannot generate Gather {node.name}: its indices are "
                        f"{node.inputs[1].type.dtype}, not int32 or int64")
    if count == 0 or outer * inner == 0:
        return
    with k.loop(count) as j:
        src = index_value(k, 1, j, dim)
        with k.loop(outer) as o, k.loop(inner) as i:
            x = k.load(k.args[0], k.index((o, dim * inner), (src, inner), (i, 1)))
            k.store(x, k.outs[0], k.index((o, count * inner), (j, inner), (i, 1)))


def emit_cumsum(k: Kernel) -> None:
    """Running sums (CumSum) or products (CumProd) along an axis, in order, float or integer.

    Reversed, they run from the end; exclusive, each element is left out of its own.
    """
    node = k.node
    b = k.b
    shape = node.inputs[0].type.shape
    axis = int(np.asarray(node.inputs[1].data).reshape(-1)[0]) % len(shape)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    dim = shape[axis]
    ty = llvm_type(node.output.type.dtype)
    is_float = isinstance(ty, ir.FloatType)
    product = node.op == "CumProd"
    start = ir.Constant(ty, (1.0 if product else 0.0) if is_float else int(product))
    step = ((b.fmul if product else b.fadd) if is_float else (b.mul if product else b.add))
    total = k.alloca(ty)
    with k.loop(outer) as o, k.loop(inner) as i:
        b.store(start, total)
        with k.loop(dim) as j:
            at = b.sub(I32(dim - 1), j) if node.attrs["reverse"] else j
            where = k.index((o, dim * inner), (at, inner), (i, 1))
            x = k.load(k.args[0], where)
            if node.attrs["exclusive"]:
                k.store(b.load(total), k.outs[0], where)
            b.store(step(b.load(total), x), total)
            if not node.attrs["exclusive"]:
                k.store(b.load(total), k.outs[0], where)


def emit_trilu(k: Kernel) -> None:
    """The upper (or lower) triangle of the last two axes from diagonal k, zeros elsewhere."""
    node = k.node
    shape = node.output.type.shape
    diagonal = 0
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        diagonal = int(np.asarray(node.inputs[1].data).reshape(-1)[0])
    rows, cols = shape[-2], shape[-1]
    batches = int(np.prod(shape[:-2], dtype=np.int64))
    zero = ir.Constant(llvm_type(node.output.type.dtype),
                       0.0 if node.output.type.dtype == "float32" else 0)
    b = k.b
    with k.loop(batches) as n, k.loop(rows) as i, k.loop(cols) as j:
        at = k.index((n, rows * cols), (i, cols), (j, 1))
        offset = b.sub(j, i)  # the diagonal a position sits on
        keep = (b.icmp_signed(">=", offset, I32(diagonal)) if node.attrs["upper"]
                else b.icmp_signed("<=", offset, I32(diagonal)))
        k.store(b.select(keep, k.load(k.args[0], at), zero), k.outs[0], at)


def emit_known_value(k: Kernel) -> None:
    """An output known from types alone (Shape, Size): its values copied from a table."""
    node = k.node
    values = op_lookup(node.op).value_from_types(node, node.input_types())[0]
    flat = np.asarray(values).reshape(-1)
    data = table(k, "value", flat, llvm_type(node.output.type.dtype))
    with k.loop(flat.size) as i:
        k.store(k.load(data, i), k.outs[0], i)


def emit_dropout(k: Kernel) -> None:
    """Dropout at inference: the input copied; the optional mask all true."""
    node = k.node
    with k.loop(node.output.type.numel) as i:
        k.store(k.load(k.args[0], i), k.outs[0], i)
        if len(k.outs) > 1 and k.outs[1] is not None:
            k.store(ir.Constant(ir.IntType(8), 1), k.outs[1], i)


def index_value(k: Kernel, slot: int, at, dim: int):
    """The index at position `at` of input `slot`, read at run time.

    Negative ones count from the end and the rest are clamped into 0..dim-1: compiled code
    never reads or writes outside a tensor.
    """
    b = k.b
    raw = k.load(k.args[slot], at)
    raw = b.trunc(raw, I32) if raw.type.width > 32 else raw
    wrapped = b.select(b.icmp_signed("<", raw, I32(0)), b.add(raw, I32(dim)), raw)
    low = b.select(b.icmp_signed("<", wrapped, I32(0)), I32(0), wrapped)
    return b.select(b.icmp_signed(">", low, I32(dim - 1)), I32(dim - 1), low)


def emit_gather_elements(k: Kernel) -> None:
    """y[p] = x[p with its axis coordinate replaced by indices[p]]."""
    node = k.node
    data = node.inputs[0].type.shape
    shape = node.output.type.shape
    axis = int(node.attrs["axis"]) % len(data)
    data_strides, own = strides(data), strides(shape)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in shape]
        at = k.index(*zip(idx, own))
        source = index_value(k, 1, at, data[axis])
        terms = [(source if a == axis else i, data_strides[a]) for a, i in enumerate(idx)]
        k.store(k.load(k.args[0], k.index(*terms)), k.outs[0], at)


def emit_scatter_elements(k: Kernel) -> None:
    """The data copied, then each update written (or combined) at its index along the axis."""
    node = k.node
    data = node.output.type.shape
    updates = node.inputs[2].type.shape
    axis = int(node.attrs["axis"]) % len(data)
    combine = _COMBINE[node.attrs.get("reduction", "none")]
    data_strides, own = strides(data), strides(updates)
    with k.loop(node.output.type.numel) as i:
        k.store(k.load(k.args[0], i), k.outs[0], i)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in updates]
        at = k.index(*zip(idx, own))
        target = index_value(k, 1, at, data[axis])
        terms = [(target if a == axis else i, data_strides[a]) for a, i in enumerate(idx)]
        where = k.index(*terms)
        update = k.load(k.args[2], at)
        value = update if combine is None else combine(k, k.load(k.outs[0], where), update)
        k.store(value, k.outs[0], where)


def _float_or_int(float_op, int_op):
    def combine(k, a, x):
        if isinstance(a.type, ir.FloatType):
            return float_op(k, a, x)
        return int_op(k, a, x)
    return combine


_COMBINE = {
    "none": None,
    "add": _float_or_int(lambda k, a, x: k.b.fadd(a, x), lambda k, a, x: k.b.add(a, x)),
    "mul": _float_or_int(lambda k, a, x: k.b.fmul(a, x), lambda k, a, x: k.b.mul(a, x)),
    "max": _float_or_int(lambda k, a, x: k.b.select(k.b.fcmp_ordered(">", x, a), x, a),
                         lambda k, a, x: k.b.select(k.b.icmp_signed(">", x, a), x, a)),
    "min": _float_or_int(lambda k, a, x: k.b.select(k.b.fcmp_ordered("<", x, a), x, a),
                         lambda k, a, x: k.b.select(k.b.icmp_signed("<", x, a), x, a)),
}


def emit_center_crop_pad(k: Kernel) -> None:
    """Each output position reads the input shifted by the crop and the pad, or holds 0."""
    node = k.node
    shape, out = node.inputs[0].type.shape, node.output.type.shape
    b = k.b
    x_strides, own = strides(shape), strides(out)
    zero = ir.Constant(llvm_type(node.output.type.dtype),
                       0.0 if node.output.type.dtype == "float32" else 0)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        inside = ir.Constant(ir.IntType(1), 1)
        terms = []
        for i, n, m, step in zip(idx, shape, out, x_strides):
            # A crop starts (n - m) // 2 in; a pad puts (m - n) // 2 before.
            offset = (n - m) // 2 if n > m else -((m - n) // 2)
            source = b.add(i, I32(offset))
            inside = b.and_(inside, b.and_(b.icmp_signed(">=", source, I32(0)),
                                           b.icmp_signed("<", source, I32(n))))
            terms.append((b.select(inside, source, I32(0)), step))
        value = k.load(k.args[0], k.index(*terms))
        k.store(b.select(inside, value, zero), k.outs[0], k.index(*zip(idx, own)))


def emit_compress(k: Kernel) -> None:
    """The slices along the axis a known condition keeps (a table of their positions)."""
    node = k.node
    condition = np.asarray(node.inputs[1].data).reshape(-1).astype(bool)
    shape = node.inputs[0].type.shape
    axis = node.attrs.get("axis")
    if axis is None:  # the flattened input
        shape, axis = (int(np.prod(shape, dtype=np.int64)),), 0
    axis = int(axis) % len(shape)
    kept = np.nonzero(condition[:shape[axis]])[0]
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    if kept.size == 0 or outer * inner == 0:
        return
    positions = table(k, "kept", kept)
    with k.loop(outer) as o, k.loop(kept.size) as j:
        src = k.load(positions, j)
        with k.loop(inner) as i:
            x = k.load(k.args[0], k.index((o, shape[axis] * inner), (src, inner), (i, 1)))
            k.store(x, k.outs[0], k.index((o, kept.size * inner), (j, inner), (i, 1)))
