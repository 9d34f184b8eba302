"""Arena plans checked by a brute-force checker that shares no code with `check_plan`.

`check_plan` sweeps buffers by first step; a comparison off by one there (`>` for `>=`) would
let two buffers that share exactly one step overlap, and a checker cannot be trusted to test
itself. Here every pair is compared step by step, and plans with one shared step are built
on purpose. A streaming output and its source are judged by running a kernel byte by byte
(rows upwards, then downwards) at the step the source dies, not by `check_plan`'s interval.
"""

import random

import pytest

from compiler.memory import Buffer, PlanError, check_plan, plan_arena
from compiler.memory.plan import ArenaPlan


def brute_force_valid(buffers, offsets, size, alignment) -> bool:
    """True when no two buffers live at one common step share a byte (every pair, every step).

    At the step where a streaming output is first written and its source last read, the two
    may share bytes when a kernel writing the output upwards or downwards never overwrites a
    source byte it has still to read.
    """
    for b in buffers:
        off = offsets[b.name]
        if off % alignment or off < 0 or off + b.size > size:
            return False
    for i, a in enumerate(buffers):
        steps_a = set(range(a.first, a.last + 1))
        bytes_a = range(offsets[a.name], offsets[a.name] + a.size)
        for b in buffers[i + 1:]:
            lo = max(bytes_a.start, offsets[b.name])
            hi = min(bytes_a.stop, offsets[b.name] + b.size)
            disjoint = not (a.size and b.size and lo < hi)
            for step in sorted(steps_a & set(range(b.first, b.last + 1))):
                pair = _streaming_at(a, b, step)
                if pair is None and not disjoint:
                    return False
                if pair is not None and not _kernel_runs_clean(*pair, offsets):
                    return False
    return True


def _streaming_at(a, b, step):
    """(output, source) when one streams from the other at `step`, the source's last."""
    for out, source in ((a, b), (b, a)):
        if out.stream and out.stream[0] == source.name and step == out.first == source.last:
            return out, source
    return None


def _kernel_runs_clean(out, source, offsets) -> bool:
    """Write the output byte by byte, upwards then downwards: does either order spare every
    source byte it still has to read?

    The model kernel's reads trail its writes by the stream's lag (upwards: when it writes
    output byte k, source bytes from k + 1 - lag on are still to be read) or lead them by its
    lead (downwards: source bytes below k + lead are still to be read).
    """
    _, lag, lead = out.stream
    shift = offsets[out.name] - offsets[source.name]  # output byte k is source byte k + shift

    def still_to_read(k: int, downwards: bool) -> range:
        if downwards:
            return range(0, min(source.size, k + lead))
        return range(max(0, k + 1 - lag), source.size)

    for downwards in (False, True):
        order = range(out.size - 1, -1, -1) if downwards else range(out.size)
        if all(k + shift not in still_to_read(k, downwards) for k in order):
            return True
    return False


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


def test_buffers_that_only_touch_in_memory_are_accepted_in_either_order():
    a, b = Buffer("a", 48, 0, 3), Buffer("b", 64, 1, 5)
    for offsets in ({"a": 0, "b": 48}, {"a": 64, "b": 0}):  # b just above a, then just below
        assert brute_force_valid([a, b], offsets, 256, 16)
        check_plan(_plan([a, b], offsets))
        check_plan(_plan([b, a], offsets))
    for offsets in ({"a": 16, "b": 48}, {"a": 48, "b": 0}):  # one alignment step too close
        assert not brute_force_valid([a, b], offsets, 256, 16)
        with pytest.raises(PlanError):
            check_plan(_plan([b, a], offsets))


