"""int8 kernels in the bundle give the interpreter's bytes, both requantization rules.

Each case is compiled for the host, written as a bundle, loaded from its files and run on
seeded random int8 inputs; every element must equal the reference interpreter's result on the
same prepared graph (0 steps of difference). On an x86 CPU whose own kernels are not AVX2's
(AVX-512, with or without VNNI), every host case also runs compiled for x86-64-v3
(`host_levels`), so the AVX2 kernels are checked on every x86 machine.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from compiler.codegen import host
from compiler.codegen.bundle import write_bundle
from compiler.codegen.targets import Target, auto_lean_weights, get_target
from compiler.codegen.weights import int8_weight_bytes
from compiler.driver import Options, compilation, compile_graph
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.qmath.requant import REQUANT_KEY
from tests.codegen.objects import check_int8_object
from tests.conftest import shared_models
from tests.tflite.oracles import quantized
from tests.tflite.writer import Model, Op, T, write

SEEDS = range(50)  # seeded random inputs per case, as the int8 issue asks
INT8_MODELS = ["ad01_int8", "kws_ref_model", "pretrainedResnet_quant", "vww_96_int8"]


def host_levels() -> list[str]:
    """The x86 levels whose kernels a "host" case runs here: the host's own and, on a CPU
    whose own differ from AVX2's (AVX-512, with or without VNNI), x86-64-v3's too, so the
    AVX2 kernels are checked on every x86 machine."""
    from compiler.codegen.targets import missing_on_this_cpu

    own, avx2 = get_target("host"), get_target("x86-64-v3")
    if not own.triple.startswith("x86_64") or missing_on_this_cpu(avx2) or (
            own.int8_dot, own.vector_bits) == (avx2.int8_dot, avx2.vector_bits):
        return ["host"]
    return ["host", "x86-64-v3"]


def _bundle_equals_interpreter(graph, folder, seeds=SEEDS, target: str | Target = "host"
                               ) -> int:
    """Elements of the bundle's outputs that differ from the interpreter's, over `seeds`;
    for "host", summed over `host_levels` (the interpreter runs once per seed)."""
    prepared = compilation(graph).prepared
    levels = host_levels() if isinstance(target, str) and target == "host" else [target]
    runners = []
    try:
        for level in levels:
            net = compile_graph(prepared, get_target(level) if isinstance(level, str)
                                else level)
            where = folder if level == levels[0] else folder.parent / f"{folder.name}-{level}"
            write_bundle(net, where)
            runners.append(host.HostNet.from_bundle(where))
        differing = 0
        for seed in seeds:
            rng = np.random.default_rng(seed)
            feeds = {v.name: rng.integers(-128, 128, v.type.shape).astype(v.type.dtype)
                     for v in prepared.inputs}
            want = run(prepared, feeds)
            for runner in runners:
                got = runner.run(feeds)
                for value in prepared.outputs:
                    assert got[value.name].dtype == want[value.name].dtype
                    differing += int(np.count_nonzero(got[value.name].astype(np.int64)
                                                      != want[value.name].astype(np.int64)))
        return differing
    finally:
        for runner in runners:
            runner.close()


def _fully_connected(per_channel: bool, activation: int, rows: int = 1) -> bytes:
    rng = np.random.default_rng(4)
    units, depth = 7, 19
    ws = rng.uniform(0.002, 0.02, units if per_channel else 1).tolist()
    scales = ws * units if len(ws) == 1 else ws
    return write(Model([quantized("x", (rows, depth), 0.05, -9),
                        T("w", (units, depth), "int8", rng.integers(-127, 128, (units, depth)),
                          scale=ws, zero_point=[0] * len(ws)),
                        T("b", (units,), "int32", rng.integers(-3000, 3000, units),
                          scale=[0.05 * s for s in scales], zero_point=[0] * units),
                        quantized("y", (rows, units), 0.04, 11)],
                       [Op("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {
                           "FusedActivationFunction": activation}))], [0], [3]))


@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("activation", [0, 3])
def test_int8_fully_connected(rule, per_channel, activation, tmp_path):
    graph = load_model(_fully_connected(per_channel, activation, rows=3))
    graph.metadata[REQUANT_KEY] = rule
    assert _bundle_equals_interpreter(graph, tmp_path) == 0


@pytest.mark.parametrize("form", ["QDQ", "QOperator"])
def test_quantized_matmul_with_weight_zero_points(form, tmp_path):
    """onnxruntime's quantizer with uint8 weights: nonzero weight zero points, folded sums."""
    import onnx
    from onnx import TensorProto, helper
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    rng = np.random.default_rng(0)
    w = rng.standard_normal((12, 5)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
                              [onnx.numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    source, target = tmp_path / "mm.onnx", tmp_path / f"mm_{form}.onnx"
    onnx.save(model, source)

    class Data(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal((2, 12)).astype(np.float32)}
                            for _ in range(8)])

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(source), str(target), Data(), quant_format=getattr(QuantFormat, form),
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8)
    graph = load_model(target)
    prepared = compilation(graph).prepared
    assert {n.op for n in prepared.nodes} & {"QGemm", "QLinearMatMul"}
    # The float input and output stay float: only the integer part is checked here.
    differing = _bundle_equals_interpreter_float_io(prepared, tmp_path / "b")
    assert differing == 0


