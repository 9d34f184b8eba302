"""TopK, OneHot and ScatterND: indices chosen, or written, at run time.

TopK picks its K elements one after another without scratch memory: the r-th is the best of
those that come after the (r-1)-th in the total order (value, then the lower index first), as
compiler/ops/index.py's stable sort orders them. OneHot writes on where an index (negative
ones counted from the end) names the position, off elsewhere. ScatterND copies the data, then
writes (or adds, multiplies, takes the larger or smaller of) each update slice at the position
its index row addresses; indices are clamped into the tensor, so compiled code never writes
outside it.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import I32, Kernel, llvm_type, strides
from compiler.codegen.select import index_value
from compiler.ops._util import normalize_axis

I64 = ir.IntType(64)


def _span(shape, axis: int) -> tuple[int, int, int]:
    """(outer, length, inner) of `shape` around `axis`."""
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, shape[axis], inner


def _better(k: Kernel, largest: bool, v, i, w, j):
    """Whether (v, i) comes before (w, j): the larger (smaller) value, then the lower index."""
    b = k.b
    is_float = isinstance(v.type, ir.FloatType)
    if is_float:
        ahead = b.fcmp_ordered(">" if largest else "<", v, w)
        same = b.fcmp_ordered("==", v, w)
    else:
        ahead = b.icmp_signed(">" if largest else "<", v, w)
        same = b.icmp_signed("==", v, w)
    return b.or_(ahead, b.and_(same, b.icmp_signed("<", i, j)))


def emit_top_k(k: Kernel) -> None:
    """The K best values along the axis and their int64 indices, in order."""
    node, b = k.node, k.b
    shape = node.inputs[0].type.shape
    axis = normalize_axis(node.attrs["axis"], len(shape))
    outer, length, inner = _span(shape, axis)
    count = node.outputs[0].type.shape[axis]
    largest = bool(node.attrs["largest"])
    ty = llvm_type(node.output.type.dtype)
    best_v, best_i, prev_v, prev_i, found = (k.alloca(ty), k.alloca(I32), k.alloca(ty),
                                             k.alloca(I32), k.alloca(ir.IntType(1)))
    with k.loop(outer) as o, k.loop(inner) as r:
        first = k.alloca(ir.IntType(1))
        b.store(ir.Constant(ir.IntType(1), 1), first)
        with k.loop(count) as rank:
            b.store(ir.Constant(ir.IntType(1), 0), found)
            with k.loop(length) as i:
                v = k.load(k.args[0], k.index((o, length * inner), (i, inner), (r, 1)))
                after = b.or_(b.load(first), _better(k, largest, b.load(prev_v),
                                                     b.load(prev_i), v, i))
                better = b.or_(b.not_(b.load(found)),
                               _better(k, largest, v, i, b.load(best_v), b.load(best_i)))
                take = b.and_(after, better)
                b.store(b.select(take, v, b.load(best_v)), best_v)
                b.store(b.select(take, i, b.load(best_i)), best_i)
                b.store(b.or_(b.load(found), take), found)
            at = k.index((o, count * inner), (rank, inner), (r, 1))
            k.store(b.load(best_v), k.outs[0], at)
            k.store(b.sext(b.load(best_i), I64), k.outs[1], at)
            b.store(b.load(best_v), prev_v)
            b.store(b.load(best_i), prev_i)
            b.store(ir.Constant(ir.IntType(1), 0), first)


def emit_one_hot(k: Kernel) -> None:
    """out[.., d, ..] = on when the index there is d (or d - depth), off otherwise."""
    node, b = k.node, k.b
    out_shape = node.output.type.shape
    axis = normalize_axis(node.attrs["axis"], len(out_shape))
    outer, depth, inner = _span(out_shape, axis)
    off, on = k.load(k.args[2], I32(0)), k.load(k.args[2], I32(1))
    with k.loop(outer) as o, k.loop(depth) as d, k.loop(inner) as r:
        raw = k.load(k.args[0], k.index((o, inner), (r, 1)))
        if isinstance(raw.type, ir.FloatType):
            index = b.fptosi(raw, I64)
        else:
            index = b.sext(raw, I64) if raw.type.width < 64 else raw
        index = b.select(b.icmp_signed("<", index, I64(0)), b.add(index, I64(depth)), index)
        hot = b.icmp_signed("==", index, b.zext(d, I64))
        k.store(b.select(hot, on, off), k.outs[0], k.index((o, depth * inner), (d, inner),
                                                           (r, 1)))


def _combine(k: Kernel, reduction: str, old, new):
    b = k.b
    is_float = isinstance(new.type, ir.FloatType)
    if reduction == "add":
        return b.fadd(old, new) if is_float else b.add(old, new)
    if reduction == "mul":
        return b.fmul(old, new) if is_float else b.mul(old, new)
    if reduction in ("max", "min"):
        if is_float:
            keep = b.fcmp_ordered(">" if reduction == "max" else "<", old, new)
        else:
            keep = b.icmp_signed(">" if reduction == "max" else "<", old, new)
        return b.select(keep, old, new)
    return new


def _addressed(k: Kernel, row_start: ir.Value, dims, axis_strides) -> ir.Value:
    """The element offset the index row of input 1 starting at `row_start` addresses.

    Each index is read as select.index_value reads one: negatives from the end, the rest clamped.
    """
    b = k.b
    offset = I32(0)
    for j, dim in enumerate(dims):
        index = index_value(k, 1, b.add(row_start, I32(j)), dim)
        offset = b.add(offset, b.mul(index, I32(axis_strides[j])))
    return offset


def emit_scatter_nd(k: Kernel) -> None:
    """The data, then every update slice written at its index row's position."""
    node, b = k.node, k.b
    data_shape = node.inputs[0].type.shape
    index_shape = node.inputs[1].type.shape
    depth = index_shape[-1]
    rows = int(np.prod(index_shape[:-1], dtype=np.int64))
    slice_size = int(np.prod(data_shape[depth:], dtype=np.int64))
    axis_strides = strides(data_shape)[:depth]
    total = int(np.prod(data_shape, dtype=np.int64))
    data = k.args[0]
    with k.loop(total) as i:
        k.store(k.load(data, i), k.outs[0], i)
    reduction = node.attrs["reduction"]
    with k.loop(rows) as row:
        offset = _addressed(k, k.index((row, depth)), data_shape[:depth], axis_strides)
        with k.loop(slice_size) as s:
            at = b.add(offset, s)
            new = k.load(k.args[2], k.index((row, slice_size), (s, 1)))
            k.store(_combine(k, reduction, k.load(k.outs[0], at), new), k.outs[0], at)


