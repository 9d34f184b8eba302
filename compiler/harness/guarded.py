"""A guarded host build: every buffer in a region of its own, fenced by canary bytes.

A kernel that writes one row past its buffer (a window, a ring of rows, an output) usually
lands in bytes the packed plan gives to a dead buffer, to alignment padding or past the arena:
the outputs stay right and the host tests pass, until a board happens to crash. This build
plans memory differently for tests and debugging: no two buffers share bytes (no reuse, no
streaming overlap) and each one, in the arena and in the mutable region alike, sits between
two guard bands of at least one row. `GuardedNet` fills both regions with a canary pattern
before each run, and after it names the buffer whose guard changed, the byte range, and the
instructions that write that buffer. The default build is untouched: this module only derives
another plan from the driver's and compiles that.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from compiler.codegen.build import CompiledNet, build_net
from compiler.codegen.host import HostNet
from compiler.codegen.targets import Target
from compiler.driver import Options, compilation
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph
from compiler.lowir.ir import INOUT, OUT
from compiler.memory.buffers import align_up
from compiler.memory.plan import ArenaPlan
from compiler.memory.report import MemoryPlan, check_memory
from compiler.passes.pipeline import Pipeline

DEFAULT_GUARD = 64  # bytes, the least guard; a row of the widest tensor when that is more
_CANARY_SEED = 0x6B696C6E  # fixed: a failing run repeats exactly


class GuardError(KilnError):
    """A run changed bytes outside every buffer (a guard band) or wrote over a graph input."""


@dataclass(frozen=True)
class Guard:
    """A band of canary bytes beside one buffer, which no kernel may change.

    Attributes:
        region: "activations" or "mutable".
        storage: The buffer it fences.
        side: "before" or "after" the buffer.
        start, stop: Its bytes in the region, [start, stop).
    """

    region: str
    storage: str
    side: str
    start: int
    stop: int


def guard_size(graph: Graph, alignment: int, guard_bytes: int = DEFAULT_GUARD) -> int:
    """Bytes of each guard: `guard_bytes`, or one row of the widest tensor when that is more.

    A row is what row-wise kernels (a pair's window, a streamed convolution) step by, so an
    off-by-one row lands wholly in the guard. Aligned, so every buffer keeps its alignment.
    """
    rows = [v.type.nbytes // max(v.type.shape[0] * v.type.shape[1], 1)
            for v in graph.values() if not isinstance(v, Constant) and len(v.type.shape) >= 3]
    return align_up(max([guard_bytes, 1, *rows]), alignment)


def guard_plan(plan: MemoryPlan, guard: int) -> tuple[MemoryPlan, tuple[Guard, ...]]:
    """`plan` with every buffer placed apart between two `guard`-byte bands, and the bands.

    The schedule and low-level IR are `plan`'s, so the code is the same but for its offsets
    (and the aliasing they allow: no output overlaps the input it streams from). `guard` is
    a multiple of the plan's alignment (`guard_size` makes one). The after band starts just
    past the buffer's last byte, so it takes the alignment padding too.
    """
    guards: list[Guard] = []

    def lay_out(region: str, buffers: list[tuple[str, int]]) -> tuple[dict[str, int], int]:
        offsets, at = {}, 0
        for name, size in buffers:
            offsets[name] = at + guard
            end = at + guard + align_up(size, plan.alignment) + guard
            guards.append(Guard(region, name, "before", at, at + guard))
            guards.append(Guard(region, name, "after", at + guard + size, end))
            at = end
        return offsets, at

    # Ordered by first step, so a buffer's neighbours are those written just before and after.
    buffers = sorted(plan.arena.buffers, key=lambda b: (b.first, b.name))
    offsets, size = lay_out("activations", [(b.name, b.size) for b in buffers])
    arena = ArenaPlan(list(plan.arena.buffers), offsets, size, plan.alignment, "guarded",
                      {"guarded": size}, plan.arena.lower_bound, {"guarded": offsets})
    storages = plan.lowir.storages
    mutable_offsets, mutable = lay_out("mutable", [(name, storages[name].size)
                                                   for name in plan.mutable_offsets])
    guarded = replace(plan, arena=arena, mutable=mutable, mutable_offsets=mutable_offsets)
    check_memory(guarded)
    return guarded, tuple(guards)


class GuardedNet(HostNet):
    """A host network run with canary-filled regions, its guards checked after every call.

    `set_inputs` fills both regions (guards, buffers and padding) with the canary pattern
    before it copies the inputs in, so a kernel reading bytes nobody wrote also gives other
    outputs than the plain build; `call` raises GuardError when a guard or an input changed.
    The entry point runs every step in one call, so the check follows the whole run; no
    buffer is reused, so a changed band still names the buffer, and the error names the
    instructions that write it.

    Attributes:
        guards: The guard bands of both regions.
    """

    def __init__(self, net: CompiledNet, guards: tuple[Guard, ...], cc: str | None = None):
        super().__init__(net, cc)
        self.guards = guards
        rng = np.random.default_rng(_CANARY_SEED)
        self._canary = {r: rng.integers(0, 256, self.regions[r].size, np.uint8)
                        for r in ("mutable", "activations")}
        self._fed: list[tuple[str, np.ndarray, np.ndarray]] = []

    @classmethod
    def from_bundle(cls, folder, name=None, cc=None) -> GuardedNet:
        """Refused: a bundle's files were planned without guards."""
        raise KilnError("a guarded network is built by compile_guarded, not read from a bundle")

    def set_inputs(self, feeds: dict[str, np.ndarray]) -> None:
        """Fill both regions with the canary, then copy the inputs into their places."""
        for region, pattern in self._canary.items():
            self.regions[region][:] = pattern
        super().set_inputs(feeds)
        self._fed = [(name, view, view.copy()) for name, _, view in self._in_views]

    def call(self) -> None:
        """Run the entry point once, then check every guard and input (GuardError if not)."""
        super().call()
        self.check()

    def check(self) -> None:
        """Raise GuardError naming every buffer whose guard changed, and every input written."""
        problems = []
        for g in self.guards:
            got = self.regions[g.region][g.start:g.stop]
            changed = np.flatnonzero(got != self._canary[g.region][g.start:g.stop])
            if changed.size:
                first, last = g.start + int(changed[0]), g.start + int(changed[-1])
                count = f"{changed.size} byte" + ("s" if changed.size > 1 else "")
                problems.append(f"the guard {g.side} {g.storage} changed: {count} in "
                                f"{g.region} bytes {first}..{last} (guard {g.start}.."
                                f"{g.stop - 1}); {g.storage} is written by "
                                f"{self._writers(g.storage)}")
        for name, view, fed in self._fed:
            if not np.array_equal(view.view(np.uint8), fed.view(np.uint8)):
                problems.append(f"the input {name} was written over")
        if problems:
            raise GuardError(f"{self.name}: " + "; ".join(problems))

    def _writers(self, storage: str) -> str:
        """The instructions that write `storage`, the suspects of an overrun next to it."""
        names = [f"{ins.op} {ins.name}" for ins in self.net.plan.lowir.instrs
                 if ins.kind == "op" and any(o.storage == storage and o.mode in (OUT, INOUT)
                                             for o in ins.operands)]
        return " or ".join(names) or "a kernel"


def compile_guarded(graph: Graph, target: Target | str = "host", name: str = "net",
                    guard_bytes: int = DEFAULT_GUARD, io_in_arena: bool = False,
                    fast_compile: bool = False,
                    disabled_lowering: frozenset[str] = frozenset()) -> GuardedNet:
    """`graph` (already through a pipeline, as for `compile_graph`) built guarded and loaded.

    The schedule, lowering and kernels are those of the plain build for these options; only
    the offsets differ (`guard_plan`), with guards of at least `guard_bytes`.
    """
    target_name = target if isinstance(target, str) else target.name
    options = Options(target_name, name, io_in_arena=io_in_arena, fast_compile=fast_compile,
                      disabled_lowering=frozenset(disabled_lowering)).check()
    known = compilation(graph, Pipeline([]))
    plan = known.plan(options)
    size = guard_size(known.prepared, plan.alignment, guard_bytes)
    guarded, guards = guard_plan(plan, size)
    machine = options.resolved_target() if isinstance(target, str) else target
    net = build_net(known.prepared, guarded, machine, name, fast_compile=fast_compile)
    return GuardedNet(net, guards)
