"""Packing strategies: place buffers with known lifetimes at offsets of one arena.

Every strategy is an ordering of the buffers followed by first-fit placement: each buffer goes
at the lowest offset where it overlaps no already placed buffer that is live at the same time.
TFLite Micro's greedy planner is largest-first; Glow tries size, lifetime length and request
order; a seeded hill climb then swaps buffers in the best order while the arena shrinks.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from compiler.memory.buffers import Buffer, align_up

Offsets = dict[str, int]


def first_fit(order: Sequence[Buffer], alignment: int) -> Offsets:
    """Offsets for buffers placed in `order`, each at the lowest offset free of clashes.

    Placed buffers are indexed by the steps they are live at, so finding the ones that clash
    with a new buffer costs its lifetime times the buffers live meanwhile, not the whole list.
    Each clash forbids an interval of offsets (`Buffer.forbidden`: the other's bytes, or less
    for a streaming pair); the lowest aligned offset outside all of them is taken.
    """
    at_step: dict[int, list[int]] = {}
    placed: list[tuple[Buffer, int]] = []
    offsets: Offsets = {}
    for buf in order:
        clashing = {k for t in range(buf.first, buf.last + 1) for k in at_step.get(t, ())}
        offset = 0
        for low, high in sorted(buf.forbidden(*placed[k], alignment) for k in clashing):
            if offset <= low:
                break
            offset = max(offset, align_up(high, alignment))
        offsets[buf.name] = offset
        for t in range(buf.first, buf.last + 1):
            at_step.setdefault(t, []).append(len(placed))
        placed.append((buf, offset))
    return offsets


def arena_size(buffers: Sequence[Buffer], offsets: Offsets, alignment: int) -> int:
    """Bytes the arena needs for these offsets (end of the highest buffer)."""
    return max((offsets[b.name] + align_up(b.size, alignment) for b in buffers), default=0)


def _ordered(key: Callable[[Buffer], tuple]) -> Callable[[Sequence[Buffer], int], Offsets]:
    def strategy(buffers: Sequence[Buffer], alignment: int) -> Offsets:
        return first_fit(sorted(buffers, key=key), alignment)
    return strategy


# TFLite Micro's GreedyMemoryPlanner: largest first, ties by first use.
greedy_by_size = _ordered(lambda b: (-b.size, b.first, b.name))
# Glow's three orderings.
glow_size = _ordered(lambda b: (-b.size, -(b.last - b.first), b.name))
glow_lifetime = _ordered(lambda b: (-(b.last - b.first), -b.size, b.name))
glow_request = _ordered(lambda b: (b.first, -b.size, b.name))


def hill_climb(buffers: Sequence[Buffer], alignment: int, start: Sequence[Buffer] | None = None,
               iterations: int = 300, seed: int = 0) -> Offsets:
    """Improve an ordering by random swaps kept when the arena does not grow (TVM's idea).

    Seeded, so the same model always gets the same plan.
    """
    order = list(start if start is not None else sorted(buffers, key=lambda b: (-b.size, b.first)))
    best = first_fit(order, alignment)
    best_size = arena_size(order, best, alignment)
    if len(order) < 2:
        return best
    rng = random.Random(seed)
    for _ in range(iterations):
        i, j = rng.sample(range(len(order)), 2)
        order[i], order[j] = order[j], order[i]
        offsets = first_fit(order, alignment)
        size = arena_size(order, offsets, alignment)
        if size <= best_size:
            best, best_size = offsets, size
        else:
            order[i], order[j] = order[j], order[i]
    return best


STRATEGIES: dict[str, Callable[[Sequence[Buffer], int], Offsets]] = {
    "greedy_by_size": greedy_by_size,
    "glow_size": glow_size,
    "glow_lifetime": glow_lifetime,
    "glow_request": glow_request,
}