def _bundle_equals_interpreter_float_io(prepared, folder) -> int:
    net = compile_graph(prepared, get_target("host"))
    write_bundle(net, folder)
    runner = host.HostNet.from_bundle(folder)
    try:
        total = 0
        for seed in SEEDS:
            feeds = {v.name: np.random.default_rng(seed).standard_normal(v.type.shape)
                     .astype(np.float32) for v in prepared.inputs}
            want, got = run(prepared, feeds), runner.run(feeds)
            total += sum(int(np.count_nonzero(got[v.name] != want[v.name]))
                         for v in prepared.outputs)
        return total
    finally:
        runner.close()


@pytest.mark.slow
@pytest.mark.parametrize("source", ["onnx", "tflite"])
@pytest.mark.parametrize("name", INT8_MODELS)
def test_the_int8_mlperf_models_compile_to_the_interpreters_bytes(name, source, tmp_path):
    """The bundle equals the interpreter, which equals onnxruntime (ONNX files) or TFLite
    Micro (.tflite files) in tests/quant and tests/tflite: 0 differing elements."""
    path = shared_models() / source / f"{name}.{source}"
    assert _bundle_equals_interpreter(load_model(path), tmp_path, seeds=range(50)) == 0


@pytest.mark.slow
# cortex-m4, cortex-m7, cortex-m33, cortex-m55, cortex-m3
@pytest.mark.parametrize("machine", ["mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547",
                                     "mps2-an385"])
@pytest.mark.parametrize("source", ["tflite", "onnx"])
@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_models_run_exactly_on_cortex_m(machine, source, name, tmp_path):
    """Each int8 model (.tflite: tflite rule; .onnx: onnx rule) on its real sample input under
    QEMU: the interpreter's bytes."""
    _exact_on_board(machine, source, name, tmp_path, other_layout=False)


@pytest.mark.slow
@pytest.mark.parametrize("machine", ["mps2-an386", "mps2-an500", "mps2-an505"])  # DSP cores
@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_models_run_exactly_with_the_other_weight_layout(machine, name, tmp_path):
    """int8 weights as bytes where the automatic layout stores int16 pairs, and the reverse."""
    _exact_on_board(machine, "tflite", name, tmp_path, other_layout=True)


def _exact_on_board(machine: str, source: str, name: str, tmp_path, other_layout: bool):
    from tests.codegen import firmware
    from tests.samples import int8_sample

    firmware.require_tools()
    folder = shared_models()
    target = get_target(firmware.MACHINES[machine].target)
    prepared = compilation(load_model(folder / source / f"{name}.{source}")).prepared
    if other_layout:
        auto = auto_lean_weights(target, int8_weight_bytes(prepared)).lean_weights
        target = dataclasses.replace(target, lean_weights=not auto)
    net = compile_graph(prepared, target, name="net")
    x = prepared.inputs[0]

    def quantization():  # the .tflite twin's input parameters (an ONNX int8 input has none)
        twin = load_model(folder / "tflite" / f"{name}.tflite").inputs[0].type.quant
        return twin.scale[0], twin.zero_point[0]

    feeds = {x.name: int8_sample(name, x.type.shape, folder, quantization)}
    firmware.assert_exact(net, prepared, feeds, machine, tmp_path)


def test_an_int8_model_compiles_for_every_target():
    """An ELF of each target's architecture whose convolution uses that core's dot product."""
    from compiler.codegen.targets import target_names
    from tests.codegen.test_int8_dot_kernels import CASES

    graph = compilation(load_model(CASES["conv3x3-same-c16"]())).prepared
    for target in target_names():
        target = get_target(target)
        check_int8_object(compile_graph(graph, target), target)


