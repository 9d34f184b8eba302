"""Which layers run as row-streamed chains: only where that lowers the arena's peak.

A chain saves the tensors made and read inside it (their rows pass through windows) but costs
a little time (window moves, a call per row). So chains are chosen around the step that sets
the peak: every run of chainable layers containing it is scheduled (`compiler.lowir.rows`),
the one with the smallest footprint kept, and the next hottest step tried, until no chain
lowers the peak any more. The footprints are the live bytes lowering can see (an output that
overlaps the input it streams from counts their union); the planner packs the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.errors import KilnError
from compiler.ir.graph import Constant, Node, Value
from compiler.lowir.ir import Stream, overlapped_span
from compiler.lowir.rows import RowChain, RowInput, RowStage, schedule_rows
from compiler.ops.geometry import rows_read
from compiler.schedule.model import is_view

# Longest chain tried, in layers: longer runs cost scheduling time for little more saving.
MAX_LAYERS = 16
# Spare rows per window (fewer moves) when the chain's footprint allows.
SPARE_ROWS = 0


@dataclass(frozen=True)
class Unit:
    """One instruction-to-be of lowering: a node, or a convolution with its fused Add."""

    node: Node
    add: Node | None = None
    residual: Value | None = None


def row_stage(unit: Unit) -> RowStage | None:
    """The unit as a chain stage, or None when it cannot run row by row."""
    node = unit.node
    if node.op == "QLinearGlobalAveragePool":
        x = node.inputs[0]
        if (node.attrs.get("layout") != "NHWC" or x.type.rank != 4 or x.type.shape[0] != 1
                or x.type.dtype != "int8" or unit.add is not None):
            return None
        rows = x.type.shape[1]
        return RowStage(node.name, (node.name,), (RowInput(x.name, tuple(
            (r, r) for r in range(rows)), rows),), node.output.name, rows,
            node.output.type.nbytes, sums=True)
    if node.op == "QLinearAdd":
        return _add_stage(node)
    if node.op != "QLinearConv" or node.output.type.dtype != "int8":
        return None
    if unit.add is not None and unit.add.op != "QLinearAdd":
        return None
    needed = rows_read(node)
    x = node.inputs[0]
    if needed is None or isinstance(x, Constant) or x.type.dtype != "int8":
        return None
    if any(last < first for first, last in needed):
        return None  # a row wholly in the padding
    out = unit.add.output if unit.add is not None else node.output
    rows = out.type.shape[1]
    inputs = [RowInput(x.name, tuple(needed), x.type.shape[1])]
    nodes = (node.name,)
    if unit.add is not None:
        inputs.append(RowInput(unit.residual.name, tuple((r, r) for r in range(rows)), rows))
        nodes = (node.name, unit.add.name)
    return RowStage(node.name, nodes, tuple(inputs), out.name, rows, out.type.nbytes // rows)


def _add_stage(node: Node) -> RowStage | None:
    """An int8 QLinearAdd of two tensors of its output's shape: row r of each makes row r."""
    a, b, y = node.inputs[0], node.inputs[3] if len(node.inputs) > 3 else None, node.output
    if (b is None or isinstance(a, Constant) or isinstance(b, Constant) or y.type.rank != 4
            or y.type.shape[0] != 1 or y.type.dtype != "int8"
            or a.type.shape != y.type.shape or b.type.shape != y.type.shape
            or not all(isinstance(v, Constant) for i, v in enumerate(node.inputs)
                       if i not in (0, 3) and v is not None)):
        return None
    rows = y.type.shape[1]
    same = tuple((r, r) for r in range(rows))
    return RowStage(node.name, (node.name,), (RowInput(a.name, same, rows),
                                              RowInput(b.name, same, rows)),
                    y.name, rows, y.type.nbytes // rows)


class ChainChooser:
    """Footprints of steps and of candidate chains over one lowering's units."""

    def __init__(self, units: list[Unit], graph_inputs: list[Value], graph_outputs: list[Value],
                 inputs_live: bool):
        self.units = units
        self.stages = [row_stage(u) for u in units]
        root: dict[int, Value] = {}
        for v in graph_inputs:
            root[id(v)] = v
        self.made: dict[str, int] = {v.name: -1 for v in graph_inputs} if inputs_live else {}
        self.last: dict[str, int] = {}
        self.size: dict[str, int] = {v.name: v.type.nbytes for v in graph_inputs}
        self.rows: dict[str, int] = {v.name: v.type.shape[1] if v.type.rank >= 2 else 1
                                     for v in graph_inputs}
        self.writes: list[set[str]] = []
        for k, u in enumerate(units):
            ins = {_root(v, root).name for v in u.node.runtime_inputs()}
            if u.residual is not None:
                ins.add(_root(u.residual, root).name)
            outs = u.add.outputs if u.add is not None else u.node.outputs
            if is_view(u.node):
                for o in outs:
                    root[id(o)] = _root(u.node.inputs[0], root)
                self.writes.append(set())
                name = _root(u.node.inputs[0], root).name
                self.last[name] = max(self.last.get(name, -1), k)
                continue
            for o in outs:
                root[id(o)] = o
                self.made[o.name] = k
                self.size[o.name] = o.type.nbytes
                self.rows[o.name] = o.type.shape[1] if o.type.rank >= 2 else 1
            for name in ins:
                self.last[name] = max(self.last.get(name, -1), k)
            self.writes.append({o.name for o in outs})
        for v in graph_outputs:
            self.last[_root(v, root).name] = len(units)
        self.kept = {_root(v, root).name for v in graph_outputs}
        self._cache: dict[tuple[int, int], RowChain | None] = {}

    def live(self, first: int, last: int, exclude: frozenset[str] | set[str] = frozenset()
             ) -> int:
        """Bytes of values live at some step of [first, last], made before or in it.

        Values in `exclude` are left out (a chain's inner tensors, which only windows hold).
        """
        return sum(self.size.get(v, 0) for v, m in self.made.items()
                   if m <= last and self.last.get(v, m) >= first and v not in exclude)

    def step_bytes(self, k: int) -> int:
        """Live bytes at step k, an output overlapping the input it streams from counted once."""
        total = self.live(k, k)
        u, stage = self.units[k], self.stages[k]
        if stage is None or stage.sums or u.add is not None:
            return total
        x = stage.inputs[0].value
        if x not in self.made or self.last.get(x) != k or x in self.kept:
            return total  # the input is not in the arena, or is read later
        rows_in, size_in = self.rows.get(x, 0), self.size.get(x, 0)
        if not rows_in:
            return total
        flow = Stream(x, 0, size_in // rows_in, rows_in, 0, stage.row_bytes,
                      stage.inputs[0].needed)
        size_out = stage.row_bytes * stage.rows
        union = overlapped_span(size_out, size_in, flow.ascending_lag(), flow.descending_lead())
        return total - (size_in + size_out - union)

    def chain(self, first: int, last: int) -> RowChain | None:
        """The chain of units first..last, or None when they cannot run as one."""
        key = (first, last)
        if key not in self._cache:
            self._cache[key] = self._make(first, last)
        return self._cache[key]

    def _make(self, first: int, last: int) -> RowChain | None:
        stages = self.stages[first:last + 1]
        if len(stages) < 2 or any(s is None for s in stages):
            return None
        if any(s.sums for s in stages[:-1]):
            return None  # a pool's one row of sums can only end a chain
        made = {s.output for s in stages}
        if not any(i.value in made for s in stages for i in s.inputs):
            return None
        outputs = {v for v in made if self.last.get(v, -1) > last or v in self.kept}
        try:
            return schedule_rows(list(stages), outputs, SPARE_ROWS)
        except KilnError:
            return None

    def chain_bytes(self, first: int, last: int, chain: RowChain) -> int:
        """Live bytes at the chain's one step: windows instead of its inner tensors."""
        inner = {v for k in range(first, last + 1) for v in self.writes[k]} - set(chain.outputs)
        return self.live(first, last, inner) + chain.window_bytes

    def choose(self) -> list[tuple[int, int, RowChain]]:
        """Disjoint chains (first unit, last unit, chain) that lower the peak, in order."""
        cost = {k: self.step_bytes(k) for k in range(len(self.units))}
        chosen: dict[tuple[int, int], tuple[RowChain, int]] = {}
        while cost:
            spans = {k: (k, k) for k in cost}
            for (a, z) in chosen:
                for k in range(a, z + 1):
                    spans[k] = (a, z)
            peak_at = max(cost, key=lambda k: (cost[k], -k))
            peak = cost[peak_at]
            best = None
            for a in range(max(0, peak_at - MAX_LAYERS + 1), peak_at + 1):
                for z in range(peak_at, min(len(self.units), a + MAX_LAYERS)):
                    if a == z or any(spans[k][0] < a or spans[k][1] > z for k in range(a, z + 1)):
                        continue
                    c = self.chain(a, z)
                    if c is None:
                        continue
                    size = self.chain_bytes(a, z, c)
                    if size < peak and (best is None or (size, z - a) < (best[0],
                                                                          best[2] - best[1])):
                        best = (size, a, z, c)
            if best is None:
                break
            size, a, z, c = best
            for key in [key for key in chosen if a <= key[0] and key[1] <= z]:
                del chosen[key]
            chosen[(a, z)] = (c, size)
            for k in range(a, z + 1):
                cost[k] = size
        return [(a, z, c) for (a, z), (c, _) in sorted(chosen.items())]



def _root(value: Value, root: dict[int, Value]) -> Value:
    return root.get(id(value), value)


def units_of(order: list[Node], fused: dict[int, tuple[Node, Value]]) -> list[Unit]:
    """Lowering's instructions-to-be in order: fused Adds ride with their producer."""
    adds = {id(add) for add, _ in fused.values()}
    units = []
    for node in order:
        if id(node) in adds:
            continue
        add, residual = fused.get(id(node), (None, None))
        units.append(Unit(node, add, residual))
    return units


__all__ = ["ChainChooser", "Unit", "row_stage", "units_of"]
