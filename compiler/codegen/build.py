"""Build a final graph into one LLVM module and object: kernels, weights, entry point."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from llvmlite import ir

from compiler.codegen.chain import ChainCode, chain_code, emit_chain_driver, sums_kernel
from compiler.codegen.entry import Call, add_ticks, cycle_counter, emit_calls, tick_counters
from compiler.codegen.kernel import I32, LLVM_TYPES, Kernel, llvm_type, preparing
from compiler.codegen.llvm import emit_object, new_module
from compiler.codegen.pair import PairRows, emit_driver, pair_rows
from compiler.codegen.schedules import frozen as frozen_schedule
from compiler.codegen.schedules import kernel_schedule
from compiler.codegen.state_reset import emit_reset_state
from compiler.codegen.state_reset import location as _location
from compiler.codegen.state_reset import memcpy as _memcpy
from compiler.codegen.table import lookup
from compiler.codegen.targets import Target, auto_lean_weights
from compiler.codegen.weights import WEIGHT_ALIGNMENT, WeightTable, embed, int8_weight_bytes
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Node, Value
from compiler.ir.state import variables
from compiler.lowir.ir import Fusion, Instr, pair_window
from compiler.memory.report import MemoryPlan

I8P = ir.PointerType(ir.IntType(8))
WEIGHT_MODES = ("embedded", "external")
BLOB = 3  # base index of the weights blob, after the entry point's three arguments

# C99 keywords and the names a bundle's entry point must not take: `main` would clash with the
# example program, and C reserves names starting with an underscore and a capital or a second
# underscore.
C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum
    extern float for goto if inline int long register restrict return short signed sizeof
    static struct switch typedef union unsigned void volatile while _Bool _Complex _Imaginary
    main""".split())


def check_net_name(name: str) -> None:
    """Raise KilnError unless `name` can be the entry point and file prefix of a bundle."""
    if not name.isidentifier() or not name.isascii():
        raise KilnError(f"network name {name!r} is not a C identifier (letters, digits and "
                        "underscores, not starting with a digit)")
    if name in C_KEYWORDS:
        raise KilnError(f"network name {name!r} is a C keyword or main(); pick another name")
    if name.startswith("__") or (name.startswith("_") and name[1:2].isupper()):
        raise KilnError(f"network name {name!r} is reserved by C (leading __ or _ and a "
                        "capital letter); pick another name")


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


@dataclass(frozen=True)
class KernelInfo:
    """One generated kernel, for the bundle report and the GUI's kernel map.

    Attributes:
        symbol: LLVM function name (internal: after inlining it may not reach the object).
        op: Its instruction's label: the operator, or a fused one's operators joined by `+`.
        nodes: Names of the graph nodes the kernel covers.
        weight_bytes: Bytes of constant data it reads, each blob slot once (a slot two
            kernels share counts in both).
        fusion: The fused operator it runs (`compiler.lowir.ir.Fusion`), None for one node.
        part_of: For a one-row kernel of a row-streamed chain, the chain's driver symbol
            (its weights count there); "" otherwise.
        workload: Its workload key (`compiler.codegen.schedules`) when its family has a
            schedule space, which a tuning log's entries are keyed by; "" otherwise.
        own_weight_bytes: Bytes of the arrays its own code reads, a chain's one-row kernels
            included (what a schedule's weight layout changes).
    """

    symbol: str
    op: str
    nodes: tuple[str, ...]
    weight_bytes: int
    fusion: Fusion | None = None
    part_of: str = ""
    workload: str = ""
    own_weight_bytes: int = 0


