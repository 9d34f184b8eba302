"""Buffers with lifetimes over schedule steps, live bytes per step and the arena lower bound."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compiler.lowir.ir import overlapped_span


@dataclass(frozen=True)
class Buffer:
    """One block of the arena, live from step `first` to step `last` (both included).

    Attributes:
        name: Unique name (the storage of one or more values that share memory in place).
        size: Bytes it needs, unaligned.
        first: Step that first writes it.
        last: Step that last reads it.
        node: The node whose output it holds (for reports and the timeline).
        stream: (source, lag, lead) when the op that first writes this buffer streams rows from
            `source`, which dies there: this buffer may overlap it when its offset is at least
            `lag` bytes below the source's (rows run upwards) or `lead` bytes above (rows run
            downwards).
    """

    name: str
    size: int
    first: int
    last: int
    node: str = ""
    stream: tuple[str, int, int] | None = None

    def forbidden(self, other: Buffer, other_offset: int, alignment: int) -> tuple[int, int]:
        """The open interval of offsets this buffer may not take with `other` at its offset.

        Both are live at a common step; unless one streams from the other, they may not share
        a byte.
        """
        if self.stream is not None and self.stream[0] == other.name:
            _, lag, lead = self.stream
            return other_offset - lag, other_offset + lead
        if other.stream is not None and other.stream[0] == self.name:
            _, lag, lead = other.stream
            return other_offset - lead, other_offset + lag
        return (other_offset - align_up(self.size, alignment),
                other_offset + align_up(other.size, alignment))

    def overlaps_in_time(self, other: Buffer) -> bool:
        """True when both are live at some common step, so they may not share bytes."""
        return self.first <= other.last and other.first <= self.last


def align_up(size: int, alignment: int) -> int:
    """`size` rounded up to a multiple of `alignment`."""
    return -(-size // alignment) * alignment


def live_bytes(buffers: Iterable[Buffer], steps: int | None = None,
               alignment: int = 1) -> list[int]:
    """Bytes live at each step (aligned sizes), the curve a timeline view draws.

    At the step where a buffer streams from its source, the pair counts for the least bytes
    their union can take (`stream_union`).
    """
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
    by_name = {b.name: b for b in buffers}
    for b in buffers:
        source = by_name.get(b.stream[0]) if b.stream is not None else None
        if source is not None and source.last == b.first and 0 <= b.first < steps:
            both = align_up(b.size, alignment) + align_up(source.size, alignment)
            curve[b.first] -= both - stream_union(b, source, alignment)
    return curve


def stream_union(out: Buffer, source: Buffer, alignment: int = 1) -> int:
    """The fewest bytes a streaming output and its source can span together.

    Rows upwards, the output starts at least `lag` below the source; downwards, at least
    `lead` above it; apart, they span both sizes.
    """
    _, lag, lead = out.stream
    return overlapped_span(align_up(out.size, alignment), align_up(source.size, alignment),
                           align_up(lag, alignment), align_up(lead, alignment))


def lower_bound(buffers: Sequence[Buffer], alignment: int = 1) -> int:
    """The largest sum of simultaneously live (aligned) sizes: no arena can be smaller.

    Interval graphs are perfect, so for unit-size buffers this bound is reached; with sizes it
    is a bound that good packings come close to.
    """
    return max(live_bytes(buffers, alignment=alignment), default=0)
