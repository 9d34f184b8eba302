"""Which lines of the low-level IR, LLVM IR and assembly come from the same kernel.

Compiler Explorer colours each source line and the assembly it became alike. Kiln's analogue:
every kernel call of the low-level IR (a node, or a row-streamed chain and each of its stages)
is a `Link` holding its instruction's line, the lines of its LLVM functions (`define ...
@"net.k3.Conv"(` to the closing `}`) and of their assembly (the symbol's label to its `.size`).
The whole network is compiled with its kernels kept apart (`separate_kernels`), so each kernel
keeps a function, hence lines, of its own. Plain data: the Code panel only draws it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from compiler.codegen.build import KernelInfo
from compiler.lowir.ir import LowIR

LOWIR, LLVM_IR, ASSEMBLY = "lowir", "llvm_ir", "assembly"
VIEWS = (LOWIR, LLVM_IR, ASSEMBLY)

Span = tuple[int, int]  # first and last line (0-based, both included)


@dataclass(frozen=True)
class Link:
    """One coloured group: a kernel call's low-level IR line and its functions' lines.

    Attributes:
        colour: Its colour's number (links in schedule order; the view picks the colour).
        label: What it runs, e.g. `k1 QGemm` or `k0 RowChain[10] stage CONV_2D_1`.
        nodes: Final-graph node names it covers (the producer first).
        symbols: Its LLVM functions: a chain's driver link holds the chain's every function.
        lines: Per view (LOWIR, LLVM_IR, ASSEMBLY), the spans it highlights when selected.
    """

    colour: int
    label: str
    nodes: tuple[str, ...]
    symbols: tuple[str, ...]
    lines: dict[str, tuple[Span, ...]] = field(hash=False, compare=False)

    def line_set(self, view: str) -> set[int]:
        """Every line of `view` the link highlights."""
        return {i for first, last in self.lines[view] for i in range(first, last + 1)}


@dataclass(frozen=True)
class LineMap:
    """The links of one compiled network, and the colour each line is tinted with.

    Attributes:
        links: In schedule order (a chain's driver before its stages).
        tints: Per view, (first, last, colour) spans: a function takes the colour of the most
            specific link holding it (a chain stage's rather than the whole chain's).
    """

    links: tuple[Link, ...]
    tints: dict[str, tuple[tuple[int, int, int], ...]]

    def at(self, view: str, line: int) -> Link | None:
        """The link whose tint covers `line` of `view` (None: a line of no kernel)."""
        colour = next((c for first, last, c in self.tints[view] if first <= line <= last), None)
        return None if colour is None else self.links[colour]

    def of_node(self, name: str) -> Link | None:
        """The most specific link covering final-graph node `name` (None: no kernel)."""
        covering = [link for link in self.links if name in link.nodes]
        return min(covering, key=lambda link: len(link.nodes), default=None)


def function_spans(llvm_ir: str) -> dict[str, Span]:
    """Lines of each function defined in an LLVM IR listing, by symbol."""
    spans: dict[str, Span] = {}
    start, name = -1, ""
    define = re.compile(r'^define\b[^@]*@("(?:[^"]+)"|[\w.$-]+)\(')
    for i, line in enumerate(llvm_ir.splitlines()):
        match = define.match(line)
        if match:
            start, name = i, match.group(1).strip('"')
        elif start >= 0 and line.startswith("}"):
            spans[name] = (start, i)
            start = -1
    return spans


def assembly_spans(assembly: str, symbols: set[str]) -> dict[str, Span]:
    """Lines of each of `symbols` in an assembly listing: its label to its `.size` (or end).

    A symbol missing from the listing (a kernel the optimizer inlined after all) has none.
    """
    lines = assembly.splitlines()
    label = re.compile(r'^("(?:[^"]+)"|[\w.$]+):')
    spans: dict[str, Span] = {}
    for i, line in enumerate(lines):
        match = label.match(line)
        name = match.group(1).strip('"') if match else ""
        if name not in symbols or name in spans:
            continue
        end = re.compile(rf'^\s*\.size\s+"?{re.escape(name)}"?\s*,|^\.Lfunc_end\d+:')
        last = next((j for j in range(i + 1, len(lines)) if end.match(lines[j])), len(lines) - 1)
        if lines[last].startswith(".Lfunc_end") and last + 1 < len(lines) \
                and end.match(lines[last + 1]):
            last += 1  # the `.size` after the end label belongs to the function too
        spans[name] = (i, last)
    return spans


def instruction_lines(lowir: LowIR) -> list[int]:
    """Line of `lowir.dump()` of each kernel call (`op` instruction), in schedule order."""
    prefix = sum(1 for s in lowir.storages.values() if s.kind != "activation")
    return [prefix + i for i, ins in enumerate(lowir.instrs) if ins.kind == "op"]


def _groups(lowir: LowIR, kernels: list[KernelInfo]) -> list[tuple[str, tuple, tuple, int]]:
    """(label, nodes, symbols, low-IR line) per link, in schedule order."""
    calls = [k for k in kernels if not k.part_of]
    lines = instruction_lines(lowir)
    if len(calls) != len(lines):
        raise ValueError(f"{len(calls)} kernel calls for {len(lines)} low-level IR instructions")
    groups = []
    for step, (call, line) in enumerate(zip(calls, lines)):
        parts = [k for k in kernels if k.part_of == call.symbol]
        groups.append((f"k{step} {call.op}", call.nodes,
                       (call.symbol, *(p.symbol for p in parts)), line))
        stages: dict[tuple[str, ...], list[str]] = {}
        for part in parts:
            stages.setdefault(part.nodes, []).append(part.symbol)
        for nodes, symbols in stages.items():
            groups.append((f"k{step} {call.op} stage {nodes[0]}", nodes, tuple(symbols), line))
    return groups


def line_map(lowir: LowIR, kernels: list[KernelInfo], llvm_ir: str, assembly: str) -> LineMap:
    """The links of a network compiled with its kernels kept apart.

    `kernels` is the build's kernel list (`CompiledNet.kernels`), `llvm_ir` and `assembly`
    the listings of that very module.
    """
    groups = _groups(lowir, kernels)
    functions = function_spans(llvm_ir)
    code = assembly_spans(assembly, {s for _, _, symbols, _ in groups for s in symbols})
    links = []
    for colour, (label, nodes, symbols, line) in enumerate(groups):
        lines = {LOWIR: ((line, line),),
                 LLVM_IR: tuple(sorted(functions[s] for s in symbols if s in functions)),
                 ASSEMBLY: tuple(sorted(code[s] for s in symbols if s in code))}
        links.append(Link(colour, label, tuple(nodes), symbols, lines))
    # A function is tinted by the most specific link holding it; a line by the first one.
    owner: dict[str, Link] = {}
    for link in sorted(links, key=lambda link: len(link.symbols)):
        for symbol in link.symbols:
            owner.setdefault(symbol, link)
    seen: dict[int, int] = {}
    for link in links:
        seen.setdefault(link.lines[LOWIR][0][0], link.colour)
    tints = {LOWIR: tuple((line, line, colour) for line, colour in sorted(seen.items())),
             LLVM_IR: tuple(sorted((*functions[s], link.colour) for s, link in owner.items()
                                   if s in functions)),
             ASSEMBLY: tuple(sorted((*code[s], link.colour) for s, link in owner.items()
                                    if s in code))}
    return LineMap(tuple(links), tints)


@dataclass(frozen=True)
class LinkedCode:
    """The whole network's listings for one target, and which of their lines go together.

    Attributes:
        lowir: The low-level IR dump (`MemoryPlan.lowir.dump()`).
        llvm_ir: The optimized LLVM IR of the module with kernels kept apart.
        assembly: That module's target assembly.
        map: The links between their lines.
        target: Target name.
    """

    lowir: str
    llvm_ir: str
    assembly: str
    map: LineMap
    target: str

    def text(self, view: str) -> str:
        """The listing shown in `view`."""
        return {LOWIR: self.lowir, LLVM_IR: self.llvm_ir, ASSEMBLY: self.assembly}[view]
