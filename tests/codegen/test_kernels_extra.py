"""The kernels beyond convolution and pooling, compiled for the host, against both oracles.

Each case is a small ONNX graph; after the pass pipeline the operator under test must still be
there (so the kernel, not a rewrite, is what gets checked), then the compiled code must match
the reference interpreter and onnxruntime within rtol 1e-4, atol 1e-5.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.codegen.oracle import check_host
from tests.helpers import make_model


def _check(model: onnx.ModelProto, op: str | tuple[str, ...], seed: int = 0) -> None:
    check_host(model, op, seed)


def _one(op, shape, inits=None, inputs=("x",), opset=13, **attrs) -> onnx.ModelProto:
    """A model of one `op` node reading x (then the initializers named in `inputs`)."""
    node = helper.make_node(op, list(inputs), ["y"], **attrs)
    return make_model([node], [("x", np.float32, list(shape))], [("y", np.float32, None)],
                      inits or {}, opset=opset)


# -- LRN (the layout pass makes it NHWC: channels innermost) -------------------------------------

@pytest.mark.parametrize("shape,attrs", [
    ((1, 8, 5, 6), {"size": 5}),
    ((1, 7, 4, 3), {"size": 3, "alpha": 0.01, "beta": 0.5, "bias": 2.0}),
    ((2, 5, 3, 3), {"size": 1, "alpha": 0.1, "beta": 1.0}),
    ((1, 3, 2, 2), {"size": 7}),
], ids=["size5", "size3-attrs", "size1-batch2", "window-wider-than-channels"])
def test_lrn(shape, attrs):
    _check(_one("LRN", shape, **attrs), "LRN")


# -- Gather with constant indices ----------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,indices", [
    ((1, 6, 4, 5), 1, np.array([0, 3, 1, 4, 2, 5], np.int64)),
    ((3, 7), 0, np.array([2, -1, 0, 2], np.int64)),
    ((2, 3, 5), 2, np.array([[4, 0], [-5, 1], [3, 3]], np.int64)),
    ((4, 6), 1, np.array(2, np.int64)),
    ((2, 5, 3), -2, np.array([1, 4], np.int32)),
], ids=["channel-shuffle", "axis0-negative", "2d-indices", "scalar-index", "int32-neg-axis"])
def test_gather(shape, axis, indices):
    model = _one("Gather", shape, {"idx": indices}, ("x", "idx"), axis=axis)
    _check(model, "Gather")


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_gather_reads_indices_computed_at_run_time(dtype):
    """Indices from a graph input: negative ones count from the end, as in the interpreter;
    one outside the axis is clamped into it (compiled code never reads outside a tensor)."""
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)],
                       [("x", np.float32, [3, 5, 2]), ("i", dtype, [4])],
                       [("y", np.float32, None)])
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    runner = HostNet(compile_graph(graph, get_target("host")))
    x = np.arange(30, dtype=np.float32).reshape(3, 5, 2)
    try:
        got = runner.run({"x": x, "i": np.array([4, -1, 0, 2], dtype)})["y"]
        assert np.array_equal(got, x[:, [4, 4, 0, 2]])
        clamped = runner.run({"x": x, "i": np.array([9, -9, 1, 3], dtype)})["y"]
        assert np.array_equal(clamped, x[:, [4, 0, 1, 3]])
    finally:
        runner.close()


# -- Softmax and LogSoftmax over any axis --------------------------------------------------------

@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis,opset", [
    ((3, 10), -1, 13),
    ((2, 5, 3, 4), 1, 13),
    ((2, 5, 3, 4), 2, 13),
    ((1, 10, 1, 1), 1, 11),
    ((2, 3, 4), 1, 11),
    ((4, 6), 0, 13),
], ids=["last", "channels", "middle", "coerce-2d-squeezenet", "coerce-2d", "first"])
def test_softmax_any_axis(op, shape, axis, opset):
    _check(_one(op, shape, opset=opset, axis=axis), op)


# -- Pad ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,pads,mode,value", [
    ((1, 3, 4, 5), [0, 0, 1, 2, 0, 0, 2, 1], "constant", None),
    ((2, 3, 4), [1, 0, 2, 0, 3, 1], "constant", 1.5),
    ((1, 2, 5, 6), [0, 0, -1, 2, 0, 0, 1, -2], "constant", -0.5),
    ((1, 2, 4, 5), [0, 0, 2, 1, 0, 0, 1, 3], "reflect", None),
    ((1, 2, 4, 5), [0, 0, 3, 1, 0, 0, 1, 4], "edge", None),
    ((3, 4), [2, -1, 1, 2], "edge", None),
], ids=["constant-hw", "constant-value", "constant-crop", "reflect", "edge", "edge-crop"])
def test_pad(shape, pads, mode, value):
    inits = {"pads": np.array(pads, np.int64)}
    inputs = ["x", "pads"]
    if value is not None:
        inits["value"] = np.array(value, np.float32)
        inputs.append("value")
    _check(_one("Pad", shape, inits, inputs, mode=mode), "Pad")


def test_pad_wrap():
    model = _one("Pad", (2, 3, 4), {"pads": np.array([0, 2, 1, 0, 1, 3], np.int64)},
                 ("x", "pads"), opset=19, mode="wrap")
    _check(model, "Pad")


# -- Reduce ------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax"])
@pytest.mark.parametrize("shape,axes,keepdims", [
    ((1, 4, 5, 6), [2, 3], 1),
    ((2, 3, 4), [1], 0),
    ((2, 3, 4), [-1], 1),
    ((3, 5), None, 0),
    ((2, 3, 4, 5), [0, 2], 1),
], ids=["spatial", "middle-drop", "last", "all", "scattered"])
def test_reduce(op, shape, axes, keepdims):
    opset = 18
    inits, inputs = {}, ["x"]
    if axes is not None:
        inits["axes"] = np.array(axes, np.int64)
        inputs.append("axes")
    # A mean over some axes may be lowered to AveragePool: that path must be right too.
    lowered = ("AveragePool",) if op == "ReduceMean" else ()
    _check(_one(op, shape, inits, inputs, opset=opset, keepdims=keepdims), (op, *lowered))


def test_reduce_axes_attribute():
    _check(_one("ReduceMean", (2, 6, 3, 3), axes=[1], keepdims=1), ("ReduceMean", "AveragePool"))


# -- Resize ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,scales,sizes,attrs", [
    ((1, 3, 4, 5), [1, 1, 2, 2], None, {"mode": "nearest"}),
    ((1, 2, 6, 4), [1, 1, 0.5, 1.5], None,
     {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}),
    ((1, 3, 4, 5), [1, 1, 2, 3], None, {"mode": "linear"}),
    ((1, 2, 5, 4), None, [1, 2, 7, 9],
     {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
    ((1, 2, 4, 4), [1, 1, 0.75, 1.5], None,
     {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}),
    ((1, 2, 4, 5), [1, 1, 2, 2], None, {"mode": "cubic"}),
    ((2, 6), None, [2, 11], {"mode": "linear"}),
], ids=["nearest-x2", "nearest-asym-floor", "linear", "linear-align-sizes",
        "linear-pytorch-shrink", "cubic", "linear-2d"])
def test_resize(shape, scales, sizes, attrs):
    inits = {"roi": np.zeros(0, np.float32), "scales": np.array(scales or [], np.float32)}
    inputs = ["x", "roi", "scales"]
    if sizes is not None:
        inits["sizes"] = np.array(sizes, np.int64)
        inputs.append("sizes")
    _check(_one("Resize", shape, inits, inputs, **attrs), "Resize")


# -- MatMul of two computed operands, and element-wise additions ---------------------------------

@pytest.mark.parametrize("a,b", [
    ((3, 4), (4, 5)),
    ((2, 3, 4), (4, 6)),
    ((2, 1, 3, 4), (3, 4, 2)),
    ((4,), (4, 3)),
    ((2, 3, 4), (4,)),
], ids=["2d", "batched-a", "broadcast-batch", "vector-a", "vector-b"])
def test_matmul(a, b):
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    model = make_model(nodes, [("a", np.float32, list(a)), ("b", np.float32, list(b))],
                       [("y", np.float32, None)])
    _check(model, "MatMul")


@pytest.mark.parametrize("op,count", [("Tanh", 1), ("Sum", 3), ("Mean", 2)])
def test_new_elementwise(op, count):
    names = [f"x{i}" for i in range(count)]
    model = make_model([helper.make_node(op, names, ["y"])],
                       [(n, np.float32, [2, 3, 4]) for n in names], [("y", np.float32, None)])
    _check(model, (op, "FusedElementwise"))


# -- 1-D pooling (also what a ReduceMean over one axis of a 3-D tensor lowers to) ----------------

@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ("AveragePool", {"kernel_shape": [4], "strides": [1], "pads": [2, 1]}),
    ("AveragePool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1],
                     "count_include_pad": 1}),
], ids=["max", "avg-pad", "avg-include-pad"])
def test_pool_1d(op, attrs):
    _check(_one(op, (2, 5, 9), **attrs), op)


# -- DequantizeLinear of constant weights is folded before float code generation ----------------

def test_prepare_folds_constant_dequantize():
    rng = np.random.default_rng(4)
    q = rng.integers(-127, 128, (6, 3, 3, 3)).astype(np.int8)
    inits = {"q": q, "s": np.array(0.05, np.float32), "z": np.array(0, np.int8)}
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["w"]),
             helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])]
    model = make_model(nodes, [("x", np.float32, [1, 3, 5, 5])], [("y", np.float32, None)],
                       inits)
    compiled = compilation(load_onnx(model))
    graph = compiled.final
    assert "DequantizeLinear" in {n.op for n in graph.nodes}
    prepared = compiled.prepared
    assert "DequantizeLinear" in {n.op for n in graph.nodes}, "the input graph was changed"
    assert "DequantizeLinear" not in {n.op for n in prepared.nodes}
    assert not any(c.data.dtype == np.int8 for c in prepared.constants.values())
    _check(model, "Conv")


# -- Slice and Split ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape,starts,ends,axes,steps", [
    ((1, 6, 5, 4), [1, 0], [5, 3], [1, 3], None),
    ((4, 7), [-1, 1], [-5, 7], [0, 1], [-1, 2]),
    ((2, 8, 3), [7], [-100], [1], [-3]),
], ids=["channels", "negative-steps", "clamped"])
def test_slice(shape, starts, ends, axes, steps):
    inits = {"s": np.array(starts, np.int64), "e": np.array(ends, np.int64),
             "a": np.array(axes, np.int64)}
    inputs = ["x", "s", "e", "a"]
    if steps is not None:
        inits["t"] = np.array(steps, np.int64)
        inputs.append("t")
    _check(_one("Slice", shape, inits, inputs), "Slice")


@pytest.mark.parametrize("shape,axis,split", [
    ((1, 6, 4, 5), 1, [2, 4]),
    ((3, 7), -1, [3, 1, 3]),
], ids=["channels", "last-three"])
def test_split(shape, axis, split):
    names = [f"y{i}" for i in range(len(split))]
    node = helper.make_node("Split", ["x", "split"], names, axis=axis)
    model = make_model([node], [("x", np.float32, list(shape))],
                       [(n, np.float32, None) for n in names],
                       {"split": np.array(split, np.int64)})
    _check(model, "Split")
