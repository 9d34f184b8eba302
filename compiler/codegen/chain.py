"""A row-streamed chain's kernel: one-row kernels called in the order of the chain's schedule.

The schedule (`compiler.lowir.rows`) is fixed at compile time, so it becomes a table in flash,
four words per event: what to run and up to three places (argument, byte offset) packed into
one word each. The driver walks the table and a switch calls the event's kernel. Each layer
has a few one-row kernels, one per distinct padding at the top and bottom (the usual
emitters run on the layer cut down to one output row, as for a residual pair); a window move
is a memmove; a pool adds rows into int32 sums and writes its output once at the end.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from llvmlite import ir

from compiler.codegen.entry import add_ticks, cycle_counter
from compiler.codegen.kernel import I32, Kernel
from compiler.codegen.pair import one_row, row_add
from compiler.codegen.qpool import emit_qgap_finish, emit_qgap_row_sums
from compiler.errors import KilnError
from compiler.ir.graph import Node, Value
from compiler.ir.types import TensorType
from compiler.lowir.ir import sums_storage
from compiler.lowir.rows import RowChain, RowEvent, RowStage
from compiler.ops.geometry import spatial

I8P = ir.PointerType(ir.IntType(8))
_IDS = itertools.count(-1_000_000, -1)  # nodes of no graph
MOVE = 0  # the case of a window move
OFFSET_BITS = 24  # a place: argument index above, byte offset below


@dataclass(frozen=True)
class ChainPart:
    """One kernel a chain's driver calls.

    kind: "row" (`node` cut to one output row, run by its usual emitter, with its one-row
    residual `add` or None), "sums_first" / "sums" (a pool's row into its sums), "finish"
    (a pool's output from its sums). `source` is the name of the graph node it cuts down.
    """

    kind: str
    node: Node
    add: Node | None = None
    source: str = ""

    @property
    def label(self) -> str:
        """What it runs, for reports: the operator and which part of it."""
        op = self.node.op + (f"+{self.add.op}" if self.add is not None else "")
        part = "one row" if self.kind == "row" else self.kind.replace("_", " ")
        return f"{op} ({part})"


@dataclass
class ChainCode:
    """What the driver needs: the kernels by case, the event table, the chain's stages."""

    parts: dict[int, ChainPart]
    table: list[tuple[int, int, int, int]]
    stages: list[RowStage]


def chain_code(chain: RowChain, nodes: dict[str, Node], values: dict[str, Value],
               args: dict[str, int]) -> ChainCode:
    """The parts and the table of `chain`; `args` maps a value (or sums storage) to its argument.

    A value kept whole and a window are both addressed by rows from their argument's start.
    """
    parts: dict[int, ChainPart] = {}
    keys: dict[tuple, int] = {}
    table = []
    row_bytes = {s.output: s.row_bytes for s in chain.stages}
    for v in chain.inputs:
        row_bytes[v] = values[v].type.nbytes // values[v].type.shape[1]

    def case(key: tuple, make) -> int:
        if key not in keys:
            keys[key] = len(keys) + 1
            parts[keys[key]] = make()
        return keys[key]

    def place(value: str, slot: int) -> int:
        offset = slot * row_bytes[value]
        if offset >= 1 << OFFSET_BITS:
            raise KilnError(f"a row of {value} lies past 16 MB: too far for a chain's table")
        return args[value] << OFFSET_BITS | offset

    for event in chain.events:
        table.append(_entry(event, chain, nodes, case, place, args))
    return ChainCode(parts, table, chain.stages)


def _entry(event: RowEvent, chain: RowChain, nodes: dict[str, Node], case, place,
           args: dict[str, int]) -> tuple[int, int, int, int]:
    """One table row: (case, place, place, place or byte count)."""
    if event.kind == "move":
        return (MOVE, place(event.value, 0), place(event.value, event.row),
                event.count * chain.windows[event.value][0])
    stage = chain.stages[event.stage]
    node = nodes[stage.nodes[0]]
    sums = args[sums_storage(stage.output)] << OFFSET_BITS if stage.sums else 0
    if event.kind == "finish":
        finish = case((event.stage, "finish"), lambda: ChainPart("finish", node, None, node.name))
        return finish, sums, place(stage.output, 0), 0
    (first, slot), *rest = event.reads
    if stage.sums:
        kind = "sums_first" if event.row == 0 else "sums"
        return (case((event.stage, kind), lambda: ChainPart(kind, node, None, node.name)),
                place(stage.inputs[0].value, slot), sums, 0)
    if node.op == "QLinearAdd":  # two rows of the output's shape
        part = case((event.stage, "add"), lambda: ChainPart("row", _add_row(node), None,
                                                             node.name))
        return (part, place(stage.inputs[0].value, slot),
                place(stage.inputs[1].value, rest[0][1]), place(stage.output, event.slot))
    (kh, _), (sh, _), (dh, _), (pt, _, _, _) = spatial(node)
    start = event.row * sh - pt
    last = stage.inputs[0].needed[event.row][1]
    pads = (first - start, start + (kh - 1) * dh - last, last - first + 1)

    def make() -> ChainPart:
        conv = one_row(node, pads[2], pads[0], pads[1], f"c{event.stage}.{pads[0]}.{pads[1]}")
        add = row_add(nodes[stage.nodes[1]], node, conv) if len(stage.nodes) > 1 else None
        return ChainPart("row", conv, add, node.name)

    code = case((event.stage, *pads), make)
    where = [place(stage.inputs[0].value, slot)]
    where += [place(stage.inputs[1].value, rest[0][1])] if rest else []
    where.append(place(stage.output, event.slot))
    return (code, *where, *([0] * (3 - len(where))))


def _add_row(node: Node) -> Node:
    """A QLinearAdd cut to one row of each operand."""
    y = node.output.type
    row = TensorType((1, 1, *y.shape[2:]), y.dtype, y.quant)
    inputs = [Value(f"{node.name}.row.{i}", TensorType(row.shape, v.type.dtype, v.type.quant))
              if i in (0, 3) else v for i, v in enumerate(node.inputs)]
    return Node(next(_IDS), node.op, f"{node.name}.row", inputs,
                [Value(f"{node.name}.row.out", row)], dict(node.attrs), node.provenance)


def emit_chain_driver(fn: ir.Function, code: ChainCode, kernels: dict[int, ir.Function],
                      weights: dict[int, list[ir.Value]], places: int, name: str,
                      ticks: ir.GlobalVariable | None = None) -> None:
    """The body of `fn(places..., weights...)`: the walk over the table, a call per event.

    `kernels[c]` is case c's function, `weights[c]` the weight arguments it takes after its
    pointers; the first `places` arguments of `fn` are the chain's tensors, windows and sums.
    With `ticks` (one i64 per kernel, in the order of `kernels`), each call adds the
    counter's advance across it to its kernel's slot: a timed build's per-layer time inside
    the chain. The counting sits in a wrapper per kernel, so the driver's own code is the
    untimed build's (per-layer instruction counts stay comparable).
    """
    module = fn.module
    entry_ty = ir.ArrayType(I32, 4)
    table_ty = ir.ArrayType(entry_ty, len(code.table))
    table = ir.GlobalVariable(module, table_ty, f"{name}.table")
    table.initializer = ir.Constant(table_ty, [ir.Constant(entry_ty, [I32(w) for w in row])
                                               for row in code.table])
    table.global_constant = True
    table.linkage = "internal"
    k = Kernel(next(iter(code.parts.values())).node, fn, [], [])
    b = k.b
    bases = k.alloca_array(I8P, places)
    for index in range(places):
        b.store(fn.args[index], b.gep(bases, [I32(index)]))
    memmove = module.globals.get("llvm.memmove.p0i8.p0i8.i32") or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [I8P, I8P, I32, ir.IntType(1)]),
        "llvm.memmove.p0i8.p0i8.i32")
    with k.loop(len(code.table)) as i:
        def word(j: int) -> ir.Value:
            return b.load(b.gep(table, [I32(0), i, I32(j)], inbounds=True))

        def where(j: int) -> ir.Value:
            packed = word(j)
            base = b.load(b.gep(bases, [b.lshr(packed, I32(OFFSET_BITS))]))
            return b.gep(base, [b.and_(packed, I32((1 << OFFSET_BITS) - 1))])

        done = fn.append_basic_block("next")
        switch = b.switch(word(0), done)
        move = fn.append_basic_block("move")
        switch.add_case(I32(MOVE), move)
        b.position_at_end(move)
        b.call(memmove, [where(1), where(2), word(3), ir.Constant(ir.IntType(1), 0)])
        b.branch(done)
        for slot, (c, kernel) in enumerate(kernels.items()):
            block = fn.append_basic_block(f"case{c}")
            switch.add_case(I32(c), block)
            b.position_at_end(block)
            pointers = len(kernel.args) - len(weights[c])
            args = [b.bitcast(where(j + 1), a.type) for j, a in zip(range(pointers),
                                                                   kernel.args)]
            callee = kernel if ticks is None else _timed(kernel, ticks, slot)
            b.call(callee, args + weights[c])
            b.branch(done)
        b.position_at_end(done)
    k.finish()


def _timed(kernel: ir.Function, ticks: ir.GlobalVariable, slot: int) -> ir.Function:
    """`kernel` called between two reads of the counter, its advance added to `slot`."""
    fn = ir.Function(kernel.module, kernel.function_type, f"{kernel.name}.timed")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    since = cycle_counter(b)
    b.call(kernel, list(fn.args))
    add_ticks(b, ticks, I32(slot), since)
    b.ret_void()
    return fn


def sums_kernel(module: ir.Module, name: str, part: ChainPart, target) -> ir.Function:
    """A pool's part of a chain: (row, sums) -> sums, or (sums, output) for the finish."""
    i32p = ir.PointerType(I32)
    types = [i32p, I8P] if part.kind == "finish" else [I8P, i32p]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), types), f"{name}.{part.kind}")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")
    for arg in fn.args:
        arg.add_attribute("noalias")
    node = part.node
    k = Kernel(node, fn, [fn.args[0]] + [None] * (len(node.inputs) - 1), [fn.args[1]],
               target=target)
    if part.kind == "finish":
        emit_qgap_finish(k)
    else:
        emit_qgap_row_sums(k, part.kind == "sums_first")
    k.finish()
    return fn
