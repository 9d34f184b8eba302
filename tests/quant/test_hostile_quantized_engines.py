"""Hostile and unusual quantized models: the compiled bundle equals the reference interpreter,
and the interpreter equals the model's oracle (onnxruntime's integer kernels or TFLite Micro).

- int32 biases near 2**31: both runtimes accumulate in int32 and wrap (onnxruntime's MLAS adds
  the bias with _mm_add_epi32 before converting to float, TFLite Micro adds it to an int32), so
  Kiln's integer operators wrap too; a QDQ unit whose sums could wrap stays float, because its
  float graph does not wrap.
- A bias DequantizeLinear with a zero point is folded (bias - zero point, in int32 as
  onnxruntime's DequantizeLinear subtracts it).
- A QLinearConv whose weights are a graph input runs in the interpreter as in onnxruntime, and
  compiling it is refused in one sentence.
- 1-D convolutions compile as 2-D ones of height 1; 3-D ones are refused in one sentence.

Every case is a graph built here; the MLPerf Tiny models with their biases pushed to int32's
limits add real layers. onnxruntime runs int8 activations only (its u8s8 kernels saturate
16-bit sums on x86 without VNNI, so uint8 cases would depend on the CPU).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from app.cli import main
from compiler.codegen.host import HostNet
from compiler.codegen.table import lookup
from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.qmath.accumulator import BiasDequantize, fold_bias
from compiler.qmath.requant import REQUANT_KEY
from tests.codegen import firmware
from tests.conftest import shared_models
from tests.helpers import assert_close, make_model, ort_run
from tests.quant.int8_oracle import differing, integer_stage, ort_session
from tests.tflite.oracles import quantized, tflm
from tests.tflite.writer import Model, Op, T, write

SEEDS = range(4)
I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
HOSTILE = [I32_MAX, I32_MIN, I32_MAX - 1000, I32_MIN + 1000]  # wrap for some inputs, not all
RULES = ["onnx", "tflite"]


def _model(nodes, inputs, outputs, inits, opset=13):
    """make_model, with onnxruntime's com.microsoft domain imported too (QGemm)."""
    model = make_model(nodes, inputs, outputs, inits, opset)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def _feeds(graph, seed):
    rng = np.random.default_rng(seed)
    return {v.name: rng.integers(np.iinfo(v.type.dtype).min, np.iinfo(v.type.dtype).max + 1,
                                 v.type.shape).astype(v.type.dtype)
            for v in graph.inputs}


def _ruled(graph, rule: str):
    graph.metadata[REQUANT_KEY] = rule
    return graph


def _compiled_equals_interpreter(graph, target="host", seeds=SEEDS) -> None:
    """`graph` compiled for `target` (run on this host) gives the interpreter's bytes."""
    prepared = compilation(graph).prepared
    net = HostNet(compile_graph(prepared, get_target(target) if isinstance(target, str)
                                else target))
    try:
        for seed in seeds:
            feeds = _feeds(prepared, seed)
            want, got = run(prepared, feeds), net.run(feeds)
            for value in prepared.outputs:
                assert differing(got[value.name], want[value.name]) == 0, \
                    f"seed {seed}: {value.name} compiled differs from the interpreter"
    finally:
        net.close()


def _interpreter_equals_onnxruntime(model, seeds=SEEDS) -> None:
    """Kiln's interpreter on the loaded model equals onnxruntime's kernels, node for node."""
    graph = load_onnx(model)
    for seed in seeds:
        feeds = _feeds(graph, seed)
        ours = run(graph, feeds)
        for value, want in zip(graph.outputs, ort_run(model, feeds)):
            assert differing(ours[value.name], want) == 0, f"seed {seed}: {value.name}"


# -- 1. int32 biases near 2**31 in integer operators: they wrap, as in both runtimes -----------

def _qlinear_conv(bias, weights_shape=(4, 4, 3, 3), per_channel=True, **attrs):
    rng = np.random.default_rng(1)
    out_c = weights_shape[0]
    spatial = [5] * (len(weights_shape) - 2)
    inits = {"xs": np.float32(0.05), "xz": np.int8(3),
             "w": rng.integers(-127, 128, weights_shape).astype(np.int8),
             "ws": (rng.uniform(0.005, 0.02, out_c) if per_channel else np.array(0.01))
             .astype(np.float32),
             "wz": np.zeros(out_c if per_channel else (), np.int8),
             "ys": np.float32(0.3), "yz": np.int8(-5)}
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias is not None:
        inits["b"] = np.asarray(bias, np.int32)
        names.append("b")
    if "auto_pad" not in attrs:
        attrs.setdefault("pads", [1] * (2 * len(spatial)))
    node = helper.make_node("QLinearConv", names, ["y"], **attrs)
    channels = weights_shape[1] * attrs.get("group", 1)
    return make_model([node], [("x", np.int8, [1, channels, *spatial])], [("y", np.int8, None)],
                      inits)


