"""Shared test helpers: build small ONNX models and compare Kiln with onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.frontends.onnx import load_onnx, to_onnx
from compiler.interpreter import run
from compiler.ir.types import ONNX_ELEM_TYPES


def make_model(nodes, inputs, outputs, initializers=(), opset=13) -> onnx.ModelProto:
    """A model from onnx.helper nodes.

    `inputs` / `outputs` are (name, dtype, shape) triples (shape None for outputs lets ONNX
    leave it open); `initializers` maps name -> array or is a sequence of (name, array).
    """
    def info(name, dtype, shape):
        return helper.make_tensor_value_info(name, ONNX_ELEM_TYPES[np.dtype(dtype).name], shape)

    inits = initializers.items() if isinstance(initializers, dict) else initializers
    graph = helper.make_graph(
        nodes, "test", [info(*i) for i in inputs], [info(*o) for o in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 8 if opset < 19 else 9 if opset < 21 else 10)
    return model


def ort_run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """Outputs of onnxruntime on `model` (all graph optimizations off: the plain semantics)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_close(got: np.ndarray, want: np.ndarray, rtol=1e-4, atol=1e-5, what=""):
    """Float outputs within tolerance; integer and bool outputs exactly; same dtype and shape."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def check_against_ort(model: onnx.ModelProto, feeds: dict, rtol=1e-4, atol=1e-5,
                      roundtrip=True) -> dict[str, np.ndarray]:
    """Kiln's interpreter matches onnxruntime on `model`; so does the model Kiln saves back.

    Returns Kiln's outputs by name.
    """
    onnx.checker.check_model(model)
    graph = load_onnx(model)
    ours = run(graph, feeds)
    theirs = ort_run(model, feeds)
    for value, want in zip(graph.outputs, theirs):
        assert_close(ours[value.name], want, rtol, atol, what=value.name)
    if roundtrip:
        saved = to_onnx(graph)
        onnx.checker.check_model(saved, full_check=True)
        again = ort_run(saved, feeds)
        for value, want in zip(graph.outputs, theirs):
            idx = [o.name for o in saved.graph.output].index(value.name)
            assert_close(again[idx], want, rtol, atol, what=f"saved {value.name}")
    return ours


def float64_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A float64 copy of a float32 ONNX model: onnxruntime's own near-exact answer.

    When Kiln and onnxruntime disagree beyond tolerance on an ill-conditioned input, this
    tells which of them is right; the referee is never Kiln's own code.
    """
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    f32, f64 = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE
    graph = wide.graph
    for index, init in enumerate(graph.initializer):
        if init.data_type == f32:
            array = numpy_helper.to_array(init).astype(np.float64)
            graph.initializer[index].CopyFrom(numpy_helper.from_array(array, init.name))
    for info in [*graph.input, *graph.output, *graph.value_info]:
        if info.type.tensor_type.elem_type == f32:
            info.type.tensor_type.elem_type = f64
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == f32:
                attr.t.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(attr.t).astype(np.float64), attr.t.name))
            elif node.op_type == "Cast" and attr.name == "to" and attr.i == f32:
                attr.i = f64
    return wide


def make_typed_model(nodes, inputs, outputs, initializers=(), opset=13) -> onnx.ModelProto:
    """make_model with output names only: their types come from onnx's shape inference."""
    model = make_model(nodes, inputs, [(o, np.float32, None) for o in outputs], initializers,
                       opset)
    for out in model.graph.output:
        out.type.tensor_type.ClearField("elem_type")
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in [*inferred.graph.value_info, *inferred.graph.output]}
    for out in model.graph.output:
        out.type.CopyFrom(types[out.name])
    return model


def hard_digits_model() -> onnx.ModelProto:
    """The digits CNN with conv1's channel 0 scaled by 1000 and conv2's matching input
    weights by 1/1000: the same float function, but relu1_out's range now drowns the other
    channels when quantized per tensor (plain int8 falls to about a quarter right)."""
    from tests.conftest import SAMPLE_MODEL

    model = onnx.load(SAMPLE_MODEL)
    inits = {i.name: i for i in model.graph.initializer}

    def edit(name, fn):
        array = numpy_helper.to_array(inits[name]).copy()
        fn(array)
        inits[name].CopyFrom(numpy_helper.from_array(array, name))
    edit("conv1.weight", lambda a: a.__setitem__(0, a[0] * 1000))
    edit("conv1.bias", lambda a: a.__setitem__(0, a[0] * 1000))
    edit("conv2.weight", lambda a: a.__setitem__((slice(None), 0), a[:, 0] / 1000))
    return model
