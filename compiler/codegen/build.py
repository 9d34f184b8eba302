"""Build a final graph into one LLVM module and object: kernels, embedded weights, entry point."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from compiler.codegen.kernels import I32, Kernel, llvm_type
from compiler.codegen.llvm import emit_object, new_module
from compiler.codegen.table import lookup
from compiler.codegen.targets import Target
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Node, Value
from compiler.memory.plan import HOST_ALIGNMENT
from compiler.memory.report import MemoryPlan, plan_memory

I8P = ir.PointerType(ir.IntType(8))
WEIGHT_ALIGNMENT = 64


@dataclass(frozen=True)
class Tensor:
    """Where the caller finds one graph input or output.

    Attributes:
        name: Value name.
        region: "mutable" or "activations" (when inputs/outputs live in the arena).
        offset: Byte offset inside that region.
        shape: Static shape.
        dtype: Element type.
    """

    name: str
    region: str
    offset: int
    shape: tuple[int, ...]
    dtype: str


@dataclass
class CompiledNet:
    """One graph compiled for one target: the object, the plan it assumes, and its I/O map."""

    name: str
    target: Target
    graph: Graph
    plan: MemoryPlan
    llvm_ir: str
    object: bytes
    inputs: list[Tensor]
    outputs: list[Tensor]


def _location(plan: MemoryPlan, value: Value) -> tuple[int, int]:
    """(argument index of the region, byte offset) of a runtime value."""
    storage, offset = plan.lowir.values[value.name]
    if storage in plan.mutable_offsets:
        return 1, plan.mutable_offsets[storage] + offset
    return 2, plan.arena.offsets[storage] + offset


def _tensor(plan: MemoryPlan, value: Value) -> Tensor:
    region, offset = _location(plan, value)
    return Tensor(value.name, "mutable" if region == 1 else "activations", offset,
                  tuple(value.type.shape), value.type.dtype)


class _Builder:
    """Emits the module: one internal function per node, called in schedule order by `name`."""

    def __init__(self, graph: Graph, plan: MemoryPlan, target: Target, name: str):
        self.graph, self.plan, self.target, self.name = graph, plan, target, name
        self.module = new_module(name, target)
        self.nodes = {n.name: n for n in graph.nodes}
        self.weights = 0
        # id(array) -> (array, global): a constant read by several nodes is embedded once; the
        # array is kept so its id stays unique while the module is built.
        self._globals: dict[int, tuple[np.ndarray, ir.Value]] = {}

    def weight(self, array: np.ndarray, ty: ir.Type) -> ir.Value:
        """A read-only, aligned global holding `array` (flash on an MCU), as an element pointer."""
        if id(array) in self._globals:
            return self._globals[id(array)][1]
        data = np.ascontiguousarray(array, dtype=np.dtype(str(array.dtype)).newbyteorder("<"))
        raw = bytearray(data.tobytes())
        gv = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), len(raw)),
                               f"{self.name}.w{self.weights}")
        self.weights += 1
        gv.initializer = ir.Constant(gv.value_type, raw)
        gv.global_constant = True
        gv.linkage = "internal"
        gv.align = WEIGHT_ALIGNMENT
        ptr = gv.bitcast(ir.PointerType(ty))
        self._globals[id(array)] = (array, ptr)
        return ptr

    def kernel(self, node: Node, index: int, add: Node | None = None
               ) -> tuple[ir.Function, list[Value]]:
        """The specialized function of `node` and the runtime values it takes, in order.

        With `add` (a fused residual Add), the kernel also takes the residual and writes the
        Add's output instead of the node's.
        """
        emit, prepare = lookup(node)
        ty = llvm_type(node.output.type.dtype)
        runtime = [v for v in node.inputs if v is not None and not isinstance(v, Constant)]
        outputs = list(node.outputs)
        if add is not None:
            residual = next(v for v in add.inputs if v is not node.output)
            if residual.type.shape != node.output.type.shape or node.attrs.get("activation"):
                raise KilnError(f"cannot generate {node.op}+Add {node.name}: the residual must "
                                "have the output's shape and the producer no activation")
            runtime.append(residual)
            outputs = list(add.outputs)
        params = runtime + outputs
        fnty = ir.FunctionType(ir.VoidType(), [ir.PointerType(ty)] * len(params))
        fn = ir.Function(self.module, fnty, f"{self.name}.k{index}.{node.op}")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        # A tensor alone in its storage overlaps no other argument: saying so lets LLVM
        # vectorize without runtime checks. In-place pairs (residual and output) get nothing.
        storages = [self.plan.lowir.values[v.name][0] for v in params]
        for arg, storage in zip(fn.args, storages):
            if storages.count(storage) == 1:
                arg.add_attribute("noalias")
        prepared = prepare(node)
        slots = max([len(node.inputs)] + [i + 1 for i in prepared])
        args: list = [None] * slots
        it = iter(fn.args)
        for i, v in enumerate(node.inputs):
            if v is not None and not isinstance(v, Constant):
                args[i] = next(it)
        for i, array in prepared.items():
            args[i] = self.weight(array, llvm_type(str(array.dtype)))
        residual = next(it) if add is not None else None
        kernel = Kernel(node, fn, args, [next(it) for _ in outputs], residual, add)
        emit(kernel)
        kernel.finish()
        return fn, params

    def build(self) -> ir.Module:
        """The module with the exported `int name(const u8 *, u8 *, u8 *)` entry point."""
        entry = ir.Function(self.module, ir.FunctionType(I32, [I8P, I8P, I8P]), self.name)
        entry.attributes.add("nounwind")
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        for step, instr in enumerate(i for i in self.plan.lowir.instrs if i.kind == "op"):
            fused = instr.op.endswith("+Add") and len(instr.nodes) == 2
            if (len(instr.nodes) > 1 and not fused) or instr.name not in self.nodes:
                raise KilnError(f"cannot generate {instr.op} ({instr.name})")
            add = self.nodes[instr.nodes[1]] if fused else None
            fn, params = self.kernel(self.nodes[instr.name], step, add)
            ptrs = []
            for value, arg in zip(params, fn.args):
                region, offset = _location(self.plan, value)
                ptrs.append(b.bitcast(b.gep(entry.args[region], [I32(offset)], inbounds=True),
                                      arg.type))
            b.call(fn, ptrs)
        b.ret(I32(0))
        return self.module


def compile_graph(graph: Graph, target: Target, name: str = "net",
                  alignment: int = HOST_ALIGNMENT, io_in_arena: bool = False) -> CompiledNet:
    """Plan memory for a final graph (after `run_pipeline`) and compile it for `target`."""
    if not name.isidentifier():
        raise KilnError(f"network name {name!r} is not a C identifier")
    plan = plan_memory(graph, alignment, io_in_arena)
    module = _Builder(graph, plan, target, name).build()
    text = str(module)
    return CompiledNet(name, target, graph, plan, text, emit_object(text, target),
                       [_tensor(plan, v) for v in graph.inputs],
                       [_tensor(plan, v) for v in graph.outputs])