def test_qlinear_conv_bias_near_int32_limits_wraps_as_onnxruntime():
    model = _qlinear_conv(HOSTILE)
    _interpreter_equals_onnxruntime(model)
    for rule in RULES:
        _compiled_equals_interpreter(_ruled(load_onnx(model), rule))


def _qgemm(bias, rows=3, depth=16):
    rng = np.random.default_rng(2)
    n = len(bias)
    inits = {"as": np.float32(0.05), "az": np.int8(3),
             "b": rng.integers(-127, 128, (depth, n)).astype(np.int8), "bs": np.float32(0.01),
             "bz": np.int8(0), "c": np.asarray(bias, np.int32), "ys": np.float32(0.002),
             "yz": np.int8(-3)}
    node = helper.make_node("QGemm", ["a", "as", "az", "b", "bs", "bz", "c", "ys", "yz"], ["y"],
                            domain="com.microsoft")
    return _model([node], [("a", np.int8, [rows, depth])], [("y", np.int8, [rows, n])], inits)


def test_qgemm_bias_near_int32_limits_wraps_as_onnxruntime():
    model = _qgemm(HOSTILE + [5, -7, 0, 123])
    _interpreter_equals_onnxruntime(model)
    for rule in RULES:
        _compiled_equals_interpreter(_ruled(load_onnx(model), rule))


def _tflite_conv(bias, depthwise=False, cout=4):
    rng = np.random.default_rng(3)
    cin, cout = (8, 8) if depthwise else (8, cout)
    ws = rng.uniform(0.005, 0.03, cout).tolist()
    wshape = (1, 3, 3, cout) if depthwise else (cout, 3, 3, cin)
    op = (("DEPTHWISE_CONV_2D", "DepthwiseConv2DOptions", {"DepthMultiplier": 1})
          if depthwise else ("CONV_2D", "Conv2DOptions", {}))
    return Model(
        [quantized("x", (1, 6, 5, cin), 0.04, 9),
         T("w", wshape, "int8", rng.integers(-127, 128, wshape), scale=ws,
           zero_point=[0] * cout, axis=3 if depthwise else 0),
         T("b", (cout,), "int32", np.resize(np.asarray(bias, np.int64), cout),
           scale=[0.04 * s for s in ws], zero_point=[0] * cout),
         quantized("y", (1, 6, 5, cout), 0.05, -7)],
        [Op(op[0], [0, 1, 2], [3], (op[1], {"Padding": 0, "StrideH": 1, "StrideW": 1, **op[2]}))],
        [0], [3])


def _tflite_fully_connected(bias, depth=24):
    rng = np.random.default_rng(4)
    units = len(bias)
    return Model(
        [quantized("x", (2, depth), 0.05, -9),
         T("w", (units, depth), "int8", rng.integers(-127, 128, (units, depth)), scale=[0.01],
           zero_point=[0]),
         T("b", (units,), "int32", np.asarray(bias), scale=[0.0005], zero_point=[0]),
         quantized("y", (2, units), 0.04, 11)],
        [Op("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {
            "FusedActivationFunction": 0}))], [0], [3])


TFLITE_CASES = {
    "conv": lambda: _tflite_conv(HOSTILE),
    "depthwise": lambda: _tflite_conv(HOSTILE, depthwise=True),
    "fully_connected": lambda: _tflite_fully_connected(HOSTILE + [17, -4, 0, 9]),
}


def _interpreter_equals_tflite_micro(data: bytes, seeds=SEEDS) -> None:
    oracle = tflm(data)
    graph = load_model(data)
    for seed in seeds:
        feeds = _feeds(graph, seed)
        for index, value in enumerate(graph.inputs):
            oracle.set_input(feeds[value.name], index)
        oracle.invoke()
        ours = run(graph, feeds)[graph.outputs[0].name]
        assert differing(ours, oracle.get_output(0)) == 0, f"seed {seed}"