@dataclass
class CompiledNet:
    """One graph compiled for one target: the object, the plan it assumes, and its I/O map.

    `weights` says where the constant data is; with "external", `constant` is the blob the
    caller passes as `constant_weights` (each tensor at a 64-aligned offset), else b"".
    """

    name: str
    target: Target
    graph: Graph
    plan: MemoryPlan
    llvm_ir: str
    object: bytes
    inputs: list[Tensor]
    outputs: list[Tensor]
    weights: str = "embedded"
    constant: bytes = b""
    kernels: list[KernelInfo] = field(default_factory=list)
    state: list[StateSlot] = field(default_factory=list)
    timed: tuple[int, ...] = ()  # with timed kernels: the kernel (index) of each tick slot
    # A timed microcontroller build's row chains: each one's counters (an exported u64 array)
    # and the kernel (index) of each of its slots.
    chain_timed: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # Workload key -> its description, for every kernel with a schedule space (tuning).
    workloads: dict[str, dict] = field(default_factory=dict)

    @property
    def ticks_symbol(self) -> str:
        """`uint64_t NAME_layer_ticks[]`: per timed call, then the whole entry point."""
        return f"{self.name}_layer_ticks"

    @property
    def data_inputs(self) -> list[Tensor]:
        """The inputs a caller writes: all but the state, which the network keeps itself."""
        kept = {slot.input.name for slot in self.state}
        return [t for t in self.inputs if t.name not in kept]

    @property
    def reset_symbol(self) -> str:
        """`void NAME_reset_state(uint8_t *mutable)`: the state's initial values, written."""
        return f"{self.name}_reset_state"


@dataclass(frozen=True)
class StateSlot:
    """A state variable in the mutable region: where it is kept and where its update lands.

    The entry point copies `output` onto `input` after every inference; `reset_state` writes
    `initial` there.
    """

    name: str
    input: Tensor
    output: Tensor | None
    initial: bytes

    @property
    def nbytes(self) -> int:
        """The variable's size in bytes."""
        return len(self.initial)


def _copy(b: ir.IRBuilder, regions, source: tuple[int, int], dest: tuple[int, int],
          nbytes: int) -> None:
    """Copy `nbytes` between two (region argument, offset) places of the entry point."""
    _memcpy(b, b.gep(regions[dest[0]], [I32(dest[1])], inbounds=True),
            b.gep(regions[source[0]], [I32(source[1])], inbounds=True), nbytes)


def _state_slots(graph: Graph, plan: MemoryPlan) -> list[StateSlot]:
    by_name = {v.name: v for v in graph.values()}
    return [StateSlot(var.name, _tensor(plan, by_name[var.input]),
                      None if var.output is None else _tensor(plan, by_name[var.output]),
                      np.ascontiguousarray(var.initial).tobytes())
            for var in variables(graph)]


def _tensor(plan: MemoryPlan, value: Value) -> Tensor:
    region, offset = _location(plan, value)
    return Tensor(value.name, "mutable" if region == 1 else "activations", offset,
                  tuple(value.type.shape), value.type.dtype)


