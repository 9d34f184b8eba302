"""The low-level IR: views, in-place element-wise ops, Concat slices, the residual Add."""

from __future__ import annotations

import pytest

from compiler.driver import Options
from compiler.errors import KilnError, VerifyError
from compiler.lowir import INOUT, Instr, lower, verify_lowir
from compiler.lowir.ir import Fusion
from compiler.lowir.passes import ALL_LOWERING, RESIDUAL_IN_STORE
from compiler.memory.report import plan_memory
from compiler.memory.simulate import simulate
from tests.memory.graphs import residual_block, view_chain


def _checked(graph, **kw):
    plan = plan_memory(graph, **kw)
    simulate(plan)
    return plan


def test_residual_add_writes_over_its_input():
    graph = residual_block()
    ir = lower(graph)
    verify_lowir(ir)
    fused = [i for i in ir.instrs if i.op == "Conv+Add"]
    assert len(fused) == 1
    inout = [o for o in fused[0].operands if o.mode == INOUT]
    add = next(n for n in graph.nodes if n.op == "Add")
    assert len(inout) == 1 and inout[0].writes == add.output.name
    assert ir.values[add.output.name] == ir.values[add.inputs[0].name]
    plan = _checked(graph, io_in_arena=True)
    # Every tensor is 1 KiB; the unfused block would hold a, b and c (3 KiB) at once.
    assert plan.arena.size == plan.arena.lower_bound == 2048
    assert plan.schedule.peak == 3072
    assert [i.op for i in ir.instrs if i.kind == "op"] == ["Conv", "Conv", "Conv+Add", "Conv"]


def test_views_in_place_and_concat_slices():
    graph = view_chain()
    ir = lower(graph)
    verify_lowir(ir)
    views = [i.op for i in ir.instrs if i.kind == "view"]
    assert views.count("Reshape") == 3 and views.count("Concat") == 1
    text = ir.dump()
    assert "inout" in text and "alloc" in text and "dealloc" in text
    # Sigmoid and Relu write into the two halves of the Concat's storage.
    cat = next(n for n in graph.nodes if n.op == "Concat").output.name
    assert {ir.values[n.output.name][0] for n in graph.nodes if n.op == "Sigmoid"} == {cat}
    # Tanh runs in place in the Concat's storage, which holds the graph output (a view of it).
    assert ir.values[graph.outputs[0].name][0] == cat
    assert ir.storages[cat].kind == "output"
    for io in (False, True):
        _checked(graph, io_in_arena=io, alignment=16)


def test_graph_inputs_are_never_written():
    ir = lower(view_chain())
    for ins in ir.instrs:
        for o in ins.operands:
            if ir.storages[o.storage].kind == "input" and ins.kind == "op":
                assert o.mode == "in"


def test_verifier_rejects_use_after_free_and_double_alloc():
    ir = lower(residual_block())
    broken = list(ir.instrs)
    first_dealloc = next(k for k, i in enumerate(broken) if i.kind == "dealloc")
    name = broken[first_dealloc].name
    ir.instrs = [i for i in broken if not (i.kind == "dealloc" and i.name == name)]
    ir.instrs.insert(1, Instr("dealloc", name))
    with pytest.raises(VerifyError):
        verify_lowir(ir)
    ir.instrs = [broken[0], *broken]
    with pytest.raises(VerifyError, match="twice"):
        verify_lowir(ir)


# -- each lowering pass switched off on its own ------------------------------------------------

def test_without_lowering_passes_every_value_has_a_buffer_and_every_node_a_step():
    graph = view_chain()
    ir = lower(graph, enabled=frozenset())
    verify_lowir(ir)
    assert not ir.sites and not ir.streams
    assert not any(o.mode == INOUT for i in ir.instrs for o in i.operands)
    concat = next(i for i in ir.instrs if i.op == "Concat")
    assert concat.kind == "op", "a Concat not done by placement copies its inputs"
    _checked(graph, enabled=frozenset(), io_in_arena=True)


@pytest.mark.parametrize("name", sorted(ALL_LOWERING))
def test_a_lowering_pass_switched_off_applies_nowhere_and_the_plan_still_holds(name):
    for graph in (view_chain(), residual_block()):
        without = lower(graph, enabled=ALL_LOWERING - {name})
        verify_lowir(without)
        assert name not in without.sites
        _checked(graph, enabled=ALL_LOWERING - {name}, io_in_arena=True)


def test_the_residual_fusion_is_a_typed_instruction_and_its_site_says_why():
    ir = lower(residual_block())
    fused = [i for i in ir.instrs if i.fusion is Fusion.RESIDUAL_ADD]
    assert len(fused) == 1 and fused[0].op == "Conv+Add" and len(fused[0].nodes) == 2
    (site,) = ir.sites[RESIDUAL_IN_STORE]
    assert "is never stored" in site and "dies there" in site
    plain = lower(residual_block(), enabled=ALL_LOWERING - {RESIDUAL_IN_STORE})
    assert not any(i.fusion for i in plain.instrs)
    assert [i.op for i in plain.instrs if i.kind == "op"].count("Add") == 1


def test_unknown_lowering_pass_is_refused_by_name():
    with pytest.raises(KilnError, match="unknown lowering pass 'conv_pairs'.*conv_pair"):
        Options("cortex-m7", disabled_lowering=frozenset({"conv_pairs"})).check()