@pytest.mark.parametrize("case", sorted(TFLITE_CASES))
def test_tflite_bias_near_int32_limits_wraps_as_tflite_micro(case):
    data = write(TFLITE_CASES[case]())
    _interpreter_equals_tflite_micro(data)
    for rule in RULES:
        _compiled_equals_interpreter(_ruled(load_model(data), rule))


# -- 2. QDQ units: the bias's zero point and scale, and sums that could wrap -----------------
# Power-of-two scales make the float graph exact, so onnxruntime's float Conv and Kiln's
# integer operator agree bit for bit (ties included) whenever they compute the same thing.

XS, WS, YS = 2.0**-4, 2.0**-6, 2.0**-3


def _qdq(op: str, bias, bias_zero_point=None, w_scale=WS, channels=4, outputs=4):
    """DequantizeLinear -> op (-> bias Add) -> QuantizeLinear; per channel when `w_scale` or
    `bias_zero_point` has one value per output."""
    rng = np.random.default_rng(5)
    x_shape = [1, channels, 5, 5] if op == "Conv" else [3, channels]
    w_shape = [outputs, channels, 3, 3] if op == "Conv" else [channels, outputs]
    bias_inputs = ["b", "bs"] + (["bz"] if bias_zero_point is not None else [])
    w_per_channel = np.ndim(w_scale) == 1
    per_channel = w_per_channel or np.ndim(bias_zero_point) == 1
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"],
                              axis=0 if op == "Conv" else 1),
             helper.make_node("DequantizeLinear", bias_inputs, ["bf"], axis=0)]
    if op == "Conv":
        nodes.append(helper.make_node("Conv", ["xf", "wf", "bf"], ["yf"], pads=[1, 1, 1, 1]))
    elif op == "Gemm":
        nodes.append(helper.make_node("Gemm", ["xf", "wf", "bf"], ["yf"]))
    else:
        nodes += [helper.make_node("MatMul", ["xf", "wf"], ["mf"]),
                  helper.make_node("Add", ["mf", "bf"], ["yf"])]
    nodes.append(helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"]))
    inits = {"xs": np.float32(XS), "xz": np.int8(3),
             "w": rng.integers(-127, 128, w_shape).astype(np.int8),
             "ws": np.asarray(w_scale, np.float32),
             "wz": np.zeros(outputs if w_per_channel else (), np.int8),
             "b": np.asarray(bias, np.int32),
             "bs": np.broadcast_to(np.float32(XS) * np.asarray(w_scale, np.float32),
                                   (outputs,) if per_channel else ()).copy(),
             "ys": np.float32(YS), "yz": np.int8(-5)}
    if bias_zero_point is not None:
        inits["bz"] = np.asarray(bias_zero_point, np.int32)
    return make_model(nodes, [("x", np.int8, x_shape)], [("y", np.int8, None)], inits)


def _notes(compiled) -> list[str]:
    return [note for record in compiled.records for note in record.notes]


def _qdq_checks(model, rule: str, fused: bool) -> list[str]:
    """Final stage and bundle against onnxruntime; returns the pass notes."""
    graph = _ruled(load_onnx(model), rule)
    compiled = compilation(graph)
    final = compiled.final
    ops = {n.op for n in final.nodes}
    assert bool(ops & {"QLinearConv", "QGemm"}) == fused, ops
    session = ort_session(integer_stage(compiled))
    for seed in SEEDS:
        feeds = _feeds(graph, seed)
        ours = run(final, feeds)["y"]
        assert differing(ours, ort_run(model, feeds)[0]) == 0, f"seed {seed}: float graph"
        assert differing(ours, session.run(None, feeds)[0]) == 0, f"seed {seed}: integer stage"
    _compiled_equals_interpreter(graph)
    return _notes(compiled)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("op", ["Conv", "MatMul", "Gemm"])
def test_a_qdq_unit_whose_sums_could_wrap_stays_float(op, rule):
    notes = _qdq_checks(_qdq(op, HOSTILE), rule, fused=False)
    assert any("could reach" in n and "wrap" in n for n in notes), notes


@pytest.mark.parametrize("rule", RULES)
def test_a_dead_channel_whose_bias_was_clipped_to_int32_still_fuses(rule):
    """Weights of scale ~1e-32 (a channel a quantizer saw as all zeros) and a bias clipped to
    int32: its sums may wrap, but every value, wrapped or not, requantizes to the zero point."""
    model = _qdq("Conv", [I32_MAX, I32_MIN, 100, -100],
                 w_scale=np.array([1e-32, 2e-32, WS, WS], np.float32))
    _qdq_checks(model, rule, fused=True)


@pytest.mark.parametrize("op", ["Conv", "MatMul", "Gemm"])
def test_a_bias_zero_point_is_folded_into_the_integer_bias(op):
    rng = np.random.default_rng(6)
    bias = rng.integers(-3000, 3000, 4)
    _qdq_checks(_qdq(op, bias, bias_zero_point=1000), "onnx", fused=True)
    # Per channel too; and one that leaves int32 once the zero point is taken off stays float.
    _qdq_checks(_qdq(op, bias, bias_zero_point=[1000, -7, 0, 2**20]), "onnx", fused=True)
    notes = _qdq_checks(_qdq(op, [I32_MIN + 5, 1, 2, 3], bias_zero_point=1000), "onnx",
                        fused=False)
    assert any("could reach" in n for n in notes), notes


def test_fold_bias_checks_scale_zero_point_and_reach():
    """The rules `to_integer` applies, on numbers worked out by hand."""
    rows = np.ones((2, 3), np.int64)  # int8 x, zero point 0: each sum lies in [-384, 381]
    scales = {"x_scale": 0.5, "w_scale": 0.25, "y_scale": 0.5, "fully_connected": False}

    def fold(integers, zero_point=None, scale=0.125, mode="onnx", **changes):
        bias = BiasDequantize(np.asarray(integers, np.int32), np.float32(scale),
                              None if zero_point is None else np.asarray(zero_point, np.int32))
        return fold_bias(rows, "int8", 0, bias, mode=mode, **{**scales, **changes})

    kept = fold([10, 20])
    assert kept.problem is None and not kept.changed and kept.bias.tolist() == [10, 20]
    folded = fold([10, 20], zero_point=[5, -5])
    assert folded.problem is None and folded.changed and folded.bias.tolist() == [5, 25]
    assert "not input scale x weight scale" in fold([10, 20], scale=0.25).problem
    # -2**31 - 1 wraps to 2**31 - 1 (as DequantizeLinear subtracts), and 381 more cannot fit.
    assert "could reach 2147484028" in fold([I32_MIN, 0], zero_point=1).problem
    assert fold([I32_MAX - 381, I32_MIN + 384]).problem is None
    assert "could reach" in fold([I32_MAX - 380, 0]).problem
    # The tflite rule shifts left by 7 first here (0.5 * 0.25 / 0.001 = 125 = 0.98 * 2**7).
    assert fold([2**24, 0], y_scale=0.001).problem is None
    assert "could reach" in fold([2**24, 0], y_scale=0.001, mode="tflite").problem
    # A dead channel (weight scale ~1e-32, bias clipped to int32 by a quantizer) may wrap:
    # every value it can take, wrapped or not, requantizes to the zero point.
    dead = np.array([0.25, 1e-32], np.float32)
    for mode in RULES:
        folded = fold([7, I32_MAX], scale=np.float32(0.5) * dead, w_scale=dead, mode=mode)
        assert folded.problem is None and folded.bias.tolist() == [7, I32_MAX]
        assert "could reach" in fold([I32_MAX, 7], scale=np.float32(0.5) * dead,
                                     w_scale=dead, mode=mode).problem


# -- 3. weights as a graph input ---------------------------------------------------------------

@pytest.mark.parametrize("group,per_channel", [(1, False), (1, True), (2, True)])
def test_qlinear_conv_with_runtime_weights_runs_as_onnxruntime(group, per_channel):
    model = _qlinear_conv([5, -900, 70000, 3], weights_shape=(4, 4 // group, 3, 3),
                          per_channel=per_channel, group=group)
    weights = model.graph.initializer[[i.name for i in model.graph.initializer].index("w")]
    model.graph.input.append(helper.make_tensor_value_info(
        "w", onnx.TensorProto.INT8, list(weights.dims)))
    model.graph.initializer.remove(weights)
    _interpreter_equals_onnxruntime(model, seeds=range(8))
    # The tuned kernels arrange their weights at compile time; run-time weights take the direct
    # integer kernel, whose codes equal the interpreter's.
    from compiler.codegen.host import HostNet
    from compiler.interpreter import run

    prepared = compilation(load_onnx(model)).prepared
    runner = HostNet(compile_graph(prepared, get_target("host")))
    rng = np.random.default_rng(4)
    for _ in range(3):
        feeds = {p.name: rng.integers(-128, 128, p.type.shape).astype(p.type.dtype)
                 if p.type.dtype == "int8" else rng.standard_normal(p.type.shape).astype(
                     p.type.dtype) for p in prepared.inputs}
        want = run(prepared, feeds)[prepared.outputs[0].name]
        got = runner.run(feeds)[prepared.outputs[0].name]
        assert np.array_equal(got, want)
    runner.close()


# -- 4. convolutions over one and three spatial axes -------------------------------------------

CONV_1D = {
    "plain": {},
    "strided-dilated": {"strides": [2], "dilations": [2], "pads": [2, 1]},
    "grouped-same": {"group": 2, "auto_pad": "SAME_UPPER"},
}


@pytest.mark.parametrize("case", sorted(CONV_1D))
def test_qlinear_conv_1d_compiles_as_an_image_of_one_row(case):
    attrs = dict(CONV_1D[case])
    group = attrs.get("group", 1)
    model = _qlinear_conv([5, -900, 70000, 3, I32_MAX, -60], weights_shape=(6, 4 // group, 3),
                          **attrs)
    _interpreter_equals_onnxruntime(model)
    for rule in RULES:
        graph = _ruled(load_onnx(model), rule)
        prepared = compilation(graph).prepared
        conv = next(n for n in prepared.nodes if n.op == "QLinearConv")
        assert conv.output.type.rank == 4 and conv.output.type.shape[1] == 1  # NHWC, H = 1
        _compiled_equals_interpreter(graph)


def test_float_and_qdq_conv_1d_compile():
    rng = np.random.default_rng(7)
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 2], strides=[2])
    model = make_model([conv, helper.make_node("Relu", ["c"], ["y"])],
                       [("x", np.float32, [2, 3, 11])], [("y", np.float32, None)],
                       {"w": rng.standard_normal((5, 3, 4)).astype(np.float32),
                        "b": rng.standard_normal(5).astype(np.float32)})
    graph = load_onnx(model)
    prepared = compilation(graph).prepared
    net = HostNet(compile_graph(prepared, get_target("host")))
    try:
        feeds = {"x": rng.standard_normal((2, 3, 11)).astype(np.float32)}
        got = net.run(feeds)["y"]
    finally:
        net.close()
    assert_close(got, run(prepared, feeds)["y"], what="compiled")
    assert_close(got, ort_run(model, feeds)[0], what="onnxruntime")
    # A QDQ 1-D unit becomes a QLinearConv, then an image of one row.
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"]),
             helper.make_node("Conv", ["xf", "wf"], ["yf"], pads=[1, 1]),
             helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"])]
    model = make_model(nodes, [("x", np.int8, [1, 4, 9])], [("y", np.int8, None)],
                       {"xs": np.float32(XS), "xz": np.int8(3),
                        "w": rng.integers(-127, 128, (4, 4, 3)).astype(np.int8),
                        "ws": np.float32(WS), "wz": np.int8(0), "ys": np.float32(YS),
                        "yz": np.int8(-5)})
    _qdq_checks(model, "onnx", fused=True)


def test_conv_integer_1d_compiles():
    rng = np.random.default_rng(8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1, 1])
    model = make_model([node], [("x", np.int8, [1, 3, 7])], [("y", np.int32, None)],
                       {"w": rng.integers(-128, 128, (4, 3, 3)).astype(np.int8),
                        "xz": np.int8(-4)})
    _interpreter_equals_onnxruntime(model)
    _compiled_equals_interpreter(load_onnx(model))


