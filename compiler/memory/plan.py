"""An arena plan: every strategy tried, the smallest kept, and a checker that proves it valid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from compiler.errors import KilnError
from compiler.memory.buffers import Buffer, align_up, live_bytes, lower_bound
from compiler.memory.strategies import STRATEGIES, arena_size, first_fit, hill_climb

# Region alignment: a cache line on hosted CPUs; microcontrollers need only 16 (LDRD/VLDM, MVE
# vectors). `Target.alignment` picks one of them; it is the one truth the CLI and GUI default to.
HOST_ALIGNMENT = 64
MCU_ALIGNMENT = 16


class PlanError(KilnError):
    """A memory plan that breaks a rule (overlap, out of its region, misaligned)."""


@dataclass
class ArenaPlan:
    """Offsets of buffers in one arena, with the size each strategy reached.

    Attributes:
        buffers: The buffers placed.
        offsets: Buffer name -> byte offset.
        size: Arena bytes (end of the highest buffer).
        alignment: Every offset and size is a multiple of it.
        strategy: The strategy whose plan was kept.
        strategies: Strategy name -> arena bytes it reached.
        lower_bound: Largest sum of simultaneously live aligned sizes.
        strategy_offsets: Strategy name -> its offsets (the kept one's are `offsets`), so a
            viewer can show any strategy's packing without packing again.
    """

    buffers: list[Buffer]
    offsets: dict[str, int]
    size: int
    alignment: int
    strategy: str = ""
    strategies: dict[str, int] = field(default_factory=dict)
    lower_bound: int = 0
    strategy_offsets: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def efficiency(self) -> float:
        """lower_bound / size (1.0 for an empty arena)."""
        return self.lower_bound / self.size if self.size else 1.0

    def live_bytes(self) -> list[int]:
        """Aligned bytes live at each step."""
        return live_bytes(self.buffers, alignment=self.alignment)


def plan_arena(buffers: Sequence[Buffer], alignment: int = HOST_ALIGNMENT,
               climb_iterations: int = 300) -> ArenaPlan:
    """Pack `buffers` with every strategy and keep the smallest arena (checked before return)."""
    buffers = list(buffers)
    if len({b.name for b in buffers}) != len(buffers):
        raise PlanError("buffer names must be unique")
    results: dict[str, dict[str, int]] = {}
    sizes: dict[str, int] = {}
    for name, strategy in STRATEGIES.items():
        results[name] = strategy(buffers, alignment)
        sizes[name] = arena_size(buffers, results[name], alignment)
    best_name = min(sizes, key=lambda n: (sizes[n], n))
    bound = lower_bound(buffers, alignment)
    if sizes[best_name] > bound:
        # Start the climb from the best ordering found so far.
        offsets = results[best_name]
        start = sorted(buffers, key=lambda b: (offsets[b.name], b.first))
        results["hill_climb"] = hill_climb(buffers, alignment, start, climb_iterations)
    else:
        results["hill_climb"] = results[best_name]
    sizes["hill_climb"] = arena_size(buffers, results["hill_climb"], alignment)
    best_name = min(sizes, key=lambda n: (sizes[n], n))
    plan = ArenaPlan(buffers, results[best_name], sizes[best_name], alignment, best_name, sizes,
                     bound, results)
    check_plan(plan)
    return plan


def check_plan(plan: ArenaPlan) -> None:
    """Raise PlanError unless the plan is valid.

    Valid means: every buffer has an aligned offset and lies inside the arena, and no two
    buffers live at a common step share a byte, but for a streaming output and its source,
    which may overlap when the output sits at least its lag below or its lead above. That
    holds only when the source dies at the step that first writes the output (their one
    common step): a source still read later would find its rows overwritten.
    """
    a = plan.alignment
    for b in plan.buffers:
        if b.name not in plan.offsets:
            raise PlanError(f"buffer {b.name} has no offset")
        off = plan.offsets[b.name]
        if off < 0 or off % a:
            raise PlanError(f"buffer {b.name} at offset {off} is not {a}-byte aligned")
        if off + align_up(b.size, a) > plan.size:
            raise PlanError(f"buffer {b.name} ends past the arena ({plan.size} bytes)")
        if b.first > b.last:
            raise PlanError(f"buffer {b.name} ends (step {b.last}) before it starts ({b.first})")
    # Sweep by first step: compare each buffer only with those still live when it starts.
    ordered = sorted(plan.buffers, key=lambda b: b.first)
    for i, b in enumerate(ordered):
        lo = plan.offsets[b.name]
        hi = lo + b.size
        for k in range(i + 1, len(ordered)):  # indices: a slice would copy the tail
            other = ordered[k]
            if other.first > b.last:
                break
            olo = plan.offsets[other.name]
            pair = _stream_pair(b, other)
            if pair is not None:
                out, source = pair
                _, lag, lead = out.stream
                apart = plan.offsets[out.name] - plan.offsets[source.name]
                if -lag < apart < lead:
                    raise PlanError(f"buffer {out.name} streams from {source.name} but sits "
                                    f"{apart} bytes from it, inside ({-lag}, {lead})")
                continue
            if b.size and other.size and lo < olo + other.size and olo < hi:
                raise PlanError(f"buffers {b.name} and {other.name} are live together "
                                f"(steps {max(b.first, other.first)}-"
                                f"{min(b.last, other.last)}) and overlap in memory")
    if plan.size < lower_bound(plan.buffers, a):
        raise PlanError("the arena is smaller than its lower bound: the checker is wrong")


def _stream_pair(a: Buffer, b: Buffer) -> tuple[Buffer, Buffer] | None:
    """(output, source) when one streams rows from the other, which dies where it starts.

    Otherwise None: the two are an ordinary pair and may not share a byte.
    """
    for out, source in ((a, b), (b, a)):
        if (out.stream is not None and out.stream[0] == source.name
                and source.last == out.first):
            return out, source
    return None


__all__ = ["ArenaPlan", "PlanError", "plan_arena", "check_plan", "first_fit"]