class _Builder:
    """Emits the module: one internal function per node, called in schedule order by `name`.

    Weights are packed into one `WeightTable` before any kernel is emitted, so each is at a
    final offset: inside the `name.weights` placeholder global (embedded) or from the entry
    point's `constant_weights` argument (external). Kernels take them as arguments in both
    modes: pointers into one big global as constant expressions cost LLVM about 1.5x the
    optimization and emission time.
    """

    def __init__(self, graph: Graph, plan: MemoryPlan, target: Target, name: str,
                 weights: str, separate_kernels: bool = False, compact: bool = False,
                 timed: bool = False, schedules: Mapping[str, Mapping] | None = None):
        target = auto_lean_weights(target, int8_weight_bytes(graph))
        self.schedules = schedules or {}  # workload key -> knobs (a tuning log's best)
        self.graph, self.plan, self.target, self.name = graph, plan, target, name
        self.separate_kernels = separate_kernels or timed
        self.timed = timed
        self.timed_kernels: list[int] = []  # per call: its kernel's index in `kernels`
        # Per timed chain on a microcontroller: its counters' symbol, each slot's kernel.
        self.chain_ticks: list[tuple[str, tuple[int, ...]]] = []
        self.compact = compact
        self.external = weights == "external"
        self.module = new_module(name, target)
        self.nodes = {n.name: n for n in graph.nodes}
        self.table = WeightTable()
        self.blob: ir.GlobalVariable | None = None
        self.kernels: list[KernelInfo] = []
        self.workloads: dict[str, dict] = {}

    def _steps(self) -> list[tuple[Node, Node | None, Instr]]:
        """(node, fused Add or None, instruction) per kernel, in schedule order."""
        steps = []
        for instr in (i for i in self.plan.lowir.instrs if i.kind == "op"):
            if instr.fusion is Fusion.CONV_PAIR:
                second, add = (self.nodes[n] for n in instr.nodes[1:])
                steps.append((second, add, instr))
                continue
            if instr.fusion is Fusion.ROW_CHAIN:
                steps.append((self.nodes[instr.nodes[0]], None, instr))
                continue
            fused = instr.fusion is Fusion.RESIDUAL_ADD and len(instr.nodes) == 2
            if (len(instr.nodes) > 1 and not fused) or instr.name not in self.nodes:
                raise KilnError(f"cannot generate {instr.op} ({instr.name})")
            add = self.nodes[instr.nodes[1]] if fused else None
            steps.append((self.nodes[instr.name], add, instr))
        return steps

    def _placeholder(self) -> None:
        """The embedded weights global: zeros in the IR, the blob written in by `embed`."""
        if self.external or not self.table.size:
            return
        size = -(-self.table.size // WEIGHT_ALIGNMENT) * WEIGHT_ALIGNMENT
        gv = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), size),
                               f"{self.name}.weights")
        gv.initializer = ir.Constant(gv.value_type, None)
        gv.global_constant = True
        gv.linkage = "internal"
        # Printed between the linkage and `constant`: the optimizer must not fold loads from
        # the zero placeholder (the real bytes arrive after code generation).
        gv.storage_class = "externally_initialized"
        gv.align = WEIGHT_ALIGNMENT
        self.blob = gv

    @staticmethod
    def _arguments(node: Node, add: Node | None, weights: dict[int, tuple[np.ndarray, int]]
                   ) -> tuple[list[Value], list[tuple[int, ir.Type]]]:
        """A kernel's runtime values (inputs, residual, outputs) and weights (blob offset, type)."""
        runtime = node.runtime_inputs()
        outputs = list(node.outputs)
        if add is not None:
            residual = next(v for v in add.inputs if v is not node.output
                            and v is not None and not isinstance(v, Constant))
            if residual.type.shape != node.output.type.shape or node.attrs.get("activation"):
                raise KilnError(f"cannot generate {node.op}+{add.op} {node.name}: the residual "
                                "must have the output's shape and the producer no activation")
            runtime.append(residual)
            outputs = list(add.outputs)
        consts = [(offset, llvm_type(str(array.dtype)))
                  for _, (array, offset) in sorted(weights.items())]
        return runtime + outputs, consts

    def schedule(self, node: Node, add: Node | None) -> tuple[str, dict, Target]:
        """(workload key, knobs, target) of `node`'s kernel (`schedules.kernel_schedule`)."""
        key, description, knobs, target = kernel_schedule(node, add, self.target, self.schedules)
        if key:
            self.workloads[key] = description
        return key, knobs, target

    def kernel(self, node: Node, index: int | str, add: Node | None,
               weights: dict[int, tuple[np.ndarray, int]], alone: list[bool] | None = None
               ) -> tuple[ir.Function, list[Value], list[tuple[int, ir.Type]]]:
        """The function of `node`, its runtime values in order, and its weight arguments.

        The weight arguments follow the runtime ones, as (blob offset, element type): the entry
        point passes pointers into the blob, wherever it is. With `add` (a fused residual
        Add), the kernel also takes the residual and writes the Add's output instead of the
        node's. `alone` says which runtime arguments share no bytes for a node the plan does
        not know (a pair's one-row nodes); such a kernel is always inlined into its caller.
        """
        _, schedule, target = self.schedule(node, add)
        emit, _ = lookup(node, target)
        params, consts = self._arguments(node, add, weights)
        outputs = list(add.outputs) if add is not None else list(node.outputs)
        # Each runtime tensor has its own element type (a QuantizeLinear reads float and writes
        # int8); a type code generation lacks is left to the emitter to refuse by name.
        out_ty = llvm_type(node.output.type.dtype)
        fnty = ir.FunctionType(ir.VoidType(),
                               [ir.PointerType(LLVM_TYPES.get(v.type.dtype, out_ty))
                                for v in params] + [ir.PointerType(t) for _, t in consts])
        fn = ir.Function(self.module, fnty, f"{self.name}.k{index}.{node.op}")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        # A tensor alone in its storage overlaps no other argument: saying so lets LLVM
        # vectorize without runtime checks. In-place pairs (residual and output) get nothing,
        # nor do an output and the input it streams from when the plan overlaps them.
        shared, overlapping, descending = (self._aliasing(params) if alone is None
                                           else (alone, False, False))
        for arg, apart in zip(fn.args, shared):
            if apart:
                arg.add_attribute("noalias")
        if alone is not None:
            fn.attributes.add("alwaysinline")
        elif (self.separate_kernels or (add is not None and add.op == "QLinearAdd")
                or (overlapping and not self.target.inline_streaming)):
            # Kept as its own function: its code is measurable alone. An int8 convolution
            # with its residual Add is too: inlined, LLVM hoists the Add's constants into the
            # entry point and the convolution's loops pay in spills (3 % more instructions
            # for ResNet-8 on Cortex-M7). So is one whose output overlaps its input where
            # inlining it costs more than the call (`Target.inline_streaming`).
            fn.attributes.add("noinline")
        # Weights are never written and live in their own region. No `align 64` promise: a
        # caller placing the blob less aligned than asked then still gets correct code.
        for arg in fn.args[len(params):]:
            arg.add_attribute("noalias")
        slots = max([len(node.inputs)] + [i + 1 for i in weights])
        args: list = [None] * slots
        it = iter(fn.args)
        for i, v in enumerate(node.inputs):
            if v is not None and not isinstance(v, Constant):
                args[i] = next(it)
        residual = next(it) if add is not None else None
        outs = [next(it) for _ in outputs]
        for i in sorted(weights):
            args[i] = next(it)
        kernel = Kernel(node, fn, args, outs, residual, add, target=target,
                        compact=self.compact, descending_rows=descending, schedule=schedule)
        emit(kernel)
        kernel.finish()
        return fn, params, consts

    def _aliasing(self, params: list[Value]) -> tuple[list[bool], bool, bool]:
        """How a kernel's runtime arguments share bytes.

        Per argument, whether no other one shares its bytes; whether two of them overlap from
        different storages (an output and the input it streams from); and whether the rows
        then run downwards (the output overlaps the input from above).
        """
        storages = [self.plan.lowir.values[v.name][0] for v in params]
        overlaps = [any(self.plan.overlapping(s, other) for other in storages)
                    for s in storages]
        alone = [storages.count(s) == 1 and not o for s, o in zip(storages, overlaps)]
        return alone, any(overlaps), self.plan.descending(storages[-1])

    def _shape_key(self, node: Node, add: Node | None,
                   weights: dict[int, tuple[np.ndarray, int]]) -> tuple:
        """What a kernel's code depends on; equal keys may share one function.

        The operator, attributes, every input's type (constant inputs compiled into the code
        by content, weight arguments by shape and type), output types, the fused Add and the
        aliasing of the runtime arguments. Weights and buffers arrive as arguments, so a
        thousand identical blocks compile one kernel, not a thousand.
        """
        def frozen(value):
            if isinstance(value, np.ndarray):
                return ("array", value.dtype.str, value.shape, value.tobytes())
            if isinstance(value, (list, tuple)):
                return tuple(frozen(v) for v in value)
            return value

        inputs = []
        for i, v in enumerate(node.inputs):
            if v is None:
                inputs.append(None)
            elif i in weights:
                inputs.append(("weight", v.type, weights[i][0].dtype.str, weights[i][0].shape))
            elif isinstance(v, Constant):
                inputs.append(("inline", v.type, frozen(v.data)))
            else:
                inputs.append(("runtime", v.type))
        params, _ = self._arguments(node, add, weights)
        # A QLinearAdd's scales and zero points are compiled into the code: part of the key.
        add_key = None if add is None else (add.op, frozen(sorted(add.attrs.items())), tuple(
            ("inline", frozen(v.data)) if isinstance(v, Constant) else v is node.output
            for v in add.inputs))
        storages = [self.plan.lowir.values[v.name][0] for v in params]
        alone, overlapping, descending = self._aliasing(params)
        aliasing = (tuple(storages.index(s) for s in storages), tuple(alone), overlapping,
                    descending)
        return (node.op, frozen(sorted(node.attrs.items())), tuple(inputs),
                tuple(v.type for v in params), add_key, aliasing,
                frozen_schedule(self.schedule(node, add)[1]))

    def _weights(self, node: Node, add: Node | None = None) -> dict[int, tuple[np.ndarray, int]]:
        """`node`'s arrays as its emitter wants them, each with its blob offset."""
        _, knobs, target = self.schedule(node, add)
        with preparing(knobs):  # a knob may arrange the weights
            arrays = lookup(node, target)[1](node)
        return {i: (a, self.table.add(a)) for i, a in arrays.items()}

    def _pair_rows(self, names: tuple[str, ...]) -> PairRows:
        first, second, add = (self.nodes[n] for n in names)
        window = self.plan.lowir.storages[pair_window(first.output.name)].size
        return pair_rows(first, second, add,
                         window // (first.output.type.nbytes // first.output.type.shape[1]))

    def pair(self, step: int, rows: PairRows, weights: dict[str, dict]
             ) -> tuple[ir.Function, list[tuple[int, ir.Type]]]:
        """A residual block's pair: its one-row kernels and the driver calling them.

        Returns the driver, which takes the residual (written over), the window and then
        every kernel's weight arguments in turn, and those weight arguments.
        """
        kernels, consts = {}, []
        for part, node in rows.parts.items():
            add = rows.out_add if part == "out" else None
            # Input and output rows apart; B's residual row is the row it writes.
            alone = [True, False, False] if add is not None else [True, True]
            fn, _, own = self.kernel(node, f"{step}.{part}", add, weights[part], alone)
            kernels[part] = (fn, 2 + len(consts))
            consts += own
        driver = self._driver(self.symbol(step, rows.out, Fusion.CONV_PAIR), 2, consts)
        for arg in driver.args:
            arg.add_attribute("noalias")
        emit_driver(driver, rows, kernels)
        return driver, consts

    def _driver(self, symbol: str, places: int, consts: list[tuple[int, ir.Type]]
                ) -> ir.Function:
        """A pair's or chain's driver function, internal and called once (never inlined).

        It takes `places` tensor pointers, then its kernels' weight arguments.
        """
        fnty = ir.FunctionType(ir.VoidType(),
                               [I8P] * places + [ir.PointerType(t) for _, t in consts])
        driver = ir.Function(self.module, fnty, symbol)
        driver.linkage = "internal"
        driver.attributes.add("nounwind")
        driver.attributes.add("noinline")
        return driver

    def symbol(self, step: int, node: Node | None, fusion: Fusion | None) -> str:
        """The function name of step `step`'s kernel (a pair's or a chain's driver)."""
        if fusion is Fusion.ROW_CHAIN:
            return f"{self.name}.k{step}.RowChain"
        if fusion is Fusion.CONV_PAIR:
            return f"{self.name}.k{step}.QLinearConv_pair"
        return f"{self.name}.k{step}.{node.op}"

    def _chain_parts(self, instr: Instr) -> tuple[ChainCode, dict[int, dict]]:
        """A chain instruction's table and parts, and each convolution part's weights."""
        chain = self.plan.lowir.chains[instr.name]
        values = {v.name: v for v in self.graph.values()}
        args = {o.value: k for k, o in enumerate(instr.operands)}
        code = chain_code(chain, self.nodes, values, args)
        return code, {c: self._weights(p.node, p.add) if p.kind == "row" else {}
                      for c, p in code.parts.items()}

    def chain(self, step: int, instr: Instr, code: ChainCode, weights: dict[int, dict]
              ) -> tuple[ir.Function, list[tuple[int, ir.Type]]]:
        """A row-streamed chain: its one-row kernels and the driver walking its table.

        Returns the driver, which takes the chain's tensors, windows and sums (its operands,
        in order) and then every kernel's weight arguments in turn, and those arguments.
        """
        kernels, consts, first, count = {}, [], {}, {}
        symbol = self.symbol(step, None, Fusion.ROW_CHAIN)
        stage_of = {n: s for s in code.stages for n in s.nodes}
        for c, part in code.parts.items():
            if part.kind == "row":
                alone = [True] * (len(part.node.runtime_inputs()) + 1 + (part.add is not None))
                fn, _, own = self.kernel(part.node, f"{step}.c{c}", part.add, weights[c], alone)
                fn.attributes.discard("alwaysinline")  # called once per row: a call is cheap
                fn.attributes.add("noinline")
            else:
                fn, own = sums_kernel(self.module, f"{self.name}.k{step}.c{c}", part,
                                      self.target), []
            kernels[c], first[c], count[c] = fn, len(consts), len(own)
            consts += own
            stage = stage_of[part.source]
            key = self.schedule(part.node, part.add)[0] if part.kind == "row" else ""
            self.kernels.append(KernelInfo(fn.name, part.label, stage.nodes, 0, Fusion.ROW_CHAIN,
                                           symbol, key,
                                           WeightTable.distinct_bytes(weights[c].values())))
        places = len(instr.operands)
        driver = self._driver(symbol, places, consts)
        own_weights = {c: list(driver.args[places + first[c]:places + first[c] + count[c]])
                       for c in kernels}
        ticks = None
        if self.timed:  # per-layer time inside the chain (a board's, a tuner's)
            ticks = tick_counters(self.module, f"{self.name}_k{step}_ticks", len(kernels))
            self.chain_ticks.append((ticks.name, tuple(range(len(self.kernels) - len(kernels),
                                                             len(self.kernels)))))
        emit_chain_driver(driver, code, kernels, own_weights, places,
                          f"{self.name}.k{step}", ticks)
        return driver, consts

    def build(self) -> ir.Module:
        """The module with the exported `int name(const u8 *, u8 *, u8 *)` entry point."""
        steps = self._steps()
        prepared = []
        for node, _, instr in steps:
            if instr.fusion is Fusion.CONV_PAIR:
                rows = self._pair_rows(instr.nodes)
                prepared.append((rows, {p: self._weights(n, rows.out_add if p == "out" else None)
                                        for p, n in rows.parts.items()}))
            elif instr.fusion is Fusion.ROW_CHAIN:
                prepared.append(self._chain_parts(instr))
            else:
                prepared.append(self._weights(node))
        self._placeholder()
        entry = ir.Function(self.module, ir.FunctionType(I32, [I8P, I8P, I8P]), self.name)
        entry.attributes.add("nounwind")
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        base = entry.args[0] if self.blob is None else b.bitcast(self.blob, I8P)
        made: dict[tuple, ir.Function] = {}
        calls: list[Call] = []
        for step, ((node, add, instr), weights) in enumerate(zip(steps, prepared)):
            names = instr.nodes
            if instr.fusion in (Fusion.CONV_PAIR, Fusion.ROW_CHAIN):  # a driver of parts
                layout, parts = weights
                if instr.fusion is Fusion.CONV_PAIR:
                    fn, consts = self.pair(step, layout, parts)
                    first = self.nodes[names[0]]
                    places = [_location(self.plan, first.inputs[0]),
                              _location(self.plan, pair_window(first.output.name))]
                else:
                    fn, consts = self.chain(step, instr, layout, parts)
                    places = [_location(self.plan, o.value) for o in instr.operands]
                places += [(BLOB, offset) for offset, _ in consts]
                calls.append(Call(fn, tuple(r for r, _ in places), tuple(o for _, o in places)))
                self.timed_kernels.append(len(self.kernels))
                self.kernels.append(KernelInfo(fn.name, instr.op, names, WeightTable.distinct_bytes(
                    pair for own in parts.values() for pair in own.values()), instr.fusion))
                continue
            key = self._shape_key(node, add, weights)
            if key in made:
                fn = made[key]
                params, consts = self._arguments(node, add, weights)
                if "noinline" not in fn.attributes:
                    # Called from several places: inlined, each call would be optimized and
                    # emitted again, which is what sharing the kernel is meant to avoid.
                    fn.attributes.add("noinline")
            else:
                fn, params, consts = self.kernel(node, step, add, weights)
                made[key] = fn
            places = [_location(self.plan, value) for value in params]
            places += [(BLOB, offset) for offset, _ in consts]
            calls.append(Call(fn, tuple(r for r, _ in places), tuple(o for _, o in places)))
            self.timed_kernels.append(len(self.kernels))
            self.kernels.append(KernelInfo(fn.name, instr.op, names,
                                           WeightTable.distinct_bytes(weights.values()),
                                           instr.fusion, "", self.schedule(node, add)[0],
                                           WeightTable.distinct_bytes(weights.values())))
        ticks = tick_counters(self.module, f"{self.name}_layer_ticks", len(calls) + 1) \
            if self.timed else None
        since = cycle_counter(b) if ticks is not None else None
        emit_calls(b, [*entry.args, base], calls, ticks)
        if ticks is not None:  # the last slot: the whole entry point
            add_ticks(b, ticks, I32(len(calls)), since)
        for var in variables(self.graph):
            if var.output is not None:  # the update becomes the next inference's state
                _copy(b, entry.args, _location(self.plan, var.output),
                      _location(self.plan, var.input), var.initial.nbytes)
        b.ret(I32(0))
        emit_reset_state(self.module, self.graph, self.plan, self.name)
        return self.module


def build_net(graph: Graph, plan: MemoryPlan, target: Target, name: str = "net",
              weights: str = "embedded", separate_kernels: bool = False,
              fast_compile: bool = False, timed: bool = False,
              schedules: Mapping[str, Mapping] | None = None) -> CompiledNet:
    """Generate the module and object of a prepared graph whose memory `plan` is made.

    The compile driver (`compiler.driver`) calls this with the graph its `prepare_for_codegen`
    stage left and the plan of that graph, so the object assumes exactly the plan every view
    shows. `weights` is "embedded" (read-only data in the object) or "external" (the object
    reads them through `constant_weights`; `CompiledNet.constant` is the blob to place there).
    `fast_compile` trades a few percent of speed for a fraction of LLVM's time (compact
    kernels, `emit_object`'s fast mode): for code run once over a data set. `timed` (hosts
    with a time-stamp counter) keeps kernels apart and adds the counter's advance across each
    call to `NAME_layer_ticks`, for the per-layer host time. `schedules` maps workload keys
    to the knobs their kernels take (a tuning log's best entries); others take the defaults.
    """
    check_net_name(name)
    if weights not in WEIGHT_MODES:
        raise KilnError(f"weights must be one of {', '.join(WEIGHT_MODES)}, not {weights!r}")
    builder = _Builder(graph, plan, target, name, weights, separate_kernels, fast_compile,
                       timed, schedules)
    target = builder.target  # with its weight layout decided
    text = str(builder.build())
    blob, kernels = builder.table.blob(), builder.kernels
    timed_calls = tuple(builder.timed_kernels) if timed else ()
    chain_timed = tuple(builder.chain_ticks)
    workloads = builder.workloads
    del builder  # the prepared weight arrays: the blob holds their bytes now
    obj = emit_object(text, target, fast=fast_compile)
    if weights == "embedded":
        obj, blob = embed(obj, f"{name}.weights", blob), b""
    return CompiledNet(name, target, graph, plan, text, obj,
                       [_tensor(plan, v) for v in graph.inputs],
                       [_tensor(plan, v) for v in graph.outputs], weights, blob, kernels,
                       _state_slots(graph, plan), timed_calls, chain_timed, workloads)
