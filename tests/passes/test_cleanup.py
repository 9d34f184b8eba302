"""Cleanup passes: identity and no-op removal, DCE and CSE."""

import numpy as np

from compiler.passes import get_pass
from tests.passes.util import Builder, apply, op_counts


def test_remove_identity_drops_identity_and_dropout_and_keeps_output_names():
    b = Builder()
    x = b.input("x", (1, 4))
    y = b.node("Relu", [x])
    z = b.node("Identity", [y])
    out = b.node("Dropout", [z])
    out.name = "result"
    g = apply(b.build(out), "remove_identity")
    assert op_counts(g) == {"Relu": 1}
    assert g.outputs[0].name == "result"


def test_remove_identity_keeps_a_read_mask_and_a_passthrough_of_an_input():
    b = Builder()
    x = b.input("x", (1, 4))
    y, mask = b.node("Dropout", [x], outputs=2)
    passthrough = b.node("Identity", [x])
    apply(b.build(y, mask, passthrough), "remove_identity", changed=False)


def test_remove_noops_removes_each_kind_of_noop():
    b = Builder()
    x = b.input("x", (1, 3, 4))
    y = b.node("Reshape", [x, b.ints([1, 3, 4])])
    y = b.node("Transpose", [y], perm=(0, 1, 2))
    y = b.node("Pad", [y, b.ints([0] * 6)])
    y = b.node("Slice", [y, b.ints([0]), b.ints([3]), b.ints([1])])
    y = b.node("Concat", [y], axis=0)
    y = b.node("Relu", [y])
    g = apply(b.build(y), "remove_noops")
    assert op_counts(g) == {"Relu": 1}


def test_remove_noops_keeps_a_reversing_slice_and_real_transposes():
    b = Builder()
    x = b.input("x", (2, 3))
    y = b.node("Slice", [x, b.ints([-1]), b.ints([-10]), b.ints([0]), b.ints([-1])])
    y = b.node("Transpose", [y], perm=(1, 0))
    apply(b.build(y), "remove_noops", changed=False)


def test_dce_removes_dead_nodes_and_unused_constants():
    b = Builder()
    x = b.input("x", (1, 4))
    b.node("Mul", [x, b.const(np.ones(4), "unused_w")])
    y = b.node("Relu", [x])
    g = apply(b.build(y), "dce")
    assert op_counts(g) == {"Relu": 1}
    assert not g.constants
    assert get_pass("dce")(g).changed is False


def test_cse_merges_duplicate_nodes_and_equal_small_constants():
    b = Builder()
    x = b.input("x", (1, 4))
    a = b.node("Add", [x, b.const(np.arange(4.0), "c1")])
    c = b.node("Add", [x, b.const(np.arange(4.0), "c2")])
    d = b.node("Add", [x, b.const(np.arange(4.0) + 1, "c3")])  # another constant: stays
    g = apply(b.build(b.node("Mul", [a, c]), d), "cse")
    assert op_counts(g) == {"Add": 2, "Mul": 1}
    mul = next(n for n in g.nodes if n.op == "Mul")
    assert mul.inputs[0] is mul.inputs[1]


def test_cse_leaves_different_attributes_and_two_model_outputs_alone():
    b = Builder()
    x = b.input("x", (1, 4, 2))
    t1 = b.node("Transpose", [x], perm=(0, 2, 1))
    t2 = b.node("Transpose", [x], perm=(1, 0, 2))
    r1 = b.node("Relu", [x])
    r2 = b.node("Relu", [x])
    apply(b.build(t1, t2, r1, r2), "cse", changed=False)
