"""Layout passes: channels-last conversion, Transpose sinking and cancellation, folding into FC."""

import numpy as np

from compiler.passes import get_pass
from tests.passes.util import Builder, apply, op_counts


def _conv(b, x, cin, cout, name, **attrs):
    return b.node("Conv", [x, b.weights(cout, cin, 3, 3, name=name)], pads=(1, 1, 1, 1), **attrs)


def test_to_nhwc_wraps_spatial_operators_in_transposes():
    b = Builder()
    x = b.input("x", (1, 3, 8, 8))
    y = b.node("MaxPool", [_conv(b, x, 3, 4, "w")], kernel_shape=(2, 2), strides=(2, 2))
    g = apply(b.build(y), "to_nhwc")
    assert op_counts(g) == {"Conv": 1, "MaxPool": 1, "Transpose": 4}
    assert all(n.attrs["layout"] == "NHWC" for n in g.nodes if n.op != "Transpose")
    apply(g, "to_nhwc", changed=False)


def test_sink_transposes_cancels_the_pairs_between_layers():
    b = Builder()
    x = b.input("x", (1, 3, 8, 8))
    y = b.node("Relu", [_conv(b, x, 3, 4, "w1")])
    y = b.node("Add", [_conv(b, y, 4, 4, "w2"), y])
    y = b.node("Mul", [y, b.weights(4, 1, 1, name="scale")])  # a per-channel NCHW constant
    y = b.node("Concat", [_conv(b, y, 4, 2, "w3"), y], axis=1)
    y = b.node("Pad", [y, b.ints([0, 0, 1, 1, 0, 0, 1, 1])])
    y = _conv(b, y, 6, 2, "w4")
    g = b.build(y)
    get_pass("to_nhwc")(g)
    get_pass("cse")(g)
    g = apply(g, "sink_transposes")
    while get_pass("sink_transposes")(g).changed:
        pass
    get_pass("dce")(g)
    # One Transpose in (the NCHW input), one out (the NCHW output): every inner pair cancelled.
    assert op_counts(g)["Transpose"] == 2
    assert g.nodes[0].op == "Transpose" and g.nodes[-1].op == "Transpose"


def test_sink_transposes_merges_consecutive_transposes():
    b = Builder()
    x = b.input("x", (2, 3, 4))
    y = b.node("Transpose", [b.node("Transpose", [x], perm=(1, 2, 0))], perm=(1, 0, 2))
    g = apply(b.build(b.node("Relu", [y])), "sink_transposes")
    assert op_counts(g) == {"Transpose": 1, "Relu": 1}


def test_sink_transposes_through_a_reshape_that_splits_channels():
    b = Builder()
    x = b.input("x", (1, 5, 5, 6))
    y = b.node("Transpose", [x], perm=(0, 3, 1, 2))
    y = b.node("Reshape", [y, b.ints([1, 2, 3, 5, 5])])
    g = apply(b.build(y), "sink_transposes")
    assert op_counts(g) == {"Reshape": 1, "Transpose": 1}
    assert g.nodes[0].op == "Reshape"


def test_sink_transposes_leaves_a_flatten_of_an_image_alone():
    b = Builder()
    x = b.input("x", (1, 5, 5, 6))
    y = b.node("Reshape", [b.node("Transpose", [x], perm=(0, 3, 1, 2)), b.ints([1, 150])])
    apply(b.build(y), "sink_transposes", changed=False)


def test_sink_transposes_hoists_over_a_channel_shuffle():
    b = Builder()
    x = b.input("x", (1, 4, 4, 6))
    y = b.node("Transpose", [x], perm=(0, 3, 1, 2))  # NHWC -> NCHW
    y = b.node("Reshape", [y, b.ints([1, 2, 3, 4, 4])])
    y = b.node("Transpose", [y], perm=(0, 2, 1, 3, 4))  # the shuffle
    y = b.node("Reshape", [y, b.ints([1, 6, 4, 4])])
    y = b.node("Transpose", [y], perm=(0, 2, 3, 1))  # back to NHWC
    g = b.build(y)
    while get_pass("sink_transposes")(g).changed:
        get_pass("dce")(g)
    apply(g, "sink_transposes", changed=False)
    assert op_counts(g) == {"Reshape": 2, "Transpose": 1}  # only the shuffle itself is left


