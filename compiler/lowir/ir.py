"""The low-level IR: a flat instruction list over byte buffers (storages), with a text dump.

A storage is one block of memory; several values may live in it: a view (Reshape) shares its
input's storage, an in-place element-wise op writes over its input, a Concat input is a slice
of its output's storage, a fused residual Add writes its Conv's result over the residual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

IN, OUT, INOUT = "in", "out", "inout"


class Fusion(Enum):
    """A registered fused operator: one instruction that runs several graph nodes.

    Code generation dispatches on it; the instruction's `op` is only its printed label.
    """

    # A Conv / FullyConnected (or QLinearConv) and the Add of its result and a residual: the
    # sum is made in the producer's store, over the residual when it dies there.
    RESIDUAL_ADD = "residual_add"
    # A residual block's two int8 convolutions and its Add, row by row through a window.
    CONV_PAIR = "conv_pair"
    # A run of row-wise layers, row by row through windows (`compiler.lowir.rows`).
    ROW_CHAIN = "row_chain"


def pair_window(middle: str) -> str:
    """The name of a pair's window storage (and value), after its middle tensor's."""
    return f"{middle}.rows"


def overlapped_span(size_out: int, size_in: int, lag: int, lead: int) -> int:
    """The fewest bytes a streaming output and its input span together.

    Rows upwards, the output starts at least `lag` below the input; downwards, at least
    `lead` above it; apart, they span both sizes.
    """
    return min(max(size_out, lag + size_in), max(size_in, lead + size_out), size_out + size_in)


def sums_storage(value: str) -> str:
    """The name of a chain's int32 sums storage for a pooled `value`."""
    return f"{value}.sums"


@dataclass(frozen=True)
class Operand:
    """A byte range of one storage that an instruction reads (in), writes (out) or both.

    An `inout` operand reads `value` and overwrites the same bytes with `writes` (in place).
    """

    storage: str
    value: str
    offset: int
    size: int
    mode: str
    writes: str = ""


@dataclass
class Instr:
    """One instruction.

    Attributes:
        kind: `alloc` / `dealloc` (bound an activation's lifetime), `op` (runs a kernel; takes a
            schedule step), `view` (a Reshape or a Concat already done by placement: no code,
            no step).
        name: Node name for `op`/`view`, storage name for `alloc`/`dealloc`.
        op: The operator, or for a fused instruction its nodes' operators joined by `+`
            (a label to read: code generation looks at `fusion`).
        operands: Buffer operands (constants are not buffers: they live in flash).
        step: Schedule step of an `op`, else -1.
        nodes: Names of the graph nodes the instruction implements.
        fusion: The fused operator it runs, None for one node's own kernel.
    """

    kind: str
    name: str
    op: str = ""
    operands: tuple[Operand, ...] = ()
    step: int = -1
    nodes: tuple[str, ...] = ()
    fusion: Fusion | None = None


@dataclass
class Storage:
    """A block of memory: an activation of the arena, a graph input or a graph output."""

    name: str
    size: int
    kind: str  # "activation", "input" or "output"
    node: str = ""


@dataclass(frozen=True)
class Stream:
    """An op that writes its output row by row, each from a window of input rows.

    Its output may then overlap the input that dies there, as long as no row is written over
    input rows still to be read. Rows are counted over the whole tensor (batch times height).
    Bytes are relative to the starts of the two storages; `needed[r]` is the (first, last)
    input row that output row r reads, (rows, -1) when it reads none (all padding).

    Attributes:
        source: The input's storage (it dies at this op).
        in_offset: Where the input starts in its storage.
        in_row: Bytes of one input row.
        in_rows: Input rows.
        out_offset: Where the output starts in its storage.
        out_row: Bytes of one output row.
        needed: Per output row, the first and last input row it reads.
    """

    source: str
    in_offset: int
    in_row: int
    in_rows: int
    out_offset: int
    out_row: int
    needed: tuple[tuple[int, int], ...]

    def ascending_lag(self) -> int:
        """Least bytes the output's storage must start below the input's, rows run upwards.

        Every write up to output row r ends below the first input row that row r reads.
        """
        return max(self.out_offset + (r + 1) * self.out_row - self.in_offset
                   - min(first, self.in_rows) * self.in_row
                   for r, (first, _) in enumerate(self.needed))

    def descending_lead(self) -> int:
        """Least bytes the output's storage must start above the input's, rows run downwards.

        Every write from output row r on starts above the last input row that row r reads.
        """
        return max(self.in_offset + (last + 1) * self.in_row - self.out_offset
                   - r * self.out_row for r, (_, last) in enumerate(self.needed))


@dataclass
class LowIR:
    """A scheduled, lowered graph: instructions plus where each value lives.

    Attributes:
        instrs: Instructions in execution order.
        storages: Storage name -> storage.
        values: Value name -> (storage name, byte offset).
        steps: Number of `op` instructions.
        pinned: Storages holding a graph output (live to the end, even an input's).
        streams: Output storage -> how its op reads and writes rows (`Stream`), for ops whose
            output may overlap the input that dies there.
        sites: Lowering pass name -> one line per place it applied (`compiler.lowir.passes`).
        chains: Instruction name -> its row-streamed chain (`compiler.lowir.rows.RowChain`).
    """

    instrs: list[Instr] = field(default_factory=list)
    storages: dict[str, Storage] = field(default_factory=dict)
    values: dict[str, tuple[str, int]] = field(default_factory=dict)
    steps: int = 0
    pinned: set[str] = field(default_factory=set)
    streams: dict[str, Stream] = field(default_factory=dict)
    sites: dict[str, list[str]] = field(default_factory=dict)
    chains: dict[str, object] = field(default_factory=dict)

    def dump(self) -> str:
        """One line per instruction, e.g. `  3  Conv conv1: out t1[0:4096] <- in x[0:1024]`."""
        lines = []
        for s in self.storages.values():
            if s.kind != "activation":
                lines.append(f"{s.kind} {s.name} ({s.size} B)")
        for ins in self.instrs:
            if ins.kind in ("alloc", "dealloc"):
                size = self.storages[ins.name].size
                lines.append(f"     {ins.kind} {ins.name} ({size} B)")
                continue
            ops = ", ".join(f"{o.mode} {o.storage}[{o.offset}:{o.offset + o.size}]"
                            + (f" as {o.writes}" if o.writes else "") for o in ins.operands)
            step = f"{ins.step:3d}" if ins.step >= 0 else "  -"
            lines.append(f"{step}  {ins.op} {ins.name}: {ops}")
        return "\n".join(lines) + "\n"
