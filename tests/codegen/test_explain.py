"""Per-kernel code for the GUI: loaded nodes map to kernels, each kernel compiles on its own."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from tests.conftest import SAMPLE_MODEL, shared_models


@pytest.fixture(scope="module")
def sample():
    """(loaded graph, final graph, loaded node id by name, kernel map) of the sample CNN."""
    graph = load_onnx(SAMPLE_MODEL)
    compiled = compilation(graph)
    return graph, compiled.final, {n.name: n.id for n in graph.nodes}, compiled.kernels()


def test_kernels_match_the_whole_network(sample):
    _, final, _, kernels = sample
    net = compile_graph(final, get_target("x86-64"))
    assert [(k.symbol, k.op, k.nodes) for k in net.kernels] == \
        [(s.symbol, s.op, s.nodes) for s in kernels.steps]


def test_loaded_nodes_map_to_their_fused_kernel(sample):
    graph, final, ids, kernels = sample
    node, text = kernels.explain(graph, final, ids["relu2"])
    conv, same = kernels.explain(graph, final, ids["conv2"])
    assert node is conv and node.op == "Conv"
    assert text == "relu2 is part of kernel k1 Conv (fused from conv2, relu2)"
    assert same.startswith("conv2 is part of kernel k1 Conv")
    assert kernels.explain(graph, final, ids["pool1"])[1] == "pool1 is kernel k2 MaxPool"
    # Flatten became a Reshape view and was folded into the FC weights: the FC kernel wins.
    fc, text = kernels.explain(graph, final, ids["flatten"])
    assert fc.op == "FullyConnected" and "fused from flatten, fc" in text
    assert kernels.explain(graph, final, 999)[0] is None


@pytest.mark.parametrize("target", ["host", "x86-64"])
def test_conv_kernel_on_x86(sample, target):
    _, final, _, kernels = sample
    code = kernels.kernel_code("Conv_29", target)
    assert code.symbol == "net.k1.Conv" and code.nodes == ("Conv_29",)
    assert re.search(r'define void @"?net\.k1\.Conv\b', code.llvm_ir)
    assert "fmul" in code.llvm_ir or "llvm.fma" in code.llvm_ir
    assert "net.k0" not in code.llvm_ir  # only that kernel
    if get_target(target).triple.startswith("x86_64"):
        assert re.search(r"^net\.k1\.Conv:", code.assembly, re.M)
        assert re.search(r"\b(vfmadd\w+|mulps|vmulps|mulss)\b", code.assembly)
    assert kernels.kernel_code("Conv_29", target) is code  # cached


def test_conv_kernel_on_cortex_m7(sample):
    _, final, _, kernels = sample
    code = kernels.kernel_code("Conv_28", "cortex-m7")
    assert code.target == "cortex-m7" and ".thumb_func" in code.assembly
    assert re.search(r"^\s+(vfma|vmla)\.f32\s", code.assembly, re.M)


def test_view_and_unknown_nodes_have_no_kernel(sample):
    _, final, _, kernels = sample
    view = next(n for n in final.nodes if n.op == "Reshape")
    assert kernels.kernel_of(view.name) is None
    with pytest.raises(KilnError, match="no kernel"):
        kernels.kernel_code(view.name, "host")
    with pytest.raises(KilnError, match="no node"):
        kernels.kernel_code("nope", "host")


def test_lowir_line_is_the_node_instruction(sample):
    _, final, _, kernels = sample
    plan = kernels.plan
    lines = plan.lowir.dump().splitlines()
    assert lines[kernels.lowir_line("Conv_30")].strip().startswith("3  Conv Conv_30:")
    assert kernels.lowir_line("nope") == -1


def test_fused_conv_add_kernel():
    path = shared_models() / "onnx" / "pretrainedResnet.onnx"
    graph = load_onnx(path)
    compiled = compilation(graph)
    final, kernels = compiled.final, compiled.kernels()
    step = next(s for s in kernels.steps if s.op == "Conv+Add")
    add = next(n for n in graph.nodes if n.op == "Add")
    node, text = kernels.explain(graph, final, add.id)
    assert node.name == step.nodes[1]
    assert text.startswith(f"{add.name} is part of kernel k{step.index} Conv+Add (fused from ")
    # The residual's producer has its own kernel, so it is not listed as fused in here.
    assert "Relu__5" not in text
    code = kernels.kernel_code(step.nodes[1], "host")
    assert code.symbol == step.symbol and code.nodes == step.nodes
    plan = kernels.plan
    assert "Conv+Add" in plan.lowir.dump().splitlines()[kernels.lowir_line(step.nodes[1])]


def test_a_quantized_weight_belongs_to_its_integer_kernel():
    graph = load_onnx(shared_models() / "onnx" / "kws_ref_model.onnx")
    compiled = compilation(graph)
    final, kernels = compiled.final, compiled.kernels()
    node = next(n for n in graph.nodes if n.op == "DequantizeLinear"
                and n.name.endswith("MatMul_dequant"))
    found, text = kernels.explain(graph, final, node.id)
    assert found is not None and found.op == "QGemm"
    assert "is part of kernel" in text and "QGemm" in text


def test_a_dequantized_weight_of_a_float_layer_has_no_code(tmp_path):
    """A Conv whose output is not quantized stays float: its weight is folded, with no code."""
    w = np.random.default_rng(0).integers(-127, 128, (2, 1, 3, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(0.01, np.float32), "ws")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "ws"], ["wf"], name="w_dequant"),
             helper.make_node("Conv", ["x", "wf"], ["y"], name="conv")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 1, 5, 5])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 2, 3, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    loaded = load_onnx(tmp_path / "m.onnx")
    compiled = compilation(loaded)
    node = next(n for n in loaded.nodes if n.op == "DequantizeLinear")
    found, text = compiled.kernels().explain(loaded, compiled.final, node.id)
    assert found is not None and found.op == "DequantizeLinear"
    assert text.endswith("folded into a constant weight before code generation: it has no code")
