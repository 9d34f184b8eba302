"""Lifetimes of the low-level IR's storages, as buffers the packers place."""

from __future__ import annotations

from dataclasses import replace

from compiler.lowir.ir import IN, INOUT, OUT, LowIR
from compiler.memory.buffers import Buffer


def lifetimes(ir: LowIR, io_in_arena: bool = False,
              persistent: frozenset[str] = frozenset()) -> list[Buffer]:
    """One buffer per activation storage (and per input/output storage when `io_in_arena`).

    `persistent` storages (state kept between inferences) are never in the arena.

    A storage lives from the first step that writes it to the last step that reads it. Graph
    inputs are written by the caller before step 0; graph outputs are read after the last step.
    Views take no step, so they extend nothing by themselves. A storage written by an op that
    streams rows from a storage dying at that very step carries the stream (`Buffer.stream`).
    """
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for ins in ir.instrs:
        if ins.kind != "op":
            continue
        for o in ins.operands:
            if o.mode in (OUT, INOUT):
                first[o.storage] = min(first.get(o.storage, ins.step), ins.step)
            if o.mode in (IN, INOUT, OUT):
                last[o.storage] = max(last.get(o.storage, ins.step), ins.step)
    end = max(ir.steps - 1, 0)
    buffers = []
    for s in ir.storages.values():
        if (s.kind != "activation" and not io_in_arena) or s.name in persistent:
            continue
        start = 0 if s.kind == "input" else first.get(s.name, 0)
        stop = end if s.name in ir.pinned else last.get(s.name, start)
        buffers.append(Buffer(s.name, s.size, start, max(stop, start), s.node))
    by_name = {b.name: b for b in buffers}
    for name, stream in ir.streams.items():
        out, source = by_name.get(name), by_name.get(stream.source)
        if out is not None and source is not None and source.last == out.first:
            by_name[name] = replace(out, stream=(source.name, stream.ascending_lag(),
                                                 stream.descending_lead()))
    return [by_name[b.name] for b in buffers]
