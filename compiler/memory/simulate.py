"""Run a memory plan symbolically: every byte holds the name of the value last written there.

This proves more than the geometric checker: each read finds exactly the value it expects, so
views, Concat slices, in-place ops and the packing together never clobber live data.
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

    def check(storage: str, offset: int, value: str, where: str) -> None:
        mem, base = region(storage)
        for rel, size, token in expected.get(value, [(0, 0, 0)]):
            start = base + offset + rel
            if size and not (mem[start:start + size] == token).all():
                raise PlanError(f"{where} reads {value} from {storage} but another value "
                                f"overwrote it")

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
        for o in ins.operands:
            if o.mode in (IN, INOUT):
                check(o.storage, o.offset, o.value, ins.name)
        for o in ins.operands:
            if o.mode == OUT:
                write(o.storage, o.offset, o.size, o.value)
            elif o.mode == INOUT:
                write(o.storage, o.offset, o.size, o.writes)
    for name in plan.output_names:
        if name in ir.values and name in expected:  # a constant output is not a buffer
            check(*ir.values[name], name, "the caller")
