"""Pad with constant pads: constant fill, or edge / reflect / wrap through per-axis tables."""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.codetables import table
from compiler.codegen.kernel import Kernel, constant_input, llvm_type, strides
from compiler.errors import KilnError
from compiler.ir.graph import Constant
from compiler.ops.gather import _full_pads


def _known_fill(node):
    """The constant fill value, or None when absent or computed at run time."""
    value = node.inputs[2] if len(node.inputs) > 2 else None
    return value.data if isinstance(value, Constant) else None


def runtime_fill(node) -> bool:
    """A constant-mode Pad whose fill value is computed at run time."""
    value = node.inputs[2] if len(node.inputs) > 2 else None
    return value is not None and not isinstance(value, Constant)


def pad_widths(k: Kernel) -> tuple[list[tuple[int, int]], float]:
    """(before, after) per axis and the fill value; the pads must be known at compile time.

    A fill computed at run time (runtime_fill) reads as 0 here; the kernel loads it.
    """
    node = k.node
    data = {slot: constant_input(k, slot, what) for slot, what in ((1, "pads"), (3, "axes"))}
    data[2] = _known_fill(node)

    def ints(slot):
        return None if data[slot] is None else [int(v) for v in data[slot].reshape(-1)]

    rank = len(node.inputs[0].type.shape)
    widths = _full_pads(rank, ints(1), ints(3))
    value = data[2]
    fill = float(value.reshape(-1)[0]) if value is not None and value.size else 0.0
    return widths, fill


def emit_pad(k: Kernel) -> None:
    """Constant mode fills the output, then copies the kept part of x to its shifted place.

    Other modes read every output element through one index table per axis, made by numpy's
    own padding of 0..n-1, so each mode is exactly numpy's (and the reference's).
    Negative pads crop. Every loop runs over the output in order, innermost axis contiguous.
    """
    node = k.node
    shape = node.inputs[0].type.shape
    out = node.output.type.shape
    widths, fill = pad_widths(k)
    mode = node.attrs.get("mode", "constant")
    ty = llvm_type(node.output.type.dtype)
    x_strides, y_strides = strides(shape), strides(out)
    if 0 in out:
        return
    if mode == "constant":
        total = int(np.prod(out, dtype=np.int64))
        value = (k.load(k.args[2], ir.Constant(ir.IntType(32), 0)) if runtime_fill(node)
                 else ir.Constant(ty, int(fill) if isinstance(ty, ir.IntType) else fill))
        with k.loop(total) as i:
            k.store(value, k.outs[0], i)
        # Kept input range per axis: [lo, hi), written at output position + before.
        kept = [(max(0, -b), d - max(0, -e)) for (b, e), d in zip(widths, shape)]
        if any(hi <= lo for lo, hi in kept):
            return
        with ExitStack() as stack:
            idx = [stack.enter_context(k.loop(hi - lo)) for lo, hi in kept]
            src = k.index(*zip(idx, x_strides),
                          base=sum(lo * s for (lo, _), s in zip(kept, x_strides)))
            dst = k.index(*zip(idx, y_strides), base=sum(
                (lo + b) * s for (lo, _), (b, _), s in zip(kept, widths, y_strides)))
            k.store(k.load(k.args[0], src), k.outs[0], dst)
        return
    if mode not in ("edge", "reflect", "wrap", "symmetric"):
        raise KilnError(f"cannot generate Pad {node.name}: mode {mode!r}")
    tables = []
    for axis, ((b, e), d) in enumerate(zip(widths, shape)):
        rows = np.arange(d, dtype=np.int64)[max(0, -b):d - max(0, -e)]
        rows = np.pad(rows, (max(0, b), max(0, e)), mode=mode) * x_strides[axis]
        tables.append(None if b == e == 0 else table(k, f"axis{axis}", rows))
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        src: ir.Value = ir.Constant(idx[0].type, 0)
        for axis, i in enumerate(idx):
            term = k.load(tables[axis], i) if tables[axis] is not None else k.b.mul(
                i, ir.Constant(i.type, x_strides[axis]))
            src = k.b.add(src, term)
        k.store(k.load(k.args[0], src), k.outs[0], k.index(*zip(idx, y_strides)))
