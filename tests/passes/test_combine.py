"""Combining passes: affine chains, element-wise chains, sibling FullyConnected merging."""

import numpy as np

from tests.passes.util import Builder, apply, op_counts


def test_fuse_elementwise_keeps_each_step_and_is_exact():
    b = Builder()
    x = b.input("x", (1, 4, 3, 3))
    r = b.input("r", (1, 4, 3, 3))
    y = b.node("Mul", [x, b.positive(4, 1, 1, name="scale")])
    y = b.node("Add", [b.weights(4, 1, 1, name="shift"), y])
    y = b.node("Add", [y, r], activation="Relu")
    y = b.node("Sub", [b.const(np.float32(1.0), "one"), b.node("LeakyRelu", [y], alpha=0.3)])
    g = apply(b.build(y), "fuse_elementwise", rtol=0, atol=0)
    assert op_counts(g) == {"FusedElementwise": 1}
    (node,) = g.nodes
    assert node.attrs["steps"] == ("Mul $0 $1", "Add $2 x", "Add x $3", "Relu x",
                                   "LeakyRelu x alpha=0.3", "Sub $4 x")


def test_fuse_elementwise_merges_with_an_existing_fused_node_and_stops_at_a_shared_value():
    b = Builder()
    x = b.input("x", (2, 3))
    fused = b.node("FusedElementwise", [x, b.const(2.0, "two")], steps=("Mul $0 $1", "Neg x"))
    y = b.node("Abs", [b.node("Exp", [fused])])
    shared = b.node("Relu", [y])
    out = b.node("Sqrt", [shared])
    g = apply(b.build(out, shared), "fuse_elementwise", rtol=0, atol=0)
    assert op_counts(g) == {"FusedElementwise": 1, "Sqrt": 1}  # one node after the shared value
    assert g.nodes[0].attrs["steps"] == ("Mul $0 $1", "Neg x", "Exp x", "Abs x", "Relu x")


def test_fuse_elementwise_leaves_lone_operators_alone():
    b = Builder()
    x = b.input("x", (2, 3))
    y = b.node("Add", [x, x], activation="Relu")  # one node, even with two steps
    apply(b.build(y, b.node("Sigmoid", [x])), "fuse_elementwise", changed=False)


def test_merge_fully_connected_siblings_into_one_wider_node():
    b = Builder()
    x = b.input("x", (1, 6))
    heads = [b.node("FullyConnected", [x, b.weights(n, 6, name=f"w{n}"),
                                       b.weights(n, name=f"b{n}")], activation="Relu")
             for n in (2, 3)]
    other = b.node("FullyConnected", [x, b.weights(4, 6, name="w4")])  # no activation
    g = apply(b.build(*heads, other), "merge_fully_connected", rtol=1e-5, atol=1e-6)
    assert op_counts(g) == {"FullyConnected": 2, "Slice": 2}


def test_merge_fully_connected_only_for_one_row():
    b = Builder()
    x = b.input("x", (3, 6))
    heads = [b.node("FullyConnected", [x, b.weights(2, 6, name=f"w{i}")]) for i in range(2)]
    apply(b.build(*heads), "merge_fully_connected", changed=False)


def test_merge_affine_collapses_scale_shift_chains():
    b = Builder()
    x = b.input("x", (1, 4, 3, 3))
    y = b.node("Add", [b.node("Mul", [x, b.positive(4, 1, 1, name="s1")]),
                       b.weights(4, 1, 1, name="t1")])
    y = b.node("Mul", [b.positive(4, 1, 1, name="s2"), y])
    y = b.node("Add", [y, b.weights(4, 1, 1, name="t2")])
    g = b.build(b.node("Relu", [y]))
    g = apply(g, "merge_affine", rtol=1e-5, atol=1e-6)  # first the shifts, then the scales
    assert op_counts(g) == {"Mul": 2, "Add": 1, "Relu": 1}
    g = apply(g, "merge_affine", rtol=1e-5, atol=1e-6)
    assert op_counts(g) == {"Mul": 1, "Add": 1, "Relu": 1}
    apply(g, "merge_affine", changed=False)


def test_merge_affine_leaves_shared_and_runtime_operands():
    b = Builder()
    x, y = b.input("x", (2, 3)), b.input("y", (2, 3))
    shared = b.node("Mul", [x, b.const(2.0, "two")])
    out = b.node("Add", [shared, b.const(1.0, "one")])
    runtime = b.node("Mul", [b.node("Add", [x, y]), b.const(3.0, "three")])
    apply(b.build(out, shared, runtime), "merge_affine", changed=False)
