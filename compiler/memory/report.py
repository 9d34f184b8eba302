"""The whole memory flow of a final graph: schedule, low-level IR, lifetimes, regions, plan.

The result is plain data: `kiln memory` prints it and a timeline view draws it (buffers with
first/last step, offset and size; live bytes per step).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from compiler.ir.graph import Graph
from compiler.ir.state import state_inputs, state_outputs
from compiler.lowir import LowIR, lower, verify_lowir
from compiler.lowir.passes import ALL_LOWERING, ROW_CHAINS
from compiler.memory.buffers import align_up, lower_bound
from compiler.memory.lifetimes import lifetimes
from compiler.memory.plan import HOST_ALIGNMENT, ArenaPlan, PlanError, check_plan, plan_arena
from compiler.schedule import Schedule, schedule


@dataclass
class MemoryPlan:
    """Regions and the activation arena of one compiled graph.

    Attributes:
        schedule: The order chosen, with its peak and plain topological order's.
        lowir: The low-level IR of that order.
        arena: The activation arena plan (with inputs/outputs when `io_in_arena`).
        constant: Bytes of the constant region (weights, each aligned).
        mutable: Bytes of the mutable region (inputs and outputs, unless in the arena).
        mutable_offsets: Input/output storage -> offset in the mutable region.
        alignment: Alignment of every region and buffer.
        io_in_arena: Whether inputs and outputs live in the activation arena.
        whole_tensor_bound: The lower bound of the same order lowered without row-streamed
            chains (every tensor whole), beside `arena.lower_bound`, the row-streamed limit;
            equal to it when no chain was made.
    """

    schedule: Schedule
    lowir: LowIR
    arena: ArenaPlan
    constant: int
    mutable: int
    mutable_offsets: dict[str, int]
    alignment: int
    io_in_arena: bool
    output_names: tuple[str, ...] = ()
    whole_tensor_bound: int = 0

    def overlapping(self, a: str, b: str) -> bool:
        """True when two different arena storages share bytes (a streaming output and input)."""
        offsets, storages = self.arena.offsets, self.lowir.storages
        if a == b or a not in offsets or b not in offsets:
            return False
        return (offsets[a] < offsets[b] + storages[b].size
                and offsets[b] < offsets[a] + storages[a].size)

    def descending(self, storage: str) -> bool:
        """True when the op writing `storage` must run its rows downwards.

        It streams from a source it overlaps from above (not the `lag` below that rows run
        upwards need).
        """
        stream = self.lowir.streams.get(storage)
        if stream is None or not self.overlapping(storage, stream.source):
            return False
        apart = self.arena.offsets[storage] - self.arena.offsets[stream.source]
        return apart > -stream.ascending_lag()

    def streams_from(self, storage: str) -> dict | None:
        """How `storage` overlaps the input it streams from, or None when it does not.

        {"source": the input's storage, "rows": "up" or "down", the order its kernel runs}.
        """
        stream = self.lowir.streams.get(storage)
        if stream is None or not self.overlapping(storage, stream.source):
            return None
        return {"source": stream.source, "rows": "down" if self.descending(storage) else "up"}

    def window_of(self, storage: str) -> dict | None:
        """For a row-streamed chain's window, the tensor whose rows pass and how many it holds."""
        for chain in self.lowir.chains.values():
            for value, (row, rows) in chain.windows.items():
                if self.lowir.values.get(value, ("",))[0] == storage:
                    return {"of": value, "rows": rows, "row_bytes": row}
        return None

    def to_json(self) -> dict:
        """The `kiln memory --json` document."""
        a = self.arena
        return {
            "lower_bound": a.lower_bound,
            "whole_tensor_bound": self.whole_tensor_bound or a.lower_bound,
            "activations": a.size, "mutable": self.mutable,
            "constant": self.constant, "efficiency": round(a.efficiency, 6),
            "schedule_peak": self.schedule.peak, "topological_peak": self.schedule.topological_peak,
            "strategies": dict(a.strategies),
            "buffers": [{"name": b.name, "node": b.node, "size": b.size,
                         "offset": a.offsets[b.name], "first": b.first, "last": b.last,
                         "streams_from": self.streams_from(b.name),
                         "window": self.window_of(b.name)}
                        for b in sorted(a.buffers, key=lambda b: (b.first, b.name))],
            "live_bytes": a.live_bytes(),
            "alignment": self.alignment, "io_in_arena": self.io_in_arena,
            "scheduler": self.schedule.method,
        }


def _best_order(graph: Graph, alignment: int, io_in_arena: bool, enabled: frozenset[str],
                int8_residual: bool):
    """The scheduler candidate with the lowest arena bound once in-place ops are known.

    The schedulers count every output as a new buffer; lowering shows which ones reuse their
    input, which may favour another candidate. Ties keep the scheduler's own choice.
    """
    result = schedule(graph)
    best = None
    seen: set[tuple[int, ...]] = set()
    # The scheduler's own choice first: among equal orders, it is the one kept.
    names = sorted(result.orders, key=lambda n: n != result.method)
    for name in names:
        nodes = result.orders[name]
        order = tuple(id(n) for n in nodes)
        if order in seen:
            continue  # another scheduler found the same order: same lowering, same bound
        seen.add(order)
        ir = lower(graph, nodes, enabled, int8_residual, inputs_live=io_in_arena)
        buffers = lifetimes(ir, io_in_arena, persistent_storages(graph, ir))
        key = (lower_bound(buffers, alignment), result.candidates[name], name != result.method)
        if best is None or key < best[0]:
            best = (key, result.pick(name), ir, buffers)
    return best[1], best[2], best[3]


def persistent_storages(graph: Graph, ir) -> frozenset[str]:
    """Storages of the graph's state inputs and outputs: in the mutable region, never the arena.

    A state input must outlive the inference (the next one reads it), and its state output is
    copied onto it at the end.
    """
    names = state_inputs(graph) | state_outputs(graph)
    return frozenset(ir.values[n][0] for n in names if n in ir.values)


def distinct_constant_bytes(graph: Graph, alignment: int) -> int:
    """The constant region's size: every used constant once per distinct contents.

    The weight blob stores identical arrays once (an unrolled recurrent layer reads the same
    weights at every step, through constants of its own), so they count once here too.
    """
    total, seen = 0, set()
    for c in graph.used_constants():
        data = np.ascontiguousarray(c.data)
        key = (data.dtype.str, data.shape, hashlib.blake2b(data.tobytes(), digest_size=16)
               .digest())
        if key not in seen:
            seen.add(key)
            total += align_up(c.type.nbytes, alignment)
    return total


def plan_memory(graph: Graph, alignment: int = HOST_ALIGNMENT, io_in_arena: bool = False,
                climb_iterations: int = 300, int8_residual: bool = True,
                enabled: frozenset[str] = ALL_LOWERING) -> MemoryPlan:
    """Schedule `graph` (a final graph), lower it, and plan its three regions.

    `enabled`: the lowering passes to apply; `int8_residual`: the target fuses int8 residual
    Adds into their convolutions (both `compiler.lowir.lower`).
    """
    order, ir, buffers = _best_order(graph, alignment, io_in_arena, frozenset(enabled),
                                     int8_residual)
    verify_lowir(ir)
    arena = plan_arena(buffers, alignment, climb_iterations)
    constant = distinct_constant_bytes(graph, alignment)
    offsets, mutable = {}, 0
    persistent = persistent_storages(graph, ir)
    for s in ir.storages.values():
        if (s.kind in ("input", "output") and not io_in_arena) or s.name in persistent:
            offsets[s.name] = mutable
            mutable += align_up(s.size, alignment)
    plan = MemoryPlan(order, ir, arena, constant, mutable, offsets, alignment, io_in_arena,
                      tuple(v.name for v in graph.outputs),
                      _whole_tensor_bound(graph, order, ir, enabled, int8_residual, io_in_arena,
                                          alignment))
    check_memory(plan)
    return plan


def _whole_tensor_bound(graph: Graph, order: Schedule, ir: LowIR, enabled: frozenset[str],
                        int8_residual: bool, io_in_arena: bool, alignment: int) -> int:
    """The lower bound of `order` lowered without chains (0 when `ir` has none)."""
    if not ir.chains:
        return 0
    whole = lower(graph, order.nodes, frozenset(enabled) - {ROW_CHAINS}, int8_residual,
                  inputs_live=io_in_arena)
    return lower_bound(lifetimes(whole, io_in_arena, persistent_storages(graph, whole)),
                       alignment)


def check_memory(plan: MemoryPlan) -> None:
    """Raise PlanError unless every storage sits in exactly one region, validly.

    The arena is checked by `check_plan`; inputs and outputs outside it live for the whole run,
    so in the mutable region they may not overlap at all.
    """
    check_plan(plan.arena)
    a = plan.alignment
    spans = []
    for s in plan.lowir.storages.values():
        in_arena = s.name in plan.arena.offsets
        in_mutable = s.name in plan.mutable_offsets
        if in_arena == in_mutable:
            raise PlanError(f"storage {s.name} must be in exactly one region")
        if s.kind == "activation" and not in_arena:
            raise PlanError(f"activation {s.name} is outside the arena")
        if in_mutable:
            off = plan.mutable_offsets[s.name]
            if off % a or off + align_up(s.size, a) > plan.mutable:
                raise PlanError(f"{s.name} is misaligned or outside the mutable region")
            spans.append((off, off + s.size, s.name))
    spans.sort()
    for (_, end, name), (start, _, other) in zip(spans, spans[1:]):
        if start < end:
            raise PlanError(f"{name} and {other} overlap in the mutable region")
    if plan.constant % a:
        raise PlanError("the constant region size is not aligned")
