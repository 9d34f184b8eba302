"""Arena packing on abstract buffers: strategies, lower bound, the checker, random interval sets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.memory import Buffer, PlanError, check_plan, live_bytes, lower_bound, plan_arena
from compiler.memory.plan import ArenaPlan


def test_lower_bound_counts_simultaneously_live_bytes():
    bufs = [Buffer("a", 100, 0, 1), Buffer("b", 50, 1, 2), Buffer("c", 70, 2, 3)]
    assert live_bytes(bufs) == [100, 150, 120, 70]
    assert lower_bound(bufs) == 150
    assert lower_bound(bufs, alignment=64) == 128 + 64


def test_chain_reuses_memory_and_reaches_bound():
    bufs = [Buffer(f"t{i}", 1000, i, i + 1) for i in range(6)]
    plan = plan_arena(bufs, alignment=16)
    assert plan.size == plan.lower_bound == 2016
    assert plan.efficiency == 1.0
    assert set(plan.strategies) >= {"greedy_by_size", "glow_size", "glow_lifetime",
                                    "glow_request", "hill_climb"}


def test_checker_rejects_overlap_misalignment_and_overflow():
    bufs = [Buffer("a", 64, 0, 2), Buffer("b", 64, 1, 3)]
    with pytest.raises(PlanError, match="overlap"):
        check_plan(ArenaPlan(bufs, {"a": 0, "b": 0}, 128, 64))
    with pytest.raises(PlanError, match="aligned"):
        check_plan(ArenaPlan(bufs, {"a": 0, "b": 70}, 256, 64))
    with pytest.raises(PlanError, match="past the arena"):
        check_plan(ArenaPlan(bufs, {"a": 0, "b": 64}, 100, 64))
    check_plan(ArenaPlan(bufs, {"a": 0, "b": 64}, 128, 64))


def test_dead_buffers_may_share_bytes():
    bufs = [Buffer("a", 64, 0, 1), Buffer("b", 64, 2, 3)]
    check_plan(ArenaPlan(bufs, {"a": 0, "b": 0}, 64, 64))


intervals = st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 30), st.integers(0, 10)),
                     min_size=0, max_size=40)


@settings(max_examples=150, deadline=None)
@given(intervals, st.sampled_from([1, 16, 64]))
def test_random_interval_sets_give_valid_plans(items, alignment):
    bufs = [Buffer(f"b{i}", size, first, first + length)
            for i, (size, first, length) in enumerate(items)]
    plan = plan_arena(bufs, alignment=alignment, climb_iterations=30)
    check_plan(plan)
    assert plan.size >= plan.lower_bound == lower_bound(bufs, alignment)
    assert plan.size == min(plan.strategies.values())
