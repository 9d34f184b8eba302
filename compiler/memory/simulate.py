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

    def chain(ins) -> None:
        """Replay a row-streamed chain's schedule: each row read must hold that very row.

        Rows of windows and of whole outputs get a token of their own; a move copies the
        bytes as the kernel's memmove does; a whole input's rows must still hold the input.
        """
        flow = ir.chains[ins.name]
        place = {o.value: o for o in ins.operands}
        rows = {s.output: s.row_bytes for s in flow.stages}
        whole = {v: place[v].size // flow.input_rows[v] for v in flow.inputs}

        def row_token(value: str, row: int) -> int:
            return tokens.setdefault(f"{value}#{row}", len(tokens) + 1)

        def span(value: str, slot: int, row_bytes: int) -> tuple[np.ndarray, int]:
            o = place[value]
            mem, base = region(o.storage)
            return mem, base + o.offset + slot * row_bytes

        for e in flow.events:
            if e.kind == "move":
                row = flow.windows[e.value][0]
                mem, dst = span(e.value, 0, row)
                src = dst + e.row * row
                mem[dst:dst + e.count * row] = mem[src:src + e.count * row].copy()
                continue
            stage = flow.stages[e.stage]
            if e.kind == "finish":
                mem, at = span(stage.output, 0, stage.row_bytes)
                mem[at:at + stage.row_bytes] = row_token(stage.output, 0)
                continue
            for i, (first, slot) in zip(stage.inputs, e.reads):
                last = i.needed[e.row][1]
                if i.value in whole:  # a whole input: the rows of the caller's value
                    check(place[i.value].storage, place[i.value].offset, i.value, ins.name,
                          (first * whole[i.value], (last + 1) * whole[i.value]))
                    continue
                for r in range(first, last + 1):
                    mem, at = span(i.value, slot + r - first, rows[i.value])
                    if not (mem[at:at + rows[i.value]] == row_token(i.value, r)).all():
                        raise PlanError(f"{ins.name}: {stage.name} reads row {r} of {i.value}"
                                        " but another row or value is there")
            if not stage.sums:
                mem, at = span(stage.output, e.slot, stage.row_bytes)
                mem[at:at + stage.row_bytes] = row_token(stage.output, e.row)
        for v in flow.outputs:
            o = place[v]
            mem, base = region(o.storage)
            stage = next(s for s in flow.stages if s.output == v)
            for r in range(stage.rows if not stage.sums else 1):
                at = base + o.offset + r * stage.row_bytes
                if not (mem[at:at + stage.row_bytes] == row_token(v, r)).all():
                    raise PlanError(f"{ins.name}: row {r} of {v} was overwritten in the chain")
            write(o.storage, o.offset, o.size, v)

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
        if ins.name in ir.chains:
            for o in ins.operands:
                if o.mode == IN:
                    check(o.storage, o.offset, o.value, ins.name)
            chain(ins)
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
