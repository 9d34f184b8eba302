"""Arena plans checked by a brute-force checker that shares no code with `check_plan`.

`check_plan` sweeps buffers by first step; a comparison off by one there (`>` for `>=`) would
let two buffers that share exactly one step overlap, and a checker cannot be trusted to test
itself. Here every pair is compared step by step, and plans with one shared step are built
on purpose.
"""

import random

import pytest

from compiler.memory import Buffer, PlanError, check_plan, plan_arena
from compiler.memory.plan import ArenaPlan


def brute_force_valid(buffers, offsets, size, alignment) -> bool:
    """True when no two buffers live at one common step share a byte (every pair, every step)."""
    for b in buffers:
        off = offsets[b.name]
        if off % alignment or off < 0 or off + b.size > size:
            return False
    for i, a in enumerate(buffers):
        steps_a = set(range(a.first, a.last + 1))
        bytes_a = range(offsets[a.name], offsets[a.name] + a.size)
        for b in buffers[i + 1:]:
            if not steps_a & set(range(b.first, b.last + 1)):
                continue
            lo = max(bytes_a.start, offsets[b.name])
            hi = min(bytes_a.stop, offsets[b.name] + b.size)
            if a.size and b.size and lo < hi:
                return False
    return True


def _random_buffers(rng: random.Random, count: int, steps: int) -> list[Buffer]:
    buffers = []
    for k in range(count):
        first = rng.randrange(steps)
        last = min(steps - 1, first + rng.randrange(4))
        buffers.append(Buffer(f"b{k}", rng.choice([16, 48, 64, 100, 256]), first, last))
    # Chains that share exactly one step: each starts at the step the previous one ends.
    for k in range(count // 3):
        start = rng.randrange(steps - 2)
        buffers.append(Buffer(f"touch{k}a", 64, start, start + 1))
        buffers.append(Buffer(f"touch{k}b", 64, start + 1, start + 2))
    return buffers


@pytest.mark.parametrize("seed", range(40))
def test_every_plan_passes_the_brute_force_check(seed):
    rng = random.Random(seed)
    buffers = _random_buffers(rng, rng.randrange(3, 25), rng.randrange(4, 12))
    for alignment in (1, 16, 64):
        plan = plan_arena(buffers, alignment, climb_iterations=40)
        for offsets in plan.strategy_offsets.values():
            size = max((offsets[b.name] + -(-b.size // alignment) * alignment
                        for b in buffers), default=0)
            assert brute_force_valid(buffers, offsets, size, alignment)
        assert brute_force_valid(buffers, plan.offsets, plan.size, alignment)


def _plan(buffers, offsets, size=256):
    return ArenaPlan(list(buffers), offsets, size, 16)


def test_one_shared_step_at_one_offset_is_refused():
    a, b = Buffer("a", 64, 0, 3), Buffer("b", 64, 3, 5)  # both live at step 3
    bad = _plan([a, b], {"a": 0, "b": 0})
    assert not brute_force_valid(bad.buffers, bad.offsets, bad.size, 16)
    with pytest.raises(PlanError, match="live together"):
        check_plan(bad)
    # The mirror order and a one-byte overlap are refused too.
    with pytest.raises(PlanError):
        check_plan(_plan([b, a], {"a": 0, "b": 0}))
    with pytest.raises(PlanError):
        check_plan(_plan([a, b], {"a": 0, "b": 48}))


def test_lifetimes_that_only_touch_may_share_memory():
    a, b = Buffer("a", 64, 0, 3), Buffer("b", 64, 4, 5)  # a dies before b is written
    good = _plan([a, b], {"a": 0, "b": 0})
    assert brute_force_valid(good.buffers, good.offsets, good.size, 16)
    check_plan(good)


@pytest.mark.parametrize("seed", range(30))
def test_check_plan_agrees_with_brute_force_on_random_placements(seed):
    rng = random.Random(1000 + seed)
    buffers = _random_buffers(rng, rng.randrange(2, 10), 6)
    offsets = {b.name: 16 * rng.randrange(6) for b in buffers}
    plan = _plan(buffers, offsets, size=16 * 6 + 256)
    valid = brute_force_valid(buffers, offsets, plan.size, 16)
    try:
        check_plan(plan)
        accepted = True
    except PlanError:
        accepted = False
    assert accepted == valid