def _lag_or_lead(rng: random.Random, size: int) -> int:
    """At most the buffer's size, as for a lowered stream; often a multiple of 16, so aligned
    placements reach the bound exactly."""
    if size >= 16 and rng.random() < 0.5:
        return 16 * rng.randint(1, size // 16)
    return rng.randint(1, size)


def _streaming_pair(rng: random.Random, k: int, step: int, outlives: bool = False,
                    source: Buffer | None = None) -> tuple[Buffer, Buffer]:
    """An output streaming, with a lag unlike its lead, from `source` or a new source dying
    at `step` (or, when `outlives`, one step later)."""
    if source is None:
        source = Buffer(f"src{k}", rng.choice([32, 48, 64, 100]),
                        rng.randint(max(0, step - 2), step), step + int(outlives))
    out_size = rng.choice([32, 48, 64, 100])
    lag = lead = 0
    while lag == lead:
        lag, lead = _lag_or_lead(rng, out_size), _lag_or_lead(rng, source.size)
    out = Buffer(f"out{k}", out_size, step, step + rng.randrange(3),
                 stream=(source.name, lag, lead))
    return out, source


def _stream_placement(rng: random.Random, alignment: int):
    """One or two streaming pairs and a few plain buffers, the outputs near their sources."""
    buffers, offsets = [], {}
    for k in range(rng.randint(1, 2)):
        out, source = _streaming_pair(rng, k, rng.randrange(1, 4), rng.random() < 0.15)
        _, lag, lead = out.stream
        offsets[source.name] = 16 * rng.randrange(8, 16)
        if alignment == 16:
            apart = 16 * rng.randint(-7, 7)
        else:
            apart = rng.choice([-lag, 1 - lag, lead - 1, lead, rng.randint(-120, 120)])
        offsets[out.name] = offsets[source.name] + apart
        buffers += [out, source]
    for k in range(rng.randrange(3)):
        first = rng.randrange(5)
        buffers.append(Buffer(f"plain{k}", rng.choice([16, 48, 64]), first,
                              first + rng.randrange(2)))
        offsets[f"plain{k}"] = alignment * rng.randrange(0, 512 // alignment)
    rng.shuffle(buffers)
    return buffers, offsets


def test_check_plan_agrees_with_brute_force_on_streaming_placements():
    rng = random.Random(7)
    seen = {"accepted": 0, "refused": 0, "below": 0, "above": 0}
    for _ in range(1500):
        alignment = rng.choice([1, 16])
        buffers, offsets = _stream_placement(rng, alignment)
        plan = ArenaPlan(buffers, offsets, 1024, alignment)
        valid = brute_force_valid(buffers, offsets, plan.size, alignment)
        try:
            check_plan(plan)
            accepted = True
        except PlanError:
            accepted = False
        assert accepted == valid, (buffers, offsets)
        seen["accepted" if accepted else "refused"] += 1
        for out in buffers:
            if accepted and out.stream and _overlap(out, offsets, buffers):
                seen["above" if offsets[out.name] > offsets[out.stream[0]] else "below"] += 1
    # The placements exercise the rule: both verdicts, and overlaps accepted both ways.
    assert min(seen.values()) >= 50, seen


def _overlap(out, offsets, buffers) -> bool:
    """True when `out` shares bytes with the source it streams from."""
    source = next(b for b in buffers if b.name == out.stream[0])
    return (offsets[out.name] < offsets[source.name] + source.size
            and offsets[source.name] < offsets[out.name] + out.size)


def test_plans_with_streaming_chains_pass_the_brute_force_check():
    seen = {"below": 0, "above": 0}
    for seed in range(12):
        rng = random.Random(2000 + seed)
        buffers = _random_buffers(rng, rng.randrange(3, 12), rng.randrange(5, 10))
        # Chains: each layer streams from the one before, which dies where it starts.
        for chain in range(2):
            step = rng.randrange(3)
            out, source = _streaming_pair(rng, 10 * chain, step)
            layers = [source, out]
            for k in range(1, rng.randint(2, 4)):
                layers.append(_streaming_pair(rng, 10 * chain + k, layers[-1].last,
                                              source=layers[-1])[0])
            buffers += layers
        for alignment in (1, 16, 64):
            plan = plan_arena(buffers, alignment, climb_iterations=40)
            for offsets in plan.strategy_offsets.values():
                size = max(offsets[b.name] + -(-b.size // alignment) * alignment
                           for b in buffers)
                assert brute_force_valid(buffers, offsets, size, alignment)
            assert brute_force_valid(buffers, plan.offsets, plan.size, alignment)
            for out in buffers:
                if out.stream and _overlap(out, plan.offsets, buffers):
                    above = plan.offsets[out.name] > plan.offsets[out.stream[0]]
                    seen["above" if above else "below"] += 1
    assert min(seen.values()) > 0, seen