def _conv_tflite(depthwise: bool, stride: int, padding: int, activation: int) -> bytes:
    from tests.tflite.test_tflite_builtins import _conv_model

    model, _ = _conv_model(depthwise, padding, stride, 1, activation, True, 2 if depthwise else 1)
    return write(model)


@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("depthwise,stride,padding,activation", [
    (False, 1, 0, 3), (False, 2, 1, 0), (True, 1, 0, 1), (True, 2, 0, 3)])
def test_int8_convolution(rule, depthwise, stride, padding, activation, tmp_path):
    graph = load_model(_conv_tflite(depthwise, stride, padding, activation))
    graph.metadata[REQUANT_KEY] = rule
    assert _bundle_equals_interpreter(graph, tmp_path) == 0


def test_int8_convolution_of_the_quantized_digits_cnn(tmp_path):
    """onnxruntime's quantizer (QDQ, per-channel): QLinearConv in both the float-input bundle."""
    from tests.quant.int8_oracle import quantize_digits

    graph = load_model(quantize_digits(tmp_path)["QDQ"])
    prepared = compilation(graph).prepared
    assert any(n.op == "QLinearConv" for n in prepared.nodes)
    assert _bundle_equals_interpreter_float_io(prepared, tmp_path / "b") == 0


def _binary(builtin: str, b_shape, activation: int) -> bytes:
    shape = (1, 4, 5, 6)
    options = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions"}[builtin]
    return write(Model([quantized("a", shape, 0.07, -4), quantized("b", b_shape, 0.03, 9),
                        quantized("y", shape, 0.09, -20)],
                       [Op(builtin, [0, 1], [2], (options, {
                           "FusedActivationFunction": activation}))], [0, 1], [2]))


# SUB exists under TFLite Micro's rule only (QLinearSub keeps it).
@pytest.mark.parametrize("rule,builtin", [("tflite", "ADD"), ("onnx", "ADD"), ("tflite", "SUB"),
                                          ("tflite", "MUL"), ("onnx", "MUL")])
@pytest.mark.parametrize("b_shape", [(1, 4, 5, 6), (1, 1, 1, 6), (1, 1, 1, 1)])
def test_int8_binary(rule, builtin, b_shape, tmp_path):
    graph = load_model(_binary(builtin, b_shape, 1 if builtin == "ADD" else 0))
    graph.metadata[REQUANT_KEY] = rule
    assert _bundle_equals_interpreter(graph, tmp_path) == 0


