"""Checks of the low-level IR: every operand inside a live storage, read only after a write."""

from __future__ import annotations

from compiler.errors import VerifyError
from compiler.lowir.ir import IN, INOUT, OUT, LowIR


def verify_lowir(ir: LowIR) -> None:
    """Raise VerifyError when an instruction breaks a rule of the low-level IR.

    Rules: an activation is allocated once before its first use and deallocated once after its
    last; operands lie inside their storage; a byte range is read only after something wrote
    it (graph inputs are written by the caller); graph inputs are never written.
    """
    state: dict[str, str] = {}
    written: dict[str, list[tuple[int, int]]] = {
        s.name: [(0, s.size)] for s in ir.storages.values() if s.kind == "input"}
    steps = 0
    for ins in ir.instrs:
        if ins.kind == "alloc":
            if ins.name in state:
                raise VerifyError(f"storage {ins.name} is allocated twice")
            state[ins.name] = "live"
            continue
        if ins.kind == "dealloc":
            if state.get(ins.name) != "live":
                raise VerifyError(f"storage {ins.name} is freed while not allocated")
            state[ins.name] = "dead"
            continue
        if ins.kind == "op":
            if ins.step != steps:
                raise VerifyError(f"{ins.name} has step {ins.step}, expected {steps}")
            steps += 1
        for o in ins.operands:
            storage = ir.storages.get(o.storage)
            if storage is None:
                raise VerifyError(f"{ins.name} uses unknown storage {o.storage}")
            if storage.kind == "activation" and state.get(o.storage) != "live":
                raise VerifyError(f"{ins.name} uses {o.storage} outside its lifetime")
            if o.offset < 0 or o.offset + o.size > storage.size:
                raise VerifyError(f"{ins.name}: {o.value} lies outside storage {o.storage}")
            if ins.kind != "op":
                continue
            if o.mode in (OUT, INOUT) and storage.kind == "input":
                raise VerifyError(f"{ins.name} writes over graph input {o.storage}")
            if o.mode in (IN, INOUT) and not _covered(written.get(o.storage, []), o):
                raise VerifyError(f"{ins.name} reads {o.value} before anything wrote it")
        if ins.kind == "op":
            for o in ins.operands:
                if o.mode in (OUT, INOUT):
                    written.setdefault(o.storage, []).append((o.offset, o.offset + o.size))
    if steps != ir.steps:
        raise VerifyError(f"the IR counts {ir.steps} steps but has {steps} ops")
    left = [s for s, v in state.items() if v == "live"]
    if left:
        raise VerifyError(f"storages never freed: {', '.join(left)}")


def _covered(ranges: list[tuple[int, int]], o) -> bool:
    """True when the union of written ranges covers the operand's bytes."""
    position = o.offset
    for lo, hi in sorted(ranges):
        if lo > position:
            break
        position = max(position, hi)
    return position >= o.offset + o.size
