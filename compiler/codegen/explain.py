"""Per-kernel code for reading: the LLVM IR and assembly of the one kernel a node became.

In a compiled network every kernel is an internal function inlined into the entry point, so
the object has no per-kernel code to show. Here the chosen kernel alone is emitted into its own
module, as an exported function (named as in the whole network), optimized and assembled. Source
(loaded-graph) nodes are mapped to final-graph kernels through `Node.provenance`. The compile
driver makes the `KernelMap` of each plan; nothing here plans or prepares a graph itself.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from compiler.codegen.build import _Builder
from compiler.codegen.line_map import LinkedCode, line_map
from compiler.codegen.llvm import LLVM_LOCK, emit_assembly, optimize, target_machine
from compiler.codegen.table import lookup
from compiler.codegen.targets import Target, get_target
from compiler.errors import KilnError
from compiler.ir.graph import Graph, Node
from compiler.lowir.ir import Fusion
from compiler.memory.report import MemoryPlan

NET_NAME = "net"


@dataclass(frozen=True)
class KernelStep:
    """One kernel of the final graph, in schedule order.

    Attributes:
        index: Step number (the `k<index>` in its symbol).
        symbol: LLVM function name, as in the whole network's module.
        op: Its instruction's label: the operator, or a fused one's operators joined by `+`.
        nodes: Final-graph node names the kernel covers (the producer first).
    """

    index: int
    symbol: str
    op: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class KernelCode:
    """What one kernel became for one target.

    Attributes:
        llvm_ir: The optimized LLVM IR of the module holding only that kernel.
        assembly: The target assembly of that module.
        symbol: The kernel's function name.
        nodes: Final-graph node names the kernel covers.
        target: Target name.
    """

    llvm_ir: str
    assembly: str
    symbol: str
    nodes: tuple[str, ...]
    target: str


class KernelMap:
    """The kernels of a prepared graph under its memory plan, and each one's code per target.

    The compile driver makes one per plan, so the code views show the kernels of exactly the
    graph and plan the bundle is built from. Code is cached per (kernel, target): the GUI asks
    again whenever the selection comes back. Thread-safe (the GUI compiles in worker threads).
    """

    def __init__(self, prepared: Graph, plan: MemoryPlan):
        self.graph, self.plan = prepared, plan
        builder = _Builder(prepared, plan, get_target("x86-64"), NET_NAME, "external")
        self.steps = [KernelStep(i, builder.symbol(i, node, instr.fusion), instr.op, instr.nodes)
                      for i, (node, _, instr) in enumerate(builder._steps())]
        self._nodes = {n.name for n in prepared.nodes}
        self._code: dict[tuple[str, str], KernelCode] = {}
        self._linked: dict[tuple[str, str], LinkedCode] = {}
        self._lock = threading.Lock()

    def kernel_of(self, node_name: str) -> KernelStep | None:
        """The kernel covering `node_name`; None for views and missing nodes."""
        return next((s for s in self.steps if node_name in s.nodes), None)

    def kernel_code(self, node_name: str, target: Target | str) -> KernelCode:
        """The optimized LLVM IR and assembly of the kernel covering `node_name`.

        Raises KilnError when the node has no kernel (a view such as Reshape, or unknown).
        """
        target = get_target(target) if isinstance(target, str) else target
        step = self.kernel_of(node_name)
        if step is None:
            if node_name not in self._nodes:
                raise KilnError(f"no node {node_name!r} in the compiled graph")
            raise KilnError(f"{node_name} has no kernel: it only renames or views memory")
        key = (step.symbol, target.name)
        with self._lock:
            known = self._code.get(key)
        if known is not None:
            return known
        with LLVM_LOCK:  # the optimized module is printed before another thread uses LLVM
            text = self._module_text(step, target)
            code = KernelCode(str(optimize(text, target)), emit_assembly(text, target),
                              step.symbol, step.nodes, target.name)
        with self._lock:
            return self._code.setdefault(key, code)

    def linked_code(self, target: Target | str) -> LinkedCode:
        """The whole network for `target` with its kernels kept apart, and its line links.

        Inlined into the entry point (as shipped), kernels leave no lines of their own to
        link; kept apart, each keeps its function, as in `kiln bench --target`'s build.
        """
        target = get_target(target) if isinstance(target, str) else target
        key = ("", target.name)
        with self._lock:
            known = self._linked.get(key)
        if known is not None:
            return known
        with LLVM_LOCK:  # one optimization gives both listings
            builder = _Builder(self.graph, self.plan, target, NET_NAME, "embedded",
                               separate_kernels=True)
            ref = optimize(str(builder.build()), target)
            llvm_ir = str(ref)
            assembly = target_machine(target).emit_assembly(ref)
            del ref
        lowir = self.plan.lowir
        code = LinkedCode(lowir.dump(), llvm_ir, assembly,
                          line_map(lowir, builder.kernels, llvm_ir, assembly), target.name)
        with self._lock:
            return self._linked.setdefault(key, code)

    def _module_text(self, step: KernelStep, target: Target) -> str:
        """A module with only `step`'s kernel, exported so the optimizer keeps it."""
        builder = _Builder(self.graph, self.plan, target, NET_NAME, "external")
        node, add, instr = builder._steps()[step.index]
        if instr.fusion is Fusion.ROW_CHAIN:  # the driver with its one-row kernels
            fn, _ = builder.chain(step.index, instr, *builder._chain_parts(instr))
            fn.linkage = ""
            return str(builder.module)
        if instr.fusion is Fusion.CONV_PAIR:  # the driver with its one-row kernels
            rows = builder._pair_rows(instr.nodes)
            fn, _ = builder.pair(step.index, rows, {part: builder._weights(n)
                                                    for part, n in rows.parts.items()})
            fn.linkage = ""
            return str(builder.module)
        arrays = lookup(node, target)[1](node)
        weights = {i: (a, builder.table.add(a)) for i, a in arrays.items()}
        fn, _, _ = builder.kernel(node, step.index, add, weights)
        fn.linkage = ""  # external: an unused internal function would be deleted
        return str(builder.module)

    # -- source (loaded) nodes -> kernels -------------------------------------------------------

    def final_node_for(self, final: Graph, source_id: int) -> Node | None:
        """The final-graph node a loaded node ended up in, preferring one with a kernel.

        Among the final nodes whose provenance holds `source_id`, one covered by a kernel wins
        over a view (a Reshape), then the one made from the fewest source nodes (Conv+Relu over
        a FullyConnected that also absorbed a Flatten), then one of the same operator.
        """
        candidates = [n for n in final.nodes if source_id in n.provenance]
        if not candidates:
            return None
        covered = {name for s in self.steps for name in s.nodes}
        return min(candidates, key=lambda n: (n.name not in covered, len(n.provenance)))

    def explain(self, source: Graph, final: Graph, source_id: int) -> tuple[Node | None, str]:
        """(final node or None, one sentence saying which kernel the loaded node is part of)."""
        names = {n.id: n.name for n in source.nodes}
        name = names.get(source_id, f"node {source_id}")
        node = self.final_node_for(final, source_id)
        if node is None:
            return None, f"{name} was removed by the passes: it has no code"
        step = self.kernel_of(node.name)
        if step is None and node.name not in self._nodes:
            return node, (f"{name} became {node.name} ({node.op}), folded into a constant "
                          "weight before code generation: it has no code")
        if step is None:
            return node, f"{name} became {node.name} ({node.op}), which has no kernel"
        sources = self._sources(final, step)
        fused = ", ".join(names.get(i, str(i)) for i in sources)
        return node, (f"{name} is part of kernel k{step.index} {step.op} "
                      f"(fused from {fused})" if len(sources) > 1 else
                      f"{name} is kernel k{step.index} {step.op}")

    def _sources(self, final: Graph, step: KernelStep) -> list[int]:
        """Source ids whose selection shows `step`.

        A fused Add's provenance also names the producers of its inputs, which have their own
        kernels.
        """
        nodes = {n.name: n for n in final.nodes}
        ids = sorted({i for name in step.nodes if name in nodes for i in nodes[name].provenance})
        mine = []
        for i in ids:
            node = self.final_node_for(final, i)
            if node is not None and node.name in step.nodes:
                mine.append(i)
        return mine

    def lowir_line(self, node_name: str) -> int:
        """Line of `plan.lowir.dump()` holding the instruction of `node_name` (-1 if none)."""
        lowir = self.plan.lowir
        prefix = sum(1 for s in lowir.storages.values() if s.kind != "activation")
        for i, ins in enumerate(lowir.instrs):
            if ins.kind not in ("alloc", "dealloc") and (ins.name == node_name
                                                         or node_name in ins.nodes):
                return prefix + i
        return -1
