"""The onnx requantization rule, property-tested against onnxruntime on ties and saturation.

onnxruntime rounds half to even after its float multiply and saturates; QuantizeLinear and the
GEMMs add the zero point after rounding, QLinearAdd and QLinearMul before. Each test runs many
seeded cases (every value of the 8-bit input, odd and even zero points, both ends of int8 and
uint8) through Kiln's interpreter and onnxruntime and asserts, besides equality, that its data
would have told apart the plausible wrong rules (`Coverage`): ties rounded away from zero at
positive and at negative values, the zero point added on the other side of the rounding, and
saturation one step short at either end.

Every case is exact on any CPU: the tie tests use power-of-two scales (a float32 product or sum
is then exact, with or without FMA, and x.5 is a true tie), and the matrix products have one
term (K = 1), whose 8-bit products fit the 16-bit pair sums that onnxruntime's u8s8 kernels
saturate without VNNI (`tests/quant/int8_oracle.py`).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.qmath.requant import REQUANT_KEY
from tests.helpers import ort_run

ELEM = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}
# Odd and even zero points, and both ends of each type (all outputs then lie on one side).
ZERO_POINTS = {np.int8: (-128, -3, 0, 6, 127), np.uint8: (0, 1, 128, 201, 255)}
DTYPES = [np.int8, np.uint8]
IDS = ["int8", "uint8"]


def _model(node, inputs, inits, out_elem, opset=13):
    graph = helper.make_graph(
        [node], "requant", [helper.make_tensor_value_info(n, e, s) for n, e, s in inputs],
        [helper.make_tensor_value_info("y", out_elem, None)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


def _kiln_and_ort(model, feeds) -> tuple[np.ndarray, np.ndarray]:
    graph = load_onnx(model)
    ours = run(graph, feeds)["y"]
    (want,) = ort_run(model, feeds)
    assert ours.dtype == want.dtype and ours.shape == want.shape
    return ours, want


def _assert_equal(ours, want, what: str) -> None:
    bad = np.flatnonzero(ours.astype(np.int64).reshape(-1) != want.astype(np.int64).reshape(-1))
    assert bad.size == 0, (f"{what}: {bad.size} of {want.size} differ from onnxruntime, first "
                           f"at {bad[0]}: Kiln {ours.reshape(-1)[bad[0]]}, onnxruntime "
                           f"{want.reshape(-1)[bad[0]]}")


class Coverage:
    """What a test's cases exercised: each plausible wrong rule must differ from onnxruntime.

    `add(real, zp, want)` takes the value the rule rounds (`real`, exact in float64, before the
    zero point when `zp_first` is False, after it when True) and onnxruntime's output; `check`
    asserts that, over the whole test, rounding ties away from zero (at positive and at
    negative values), moving the zero point across the rounding, and saturating one step short
    at either end each change some output.
    """

    def __init__(self, dtype, zp_first: bool = False):
        self.dtype, self.zp_first = dtype, zp_first
        self.caught: dict[str, int] = {}

    def _count(self, name: str, wrong: np.ndarray, want: np.ndarray, where=True) -> None:
        low, high = np.iinfo(self.dtype).min, np.iinfo(self.dtype).max
        differ = (np.clip(wrong, low, high) != want.astype(np.int64)) & where
        self.caught[name] = self.caught.get(name, 0) + int(np.count_nonzero(differ))

    def add(self, real: np.ndarray, zp: int, want: np.ndarray) -> None:
        info = np.iinfo(self.dtype)
        real = np.asarray(real, np.float64)
        away = np.sign(real) * np.floor(np.abs(real) + 0.5)
        if self.zp_first:  # real already holds the zero point: round(v + zp)
            other = np.rint(real - zp) + zp
            away_out = away
        else:  # round(v) + zp
            other = np.rint(real + zp)
            away_out = away + zp
        self._count("half away from zero, positive", away_out, want, real > 0)
        self._count("half away from zero, negative", away_out, want, real < 0)
        self._count("zero point on the other side of the rounding", other, want)
        self._count("saturating one below the top", np.minimum(want, info.max - 1), want)
        self._count("saturating one above the bottom", np.maximum(want, info.min + 1), want)

    def check(self, least: int = 10) -> None:
        if self.zp_first and np.iinfo(self.dtype).min == 0:
            # v + zp below zero saturates to 0 whichever way it rounds: nothing to tell apart.
            self.caught.pop("half away from zero, negative")
        missed = {name: n for name, n in self.caught.items() if n < least}
        assert not missed, f"the cases do not exercise {missed}"


# -- QuantizeLinear: saturate(round_half_even(x / scale) + zero_point) --------------------------

def _quantize_inputs(rng, scale: np.float32, zp: int, dtype) -> np.ndarray:
    """Ties k + 0.5 over the whole range and past both ends, their neighbours, random values."""
    info = np.iinfo(dtype)
    k = np.arange(info.min - zp - 4, info.max - zp + 4, dtype=np.float64)
    ties = ((k + 0.5) * scale).astype(np.float32)
    near = np.concatenate([np.nextafter(ties, np.float32(np.inf)),
                           np.nextafter(ties, np.float32(-np.inf))])
    spread = rng.uniform(info.min - zp - 40, info.max - zp + 40, 2000) * scale
    return np.concatenate([ties, near, (k * scale).astype(np.float32),
                           spread.astype(np.float32)]).astype(np.float32)


def _quantize_linear_equals_onnxruntime(x, scale, zp, dtype, what: str) -> np.ndarray:
    """Kiln's QuantizeLinear of `x` equals onnxruntime's; onnxruntime's result."""
    model = _model(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]),
                   [("x", TensorProto.FLOAT, [x.size])],
                   [("s", np.array(scale, np.float32)), ("z", np.array(zp, dtype))],
                   ELEM[dtype])
    ours, want = _kiln_and_ort(model, {"x": x})
    _assert_equal(ours, want, what)
    return want


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_quantize_linear_ties_and_saturation_equal_onnxruntime(dtype):
    rng = np.random.default_rng(11)
    coverage = Coverage(dtype)
    for zp in ZERO_POINTS[dtype]:
        for scale in (np.float32(1.0), np.float32(0.5), np.float32(2.0**-7),
                      np.float32(8.0)):
            x = _quantize_inputs(rng, scale, zp, dtype)
            want = _quantize_linear_equals_onnxruntime(
                x, scale, zp, dtype, f"QuantizeLinear scale {scale}, zero point {zp}")
            coverage.add(x.astype(np.float64) / np.float64(scale), zp, want)
    coverage.check()


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_quantize_linear_random_scales_equal_onnxruntime(dtype):
    """Scales that are not powers of two: x near k + 0.5 steps, both signs, 40 seeded cases."""
    info = np.iinfo(dtype)
    coverage = Coverage(dtype)
    for seed in range(40):
        rng = np.random.default_rng(seed)
        scale = np.float32(rng.uniform(1e-3, 2.0))
        zp = int(rng.integers(info.min, info.max + 1))
        x = _quantize_inputs(rng, scale, zp, dtype)
        want = _quantize_linear_equals_onnxruntime(
            x, scale, zp, dtype, f"seed {seed}: QuantizeLinear scale {scale}, zero point {zp}")
        coverage.add(x / scale, zp, want)  # the float32 quotient onnxruntime rounds
    coverage.check()


