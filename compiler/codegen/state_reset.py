"""Where a runtime value lives in the entry point's regions, and the state's reset function.

Kept apart from the builder so `build.py` stays one module's worth: these need only the plan.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import I32
from compiler.errors import KilnError
from compiler.ir.graph import Graph, Value
from compiler.ir.state import variables
from compiler.memory.report import MemoryPlan

I8P = ir.IntType(8).as_pointer()


def location(plan: MemoryPlan, value: Value | str) -> tuple[int, int]:
    """(argument index of the region, byte offset) of a runtime value (or its name)."""
    storage, offset = plan.lowir.values[value if isinstance(value, str) else value.name]
    if storage in plan.mutable_offsets:
        return 1, plan.mutable_offsets[storage] + offset
    return 2, plan.arena.offsets[storage] + offset


def memcpy(b: ir.IRBuilder, dest: ir.Value, source: ir.Value, nbytes: int) -> None:
    """llvm.memcpy of `nbytes` from `source` to `dest` (byte pointers)."""
    module = b.module
    name = "llvm.memcpy.p0i8.p0i8.i32"
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(
        ir.VoidType(), [I8P, I8P, I32, ir.IntType(1)]), name)
    b.call(fn, [dest, source, I32(nbytes), ir.Constant(ir.IntType(1), 0)])


def emit_reset_state(module: ir.Module, graph: Graph, plan: MemoryPlan, name: str) -> None:
    """`void NAME_reset_state(uint8_t *mutable)`: every state input's initial bytes."""
    state = variables(graph)
    if not state:
        return
    data = b"".join(np.ascontiguousarray(v.initial).tobytes() for v in state)
    array = ir.ArrayType(ir.IntType(8), len(data))
    initial = ir.GlobalVariable(module, array, f"{name}.initial_state")
    initial.initializer = ir.Constant(array, bytearray(data))
    initial.global_constant = True
    initial.linkage = "internal"
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8P]), f"{name}_reset_state")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    source = b.bitcast(initial, I8P)
    start = 0
    for var in state:
        region, offset = location(plan, var.input)
        if region != 1:
            raise KilnError(f"state {var.name} is not in the mutable region")
        memcpy(b, b.gep(fn.args[0], [I32(offset)], inbounds=True),
               b.gep(source, [I32(start)], inbounds=True), var.initial.nbytes)
        start += var.initial.nbytes
    b.ret_void()
