"""Buffers with lifetimes over schedule steps, live bytes per step and the arena lower bound."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Buffer:
    """One block of the arena, live from step `first` to step `last` (both included).

    Attributes:
        name: Unique name (the storage of one or more values that share memory in place).
        size: Bytes it needs, unaligned.
        first: Step that first writes it.
        last: Step that last reads it.
        node: The node whose output it holds (for reports and the timeline).
    """

    name: str
    size: int
    first: int
    last: int
    node: str = ""

    def overlaps_in_time(self, other: Buffer) -> bool:
        """True when both are live at some common step, so they may not share bytes."""
        return self.first <= other.last and other.first <= self.last


def align_up(size: int, alignment: int) -> int:
    """`size` rounded up to a multiple of `alignment`."""
    return -(-size // alignment) * alignment


def live_bytes(buffers: Iterable[Buffer], steps: int | None = None,
               alignment: int = 1) -> list[int]:
    """Bytes live at each step (aligned sizes), the curve a timeline view draws."""
    buffers = list(buffers)
    if steps is None:
        steps = max((b.last + 1 for b in buffers), default=0)
    delta = [0] * (steps + 1)
    for b in buffers:
        size = align_up(b.size, alignment)
        delta[max(b.first, 0)] += size
        delta[min(b.last, steps - 1) + 1] -= size
    curve, running = [], 0
    for step in range(steps):
        running += delta[step]
        curve.append(running)
    return curve


def lower_bound(buffers: Sequence[Buffer], alignment: int = 1) -> int:
    """The largest sum of simultaneously live (aligned) sizes: no arena can be smaller.

    Interval graphs are perfect, so for unit-size buffers this bound is reached; with sizes it
    is a bound that good packings come close to.
    """
    return max(live_bytes(buffers, alignment=alignment), default=0)