def test_fold_transpose_into_fc_permutes_the_weight_columns():
    b = Builder()
    x = b.input("x", (2, 3, 3, 4))
    y = b.node("Reshape", [b.node("Transpose", [x], perm=(0, 3, 1, 2)), b.ints([2, 36])])
    y = b.node("FullyConnected", [y, b.weights(5, 36), b.weights(5, name="bias")])
    g = apply(b.build(y), "fold_transpose_into_fc")
    assert op_counts(g) == {"Reshape": 1, "FullyConnected": 1}


def test_fold_transpose_into_fc_needs_the_batch_axis_in_place():
    b = Builder()
    x = b.input("x", (3, 2, 4))
    y = b.node("Reshape", [b.node("Transpose", [x], perm=(1, 0, 2)), b.ints([2, 12])])
    y = b.node("FullyConnected", [y, b.const(np.ones((5, 12)), "w")])
    apply(b.build(y), "fold_transpose_into_fc", changed=False)


def test_sink_transposes_through_a_fused_elementwise_node():
    b = Builder()
    x = b.input("x", (1, 4, 4, 3))
    t = b.node("Transpose", [x], perm=(0, 3, 1, 2))
    y = b.node("FusedElementwise", [t, b.weights(3, 1, 1, name="s")],
               steps=("Mul $0 $1", "Relu x"))
    g = apply(b.build(b.node("Transpose", [y], perm=(0, 2, 3, 1))), "sink_transposes")
    while get_pass("sink_transposes")(g).changed:
        get_pass("dce")(g)
    assert op_counts(g) == {"FusedElementwise": 1}


def test_lower_channel_shuffle_makes_a_gather_on_channels():
    b = Builder()
    x = b.input("x", (1, 4, 4, 6))
    y = b.node("Reshape", [x, b.ints([1, 4, 4, 2, 3])])
    y = b.node("Transpose", [y], perm=(0, 1, 2, 4, 3))
    y = b.node("Reshape", [y, b.ints([1, 4, 4, 6])])
    g = apply(b.build(y), "lower_channel_shuffle")
    assert op_counts(g) == {"Gather": 1}
    (gather,) = g.nodes
    assert gather.attrs["axis"] == 3
    assert gather.inputs[1].data.tolist() == [0, 3, 1, 4, 2, 5]


def test_lower_channel_shuffle_leaves_real_transposes_alone():
    b = Builder()
    x = b.input("x", (1, 4, 6))
    y = b.node("Reshape", [x, b.ints([1, 2, 2, 6])])
    y = b.node("Transpose", [y], perm=(0, 2, 3, 1))  # moves elements across two axes
    y = b.node("Reshape", [y, b.ints([1, 4, 6])])
    apply(b.build(y), "lower_channel_shuffle", changed=False)


def test_outputs_free_of_order_keep_their_names_and_lose_their_transposes():
    """A profile's graph: every tensor an output, any element order. No Transpose is left
    but the input's; each output keeps its name and holds the same values, reordered."""
    from compiler.driver import compilation
    from compiler.interpreter import run

    def probe(free: bool):
        b = Builder()
        x = b.input("x", (1, 3, 8, 8))
        c = _conv(b, x, 3, 4, "w1")
        r = b.node("Relu", [c])
        y = b.node("Add", [_conv(b, r, 4, 4, "w2"), r])
        g = b.build(y)
        g.outputs = [c, r, y]
        g.free_output_order = free
        return compilation(g).prepared

    fixed, free = probe(False), probe(True)
    assert op_counts(fixed)["Transpose"] > 1 and op_counts(free)["Transpose"] == 1
    assert [v.name for v in free.outputs] == [v.name for v in fixed.outputs]
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    want, got = run(fixed, feeds), run(free, feeds)
    for name in want:
        assert got[name].shape != want[name].shape  # channels-last now
        np.testing.assert_array_equal(np.sort(got[name], axis=None),
                                      np.sort(want[name], axis=None))
