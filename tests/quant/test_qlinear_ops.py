"""Integer operators in the reference interpreter and the compiled host bundle, bit for bit
against onnxruntime.

Each case is a one-node graph built here with onnx.helper, run on seeded random tensors; every
element must be equal (0 steps of difference), in the interpreter and in the bundle compiled
for this host.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.codegen.bundle import write_bundle
from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from tests.helpers import ort_run

SEEDS = range(6)
UNARY = ["xs", "xz", "ys", "yz"]  # the parameters of a one-input operator


def _model(node, inputs, output, inits, opset=13):
    """A one-node model; onnxruntime's com.microsoft domain is imported for its operators."""
    graph = helper.make_graph([node], "q", inputs, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


def _run_both(model, feeds, tmp_path, what=""):
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    graph = load_onnx(path)
    ours = run(graph, feeds)["y"]
    want = ort_run(model, feeds)[0]
    assert ours.dtype == want.dtype and ours.shape == want.shape
    differ = int(np.count_nonzero(ours.astype(np.int64) != want.astype(np.int64)))
    assert differ == 0, f"{what}{differ} of {want.size} elements differ"
    compiled = _bundle_run(graph, feeds, tmp_path / "bundle")
    differ = int(np.count_nonzero(compiled.astype(np.int64) != want.astype(np.int64)))
    assert differ == 0, f"{what}bundle: {differ} of {want.size} elements differ"


def _bundle_run(graph, feeds, folder):
    """Output y of `graph` compiled for this host, written as a bundle and loaded back."""
    net = compile_graph(compilation(graph).prepared, get_target("host"))
    write_bundle(net, folder)
    runner = HostNet.from_bundle(folder)
    try:
        return runner.run(feeds)["y"]
    finally:
        runner.close()


def _elem(dtype):
    return TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8


def _scale_and_zero_point(rng, dtype, low=0.01, high=0.2) -> list[np.ndarray]:
    """A random float32 scale and a zero point in the middle half of `dtype`'s range."""
    info = np.iinfo(dtype)
    return [np.array(np.float32(rng.uniform(low, high))),
            np.array(rng.integers(info.min // 2, info.max // 2), dtype)]


def _contrib_case(op, dtype, shapes, params, names, **attrs):
    """A one-node model of com.microsoft `op` reading "x" (or "a", "b") and its parameters."""
    data = ["a", "b"] if len(shapes) == 2 else ["x"]
    order = (["a", *names[:2], "b", *names[2:]] if len(data) == 2 else ["x", *names])
    node = helper.make_node(op, order, ["y"], domain="com.microsoft", **attrs)
    inputs = [helper.make_tensor_value_info(n, _elem(dtype), shape)
              for n, shape in zip(data, shapes)]
    return _model(node, inputs, helper.make_tensor_value_info("y", _elem(dtype), None),
                  [numpy_helper.from_array(p, n) for p, n in zip(params, names)])


def _ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _qlinear_conv(rng, dtype, channels, out_channels, group, per_channel, kernel, stride, pad):
    info = np.iinfo(dtype)
    w_dtype = np.int8 if dtype == np.int8 else np.uint8
    w = rng.integers(-127 if w_dtype == np.int8 else 0, 128 if w_dtype == np.int8 else 256,
                     (out_channels, channels // group, kernel, kernel)).astype(w_dtype)
    count = out_channels if per_channel else 1
    w_scale = (rng.uniform(0.002, 0.02, count)).astype(np.float32)
    w_zp = np.zeros(count, w_dtype) if w_dtype == np.int8 else np.full(count, 128, w_dtype)
    x_scale = np.float32(rng.uniform(0.01, 0.05))
    y_scale = np.float32(rng.uniform(0.02, 0.2))
    x_zp = np.array(rng.integers(info.min // 2, info.max // 2 + 1), dtype)
    y_zp = np.array(rng.integers(info.min // 2, info.max // 2 + 1), dtype)
    bias = rng.integers(-2000, 2000, out_channels).astype(np.int32)
    inits = [numpy_helper.from_array(np.array(x_scale), "xs"),
             numpy_helper.from_array(x_zp, "xz"), numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(w_scale if per_channel else w_scale.reshape(()), "ws"),
             numpy_helper.from_array(w_zp if per_channel else w_zp.reshape(()), "wz"),
             numpy_helper.from_array(np.array(y_scale), "ys"),
             numpy_helper.from_array(y_zp, "yz"), numpy_helper.from_array(bias, "b")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"], group=group, strides=[stride, stride],
                            pads=[pad] * 4, kernel_shape=[kernel, kernel])
    elem = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    model = _model(node, [helper.make_tensor_value_info("x", elem, [1, channels, 9, 9])],
                   helper.make_tensor_value_info("y", elem, None), inits)
    x = rng.integers(info.min, info.max + 1, (1, channels, 9, 9)).astype(dtype)
    return model, {"x": x}


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("shape", [(8, 16, 1, True, 3, 1, 1), (8, 8, 8, True, 3, 2, 1),
                                   (6, 4, 1, False, 1, 1, 0), (4, 12, 2, True, 5, 2, 2)],
                         ids=["conv3x3", "depthwise", "pointwise_per_tensor", "grouped"])
def test_qlinear_conv_equals_onnxruntime(dtype, shape, tmp_path):
    for seed in SEEDS:
        model, feeds = _qlinear_conv(np.random.default_rng(seed), dtype, *shape)
        _run_both(model, feeds, tmp_path)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_qlinear_matmul_equals_onnxruntime(dtype, tmp_path):
    info = np.iinfo(dtype)
    elem = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        b = rng.integers(info.min, info.max + 1, (64, 10)).astype(dtype)
        params = [np.array(np.float32(rng.uniform(0.01, 0.05))),
                  np.array(rng.integers(info.min // 2, info.max // 2), dtype), b,
                  np.array(np.float32(rng.uniform(0.002, 0.02))),
                  np.array(rng.integers(info.min // 2, info.max // 2), dtype),
                  np.array(np.float32(rng.uniform(0.05, 0.5))),
                  np.array(rng.integers(info.min // 2, info.max // 2), dtype)]
        names = ["as", "az", "b", "bs", "bz", "ys", "yz"]
        inits = [numpy_helper.from_array(p, n) for p, n in zip(params, names)]
        node = helper.make_node("QLinearMatMul", ["a", *names], ["y"])
        model = _model(node, [helper.make_tensor_value_info("a", elem, [3, 64])],
                       helper.make_tensor_value_info("y", elem, None), inits)
        _run_both(model, {"a": rng.integers(info.min, info.max + 1, (3, 64)).astype(dtype)},
                  tmp_path)


def test_the_tflite_rule_is_selectable_and_differs_only_by_rounding(tmp_path):
    """Same accumulators, TFLite Micro's fixed point: at most one step from the onnx rule."""
    model, feeds = _qlinear_conv(np.random.default_rng(0), np.int8, 8, 16, 1, True, 3, 1, 1)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    graph = load_onnx(path)
    onnx_rule = run(graph, feeds)["y"].astype(np.int64)
    graph.nodes[0].attrs["requant"] = "tflite"
    tflite_rule = run(graph, feeds)["y"].astype(np.int64)
    assert np.abs(onnx_rule - tflite_rule).max() <= 1


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("shapes", [([1, 8, 6, 6], [1, 8, 6, 6]), ([1, 8, 6, 6], [1]),
                                    ([1], [2, 37])], ids=["same", "scalar_b", "scalar_a"])
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_add_and_mul_equal_onnxruntime(op, dtype, shapes, tmp_path):
    for seed in range(20):
        rng = np.random.default_rng(seed)
        params = (_scale_and_zero_point(rng, dtype) + _scale_and_zero_point(rng, dtype)
                  + _scale_and_zero_point(rng, dtype, 0.02, 0.3))
        model = _contrib_case(op, dtype, shapes, params, ["as", "az", "bs", "bz", "cs", "cz"])
        feeds = {"a": _ints(rng, dtype, shapes[0]), "b": _ints(rng, dtype, shapes[1])}
        _run_both(model, feeds, tmp_path, f"seed {seed}: ")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("shape", [[1, 8, 5, 5], [2, 3, 25, 5], [1, 16, 1, 1]],
                         ids=["5x5", "25x5", "1x1"])
def test_qlinear_global_average_pool_equals_onnxruntime(dtype, shape, tmp_path):
    for seed in range(20):
        rng = np.random.default_rng(seed)
        params = _scale_and_zero_point(rng, dtype) + _scale_and_zero_point(rng, dtype, 0.005)
        model = _contrib_case("QLinearGlobalAveragePool", dtype, [shape], params, UNARY)
        _run_both(model, {"x": _ints(rng, dtype, shape)}, tmp_path, f"seed {seed}: ")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("shape,axis", [([1, 10], -1), ([2, 12], 1), ([3, 7, 5], 1)],
                         ids=["row10", "rows12", "axis1"])
def test_qlinear_softmax_equals_onnxruntime(dtype, shape, axis, tmp_path):
    for seed in range(20):
        rng = np.random.default_rng(seed)
        y_zp = -128 if dtype == np.int8 else 0
        params = [*_scale_and_zero_point(rng, dtype, 0.02, 0.3), np.array(np.float32(1 / 256)),
                  np.array(y_zp, dtype)]
        model = _contrib_case("QLinearSoftmax", dtype, [shape], params, UNARY, axis=axis,
                              opset=13)
        x = _ints(rng, dtype, shape)
        if seed % 4 == 0:  # one dominant element: the result saturates at the top
            x.reshape(-1)[0] = np.iinfo(dtype).max
        _run_both(model, {"x": x}, tmp_path, f"seed {seed}: ")


def _softmax_near_ties(rng, dtype, length: int, rows: int):
    """Parameters and rows whose quotients lie within 1e-5 of a half step, first those where
    float32 division would round the other way: there the arithmetic decides the result."""
    from compiler.ops.qtables import _table, output_multiplier

    info = np.iinfo(dtype)
    for _ in range(2000):
        x_scale = np.float32(10 ** rng.uniform(-3, 0))
        y_scale = np.float32(10 ** rng.uniform(-3, -1.5))
        table = _table(float(x_scale), length, dtype == np.int8)
        x = rng.integers(info.min, info.max + 1, (20000, length))
        entries = table[(x + (info.max - x.max(axis=1, keepdims=True))) & 0xFF]
        sums = np.cumsum(entries, axis=1, dtype=np.float32)[:, -1:]
        multiplier = output_multiplier(y_scale)
        quotient = entries.astype(np.float64) * multiplier / sums
        with np.errstate(over="ignore"):
            in_float32 = entries * np.float32(multiplier) / sums
        distance = np.abs(quotient - np.floor(quotient) - 0.5)
        near = ((distance > 0) & (distance < 1e-5)).any(axis=1)
        other_way = (np.rint(quotient) != np.rint(in_float32)).any(axis=1)
        if other_way.any() and near.sum() >= rows:
            chosen = np.concatenate([x[other_way], x[near & ~other_way]])
            return x_scale, y_scale, chosen[:rows].astype(dtype)
    raise AssertionError("no near ties drawn")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("length,seed", [(10, 1), (37, 0), (37, 2)])  # seeds that draw quickly
def test_qlinear_softmax_near_ties_equal_onnxruntime(dtype, length, seed, tmp_path):
    """Rounding ties decided by float64 division of the float32 sum, as onnxruntime divides."""
    rng = np.random.default_rng(seed)
    x_scale, y_scale, x = _softmax_near_ties(rng, dtype, length, 16)
    y_zp = int(rng.integers(-128, -100)) if dtype == np.int8 else int(rng.integers(0, 20))
    params = [np.array(x_scale), np.array(0, dtype), np.array(y_scale), np.array(y_zp, dtype)]
    model = _contrib_case("QLinearSoftmax", dtype, [list(x.shape)], params, UNARY, axis=-1,
                          opset=13)
    _run_both(model, {"x": x}, tmp_path, f"seed {seed}: ")


def test_softmax_table_logf_is_the_c_librarys():
    """The table's shift starts from logf(FLT_MAX / length); glibc's misses the correct
    rounding at 60594 (Kiln calls it), so the float64 logarithm would not do."""
    import ctypes

    from compiler.qmath.ort_float import logf

    try:
        libm = ctypes.CDLL("libm.so.6")
    except OSError:
        pytest.skip("no libm.so.6: Kiln then rounds the float64 logarithm")
    libm.logf.restype, libm.logf.argtypes = ctypes.c_float, [ctypes.c_float]
    top = np.float32(np.finfo(np.float32).max)
    for length in [*range(1, 2000), 60594, 96962]:
        quotient = top / np.float32(length)
        assert logf(quotient) == np.float32(libm.logf(float(quotient))), length
    assert np.float32(np.log(np.float64(top / np.float32(60594)))) != logf(
        top / np.float32(60594))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("alpha", [0.1, 0.0])
def test_qlinear_leaky_relu_equals_onnxruntime(dtype, alpha, tmp_path):
    every_value = np.arange(np.iinfo(dtype).min, np.iinfo(dtype).max + 1).astype(dtype)
    for seed in range(10):
        rng = np.random.default_rng(seed)
        params = _scale_and_zero_point(rng, dtype) + _scale_and_zero_point(rng, dtype)
        model = _contrib_case("QLinearLeakyRelu", dtype, [[256]], params, UNARY, alpha=alpha)
        _run_both(model, {"x": every_value}, tmp_path, f"seed {seed}: ")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("include_pad", [0, 1])
def test_qlinear_average_pool_equals_onnxruntime(dtype, include_pad, tmp_path):
    for seed in range(10):
        rng = np.random.default_rng(seed)
        params = _scale_and_zero_point(rng, dtype) + _scale_and_zero_point(rng, dtype)
        model = _contrib_case("QLinearAveragePool", dtype, [[1, 4, 9, 7]], params, UNARY,
                              kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              count_include_pad=include_pad)
        _run_both(model, {"x": _ints(rng, dtype, (1, 4, 9, 7))}, tmp_path, f"seed {seed}: ")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_qlinear_sigmoid_equals_onnxruntime(dtype, tmp_path):
    every_value = np.arange(np.iinfo(dtype).min, np.iinfo(dtype).max + 1).astype(dtype)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        params = _scale_and_zero_point(rng, dtype, 0.01, 0.1) + _scale_and_zero_point(
            rng, dtype, 0.002, 0.006)
        model = _contrib_case("QLinearSigmoid", dtype, [[256]], params, UNARY)
        _run_both(model, {"x": every_value}, tmp_path, f"seed {seed}: ")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_qlinear_concat_equals_onnxruntime(dtype, tmp_path):
    shapes = [(1, 2, 5), (1, 3, 5), (1, 1, 5)]
    for seed in range(10):
        rng = np.random.default_rng(seed)
        y_params = _scale_and_zero_point(rng, dtype)
        triples = [_scale_and_zero_point(rng, dtype) for _ in shapes]
        triples[1] = y_params  # one input already has the output's parameters: copied
        names = ["ys", "yz"]
        inits = [numpy_helper.from_array(p, n) for p, n in zip(y_params, names)]
        for k, (s, z) in enumerate(triples):
            names += [f"x{k}", f"s{k}", f"z{k}"]
            inits += [numpy_helper.from_array(s, f"s{k}"), numpy_helper.from_array(z, f"z{k}")]
        node = helper.make_node("QLinearConcat", names, ["y"], domain="com.microsoft", axis=1)
        inputs = [helper.make_tensor_value_info(f"x{k}", _elem(dtype), s)
                  for k, s in enumerate(shapes)]
        model = _model(node, inputs, helper.make_tensor_value_info("y", _elem(dtype), None),
                       inits)
        feeds = {f"x{k}": _ints(rng, dtype, s) for k, s in enumerate(shapes)}
        _run_both(model, feeds, tmp_path, f"seed {seed}: ")