@pytest.mark.parametrize("builtin", ["LOGISTIC", "TANH", "HARD_SWISH", "RELU", "LEAKY_RELU"])
def test_int8_one_input_operators_are_tables(builtin, tmp_path):
    shape = (1, 4, 4, 16)
    out = {"LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}.get(builtin, (0.04, -7))
    options = ("LeakyReluOptions", {"Alpha": 0.3}) if builtin == "LEAKY_RELU" else None
    graph = load_model(write(Model([quantized("x", shape, 0.05, 3), quantized("y", shape, *out)],
                                   [Op(builtin, [0], [1], options)], [0], [1])))
    assert _bundle_equals_interpreter(graph, tmp_path) == 0


@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("out", [(0.05, -3), (0.02, 9)])  # equal to the input's, and not
def test_int8_global_average_pool(rule, out, tmp_path):
    shape = (1, 5, 7, 16)
    graph = load_model(write(Model(
        [quantized("x", shape, 0.05, -3), T("axes", (2,), "int32", np.array([1, 2])),
         quantized("y", (1, 1, 1, 16), *out)],
        [Op("MEAN", [0, 1], [2], ("ReducerOptions", {"KeepDims": True}))], [0], [2])))
    graph.metadata[REQUANT_KEY] = rule
    assert _bundle_equals_interpreter(graph, tmp_path) == 0


def test_an_int8_model_compiles_to_identical_objects_twice():
    data = _conv_tflite(False, 2, 1, 3)
    objects = [compile_graph(compilation(load_model(data)).prepared,
                             get_target("cortex-m7")).object for _ in range(2)]
    assert objects[0] == objects[1]


@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("padding,size,stride", [(1, 3, 2), (2, 3, 1), (1, 2, 2)])
def test_int8_sliding_average_pool(rule, padding, size, stride, tmp_path):
    """AVERAGE_POOL_2D, SAME (windows cut by the edge) and VALID, under both rules."""
    shape = (1, 7, 6, 5)
    out_hw = [-(-d // stride) if padding == 1 else (d - size) // stride + 1 for d in shape[1:3]]
    graph = load_model(write(Model(
        [quantized("x", shape, 0.05, -3), quantized("y", (1, *out_hw, 5), 0.05, -3)],
        [Op("AVERAGE_POOL_2D", [0], [1], ("Pool2DOptions", {
            "Padding": 0 if padding == 1 else 1, "StrideH": stride, "StrideW": stride,
            "FilterHeight": size, "FilterWidth": size}))], [0], [1])))
    graph.metadata[REQUANT_KEY] = rule
    assert any(n.op == "QLinearAveragePool" for n in compilation(graph).prepared.nodes)
    assert _bundle_equals_interpreter(graph, tmp_path) == 0


def _onnx_graph(model, tmp_path):
    import onnx

    onnx.save(model, tmp_path / "m.onnx")
    return load_model(tmp_path / "m.onnx")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("include_pad,ceil_mode", [(0, 0), (1, 0), (0, 1)])
def test_qlinear_average_pool_of_onnx(dtype, include_pad, ceil_mode, tmp_path):
    """onnxruntime's QLinearAveragePool: float32 taps, count_include_pad, differing scales."""
    from tests.quant.test_qlinear_ops import UNARY, _contrib_case, _scale_and_zero_point

    rng = np.random.default_rng(3)
    params = _scale_and_zero_point(rng, dtype) + _scale_and_zero_point(rng, dtype)
    graph = _onnx_graph(_contrib_case(
        "QLinearAveragePool", dtype, [[1, 4, 9, 7]], params, UNARY, kernel_shape=[3, 3],
        strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=include_pad,
        ceil_mode=ceil_mode), tmp_path)
    assert _bundle_equals_interpreter(graph, tmp_path / "b") == 0


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("axis", [1, 2])
def test_qlinear_concat(dtype, axis, tmp_path):
    """Inputs with other parameters go through tables; one with the output's is copied."""
    from onnx import helper, numpy_helper

    from tests.quant.test_qlinear_ops import _elem, _model, _scale_and_zero_point

    rng = np.random.default_rng(5)
    shapes = [[1, 2, 5], [1, 3, 5], [1, 1, 5]] if axis == 1 else [[1, 2, 3], [1, 2, 4],
                                                                   [1, 2, 1]]
    y_params = _scale_and_zero_point(rng, dtype)
    triples = [_scale_and_zero_point(rng, dtype) for _ in shapes]
    triples[1] = y_params
    names, inits = ["ys", "yz"], [numpy_helper.from_array(p, n)
                                  for p, n in zip(y_params, ["ys", "yz"])]
    for j, (s, z) in enumerate(triples):
        names += [f"x{j}", f"s{j}", f"z{j}"]
        inits += [numpy_helper.from_array(s, f"s{j}"), numpy_helper.from_array(z, f"z{j}")]
    node = helper.make_node("QLinearConcat", names, ["y"], domain="com.microsoft", axis=axis)
    inputs = [helper.make_tensor_value_info(f"x{j}", _elem(dtype), s)
              for j, s in enumerate(shapes)]
    graph = _onnx_graph(_model(node, inputs, helper.make_tensor_value_info(
        "y", _elem(dtype), None), inits), tmp_path)
    prepared = compilation(graph).prepared
    assert [n.op for n in prepared.nodes] == ["QLinearConcat"]
    assert _bundle_equals_interpreter(graph, tmp_path / "b") == 0


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("group,stride,pad,per_channel", [(1, 1, 1, False), (2, 2, 0, True),
                                                           (4, 1, 1, True)])
def test_conv_integer(dtype, group, stride, pad, per_channel, tmp_path):
    """ConvInteger's int32 sums, weight zero points folded into the weights at compile time."""
    from onnx import TensorProto, helper, numpy_helper

    from tests.quant.test_qlinear_ops import _elem, _model

    rng = np.random.default_rng(group)
    w = rng.integers(-127, 128, (8, 4 // group, 3, 3)).astype(np.int8)
    w_zp = rng.integers(-5, 6, 8 if per_channel else 1).astype(np.int8)
    x_zp = np.array(rng.integers(-20, 20), dtype)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], group=group,
                            strides=[stride, stride], pads=[pad] * 4)
    graph = _onnx_graph(_model(
        node, [helper.make_tensor_value_info("x", _elem(dtype), [1, 4, 7, 6])],
        helper.make_tensor_value_info("y", TensorProto.INT32, None),
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(x_zp, "xz"),
         numpy_helper.from_array(w_zp if per_channel else w_zp.reshape(()), "wz")]), tmp_path)
    assert any(n.op == "ConvInteger" for n in compilation(graph).prepared.nodes)
    assert _bundle_equals_interpreter(graph, tmp_path / "b") == 0


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("constant_b", [True, False])
def test_matmul_integer(dtype, constant_b, tmp_path):
    """MatMulInteger with per-row left and per-column right zero points (constant right)."""
    from onnx import TensorProto, helper, numpy_helper

    from tests.quant.test_qlinear_ops import _elem, _model

    rng = np.random.default_rng(8)
    rows, depth, columns = 3, 9, 5
    a_zp = rng.integers(0, 20, rows).astype(dtype)
    inputs = [helper.make_tensor_value_info("a", _elem(dtype), [2, rows, depth])]
    inits = [numpy_helper.from_array(a_zp, "az")]
    if constant_b:
        inits += [numpy_helper.from_array(rng.integers(-127, 128, (depth, columns))
                                          .astype(np.int8), "b"),
                  numpy_helper.from_array(rng.integers(-4, 5, columns).astype(np.int8), "bz")]
    else:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.INT8, [depth, columns]))
        inits.append(numpy_helper.from_array(np.array(3, np.int8), "bz"))
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    graph = _onnx_graph(_model(node, inputs, helper.make_tensor_value_info(
        "y", TensorProto.INT32, None), inits), tmp_path)
    assert _bundle_equals_interpreter(graph, tmp_path / "b") == 0