def test_a_3d_convolution_runs_in_the_interpreter_and_is_refused_in_one_sentence(tmp_path,
                                                                                 capsys):
    model = _qlinear_conv([5, -900, 70000, 3], weights_shape=(4, 4, 3, 3, 3))
    _interpreter_equals_onnxruntime(model)
    prepared = compilation(load_onnx(model)).prepared
    conv = next(n for n in prepared.nodes if n.op == "QLinearConv")
    with pytest.raises(KilnError, match="a 3-D convolution has no kernel"):
        lookup(conv, get_target("host"))
    path = tmp_path / "conv3d.onnx"
    onnx.save(model, path)
    assert main(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "conv3d.onnx" in err and "3-D convolution" in err


# -- the MLPerf Tiny models with biases at int32's limits ----------------------------------------

HOSTILE_MODELS = ["ad01_int8", "kws_ref_model"]


def _hostile_tflite(path) -> bytes:
    """The .tflite file with the first two values of every int32 bias set to 2**31-1, -2**31."""
    import tflite

    data = bytearray(path.read_bytes())
    subgraph = tflite.Model.GetRootAs(data, 0).Subgraphs(0)
    model = tflite.Model.GetRootAs(data, 0)
    for i in range(subgraph.TensorsLength()):
        tensor = subgraph.Tensors(i)
        if tensor.Type() == tflite.TensorType.INT32 and tensor.ShapeLength() == 1 and \
                tensor.Shape(0) > 1:
            buffer = model.Buffers(tensor.Buffer())
            start = buffer._tab.Vector(buffer._tab.Offset(4))
            data[start:start + 8] = np.array([I32_MAX, I32_MIN], np.int32).tobytes()
    return bytes(data)


def _hostile_onnx(path) -> onnx.ModelProto:
    """The QDQ file with the first two values of every int32 bias set to 2**31-1, -2**31."""
    model = onnx.load(path)
    for init in model.graph.initializer:
        if init.data_type == onnx.TensorProto.INT32 and list(init.dims)[:1] != [1] and \
                len(init.dims) == 1:
            values = numpy_helper.to_array(init).copy()
            values[:2] = [I32_MAX, I32_MIN]
            init.CopyFrom(numpy_helper.from_array(values, init.name))
    return model


@pytest.mark.slow
@pytest.mark.parametrize("name", HOSTILE_MODELS)
def test_mlperf_tflite_models_with_biases_at_int32_limits(name):
    data = _hostile_tflite(shared_models() / "tflite" / f"{name}.tflite")
    # Not seed 3: on it ad01's last layer meets a rounding near-tie where TFLite Micro's wheel
    # forms the per-tensor FULLY_CONNECTED multiplier as if in double (off by one step; the
    # bias plays no part there).
    _interpreter_equals_tflite_micro(data, seeds=range(3))
    _compiled_equals_interpreter(load_model(data))


@pytest.mark.slow
@pytest.mark.parametrize("name", HOSTILE_MODELS)
def test_mlperf_onnx_models_with_biases_at_int32_limits(name):
    model = _hostile_onnx(shared_models() / "onnx" / f"{name}.onnx")
    compiled = compilation(load_onnx(model))
    final = compiled.final
    notes = _notes(compiled)
    assert any("could reach" in n for n in notes), notes  # the pushed units stayed float
    session = ort_session(integer_stage(compiled))
    for seed in SEEDS:
        feeds = _feeds(final, seed)
        ours = run(final, feeds)[final.outputs[0].name]
        assert differing(ours, session.run(None, feeds)[0]) == 0, f"seed {seed}"
    _compiled_equals_interpreter(compiled.graph)


# -- the Cortex-M and VNNI kernels wrap alike ---------------------------------------------------

MACHINES = {t: firmware.board_for(t).qemu_machine for t in ("cortex-m7", "cortex-m55")}


@pytest.mark.parametrize("target", sorted(MACHINES))
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("case", sorted(TFLITE_CASES))
def test_dot_kernels_wrap_as_the_interpreter_on_cortex_m(case, rule, target, tmp_path):
    firmware.require_tools()
    graph = _ruled(load_model(write(TFLITE_CASES[case]())), rule)
    prepared = compilation(graph).prepared
    core = get_target(target)
    layer = next(n for n in prepared.nodes if n.op in ("QLinearConv", "QGemm"))
    assert lookup(layer, core)[0].__name__.endswith("_dot")
    net = compile_graph(prepared, core, name="net")
    feeds = _feeds(prepared, 11)
    elf = firmware.build(net, firmware.main_c(net, feeds), MACHINES[target], tmp_path)
    stdout, _ = firmware.run(elf, MACHINES[target])
    got = firmware.parse_outputs(net, stdout)
    for value in prepared.outputs:
        assert differing(got[value.name], run(prepared, feeds)[value.name]) == 0


@pytest.mark.parametrize("rule", RULES)
def test_vnni_kernels_wrap_as_the_interpreter(rule, tmp_path, record_property):
    """AVX-512 VNNI's convolution, VPDPBUSD emulated so that any AVX2 CPU runs it."""
    from tests.codegen.test_int8_dot_kernels import VNNI_ON_AVX2, _runs_or_is_refused

    graph = _ruled(load_model(write(_tflite_conv(HOSTILE * 4, cout=16))), rule)
    layer = next(n for n in compilation(graph).prepared.nodes if n.op == "QLinearConv")
    assert lookup(layer, VNNI_ON_AVX2)[0].__name__ == "emit_qconv_lanes"
    net = compile_graph(compilation(graph).prepared, VNNI_ON_AVX2)
    _runs_or_is_refused(graph, net, VNNI_ON_AVX2, tmp_path, record_property)
