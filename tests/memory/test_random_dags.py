"""Property test: random DAGs get a verified low-level IR and a plan the checkers accept."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.lowir import lower
from compiler.memory import lower_bound
from compiler.memory.lifetimes import lifetimes
from compiler.memory.report import check_memory, plan_memory
from compiler.memory.simulate import simulate
from compiler.passes import run_pipeline
from tests.memory.graphs import random_dag


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 99), min_size=1, max_size=14), st.integers(0, 1000),
       st.booleans(), st.sampled_from([16, 64]))
def test_random_dags_get_valid_plans(choices, seed, io_in_arena, alignment):
    graph = random_dag(choices, seed)
    plan = plan_memory(graph, alignment, io_in_arena, climb_iterations=20)
    check_memory(plan)
    simulate(plan)
    assert plan.arena.size >= plan.arena.lower_bound
    made = {id(v) for v in graph.inputs} | {id(c) for c in graph.constants.values()}
    for node in plan.schedule.nodes:  # the order is topological and runs every node once
        assert all(v is None or id(v) in made for v in node.inputs)
        made.update(id(o) for o in node.outputs)
    assert len(plan.schedule.nodes) == len(graph.nodes)
    # The order kept never needs a bigger arena than the graph's own order would.
    topological = lifetimes(lower(graph, graph.nodes), io_in_arena)
    assert plan.arena.lower_bound <= lower_bound(topological, alignment)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 99), min_size=1, max_size=14), st.integers(0, 1000),
       st.booleans())
def test_random_dags_after_the_pipeline(choices, seed, io_in_arena):
    """The pipeline turns MatMuls into FullyConnected, whose residual Adds then fuse."""
    graph = run_pipeline(random_dag(choices, seed), snapshots=False).graph
    plan = plan_memory(graph, 16, io_in_arena, climb_iterations=20)
    check_memory(plan)
    simulate(plan)
