"""A residual block's two convolutions run row by row (`compiler.lowir.lower.lower_pair`).

The block: y = A(x), then z = B(y) + x written over x. Both keep rows one to one with three-row
windows, so row r of z needs rows r - 1 .. r + 1 of y, which need rows up to r + 2 of x. The
driver below walks r upwards; y's rows pass through a window of a few rows (its own storage):
the next row of y is computed into the window, then row r of z from the three rows there, and
written over row r of x, which no later row reads. When the window is full its last two rows
move to its front. A row of padding is a row of y's zero point (so its taps add nothing), which
leaves B one kernel for every row.

The kernels themselves are the usual emitters, run on nodes cut down to one output row: A at
the top (input rows 0 and 1, padded above), in the middle (three input rows) and at the bottom
(padded below), and B on three window rows with its residual row. The driver calls them with
pointers to the rows they work on.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import I32, Kernel
from compiler.ir.graph import Constant, Node, Value
from compiler.ir.types import TensorType

I8 = ir.IntType(8)
I8P = ir.PointerType(I8)
_IDS = itertools.count(-1, -1)  # nodes of no graph


@dataclass(frozen=True)
class PairRows:
    """The one-row nodes a pair's driver calls, and the rows it walks.

    Attributes:
        top, middle, bottom: A cut to output one row: from input rows 0..1, r-1..r+1 and
            the last two.
        out: B cut to output one row from three window rows; `out_add` its residual Add.
        rows: Rows of x, y and z.
        x_row, y_row: Bytes of one row of x (and z), of y.
        window: Rows the window holds.
        zero: y's zero point, the value of a row of padding.
    """

    top: Node
    middle: Node
    bottom: Node
    out: Node
    out_add: Node
    rows: int
    x_row: int
    y_row: int
    window: int
    zero: int

    @property
    def parts(self) -> dict[str, Node]:
        """The one-row nodes by the names the driver calls them."""
        return {"top": self.top, "middle": self.middle, "bottom": self.bottom, "out": self.out}


def pair_rows(first: Node, second: Node, add: Node, window: int) -> PairRows:
    """The one-row nodes of a pair whose window holds `window` rows of y."""
    x, y = first.inputs[0].type, first.output.type
    rows = x.shape[1]
    zero = int(np.asarray(second.inputs[2].data).reshape(-1)[0])
    out = one_row(second, 3, 0, 0, "out")
    return PairRows(one_row(first, 2, 1, 0, "top"), one_row(first, 3, 0, 0, "middle"),
                    one_row(first, 2, 0, 1, "bottom"), out, row_add(add, second, out), rows,
                    x.nbytes // rows, y.nbytes // rows, window, zero)


def row_add(add: Node, conv: Node, conv_row: Node) -> Node:
    """The residual Add fused into `conv`, cut to the one row `conv_row` outputs."""
    residual = Value(f"{add.name}.{conv_row.name}.residual", conv_row.output.type)
    inputs = [conv_row.output if v is conv.output else residual if _runtime(v) else v
              for v in add.inputs]
    return Node(next(_IDS), add.op, f"{add.name}.{conv_row.name}", inputs,
                [Value(f"{add.name}.{conv_row.name}.out", TensorType(
                    conv_row.output.type.shape, add.output.type.dtype, add.output.type.quant))],
                dict(add.attrs), add.provenance)


def _runtime(value: Value | None) -> bool:
    return value is not None and not isinstance(value, Constant)


def one_row(node: Node, rows_in: int, pad_top: int, pad_bottom: int, part: str) -> Node:
    """`node` reading `rows_in` input rows (with this padding above and below) for one row."""
    x, y = node.inputs[0].type, node.output.type
    attrs = dict(node.attrs)
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    attrs["pads"] = [pad_top, pads[1], pad_bottom, pads[3]]
    attrs["auto_pad"] = "NOTSET"
    source = Value(f"{node.name}.{part}.in", TensorType((1, rows_in, *x.shape[2:]), x.dtype,
                                                        x.quant))
    row = Node(next(_IDS), node.op, f"{node.name}.{part}", [source, *node.inputs[1:]], [],
               attrs, node.provenance)
    row.outputs = [Value(f"{node.name}.{part}.out", TensorType((1, 1, *y.shape[2:]), y.dtype,
                                                               y.quant), row)]
    return row


def emit_driver(fn: ir.Function, rows: PairRows, calls: dict[str, tuple[ir.Function, int]]
                ) -> None:
    """The body of `fn(x, window, weights...)`: the walk over rows, calling the kernels.

    `calls` maps "top", "middle", "bottom" and "out" to (kernel function, index of its first
    weight argument among fn's arguments); each takes its weights as fn got them.
    """
    x, window = fn.args[0], fn.args[1]
    k = Kernel(rows.out, fn, [], [])  # for its loops and its entry block; no node of its own
    b = k.b
    base = k.alloca(I32)  # the row of y in the window's first row
    b.store(I32(-1), base)

    def weights(part: str) -> list[ir.Value]:
        kernel, first = calls[part]
        count = len(kernel.args) - (2 if part != "out" else 3)
        return list(fn.args[first:first + count])

    def at(ptr: ir.Value, row: ir.Value, size: int) -> ir.Value:
        return b.gep(ptr, [b.mul(row, I32(size))])

    def call(part: str, pointers: list[ir.Value]) -> None:
        kernel, _ = calls[part]
        args = [b.bitcast(p, a.type) for p, a in zip(pointers, kernel.args)]
        b.call(kernel, args + weights(part))

    def fill(index: ir.Value) -> None:  # a row of padding: y's zero point throughout
        start = at(window, index, rows.y_row)
        with k.loop(rows.y_row) as i:
            b.store(I8(rows.zero & 0xFF), b.gep(start, [i]))

    def compute(v: ir.Value) -> None:
        """Row v of y into its window row (v in 0..rows)."""
        index = b.sub(v, b.load(base))
        slot = at(window, index, rows.y_row)
        last = rows.rows - 1
        with b.if_else(b.icmp_signed("==", v, I32(0))) as (is_top, rest):
            with is_top:
                call("top", [x, slot])
            with rest:
                with b.if_else(b.icmp_signed("<", v, I32(last))) as (is_middle, low):
                    with is_middle:
                        call("middle", [at(x, b.sub(v, I32(1)), rows.x_row), slot])
                    with low:
                        with b.if_else(b.icmp_signed("==", v, I32(last))) as (is_bottom, pad):
                            with is_bottom:
                                call("bottom", [at(x, I32(last - 1), rows.x_row), slot])
                            with pad:
                                fill(index)

    fill(I32(0))  # row -1
    compute(I32(0))
    with k.loop(rows.rows) as r:
        # Room for row r + 1: when the window is full, rows r - 1 and r move to its front.
        full = b.icmp_signed(">=", b.sub(b.add(r, I32(1)), b.load(base)), I32(rows.window))
        with b.if_then(full):
            keep = at(window, b.sub(b.sub(r, I32(1)), b.load(base)), rows.y_row)
            with k.loop(2 * rows.y_row) as i:
                b.store(b.load(b.gep(keep, [i])), b.gep(window, [i]))
            b.store(b.sub(r, I32(1)), base)
        compute(b.add(r, I32(1)))
        here = at(x, r, rows.x_row)
        call("out", [at(window, b.sub(b.sub(r, I32(1)), b.load(base)), rows.y_row), here, here])
    k.finish()
