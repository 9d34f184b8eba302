"""The entry point's body: kernels called in schedule order, a repeated run as one loop.

A 10,000-layer chain calls one shared kernel 10,000 times, each time with other buffers and
weights. Spelled out, that is 10,000 call sites for LLVM to optimize and emit (seconds of
compile time, and code that grows with depth). As a loop over a read-only table of byte
offsets it is one call site plus a few bytes of table per step. Runs shorter than
MIN_REPEATS stay spelled out, so the usual model's entry point reads as its schedule.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from llvmlite import ir

from compiler.codegen.kernel import I32

I64 = ir.IntType(64)

MIN_REPEATS = 8  # fewer repetitions are cheaper spelled out than as a loop and a table
MAX_PERIOD = 4  # a repeated group of up to this many calls (a block of a residual chain)


@dataclass(frozen=True)
class Call:
    """One kernel call: argument k points `offsets[k]` bytes past base pointer `bases[k]`."""

    fn: ir.Function
    bases: tuple[int, ...]
    offsets: tuple[int, ...]

    @property
    def shape(self) -> tuple:
        """What two calls must share to be steps of one loop (the offsets may differ)."""
        return self.fn, self.bases


def runs(calls: Sequence[Call]) -> Iterator[tuple[int, int, int]]:
    """(start, period, repeats) covering `calls` in order; a repeats of 1 is spelled out.

    At each position the period covering the most calls wins; linear in the calls.
    """
    shapes = [c.shape for c in calls]
    start = 0
    while start < len(calls):
        best_period, best_repeats = 1, 1
        for period in range(1, MAX_PERIOD + 1):
            group = shapes[start:start + period]
            if len(group) < period:
                break
            repeats = 1
            while shapes[start + repeats * period:start + (repeats + 1) * period] == group:
                repeats += 1
            if repeats >= MIN_REPEATS and repeats * period > best_repeats * best_period:
                best_period, best_repeats = period, repeats
        if best_repeats == 1:
            yield start, 1, 1
            start += 1
        else:
            yield start, best_period, best_repeats
            start += best_period * best_repeats


def emit_calls(b: ir.IRBuilder, bases: Sequence[ir.Value], calls: Sequence[Call],
               ticks: ir.GlobalVariable | None = None) -> None:
    """Emit `calls` at the builder's position, repeated runs as loops over offset tables.

    With `ticks` (an array of one i64 per call), each call adds the time-stamp counter's
    advance across it to its slot: a host's per-layer time, read after a run.
    """
    for start, period, repeats in runs(calls):
        if repeats == 1:
            call = calls[start]
            _call(b, bases, call, [I32(o) for o in call.offsets], ticks, I32(start))
        else:
            _loop(b, bases, calls[start:start + period * repeats], period, repeats, ticks,
                  start)


def tick_counters(module: ir.Module, name: str, count: int) -> ir.GlobalVariable:
    """An exported, zeroed array of `count` u64 counters (one per call, then the whole)."""
    array = ir.ArrayType(I64, count)
    ticks = ir.GlobalVariable(module, array, name)
    ticks.initializer = ir.Constant(array, None)
    ticks.align = 64
    return ticks


PORT_TICKS = "kiln_port_ticks"  # a microcontroller's counter: the runner firmware's port


def cycle_counter(b: ir.IRBuilder) -> ir.Value:
    """The processor's counter now: `llvm.readcyclecounter` (RDTSC on x86) on a host.

    A microcontroller has no counter LLVM can read for every board (DWT CYCCNT is optional,
    SysTick needs setting up), so a timed Cortex-M build calls `uint64_t kiln_port_ticks(void)`,
    which the runner firmware's porting layer defines (`compiler/device/kiln_port.h`).
    """
    name = PORT_TICKS if b.module.triple.startswith("thumb") else "llvm.readcyclecounter"
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(I64, []), name)
        if name == PORT_TICKS:
            fn.attributes.add("nounwind")
    return b.call(fn, [])


def add_ticks(b: ir.IRBuilder, ticks: ir.GlobalVariable, slot: ir.Value, since: ir.Value
              ) -> None:
    """ticks[slot] += counter now - since."""
    cell = b.gep(ticks, [I32(0), slot], inbounds=True)
    b.store(b.add(b.load(cell), b.sub(cycle_counter(b), since)), cell)


def _call(b: ir.IRBuilder, bases: Sequence[ir.Value], call: Call,
          offsets: Sequence[ir.Value], ticks: ir.GlobalVariable | None = None,
          slot: ir.Value | None = None) -> None:
    ptrs = [b.bitcast(b.gep(bases[base], [offset], inbounds=True), arg.type)
            for base, offset, arg in zip(call.bases, offsets, call.fn.args)]
    since = cycle_counter(b) if ticks is not None else None
    b.call(call.fn, ptrs)
    if ticks is not None:
        add_ticks(b, ticks, slot, since)


def _loop(b: ir.IRBuilder, bases: Sequence[ir.Value], calls: Sequence[Call], period: int,
          repeats: int, ticks: ir.GlobalVariable | None = None, start: int = 0) -> None:
    """For step in range(repeats): the `period` calls of the group, offsets from a table row."""
    width = sum(len(c.offsets) for c in calls[:period])
    row_type = ir.ArrayType(I32, width)
    table_type = ir.ArrayType(row_type, repeats)
    rows = [ir.Constant(row_type, [o for c in calls[r * period:(r + 1) * period]
                                   for o in c.offsets]) for r in range(repeats)]
    module = b.module
    table = ir.GlobalVariable(module, table_type, module.get_unique_name("steps"))
    table.initializer = ir.Constant(table_type, rows)
    table.global_constant = True
    table.linkage = "internal"
    table.unnamed_addr = True

    before = b.block
    header = b.append_basic_block("repeat")
    b.branch(header)
    b.position_at_end(header)
    step = b.phi(I32, "step")
    step.add_incoming(I32(0), before)
    column = 0
    for j, call in enumerate(calls[:period]):
        offsets = []
        for _ in call.offsets:
            cell = b.gep(table, [I32(0), step, I32(column)], inbounds=True)
            offsets.append(b.load(cell))
            column += 1
        slot = b.add(I32(start + j), b.mul(step, I32(period))) if ticks is not None else None
        _call(b, bases, call, offsets, ticks, slot)
    following = b.add(step, I32(1), "next")
    step.add_incoming(following, b.block)
    done = b.append_basic_block("repeated")
    b.cbranch(b.icmp_unsigned("==", following, I32(repeats)), done, header)
    b.position_at_end(done)
