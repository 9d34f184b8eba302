"""Regions, alignment and the timeline data of a memory plan."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.memory import MCU_ALIGNMENT, PlanError, check_plan
from compiler.memory.report import check_memory, plan_memory
from compiler.memory.simulate import simulate
from tests.memory.graphs import residual_block, view_chain
from tests.passes.util import Builder


def test_regions_and_alignment():
    graph = view_chain()
    for alignment in (MCU_ALIGNMENT, 64):
        plan = plan_memory(graph, alignment)
        check_plan(plan.arena)
        simulate(plan)
        # Input x (64 B) and the output (128 B) each start on an aligned offset of the region.
        assert set(plan.mutable_offsets.values()) == {0, max(64, alignment)}
        assert plan.mutable == max(64, alignment) + max(128, alignment)
        assert plan.constant % alignment == 0 and plan.constant > 0
        assert all(o % alignment == 0 for o in plan.arena.offsets.values())


def test_io_in_arena_reuses_input_space():
    graph = residual_block()
    outside = plan_memory(graph, io_in_arena=False)
    inside = plan_memory(graph, io_in_arena=True)
    assert inside.mutable == 0 and outside.mutable == 2048
    # x dies at step 0 and the output is written last: both fit in the activations' space.
    assert inside.arena.size == outside.arena.size == 2048


def test_timeline_data():
    plan = plan_memory(residual_block(), io_in_arena=True)
    doc = plan.to_json()
    assert len(doc["live_bytes"]) == plan.lowir.steps
    assert max(doc["live_bytes"]) == doc["lower_bound"]
    for b in doc["buffers"]:
        assert 0 <= b["first"] <= b["last"] < plan.lowir.steps
        assert b["offset"] + b["size"] <= doc["activations"]


def test_simulation_catches_a_clobbering_plan():
    plan = plan_memory(residual_block(), io_in_arena=True)
    plan.arena.offsets = dict.fromkeys(plan.arena.offsets, 0)
    with pytest.raises(PlanError, match="overwrote"):
        simulate(plan)
    with pytest.raises(PlanError, match="overlap"):
        check_plan(plan.arena)


@pytest.mark.parametrize("io_in_arena", [False, True])
def test_degenerate_graphs(io_in_arena):
    """No nodes at all (the output is the input), a dead node, and a constant output."""
    b = Builder("empty")
    x = b.input("x", (1, 4))
    plan = plan_memory(b.build(x), io_in_arena=io_in_arena)
    simulate(plan)
    assert plan.lowir.steps == 0
    b = Builder("dead")
    x = b.input("x", (1, 4))
    b.node("Sigmoid", [x])
    graph = b.build(b.node("Relu", [x]), b.const(np.ones((1, 4), np.float32)))
    plan = plan_memory(graph, io_in_arena=io_in_arena)
    check_plan(plan.arena)
    simulate(plan)


def test_region_checker_rejects_overlapping_inputs_and_outputs():
    plan = plan_memory(view_chain(), 16)
    check_memory(plan)
    plan.mutable_offsets = dict.fromkeys(plan.mutable_offsets, 0)
    with pytest.raises(PlanError, match="overlap in the mutable region"):
        check_memory(plan)