# -- QLinearMatMul: float32(acc) * scale, clamp, round half to even, + zero point ---------------

def _weights(rng, count: int = 40) -> np.ndarray:
    """One row of int8 weights: small odd and even values of both signs, extremes, random."""
    fixed = [1, -1, 2, -2, 3, -3, 5, -5, 7, -7, 127, -128, 64, -64]
    return np.array(fixed + rng.integers(-128, 128, count - len(fixed)).tolist(), np.int8)


def _matmul_case(dtype, a_zp: int, b_zp: int, y_zp: int, scales, weights):
    """QLinearMatMul of every value of `dtype` (a column) by one row of int8 weights."""
    a_scale, b_scale, y_scale = (np.float32(s) for s in scales)
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    inits = [("as", np.array(a_scale)), ("az", np.array(a_zp, dtype)),
             ("b", weights.reshape(1, -1)), ("bs", np.array(b_scale)),
             ("bz", np.array(b_zp, np.int8)), ("ys", np.array(y_scale)),
             ("yz", np.array(y_zp, dtype))]
    info = np.iinfo(dtype)
    a = np.arange(info.min, info.max + 1).astype(dtype).reshape(-1, 1)
    model = _model(node, [("a", ELEM[dtype], [a.shape[0], 1])], inits, ELEM[dtype])
    acc = (a.astype(np.int64) - a_zp) * (weights.astype(np.int64) - b_zp).reshape(1, -1)
    real = acc.astype(np.float64) * (np.float64(a_scale) * np.float64(b_scale)
                                     / np.float64(y_scale))
    return model, {"a": a}, real


