"""Lower a scheduled graph to the low-level IR: views, Concat slices, in-place and residual Add.

Rules (each keeps every output element's reads before its own write):
- Reshape/Flatten/Squeeze/Unsqueeze are views: same storage, no code.
- A Concat whose slices are contiguous (every dimension before the axis is 1) has its inputs
  written straight into slices of its output; the Concat itself is then a view.
- An element-wise op writes over an input of the same shape and element size that dies there.
- An Add whose other operand is a Conv/FullyConnected result (without activation) read by it
  alone is fused into that producer (`Conv+Add`): element i of the result reads only element i
  of the residual, so the result may overwrite the residual when the residual dies there. The
  same holds for a QLinearAdd of a QLinearConv result: the convolution's requantized value
  joins the residual by the QLinearAdd's own arithmetic.
- Two int8 convolutions in a row whose second adds the first one's input back (a residual
  block, fused as above) run as one instruction row by row (`lower_pair`): the first one's
  rows pass through a window of a few rows instead of a whole tensor, and the sum is written
  over the input, rows it no longer needs. The block then holds one tensor and the window.
- An int8 convolution writes its output row by row, each row from a window of input rows
  (every emitter loops over output rows outermost): when its input dies there, the output
  may overlap it (`Stream`), the planner choosing how far apart and which way the rows run.
- Where it lowers the peak, a run of row-wise int8 layers runs as one instruction row by row
  (`lower_chain`, `compiler.lowir.chains`): the tensors made and read inside it pass through
  windows of a few rows.
Each rule but the views is a lowering pass (`compiler.lowir.passes`): the caller says which
run, and every place one applied is recorded in `LowIR.sites`.
Graph inputs are never written over by these rules: the caller owns them. Only when the
planner puts inputs in the arena (as TFLite Micro does) may their bytes hold other values
after their last read, a streaming output's included.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.graph import Constant, Graph, Node, Value
from compiler.ir.types import TensorType
from compiler.lowir.chains import ChainChooser, units_of
from compiler.lowir.ir import (
    IN,
    INOUT,
    OUT,
    Fusion,
    Instr,
    LowIR,
    Operand,
    Storage,
    Stream,
    pair_window,
    sums_storage,
)
from compiler.lowir.passes import (
    ALL_LOWERING,
    CONCAT_SLICES,
    CONV_PAIR,
    IN_PLACE,
    RESIDUAL_IN_STORE,
    ROW_CHAINS,
    STREAMING_ROWS,
)
from compiler.lowir.rows import RowChain
from compiler.ops import lookup
from compiler.ops.geometry import row_preserving, rows_read
from compiler.schedule.model import is_view

# Element-wise categories that may run in place; row-wise normalizers are excluded.
IN_PLACE_CATEGORIES = ("elementwise", "activation")
NOT_IN_PLACE = frozenset({"Softmax", "LogSoftmax", "Hardmax", "PRelu"})
# Operators whose every kernel runs output rows in order, each row's writes after the input
# rows it needs are read: their output may overlap their dying input.
STREAMED = frozenset({"QLinearConv"})
# New rows of the first convolution of a pair between two moves of its window's rows.
PAIR_BAND = 8
RESIDUAL_PRODUCERS = {"Add": frozenset({"Conv", "FullyConnected"}),
                      "QLinearAdd": frozenset({"QLinearConv"})}


def _concat_slices(graph: Graph, users: dict[int, list[Node]]) -> dict[int, tuple[Value, int]]:
    """id(input value) -> (Concat output, byte offset) for Concats done by placement."""
    outputs = {id(v) for v in graph.outputs}
    slices: dict[int, tuple[Value, int]] = {}
    for node in graph.nodes:
        if node.op != "Concat":
            continue
        shape = node.output.type.shape
        axis = node.attrs.get("axis", 0) % max(len(shape), 1)
        ins = node.inputs
        # Slices must be contiguous, and each input made by an ordinary node for this use only.
        if any(d != 1 for d in shape[:axis]) or len({id(v) for v in ins}) != len(ins):
            continue
        if any(v is None or v.producer is None or isinstance(v, Constant) or is_view(v.producer)
               or len(users.get(id(v), [])) != 1 or id(v) in outputs or id(v) in slices
               for v in ins):
            continue
        offset = 0
        for v in ins:
            slices[id(v)] = (node.output, offset)
            offset += v.type.nbytes
    return slices


def lower(graph: Graph, order: Sequence[Node] | None = None,
          enabled: frozenset[str] = ALL_LOWERING, int8_residual: bool = True,
          inputs_live: bool = True) -> LowIR:
    """The low-level IR of `graph` run in `order` (default: its node order).

    `enabled`: the lowering passes to apply (`compiler.lowir.passes`); without any, every
    value has a buffer of its own and every node an instruction. `int8_residual`: fuse
    QLinearAdd residuals into their QLinearConv too (the target's `int8_residual_in_store`).
    """
    return _Lowering(graph, list(order if order is not None else graph.nodes),
                     frozenset(enabled), int8_residual, inputs_live).run()


class _Lowering:
    """State of one lowering: where each value lives and which storages hold which values."""

    def __init__(self, graph: Graph, order: list[Node], enabled: frozenset[str],
                 int8_residual: bool = True, inputs_live: bool = True):
        self.graph = graph
        self.enabled = enabled
        self.order = order
        self.position = {id(n): k for k, n in enumerate(order)}
        self.users: dict[int, list[Node]] = {}
        for node in order:
            for v in node.inputs:
                if v is not None:
                    self.users.setdefault(id(v), []).append(node)
        self.outputs = {id(v) for v in graph.outputs}
        self.slices = (_concat_slices(graph, self.users) if CONCAT_SLICES in enabled else {})
        self.ir = LowIR()
        self.where: dict[int, tuple[str, int]] = {}  # id(value) -> (storage, offset)
        self.members: dict[str, list[Value]] = {}
        self.fused: dict[int, tuple[Node, Value]] = {}  # id(producer) -> (its Add, residual)
        for add in order if RESIDUAL_IN_STORE in enabled else ():
            pair = _residual(add, self.users, self.outputs, self.position)
            if pair is not None and (int8_residual or add.op != "QLinearAdd"):
                self.fused[id(pair[0])] = (add, pair[1])
        # id(first node of a chain) -> (its nodes, the chain); id(node) of every chain node.
        self.chains: dict[int, tuple[list[Node], RowChain]] = {}
        self.chained: set[int] = set()
        if ROW_CHAINS in enabled:
            units = units_of(order, self.fused)
            chooser = ChainChooser(units, list(graph.inputs), list(graph.outputs), inputs_live)
            for first, last, chain in chooser.choose():
                nodes = [n for u in units[first:last + 1]
                         for n in (u.node, u.add) if n is not None]
                self.chains[id(nodes[0])] = (nodes, chain)
                self.chained |= {id(n) for n in nodes}
        # id(second convolution) -> the first, for residual blocks run as a pair.
        self.pairs: dict[int, Node] = {}
        for node in order if CONV_PAIR in enabled and int8_residual else ():
            first = self.pair_head(node)
            if (first is not None and id(node) not in self.chained
                    and id(first) not in self.chained):
                self.pairs[id(node)] = first
        self.step = 0

    def site(self, lowering: str, text: str) -> None:
        """Record where a lowering pass applied, in one line."""
        self.ir.sites.setdefault(lowering, []).append(text)

    def pair_head(self, second: Node) -> Node | None:
        """The first convolution of a pair ending in `second`, or None.

        `second` is a QLinearConv fused with its QLinearAdd, whose residual is the input of the
        QLinearConv that feeds `second` alone; both keep rows one to one with a three-row
        window, and the residual is read by nothing else.
        """
        if second.op != "QLinearConv" or id(second) not in self.fused:
            return None
        add, residual = self.fused[id(second)]
        middle = second.inputs[0]
        first = middle.producer
        if (add.op != "QLinearAdd" or first is None or first.op != "QLinearConv"
                or id(first) in self.fused or first.inputs[0] is not residual
                or self.users.get(id(middle), []) != [second]
                or id(middle) in self.outputs or id(residual) in self.outputs
                or residual.producer is None
                or {id(u) for u in self.users.get(id(residual), [])} != {id(first), id(add)}):
            return None
        if row_preserving(first) != 3 or row_preserving(second) != 3 or residual.type.shape[1] < 2:
            return None  # (a one-row image has no middle or bottom row for the first one)
        return first

    def run(self) -> LowIR:
        """Lower every node in order, then mark output storages and bound lifetimes."""
        for v in self.graph.inputs:
            self.place(v, self.new_storage(v, "input", ""), 0)
        skip = {id(add) for add, _ in self.fused.values()}
        skip |= {id(first) for first in self.pairs.values()}
        for node in self.order:
            if id(node) in self.chains:
                self.lower_chain(*self.chains[id(node)])
                continue
            if id(node) in skip or id(node) in self.chained:
                continue  # done by its producer's fused instruction, its pair's or its chain's
            if self.is_placement(node):
                self.lower_view(node)
            elif id(node) in self.pairs:
                self.lower_pair(self.pairs[id(node)], node, *self.fused[id(node)])
            elif id(node) in self.fused:
                self.lower_fused(node, *self.fused[id(node)])
            else:
                self.lower_op(node)
        ir = self.ir
        ir.steps = self.step
        for v in self.graph.outputs:
            if id(v) not in self.where:  # a constant output lives in flash
                continue
            storage = ir.storages[self.where[id(v)][0]]
            ir.pinned.add(storage.name)
            if storage.kind == "activation":  # a view of an activation can be a graph output
                storage.kind = "output"
        _bound_lifetimes(ir)
        return ir

    # -- placement ------------------------------------------------------------------------------

    def place(self, value: Value, storage: str, offset: int) -> None:
        """Record that `value` lives at `offset` of `storage`."""
        self.where[id(value)] = (storage, offset)
        self.ir.values[value.name] = (storage, offset)
        self.members.setdefault(storage, []).append(value)

    def new_storage(self, value: Value, kind: str, node: str) -> str:
        """A new storage sized and named after `value`."""
        self.ir.storages[value.name] = Storage(value.name, value.type.nbytes, kind, node)
        return value.name

    def ensure(self, value: Value, maker: str) -> None:
        """Place `value`: in its Concat's storage (nested Concats too) or in a new one."""
        if id(value) in self.where:
            return
        if id(value) in self.slices:
            cat, offset = self.slices[id(value)]
            self.ensure(cat, maker)
            storage, base = self.where[id(cat)]
            self.place(value, storage, base + offset)
            return
        kind = "output" if id(value) in self.outputs else "activation"
        self.place(value, self.new_storage(value, kind, maker), 0)

    def operand(self, value: Value, mode: str) -> Operand:
        """The operand covering `value`'s bytes."""
        storage, offset = self.where[id(value)]
        return Operand(storage, value.name, offset, value.type.nbytes, mode)

    def dies_at(self, storage: str, k: int, exclude: Node | None = None,
                inputs_too: bool = False) -> bool:
        """True when the storage is an activation that no node after step k reads.

        With `inputs_too`, a graph input also counts: it dies the same way when it lives in the
        arena (the planner decides that).
        """
        kinds = ("activation", "input") if inputs_too else ("activation",)
        if self.ir.storages[storage].kind not in kinds:
            return False
        for v in self.members[storage]:
            if id(v) in self.outputs:
                return False
            for u in self.users.get(id(v), []):
                if u is not exclude and self.position[id(u)] > k:
                    return False
        return True

    # -- instructions ---------------------------------------------------------------------------

    def is_placement(self, node: Node) -> bool:
        """A view, or a Concat whose inputs were all written into its slices."""
        return is_view(node) or (node.op == "Concat" and bool(node.inputs) and all(
            self.slices.get(id(v), (None,))[0] is node.output for v in node.inputs))

    def lower_view(self, node: Node) -> None:
        """No code: the output shares its input's storage (or is the Concat's own storage)."""
        if id(node.output) not in self.where:  # a Concat's output is placed with its inputs
            self.place(node.output, *self.where[id(node.inputs[0])])
        data_in = node.runtime_inputs()
        if node.op == "Concat":
            self.site(CONCAT_SLICES, f"{node.name}: {len(data_in)} inputs written into their "
                                     f"slices of {node.output.name}")
        self.ir.instrs.append(Instr("view", node.name, node.op,
                                    tuple(self.operand(v, IN) for v in data_in)
                                    + (self.operand(node.output, OUT),), -1, (node.name,)))

    def lower_fused(self, node: Node, add: Node, residual: Value) -> None:
        """`Conv+Add`: the producer adds the residual; in place over it when it dies."""
        data_in = node.runtime_inputs()
        out = add.output
        rs, roff = self.where[id(residual)]
        # Nothing but the Add may read the residual once the producer has run, and the
        # producer must not read the residual's storage itself (through a view).
        if (self.dies_at(rs, self.position[id(node)], exclude=add) and id(out) not in self.slices
                and id(out) not in self.outputs
                and all(self.where[id(v)][0] != rs for v in data_in)):
            self.place(out, rs, roff)
            last = Operand(rs, residual.name, roff, residual.type.nbytes, INOUT, out.name)
            operands = [self.operand(v, IN) for v in data_in] + [last]
            where = f"written over {residual.name}, which dies there"
        else:
            self.ensure(out, node.name)
            operands = [self.operand(v, IN) for v in [*data_in, residual]]
            operands.append(self.operand(out, OUT))
            where = f"written to a buffer of its own ({residual.name} is read later)"
        self.site(RESIDUAL_IN_STORE, f"{node.name} + {add.name}: {node.output.name} "
                                     f"({node.output.type.nbytes} B) is never stored; the sum "
                                     f"is {where}")
        self.emit(node, f"{node.op}+{add.op}", operands, (node.name, add.name),
                  Fusion.RESIDUAL_ADD)

    def lower_pair(self, first: Node, second: Node, add: Node, residual: Value) -> None:
        """Both convolutions and the Add as one instruction, the sum over the residual.

        Its rows run in order: output row r needs rows r - 1 .. r + 1 of the first
        convolution, which need residual rows up to r + 2, read before row r is written over.
        Those rows live in a window of PAIR_BAND + 2 rows (its own storage, live at this step
        only). Falls back to two instructions when the residual cannot be written over.
        """
        rs, roff = self.where[id(residual)]
        out = add.output
        if (not self.dies_at(rs, self.position[id(second)], exclude=add)
                or id(out) in self.slices or id(out) in self.outputs):
            self.lower_op(first)
            self.lower_fused(second, add, residual)
            return
        middle = first.output
        row = middle.type.nbytes // middle.type.shape[1]
        rows = min(PAIR_BAND + 2, middle.type.shape[1] + 2)
        window = Value(pair_window(middle.name), TensorType((rows, *middle.type.shape[2:]),
                                                          middle.type.dtype))
        self.ir.storages[window.name] = Storage(window.name, rows * row, "activation",
                                                second.name)
        self.place(window, window.name, 0)
        self.place(out, rs, roff)
        operands = (Operand(rs, residual.name, roff, residual.type.nbytes, INOUT, out.name),
                    self.operand(window, OUT))
        self.site(CONV_PAIR, f"{first.name} + {second.name} + {add.name}: {middle.name} "
                             f"({middle.type.nbytes} B) passes through a window of {rows} rows "
                             f"({rows * row} B); the sum is written over {residual.name}")
        self.emit(second, "+".join((first.op, second.op, add.op)), list(operands),
                  (first.name, second.name, add.name), Fusion.CONV_PAIR)

    def lower_chain(self, nodes: list[Node], chain: RowChain) -> None:
        """The chain's layers as one instruction: whole inputs in, whole outputs out.

        Each tensor made and read inside lives in a window storage of its own (and a pool's
        sums in one), live at this step only.
        """
        values = {v.name: v for n in nodes for v in [*n.inputs, *n.outputs] if v is not None}
        operands = [self.operand(values[v], IN) for v in chain.inputs]
        for v in chain.outputs:
            self.ensure(values[v], nodes[0].name)
            operands.append(self.operand(values[v], OUT))
        inner = []
        for v, (row, rows) in chain.windows.items():
            name = pair_window(v)
            self.ir.storages[name] = Storage(name, row * rows, "activation", nodes[0].name)
            self.place(values[v], name, 0)
            operands.append(Operand(name, v, 0, row * rows, OUT))
            inner.append(f"{v} ({values[v].type.nbytes} B) in {rows} row"
                         f"{'s' if rows > 1 else ''} ({row * rows} B)")
        for v, size in chain.sums.items():
            name = sums_storage(v)
            self.ir.storages[name] = Storage(name, size, "activation", nodes[0].name)
            self.ir.values[name] = (name, 0)
            operands.append(Operand(name, name, 0, size, OUT))
        self.ir.chains[nodes[0].name] = chain
        self.site(ROW_CHAINS, f"{nodes[0].name} .. {nodes[-1].name}: {len(chain.stages)} layers "
                              f"row by row; " + "; ".join(inner))
        self.emit(nodes[0], f"RowChain[{len(chain.stages)}]", operands,
                  tuple(n.name for n in nodes), Fusion.ROW_CHAIN)

    def lower_op(self, node: Node) -> None:
        """An ordinary kernel; element-wise ones write over an input that dies here."""
        data_in = node.runtime_inputs()
        out = node.output
        if (IN_PLACE in self.enabled and id(out) not in self.slices
                and id(out) not in self.outputs):
            for v in data_in:
                storage = self.where[id(v)][0]
                if _in_place_ok(node, v) and self.dies_at(storage, self.position[id(node)]):
                    self.place(out, *self.where[id(v)])
                    self.site(IN_PLACE, f"{node.name} ({node.op}) writes {out.name} over "
                                        f"{v.name} ({v.type.nbytes} B)")
                    break
        for o in node.outputs:
            self.ensure(o, node.name)
        self.stream(node, data_in)
        outs = [self.operand(o, OUT) for o in node.outputs]
        operands = []
        for o in (self.operand(v, IN) for v in data_in):
            same = [w for w in outs if (w.storage, w.offset) == (o.storage, o.offset)]
            if same:  # in place: one inout operand reads the input and writes the output
                outs.remove(same[0])
                o = Operand(o.storage, o.value, o.offset, o.size, INOUT, same[0].value)
            operands.append(o)
        self.emit(node, node.op, operands + outs, (node.name,))

    def stream(self, node: Node, data_in: list[Value]) -> None:
        """Record how `node` runs its rows when its new output may overlap its dying input."""
        if (STREAMING_ROWS not in self.enabled or node.op not in STREAMED or len(data_in) != 1
                or len(node.outputs) != 1):
            return
        x, out = data_in[0], node.output
        source, in_offset = self.where[id(x)]
        storage, out_offset = self.where[id(out)]
        if (source == storage or self.members[storage] != [out]
                or self.ir.storages[storage].kind != "activation"
                or not self.dies_at(source, self.position[id(node)], inputs_too=True)):
            return
        needed = rows_read(node)
        if needed is None:
            return
        self.ir.streams[storage] = Stream(
            source, in_offset, x.type.nbytes // x.type.shape[1], x.type.shape[1], out_offset,
            out.type.nbytes // out.type.shape[1], tuple(needed))
        self.site(STREAMING_ROWS, f"{node.name}: {out.name} may overlap {x.name}, which dies "
                                  "there")

    def emit(self, node: Node, op: str, operands: list[Operand], names: tuple[str, ...],
             fusion: Fusion | None = None) -> None:
        """Append an instruction that takes the next schedule step."""
        self.ir.instrs.append(Instr("op", node.name, op, tuple(operands), self.step, names,
                                    fusion))
        self.step += 1



def _in_place_ok(node: Node, value: Value) -> bool:
    """An element-wise node may write over `value` when shapes and element sizes match."""
    if node.op in NOT_IN_PLACE or lookup(node.op).category not in IN_PLACE_CATEGORIES:
        return False
    if len(node.outputs) != 1 or isinstance(value, Constant) or value.producer is None:
        return False
    out = node.output.type
    return value.type.shape == out.shape and value.type.itemsize == out.itemsize


def _residual(add: Node, users, outputs, position) -> tuple[Node, Value] | None:
    """(producer, residual) when `add` can be fused into the producer of one operand."""
    operands = _add_operands(add)
    if operands is None or any(v is None for v in operands):
        return None
    for c, r in (operands, operands[::-1]):
        p = c.producer
        # The fused op computes producer-then-add element by element: no broadcasting, no
        # activation between them, and nobody else reads the producer's own result.
        if p is None or p.op not in RESIDUAL_PRODUCERS[add.op] or p.attrs.get("activation"):
            continue
        if c.type.dtype != add.output.type.dtype or r.type.dtype != add.output.type.dtype:
            continue
        if c.type.shape != add.output.type.shape or r.type.shape != add.output.type.shape:
            continue
        if isinstance(r, Constant) or c is r or id(c) in outputs:
            continue
        if [u for u in users.get(id(c), [])] != [add] or any(v is r for v in p.inputs):
            continue
        if r.producer is not None and position[id(r.producer)] > position[id(p)]:
            continue  # the residual must exist when the producer runs
        return p, r
    return None


def _add_operands(add: Node) -> tuple[Value | None, Value | None] | None:
    """The two summed tensors of an Add, or of a QLinearAdd whose parameters are constants."""
    if add.op == "Add" and len(add.inputs) == 2:
        return add.inputs[0], add.inputs[1]
    if add.op == "QLinearAdd" and all(isinstance(v, Constant) for i, v in enumerate(add.inputs)
                                      if i not in (0, 3) and v is not None):
        return add.inputs[0], add.inputs[3]
    return None


def _bound_lifetimes(ir: LowIR) -> None:
    """Insert `alloc` before each activation's first write and `dealloc` after its last read."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, ins in enumerate(ir.instrs):
        for o in ins.operands:
            first.setdefault(o.storage, index)
            last[o.storage] = index
    starts: dict[int, list[str]] = {}
    ends: dict[int, list[str]] = {}
    for s, i in first.items():
        if ir.storages[s].kind == "activation":
            starts.setdefault(i, []).append(s)
    for s, i in last.items():
        if ir.storages[s].kind == "activation":
            ends.setdefault(i, []).append(s)
    body: list[Instr] = []
    for index, ins in enumerate(ir.instrs):
        body += [Instr("alloc", s) for s in starts.get(index, ())]
        body.append(ins)
        body += [Instr("dealloc", s) for s in ends.get(index, ())]
    ir.instrs = body