def emit_gather_nd(k: Kernel) -> None:
    """GatherND: per batch (batch_dims leading axes) and index row, the slice it addresses."""
    node, b = k.node, k.b
    data_shape = node.inputs[0].type.shape
    index_shape = node.inputs[1].type.shape
    batch_dims = node.attrs["batch_dims"]
    depth = index_shape[-1]
    batch = int(np.prod(data_shape[:batch_dims], dtype=np.int64))
    rows = int(np.prod(index_shape[batch_dims:-1], dtype=np.int64))
    inner = data_shape[batch_dims:]
    slice_size = int(np.prod(inner[depth:], dtype=np.int64))
    block = int(np.prod(inner, dtype=np.int64))
    axis_strides = strides(inner)[:depth]
    with k.loop(batch) as bb, k.loop(rows) as row:
        offset = b.add(b.mul(bb, I32(block)), _addressed(
            k, k.index((bb, rows * depth), (row, depth)), inner[:depth], axis_strides))
        with k.loop(slice_size) as s:
            k.store(k.load(k.args[0], b.add(offset, s)), k.outs[0],
                    k.index((bb, rows * slice_size), (row, slice_size), (s, 1)))


def emit_tensor_scatter(k: Kernel) -> None:
    """TensorScatter: the cache, each batch item's update written from its write index.

    Positions along the axis wrap in circular mode and are clamped otherwise.
    """
    node, b = k.node, k.b
    cache = node.inputs[0].type.shape
    update = node.inputs[1].type.shape
    axis = normalize_axis(node.attrs["axis"], len(cache))
    size = cache[axis]
    circular = node.attrs["mode"] == "circular"
    total = int(np.prod(cache, dtype=np.int64))
    with k.loop(total) as i:
        k.store(k.load(k.args[0], i), k.outs[0], i)
    writes = k.args[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    c_st = strides(cache)
    u_st = strides(update)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in update]
        start = I32(0)
        if writes is not None:
            raw = k.load(writes, idx[0])
            start = b.trunc(raw, I32) if raw.type.width > 32 else raw
        pos = b.add(start, idx[axis])
        if circular:
            pos = b.srem(pos, I32(size))
            pos = b.select(b.icmp_signed("<", pos, I32(0)), b.add(pos, I32(size)), pos)
        else:
            pos = b.select(b.icmp_signed("<", pos, I32(0)), I32(0), pos)
            pos = b.select(b.icmp_signed(">=", pos, I32(size)), I32(size - 1), pos)
        target = [pos if a == axis else i for a, i in enumerate(idx)]
        k.store(k.load(k.args[1], k.index(*zip(idx, u_st))), k.outs[0],
                k.index(*zip(target, c_st)))