# (a scale, b scale, y scale): their ratio a * b / y is 2**-1, 2**-2, 2**-5 and 2**-8.
POW2_SCALES = [(0.25, 0.5, 0.25), (2.0**-3, 2.0**-4, 2.0**-5), (0.5, 2.0**-6, 1.0),
               (2.0**-4, 2.0**-6, 2.0**-2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_qlinear_matmul_requantization_ties_and_saturation_equal_onnxruntime(dtype):
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    coverage = Coverage(dtype)
    for scales in POW2_SCALES:
        for y_zp in ZERO_POINTS[dtype]:
            a_zp = int(rng.integers(info.min, info.max + 1))
            b_zp = int(rng.choice([0, 0, 3, -5]))
            model, feeds, real = _matmul_case(dtype, a_zp, b_zp, y_zp, scales, _weights(rng))
            ours, want = _kiln_and_ort(model, feeds)
            what = f"QLinearMatMul scales {scales}, zero points {a_zp}, {b_zp}, {y_zp}"
            _assert_equal(ours, want, what)
            coverage.add(real, y_zp, want)
    coverage.check()


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_qlinear_matmul_random_scales_equal_onnxruntime(dtype):
    info = np.iinfo(dtype)
    for seed in range(30):
        rng = np.random.default_rng(100 + seed)
        scales = (rng.uniform(0.005, 0.1), rng.uniform(0.002, 0.05), rng.uniform(0.01, 0.5))
        zps = [int(rng.integers(info.min, info.max + 1)) for _ in range(2)]
        model, feeds, _ = _matmul_case(dtype, zps[0], int(rng.integers(-10, 11)), zps[1],
                                       scales, _weights(rng))
        ours, want = _kiln_and_ort(model, feeds)
        _assert_equal(ours, want, f"seed {seed}: QLinearMatMul scales {scales}, zps {zps}")


# -- QLinearAdd and QLinearMul (com.microsoft): the zero point is added before rounding --------

def _binary_case(op, dtype, scales, zps, b_values):
    node = helper.make_node(op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"],
                            domain="com.microsoft")
    inits = [("as", np.array(np.float32(scales[0]))), ("az", np.array(zps[0], dtype)),
             ("bs", np.array(np.float32(scales[1]))), ("bz", np.array(zps[1], dtype)),
             ("cs", np.array(np.float32(scales[2]))), ("cz", np.array(zps[2], dtype))]
    info = np.iinfo(dtype)
    a = np.arange(info.min, info.max + 1).astype(dtype).reshape(-1, 1)
    b = np.asarray(b_values, dtype).reshape(1, -1)
    model = _model(node, [("a", ELEM[dtype], list(a.shape)), ("b", ELEM[dtype], list(b.shape))],
                   inits, ELEM[dtype])
    da = (a.astype(np.float64) - zps[0]) * scales[0]
    db = (b.astype(np.float64) - zps[1]) * scales[1]
    real = (da + db if op == "QLinearAdd" else da * db) / scales[2]
    return model, {"a": a, "b": b}, real + zps[2]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("op,scales", [
    ("QLinearAdd", (0.5, 0.25, 1.0)), ("QLinearAdd", (2.0**-3, 2.0**-5, 2.0**-4)),
    ("QLinearMul", (0.5, 0.25, 1.0)), ("QLinearMul", (2.0**-2, 2.0**-4, 2.0**-1))])
def test_qlinear_add_and_mul_ties_and_saturation_equal_onnxruntime(op, scales, dtype):
    rng = np.random.default_rng(9)
    info = np.iinfo(dtype)
    coverage = Coverage(dtype, zp_first=True)
    for zc in ZERO_POINTS[dtype]:
        za, zb = (int(v) for v in rng.integers(info.min // 2, info.max // 2 + 1, 2))
        b = np.concatenate([np.arange(zb - 6, zb + 7), [info.min, info.max],
                            rng.integers(info.min, info.max + 1, 30)])
        model, feeds, real = _binary_case(op, dtype, scales, (za, zb, zc), b)
        ours, want = _kiln_and_ort(model, feeds)
        what = f"{op} scales {scales}, zero points {za}, {zb}, {zc}"
        _assert_equal(ours, want, what)
        coverage.add(real, zc, want)
    coverage.check()


# -- the rule chosen by the graph: a QDQ MatMul through to_integer --------------------------------

def _qdq_matmul(y_zp: int, clip: float | None):
    """DequantizeLinear(int8 x) @ DequantizeLinear(int8 w) [-> Clip(0, clip)] -> QuantizeLinear."""
    rng = np.random.default_rng(2)
    w = _weights(rng, 24).reshape(1, -1)
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"]),
             helper.make_node("MatMul", ["xf", "wf"], ["mf"])]
    inits = [("xs", np.array(np.float32(2.0**-3))), ("xz", np.array(-7, np.int8)), ("w", w),
             ("ws", np.array(np.float32(2.0**-2))), ("wz", np.array(0, np.int8)),
             ("ys", np.array(np.float32(0.25))), ("yz", np.array(y_zp, np.int8))]
    last = "mf"
    if clip is not None:
        inits += [("lo", np.array(np.float32(0.0))), ("hi", np.array(np.float32(clip)))]
        nodes.append(helper.make_node("Clip", ["mf", "lo", "hi"], ["cf"]))
        last = "cf"
    nodes.append(helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    graph = helper.make_graph(
        nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.INT8, [256, 1])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("y_zp,clip", [(5, None), (-125, None), (-3, 10.625), (0, 6.125)],
                         ids=["zp5", "zp-125", "clip10.625", "clip6.125"])
def test_a_qdq_matmul_under_the_onnx_rule_equals_onnxruntime(y_zp, clip, tmp_path):
    """The QDQ unit becomes one integer operator (a Clip folded into its output range) with
    the graph's rule; onnxruntime runs the same file with its integer operators.

    The Clip bounds fall on ties of the output's quantization (10.625 / 0.25 = 42.5, 6.125 /
    0.25 = 24.5), so the folded range is rounded as QuantizeLinear rounds, half to even.
    """
    from compiler.driver import compilation
    from tests.quant.int8_oracle import qdq_session

    model = _qdq_matmul(y_zp, clip)
    path = tmp_path / "qdq.onnx"
    onnx.save(model, path)
    x = np.arange(-128, 128).astype(np.int8).reshape(-1, 1)
    (want,) = qdq_session(path).run(None, {"x": x})
    graph = load_onnx(path)
    final = compilation(graph).final
    assert {"QGemm", "QLinearMatMul"} & {n.op for n in final.nodes}
    ours = run(final, {"x": x})[final.outputs[0].name]
    weights = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == "w")
    acc = (x.astype(np.int64) + 7) * weights.astype(np.int64)
    real = acc * (2.0**-3 * 2.0**-2 / 0.25)
    _assert_equal(ours, want, f"QDQ MatMul, zero point {y_zp}, clip {clip}")
    if clip is None:
        coverage = Coverage(np.int8)
        coverage.add(real, y_zp, want)
        coverage.check()
    else:  # both ends of the folded range are reached; the top is a tie rounded to even
        assert want.min() == y_zp and want.max() == np.rint(clip / 0.25) + y_zp
    # The same graph under TFLite Micro's rule rounds ties away from zero: it differs.
    graph.metadata[REQUANT_KEY] = "tflite"
    tflite = run(compilation(graph).final, {"x": x})[final.outputs[0].name]
    assert np.count_nonzero(tflite != want) > 0
