"""The graph IR: building, snapshots, editing, the verifier and the text dump."""

import numpy as np
import pytest

from compiler.errors import VerifyError
from compiler.interpreter import run
from compiler.ir import Constant, Graph, Placeholder, QuantParams, TensorType
from compiler.ir.dump import dump, node_line
from compiler.verify import problems, verify


def _chain() -> Graph:
    g = Graph("chain", opset=13)
    x = g.add_input("x", TensorType((1, 4)))
    a = g.add_node("Relu", [x], [TensorType((1, 4))], name="first")
    b = g.add_node("Relu", [a.output], [TensorType((1, 4))], name="second")
    g.outputs.append(b.output)
    return g


def test_types_print_and_measure():
    t = TensorType((1, 3, 8, 8), "int8", QuantParams((0.5,), (-3,)))
    assert str(t) == "int8[1,3,8,8]{scale=0.5, zp=-3}"
    assert (t.numel, t.nbytes, t.rank) == (192, 192, 4)
    assert TensorType((), "float32").numel == 1
    assert TensorType((2, 2), "float32").nbytes == 16


def test_building_gives_stable_ids_and_provenance():
    g = _chain()
    assert [n.id for n in g.nodes] == [0, 1]
    assert g.nodes[1].provenance == (1,)
    fused = g.add_node("Relu", [g.inputs[0]], [TensorType((1, 4))], provenance=(0, 1))
    assert fused.id == 2 and fused.provenance == (0, 1)
    assert g.unique_node_name("first") == "first_1"
    assert g.unique_name("first_out") == "first_out_1"


def test_constants_are_immutable_and_snapshots_share_them():
    g = Graph()
    c = g.add_constant("w", np.ones((2, 2), np.float32))
    assert isinstance(c, Constant) and not c.data.flags.writeable
    with pytest.raises(ValueError):
        c.data[0, 0] = 5
    snap = g.snapshot()
    assert snap.constants["w"] is not c
    assert snap.constants["w"].data is c.data


def test_snapshot_is_independent_of_later_edits():
    g = _chain()
    snap = g.snapshot()
    second = g.nodes[1]
    g.replace_uses(second.output, g.nodes[0].output)
    g.remove_node(second)
    assert len(g.nodes) == 1 and len(snap.nodes) == 2
    assert snap.outputs[0].producer is snap.nodes[1]
    assert [n.id for n in snap.nodes] == [0, 1]
    verify(snap)
    verify(g)
    x = np.array([[-1, 2, -3, 4]], np.float32)
    np.testing.assert_array_equal(run(snap, {"x": x})["second_out"], run(g, {"x": x})["first_out"])


def test_users_and_replace_uses():
    g = _chain()
    first, second = g.nodes
    assert g.users(first.output) == [(second, 0)]
    assert g.replace_uses(first.output, g.inputs[0]) == 1
    assert second.inputs[0] is g.inputs[0]


def test_sort_orders_topologically_and_detects_cycles():
    g = _chain()
    g.nodes.reverse()
    g.sort()
    assert [n.name for n in g.nodes] == ["first", "second"]
    g.nodes[0].inputs[0] = g.nodes[1].output
    with pytest.raises(VerifyError, match="cycle"):
        g.sort()


def test_verifier_reports_broken_invariants():
    g = _chain()
    assert problems(g) == []
    g.nodes[1].outputs[0].type = TensorType((1, 5))
    g.nodes[0].attrs["bogus"] = 1
    g.nodes[1].id = 0
    found = problems(g)
    assert any("inference says float32[1,4]" in p for p in found)
    assert any("'bogus' is not in the schema" in p for p in found)
    assert any("id 0 is used twice" in p for p in found)
    with pytest.raises(VerifyError):
        verify(g)


def test_verifier_catches_use_before_definition():
    g = _chain()
    g.nodes.reverse()
    assert any("not defined before use" in p for p in problems(g))


def test_dump_is_one_line_per_node():
    g = _chain()
    g.add_constant("w", np.zeros((3,), np.float32))
    text = dump(g)
    assert text.splitlines() == [
        "graph chain (opset 13)",
        "input %x: float32[1,4]",
        "const $w: float32[3]",
        "#0 first = Relu(%x) -> %first_out: float32[1,4]",
        "#1 second = Relu(%first_out) -> %second_out: float32[1,4]",
        "output %second_out: float32[1,4]",
    ]
    assert node_line(g.nodes[0]).startswith("#0 first = Relu(")


def test_placeholders_are_inputs():
    g = _chain()
    assert isinstance(g.inputs[0], Placeholder)
    assert g.value("first_out") is g.nodes[0].output
