"""Run a memory plan symbolically: every byte holds the name of the value last written there.

This proves more than the geometric checker: each read finds exactly the value it expects, so
views, Concat slices, in-place ops and the packing together never clobber live data. An op
whose output overlaps the input it streams from runs row by row, in the order its kernel
will: before each output row is written, the input rows it reads must still hold the input.
"""

from __future__ import annotations

import numpy as np

from compiler.lowir.ir import IN, INOUT, OUT
from compiler.memory.plan import PlanError
from compiler.memory.report import MemoryPlan

Content = list[tuple[int, int, int]]  # (relative offset, size, token) pieces of a value


def simulate(plan: MemoryPlan) -> None:
    """Raise PlanError when some instruction would read bytes that hold another value."""
    ir = plan.lowir
    arena = np.zeros(max(plan.arena.size, 1), np.int64)
    mutable = np.zeros(max(plan.mutable, 1), np.int64)
    tokens: dict[str, int] = {}
    expected: dict[str, Content] = {}

    def region(storage: str) -> tuple[np.ndarray, int]:
        if storage in plan.arena.offsets:
            return arena, plan.arena.offsets[storage]
        return mutable, plan.mutable_offsets[storage]

    def write(storage: str, offset: int, size: int, value: str) -> None:
        tokens.setdefault(value, len(tokens) + 1)
        expected[value] = [(0, size, tokens[value])]
        mem, base = region(storage)
        mem[base + offset:base + offset + size] = tokens[value]

    def check(storage: str, offset: int, value: str, where: str,
              part: tuple[int, int] | None = None) -> None:
        """Bytes of `value` (those in [part) of it, when given) hold what was written."""
        mem, base = region(storage)
        low, high = part or (0, np.iinfo(np.int64).max)
        for rel, size, token in expected.get(value, [(0, 0, 0)]):
            start, stop = max(rel, low), min(rel + size, high)
            if stop > start and not (mem[base + offset + start:base + offset + stop]
                                     == token).all():
                raise PlanError(f"{where} reads {value} from {storage} but another value "
                                f"overwrote it")

    def overlapping_stream(ins) -> tuple | None:
        """(output operand, input operand) of an op whose output overlaps its stream's source."""
        outs = [o for o in ins.operands if o.mode == OUT]
        flow = ir.streams.get(outs[0].storage) if len(outs) == 1 else None
        if flow is None or not plan.overlapping(outs[0].storage, flow.source):
            return None
        return outs[0], next(o for o in ins.operands if o.storage == flow.source)

    def stream(ins, out, source) -> None:
        """Write `out` row by row, in the kernel's order, checking each row's input rows.

        They are checked before and after the row is written: the kernel reads them while it
        writes the row, pixel by pixel.
        """
        flow = ir.streams[out.storage]
        tokens.setdefault(out.value, len(tokens) + 1)
        rows = range(len(flow.needed))
        mem, base = region(out.storage)
        for r in reversed(rows) if plan.descending(out.storage) else rows:
            first, last = flow.needed[r]
            reads = (first * flow.in_row, (last + 1) * flow.in_row)
            if last >= first:
                check(source.storage, source.offset, source.value, ins.name, reads)
            at = base + out.offset + r * flow.out_row
            mem[at:at + flow.out_row] = tokens[out.value]
            if last >= first:
                check(source.storage, source.offset, source.value, ins.name, reads)
        expected[out.value] = [(0, out.size, tokens[out.value])]

    for s in ir.storages.values():
        if s.kind == "input":
            write(s.name, 0, s.size, s.name)
    for ins in ir.instrs:
        if ins.kind == "view":
            *ins_ops, out = ins.operands
            pieces: Content = []
            for o in ins_ops:
                shift = o.offset - out.offset
                pieces += [(rel + shift, size, t) for rel, size, t in expected[o.value]]
            expected[out.value] = pieces
            continue
        if ins.kind != "op":
            continue
        streaming = overlapping_stream(ins)
        for o in ins.operands:
            if o.mode in (IN, INOUT) and (streaming is None or o is not streaming[1]):
                check(o.storage, o.offset, o.value, ins.name)
        if streaming is not None:
            stream(ins, *streaming)
            continue
        for o in ins.operands:
            if o.mode == OUT:
                write(o.storage, o.offset, o.size, o.value)
            elif o.mode == INOUT:
                write(o.storage, o.offset, o.size, o.writes)
    for name in plan.output_names:
        if name in ir.values and name in expected:  # a constant output is not a buffer
            check(*ir.values[name], name, "the caller")
