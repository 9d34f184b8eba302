"""Compiled networks run on the host match the reference interpreter and onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.driver import compile_graph
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.ir.graph import Graph
from compiler.ir.types import TensorType
from compiler.lowir.ir import Fusion
from compiler.passes.runner import run_pipeline
from tests.codegen.oracle import check_host
from tests.conftest import SAMPLE_MODEL, shared_models
from tests.helpers import assert_close, make_model


def _check(model: onnx.ModelProto, seed: int = 0) -> HostNet:
    return check_host(model, seed=seed)


def test_sample_model():
    _check(onnx.load(SAMPLE_MODEL))


def test_ad01_fp32():
    _check(onnx.load(shared_models() / "onnx" / "ad01_fp32.onnx"))


def _conv_model(c_in, c_out, group=1, strides=(1, 1), pads=(1, 1, 1, 1), bias=True,
                dilations=(1, 1), act=None, kernel=(3, 3), size=(7, 6)):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((c_out, c_in // group, *kernel)).astype(np.float32)
    inits = {"w": w}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(c_out).astype(np.float32)
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c" if act else "y"], group=group,
                              strides=list(strides), pads=list(pads),
                              dilations=list(dilations))]
    if act:
        nodes.append(helper.make_node(act, ["c"], ["y"]))
    return make_model(nodes, [("x", np.float32, [1, c_in, *size])],
                      [("y", np.float32, None)], inits)


@pytest.mark.parametrize("kwargs", [
    {"c_in": 3, "c_out": 5},
    {"c_in": 4, "c_out": 6, "strides": (2, 2), "act": "Relu"},
    {"c_in": 4, "c_out": 4, "group": 4, "bias": False},
    {"c_in": 6, "c_out": 4, "group": 2, "pads": (0, 1, 2, 0)},
    {"c_in": 2, "c_out": 3, "dilations": (2, 1), "pads": (0, 0, 0, 0)},
    {"c_in": 8, "c_out": 8, "group": 8, "strides": (2, 1), "act": "Relu", "kernel": (1, 5),
     "pads": (0, 2, 0, 2)},
], ids=["plain", "strided-relu", "depthwise", "grouped-asym-pad", "dilated", "dw-1x5"])
def test_conv(kwargs):
    _check(_conv_model(**kwargs))


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1],
                     "count_include_pad": 1}),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                     "pads": [1, 1, 1, 1], "count_include_pad": 1}),
], ids=["max", "max-pad", "avg-pad", "avg-include-pad", "max-ceil", "avg-ceil",
        "avg-ceil-include-pad"])
def test_pool(op, attrs):
    nodes = [helper.make_node(op, ["x"], ["y"], **attrs)]
    _check(make_model(nodes, [("x", np.float32, [1, 5, 7, 6])], [("y", np.float32, None)]))


@pytest.mark.parametrize("act", [None, "Relu"])
def test_fully_connected(act):
    rng = np.random.default_rng(2)
    inits = {"w": rng.standard_normal((33, 17)).astype(np.float32),
             "b": rng.standard_normal(17).astype(np.float32)}
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g" if act else "y"])]
    if act:
        nodes.append(helper.make_node(act, ["g"], ["y"]))
    _check(make_model(nodes, [("x", np.float32, [3, 33])], [("y", np.float32, None)], inits))


def test_same_graph_gives_identical_objects():
    graph = run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph
    target = get_target("cortex-m7")
    assert compile_graph(graph, target).object == compile_graph(graph, target).object


def test_unsupported_operator_is_named():
    model = make_model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"])],
                       [("x", np.float32, [1, 2, 3, 3])], [("y", np.float32, None)])
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    with pytest.raises(KilnError, match="cannot generate"):
        compile_graph(graph, get_target("host"))


def _chain(ops, shape=(2, 3, 4, 5), extra=()):
    """A model chaining `ops`; each is (op, extra inputs, attrs) applied to the running value."""
    rng = np.random.default_rng(3)
    nodes, inits, cur = [], {}, "x"
    for i, (op, consts, attrs) in enumerate(ops):
        names = []
        for j, c in enumerate(consts):
            if isinstance(c, str):
                names.append(c)
                continue
            names.append(f"c{i}_{j}")
            inits[names[-1]] = (rng.standard_normal(c).astype(np.float32) if isinstance(c, tuple)
                                else np.array(c, np.float32))
        out = "y" if i == len(ops) - 1 else f"t{i}"
        nodes.append(helper.make_node(op, [cur, *names], [out], **attrs))
        cur = out
    inputs = [("x", np.float32, list(shape)), *extra]
    return make_model(nodes, inputs, [("y", np.float32, None)], inits)


@pytest.mark.parametrize("ops", [
    [("Add", [(5,)], {})],
    [("Mul", [(3, 1, 5)], {}), ("Add", [(1,)], {}), ("Relu", [], {})],
    [("Sigmoid", [], {})],
    [("Clip", [-0.5, 0.7], {})],
    [("LeakyRelu", [], {"alpha": 0.3}), ("HardSigmoid", [], {"alpha": 0.3, "beta": 0.4})],
    [("Sub", ["z"], {}), ("Div", [(4, 1)], {}), ("Abs", [], {}), ("Sqrt", [], {})],
    [("Softmax", [], {"axis": -1})],
    [("Exp", [], {}), ("Log", [], {}), ("Neg", [], {}), ("Max", ["z"], {})],
], ids=["add-bcast", "mul-add-relu", "sigmoid", "clip", "leaky-hardsigmoid", "sub-div-abs-sqrt",
        "softmax", "exp-log-neg-max"])
def test_elementwise(ops):
    _check(_chain(ops, extra=[("z", np.float32, [2, 3, 4, 5])], shape=(2, 3, 4, 5)))


@pytest.mark.parametrize("axis", [0, 1])
def test_concat(axis):
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b", "k"], ["c"], axis=axis),
             helper.make_node("Exp", ["c"], ["y"])]
    k = rng.standard_normal((2, 3) if axis == 0 else (2, 1)).astype(np.float32)
    _check(make_model(nodes, [("x", np.float32, [2, 3])], [("y", np.float32, None)], {"k": k}))


def test_inputs_and_outputs_in_the_arena():
    graph = run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph
    net = HostNet(compile_graph(graph, get_target("host"), io_in_arena=True))
    assert {t.region for t in net.net.inputs + net.net.outputs} == {"activations"}
    x = np.random.default_rng(5).standard_normal((1, 1, 8, 8)).astype(np.float32)
    assert_close(net.run({"image": x})["logits"], run(graph, {"image": x})["logits"])
    net.close()


def _residual_model(op: str, shape: list[int]) -> onnx.ModelProto:
    """r = relu(op(x)); s = relu(op(relu(op(r))) + r); y = op(s): the Add fuses into its producer
    (`Conv+Add` / `FullyConnected+Add`) and carries the Relu."""
    rng = np.random.default_rng(6)
    c = shape[1]
    wshape = (c, c, 3, 3) if op == "Conv" else (c, c)
    attrs = {"pads": [1, 1, 1, 1]} if op == "Conv" else {}
    inits = {f"w{i}": (rng.standard_normal(wshape) / c).astype(np.float32) for i in range(4)}
    nodes = [helper.make_node(op, ["x", "w0"], ["a"], **attrs),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node(op, ["r", "w1"], ["b1"], **attrs),
             helper.make_node("Relu", ["b1"], ["c"]),
             helper.make_node(op, ["c", "w2"], ["b"], **attrs),
             helper.make_node("Add", ["b", "r"], ["s0"]), helper.make_node("Relu", ["s0"], ["s"]),
             helper.make_node(op, ["s", "w3"], ["y"], **attrs)]
    return make_model(nodes, [("x", np.float32, shape)], [("y", np.float32, None)], inits)


@pytest.mark.parametrize("op,shape", [("Gemm", [2, 16]), ("Conv", [1, 4, 5, 6])])
def test_fused_residual_add(op, shape):
    model = _residual_model(op, shape)
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    net = compile_graph(graph, get_target("host"))
    assert any(i.fusion is Fusion.RESIDUAL_ADD for i in net.plan.lowir.instrs)
    _check(model)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("op", ["Conv", "MaxPool", "AveragePool"])
def test_auto_pad(op, auto_pad):
    inits, inputs = {}, ["x"]
    if op == "Conv":
        inits["w"] = np.random.default_rng(7).standard_normal((3, 2, 3, 2)).astype(np.float32)
        inputs.append("w")
    attrs = {"auto_pad": auto_pad, "strides": [2, 2]}
    if op != "Conv":
        attrs["kernel_shape"] = [3, 2]
    nodes = [helper.make_node(op, inputs, ["y"], **attrs)]
    _check(make_model(nodes, [("x", np.float32, [1, 2, 7, 6])], [("y", np.float32, None)], inits))


@pytest.mark.parametrize("name", ["mnist-8.onnx", "pretrainedResnet.onnx"])
def test_shared_models(name):
    _check(onnx.load(shared_models() / "onnx" / name))


def test_shared_weight_is_embedded_once():
    graph = Graph("shared")
    x = graph.add_input("x", TensorType((1, 64), "float32"))
    w = graph.add_constant("w", np.random.default_rng(8).standard_normal((64, 64)).astype(
        np.float32))
    a = graph.add_node("FullyConnected", [x, w], [TensorType((1, 64))], {"activation": "Relu"})
    y = graph.add_node("FullyConnected", [a.output, w], [TensorType((1, 64))], {"activation": ""})
    graph.outputs.append(y.output)
    net = compile_graph(graph, get_target("host"))
    assert net.llvm_ir.count("constant [16384 x i8]") == 1
    feeds = {"x": np.random.default_rng(9).standard_normal((1, 64)).astype(np.float32)}
    host = HostNet(net)
    assert_close(host.run(feeds)[y.output.name], run(graph, feeds)[y.output.name])
    host.close()
