"""ONNX loading details on models built here: old-IR weights, metadata, quantization, export."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.frontends.onnx import load_onnx, save_onnx, to_onnx
from compiler.interpreter import run
from compiler.ir import Constant, Placeholder
from tests.helpers import make_model, ort_run


def _old_ir_model():
    """Weights listed as graph inputs too (IR 3, as mnist-8 and other early exports do)."""
    w = np.arange(4, dtype=np.float32).reshape(1, 4)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "old",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    model.ir_version = 3
    return model


def test_old_ir_initializers_listed_as_inputs_are_constants():
    graph = load_onnx(_old_ir_model())
    assert [v.name for v in graph.inputs] == ["x"]
    assert isinstance(graph.constants["w"], Constant)
    x = np.ones((1, 4), np.float32)
    np.testing.assert_array_equal(run(graph, {"x": x})["y"], [[1, 2, 3, 4]])


def test_old_ir_saves_back_with_weights_as_inputs(tmp_path):
    graph = load_onnx(_old_ir_model())
    path = tmp_path / "old.onnx"
    save_onnx(graph, path)
    saved = onnx.load(path)
    onnx.checker.check_model(saved, full_check=True)
    assert saved.ir_version == 3 and saved.opset_import[0].version == 8
    assert {i.name for i in saved.graph.input} == {"x", "w"}
    x = np.ones((1, 4), np.float32)
    np.testing.assert_array_equal(ort_run(saved, {"x": x})[0], [[1, 2, 3, 4]])


def test_metadata_survives_a_round_trip():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                       [("x", "float32", [2])], [("y", "float32", [2])])
    model.producer_name, model.doc_string = "maker", "a doc"
    model.metadata_props.add(key="author", value="someone")
    saved = to_onnx(load_onnx(model))
    assert (saved.producer_name, saved.doc_string) == ("maker", "a doc")
    assert {p.key: p.value for p in saved.metadata_props} == {"author": "someone"}
    assert saved.graph.node[0].name == "r"


def test_quantize_linear_output_carries_quantization_parameters():
    model = make_model(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])],
        [("x", "float32", [1, 4])], [("q", "int8", [1, 4])],
        {"s": np.array(0.5, np.float32), "z": np.array(-3, np.int8)})
    graph = load_onnx(model)
    quant = graph.outputs[0].type.quant
    assert quant is not None and quant.scale == (0.5,) and quant.zero_point == (-3,)


def test_node_ids_follow_file_order_and_provenance_is_self():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    model = make_model(nodes, [("x", "float32", [2])], [("y", "float32", [2])])
    graph = load_onnx(model)
    assert [(n.id, n.provenance) for n in graph.nodes] == [(0, (0,)), (1, (1,))]
    assert graph.next_id == 2
    assert isinstance(graph.inputs[0], Placeholder)


def test_unsorted_nodes_are_ordered_topologically():
    model = make_model([helper.make_node("Relu", ["a"], ["y"], name="second"),
                        helper.make_node("Relu", ["x"], ["a"], name="first")],
                       [("x", "float32", [2])], [("y", "float32", [2])])
    graph = load_onnx(model)
    assert [n.name for n in graph.nodes] == ["first", "second"]
