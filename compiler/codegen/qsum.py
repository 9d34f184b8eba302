"""IntRescaledSum and IntSquaredDifference: TFLite's 8-bit ADD_N, CUMSUM and SQUARED_DIFFERENCE.

The rescaled value of each stored code is a 256-entry int32 table (compiler.ops.qsum, the
reference's own function), so a kernel only looks values up, adds them, and requantizes the
sum with the tflite rule.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np

from compiler.codegen import requant
from compiler.codegen.codetables import table
from compiler.codegen.elementwise import broadcast_strides
from compiler.codegen.kernel import I32, Kernel
from compiler.ops.qsum import rescaled_input, rescaled_table, start_value
from compiler.qmath.requant import RANGES
from compiler.qmath.tables import codes


def _finish(k: Kernel, total):
    node = k.node
    low, high = RANGES[node.output.type.dtype]
    value = requant.tflite(k, total, I32(node.attrs["output_multiplier"]),
                           I32(node.attrs["output_shift"]), node.attrs["y_zero_point"], low, high)
    return k.b.trunc(value, k.outs[0].type.pointee)


def emit_int_rescaled_sum(k: Kernel) -> None:
    """ADD_N: every input's rescaled value summed per element; CUMSUM: running along an axis."""
    node = k.node
    b = k.b
    lookup = table(k, "rescaled", rescaled_table(node))

    def rescaled(x):
        return k.load(lookup, b.zext(x, I32))  # the code's bit pattern indexes the table

    start = I32(start_value(node))
    if node.attrs["mode"] == "add_n":
        with k.loop(node.output.type.numel) as i:
            total = start
            for arg in k.args[:len(node.inputs)]:
                total = b.add(total, rescaled(k.load(arg, i)))
            k.store(_finish(k, total), k.outs[0], i)
        return
    shape = node.output.type.shape
    axis = int(node.attrs["axis"]) % len(shape)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    depth = shape[axis]
    total = k.alloca(I32)
    with k.loop(outer) as o, k.loop(inner) as i:
        b.store(start, total)
        with k.loop(depth) as j:
            at = b.sub(I32(depth - 1), j) if node.attrs["reverse"] else j
            where = k.index((o, depth * inner), (at, inner), (i, 1))
            step = rescaled(k.load(k.args[0], where))
            if node.attrs["exclusive"]:
                k.store(_finish(k, b.load(total)), k.outs[0], where)
            b.store(b.add(b.load(total), step), total)
            if not node.attrs["exclusive"]:
                k.store(_finish(k, b.load(total)), k.outs[0], where)


def emit_int_squared_difference(k: Kernel) -> None:
    """(table_a[a] - table_b[b])^2 requantized, broadcasting numpy's way."""
    node = k.node
    b = k.b
    attrs = node.attrs
    codes_ = codes("int8")
    tables = [table(k, f"rescaled_{side}", rescaled_input(
        codes_, attrs[f"{side}_zero_point"], attrs[f"{side}_multiplier"],
        attrs[f"{side}_shift"]).astype(np.int32)) for side in "ab"]
    out = tuple(node.output.type.shape)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        values = []
        for slot, lookup in enumerate(tables):
            steps = broadcast_strides(node.inputs[slot].type.shape, out)
            x = k.load(k.args[slot], k.index(*zip(idx, steps)))
            values.append(k.load(lookup, b.zext(x, I32)))
        diff = b.sub(values[0], values[1])
        k.store(_finish(k, b.mul(diff, diff)), k.outs[0],
                k.index(*zip(idx, broadcast_strides(out, out))))