def _residual_block(channels: int, activation: int) -> bytes:
    """a -> CONV_2D -> x -> CONV_2D -> h -> CONV_2D -> c, then ADD(c, x): a residual block."""
    rng = np.random.default_rng(6)
    shape, wshape = (1, 7, 6, channels), (channels, 3, 3, channels)
    tensors, ops = [quantized("a", shape, 0.04, 5)], []
    sources = [0]
    for i, (scale, zero) in enumerate([(0.05, -7), (0.06, 2), (0.05, -3)]):
        ws = rng.uniform(0.005, 0.03, channels).tolist()
        base = len(tensors)
        tensors += [T(f"w{i}", wshape, "int8", rng.integers(-127, 128, wshape), scale=ws,
                      zero_point=[0] * channels, axis=0),
                    T(f"b{i}", (channels,), "int32", rng.integers(-800, 800, channels),
                      scale=[0.04 * s for s in ws], zero_point=[0] * channels),
                    quantized(f"y{i}", shape, scale, zero)]
        ops.append(Op("CONV_2D", [sources[-1], base, base + 1], [base + 2], ("Conv2DOptions", {
            "Padding": 0, "StrideH": 1, "StrideW": 1, "FusedActivationFunction": 1})))
        sources.append(base + 2)
    tensors.append(quantized("y", shape, 0.07, 3))
    ops.append(Op("ADD", [sources[3], sources[1]], [len(tensors) - 1],
                  ("AddOptions", {"FusedActivationFunction": activation})))
    return write(Model(tensors, ops, [0], [len(tensors) - 1]))


@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("channels,activation", [(8, 0), (16, 1), (5, 0)])
def test_int8_residual_add_fused_into_its_convolution(rule, channels, activation, tmp_path):
    """The Add is done in the last convolution's store, in place over its residual, with the
    interpreter's bytes: VNNI and generic kernels, vector and scalar stores; fused for
    Cortex-M7 too, not for Helium (M55), whose Add is faster in a kernel of its own (bytes on
    the boards: test_int8_models_run_exactly_on_cortex_m, ResNet-8)."""
    graph = load_model(_residual_block(channels, activation))
    graph.metadata[REQUANT_KEY] = rule
    assert _bundle_equals_interpreter(graph, tmp_path / "host") == 0
    # Without VNNI: the generic kernel's vector (8, 16) and scalar (5) stores.
    assert _bundle_equals_interpreter(graph, tmp_path / "x86", target="x86-64") == 0
    compiled = compilation(graph)
    whole = frozenset({"row_chains"})  # the fusion of whole tensors, not rows of a chain
    for target in ("host", "cortex-m7", "cortex-m55"):
        ops = [k.op for k in compiled.net(Options(target, disabled_lowering=whole)).kernels]
        # Helium's Add is faster in a kernel of its own.
        last = (["QLinearConv", "QLinearAdd"] if target == "cortex-m55"
                else ["QLinearConv+QLinearAdd"])
        assert ops == ["QLinearConv", "QLinearConv", *last], target
    # Two tensors live at once, not three: the sum is written over the residual.
    tensor = graph.inputs[0].type.nbytes
    assert compiled.plan(Options("host", alignment=1, disabled_lowering=whole)
                         ).arena.size == 2 * tensor
