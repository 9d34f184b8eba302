"""DEPTHWISE_CONV_2D with a fused RELU6, property-tested against TFLite Micro.

An 8-bit RELU6 clamps the output to [zp + round(0 / scale), zp + round(6 / scale)], computed
in float and rounded half away from zero (TFLite Micro's CalculateActivationRangeQuantized),
then cut to the type. Each seeded case draws a random depthwise layer (channels, multiplier,
kernel, stride, dilation, padding, per-channel weight scales, bias) and an output scale and
zero point from one of several regimes: both clamps inside int8, 6 / scale exactly on a tie,
the top past 127, the bottom at -128, a positive zero point. Kiln's loaded graph (and, for
some, its final stage) must equal TFLite Micro element for element, and the outputs must reach
both bounds this file derives on its own, so a clamp that uses 6 unscaled, drops the lower
bound, rounds the tie to even or ignores the fused activation is seen.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.tflite.oracles import RELU6, SAME, VALID, quantized, tflm
from tests.tflite.writer import Model, Op, T, write

REGIMES = ("inside", "tie", "top_past_127", "bottom_at_-128", "positive_zero_point")
CASES_PER_REGIME = 10


def _tie_scale(m: int) -> np.float32 | None:
    """A float32 scale with float32(6) / scale == m + 0.5 exactly, if one is near 6 / (m + .5)
    (m even: ties to even and away from zero disagree)."""
    for direction in (np.inf, -np.inf):
        scale = np.float32(6 / (m + 0.5))
        for _ in range(8):
            if np.float32(6) / scale == np.float32(m + 0.5):
                return scale
            scale = np.nextafter(scale, np.float32(direction))
    return None


def _output_params(rng, regime: str) -> tuple[np.float32, int]:
    """(scale, zero point) of the output for `regime`."""
    if regime == "inside":  # zp > -128 and zp + 6 / scale < 127: both clamps bite
        zp = int(rng.integers(-110, -20))
        return np.float32(6 / rng.uniform(15, 120 - zp)), zp
    if regime == "tie":
        zp = int(rng.integers(-110, -40))
        scale = None
        while scale is None:
            scale = _tie_scale(2 * int(rng.integers(8, (120 - zp) // 2)))
        return scale, zp
    if regime == "top_past_127":  # 6 / scale beyond 127 - zp: the type clamps the top
        zp = int(rng.integers(-100, -20))
        return np.float32(6 / rng.uniform(140 - zp, 400)), zp
    if regime == "bottom_at_-128":  # the lower clamp is the type's own
        return np.float32(6 / rng.uniform(20, 240)), -128
    zp = int(rng.integers(10, 90))  # positive zero point, a narrow range above it
    return np.float32(6 / rng.uniform(8, 120 - zp)), zp


def _round_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def relu6_bounds(scale: np.float32, zp: int) -> tuple[int, int]:
    """[low, high] of an int8 RELU6 output: zp + round(bound / scale), float32, ties away."""
    low = zp + _round_away(float(np.float32(0.0) / scale))
    high = zp + _round_away(float(np.float32(6.0) / scale))
    return max(-128, low), min(127, high)


def _depthwise(rng, regime: str, activation: int = RELU6):
    cin, multiplier = int(rng.integers(1, 6)), int(rng.choice([1, 1, 2, 3]))
    cout, k = cin * multiplier, int(rng.choice([1, 3, 3, 5]))
    stride, dilation = int(rng.choice([1, 2])), int(rng.choice([1, 1, 2]))
    padding = int(rng.choice([SAME, VALID]))
    eff = (k - 1) * dilation + 1
    h, w = (int(v) for v in rng.integers(eff + 3 * stride, eff + 3 * stride + 6, 2))
    if padding == SAME:
        oh, ow = -(-h // stride), -(-w // stride)
    else:
        oh, ow = (h - eff) // stride + 1, (w - eff) // stride + 1
    x_scale, x_zp = float(rng.uniform(0.01, 0.08)), int(rng.integers(-20, 21))
    # Weight scales that spread the real outputs about 5 either side of 0 (an int8 input
    # spreads about 74 steps, these weights 100), so both clamps of RELU6 bite in every case.
    w_scales = (5 * rng.uniform(0.8, 1.6, cout) / (k * 74 * x_scale * 100)).tolist()
    y_scale, y_zp = _output_params(rng, regime)
    wshape = (1, k, k, cout)
    weights = rng.integers(70, 128, wshape) * rng.choice([-1, 1], wshape)  # none near zero
    tensors = [quantized("x", (1, h, w, cin), x_scale, x_zp),
               T("w", wshape, "int8", weights, scale=w_scales,
                 zero_point=[0] * cout, axis=3),
               T("b", (cout,), "int32",
                 [round(rng.uniform(-1, 1) / (x_scale * s)) for s in w_scales],
                 scale=[x_scale * s for s in w_scales], zero_point=[0] * cout),
               quantized("y", (1, oh, ow, cout), float(y_scale), y_zp)]
    op = Op("DEPTHWISE_CONV_2D", [0, 1, 2], [3], ("DepthwiseConv2DOptions", {
        "Padding": padding, "StrideH": stride, "StrideW": stride, "DepthMultiplier": multiplier,
        "FusedActivationFunction": activation, "DilationHFactor": dilation,
        "DilationWFactor": dilation}))
    what = (f"{regime}: {cin} channels x {multiplier}, {k}x{k}, stride {stride}, dilation "
            f"{dilation}, {'SAME' if padding == SAME else 'VALID'}, output scale "
            f"{float(y_scale)!r}, zero point {y_zp}")
    return Model(tensors, [op], [0], [3]), (1, h, w, cin), (y_scale, y_zp), what


def _tflm_outputs(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    oracle = tflm(data)
    outputs = []
    for x in inputs:
        oracle.set_input(x, 0)
        oracle.invoke()
        outputs.append(oracle.get_output(0).copy())
    return outputs


def _inputs(rng, shape) -> list[np.ndarray]:
    """Random int8 images, one of them the extremes only (the widest accumulators)."""
    images = [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(4)]
    images.append(rng.choice(np.array([-128, 127], np.int8), shape))
    return images


@pytest.mark.parametrize("regime", REGIMES)
def test_depthwise_relu6_equals_tflite_micro(regime):
    for case in range(CASES_PER_REGIME):
        rng = np.random.default_rng([REGIMES.index(regime), case])
        model, shape, (scale, zp), what = _depthwise(rng, regime)
        data = write(model)
        inputs = _inputs(rng, shape)
        wants = _tflm_outputs(data, inputs)
        graphs = [load_model(data), compilation(load_model(data)).final]
        low, high = relu6_bounds(scale, zp)
        reached = {"low": 0, "high": 0, "inside": 0}
        if regime == "tie":  # the top is m + 1 (away from zero), not m (to even)
            steps = float(np.float32(6) / scale)
            assert steps % 2 == 0.5 and high - zp == steps + 0.5, what
        for x, want in zip(inputs, wants):
            assert want.min() >= low and want.max() <= high, f"{what}: outside [{low}, {high}]"
            reached["low"] += int(np.count_nonzero(want == low))
            reached["high"] += int(np.count_nonzero(want == high))
            reached["inside"] += int(np.count_nonzero((want > low) & (want < high)))
            for g in graphs:
                ours = run(g, {"x": x})[g.outputs[0].name]
                assert ours.dtype == want.dtype and ours.shape == want.shape, what
                bad = np.flatnonzero(ours.astype(np.int64) != want.astype(np.int64))
                assert bad.size == 0, (f"{what}: {bad.size} of {want.size} differ from TFLite "
                                       f"Micro, first Kiln {ours.reshape(-1)[bad[0]]}, TFLite "
                                       f"Micro {want.reshape(-1)[bad[0]]} (bounds [{low}, "
                                       f"{high}])")
        # The outputs sit on both bounds and between them: each clamp was exercised.
        assert min(reached.values()) >= 5, f"{what}: {reached}"


def test_the_bounds_of_an_8_bit_relu6():
    """The derivation the property test relies on, on hand-checked values."""
    assert relu6_bounds(np.float32(0.05), -7) == (-7, 113)  # 6 / 0.05 = 120
    assert relu6_bounds(np.float32(0.01), -7) == (-7, 127)  # 600: the type's top
    assert relu6_bounds(np.float32(0.1), -128) == (-128, -68)
    tie = _tie_scale(40)  # 6 / scale == 40.5 rounds away from zero, to 41
    assert relu6_bounds(tie, -100) == (-100, -59)


def test_float_depthwise_relu6_clamps_as_tflite_micro():
    """The float layer: Conv then Clip(0, 6), equal to TFLite Micro within float rounding,
    and exactly 0 and 6 where TFLite Micro clamps."""
    rng = np.random.default_rng(7)
    cin, multiplier, k = 3, 2, 3
    cout = cin * multiplier
    tensors = [T("x", (1, 7, 6, cin)), T("w", (1, k, k, cout),
                                         data=rng.standard_normal((1, k, k, cout)) * 2),
               T("b", (cout,), data=rng.standard_normal(cout)), T("y", (1, 7, 6, cout))]
    op = Op("DEPTHWISE_CONV_2D", [0, 1, 2], [3], ("DepthwiseConv2DOptions", {
        "Padding": SAME, "StrideH": 1, "StrideW": 1, "DepthMultiplier": multiplier,
        "FusedActivationFunction": RELU6, "DilationHFactor": 1, "DilationWFactor": 1}))
    data = write(Model(tensors, [op], [0], [3]))
    inputs = [(rng.standard_normal((1, 7, 6, cin)) * 2).astype(np.float32) for _ in range(3)]
    final = compilation(load_model(data)).final
    for x, want in zip(inputs, _tflm_outputs(data, inputs)):
        ours = run(final, {"x": x})[final.outputs[0].name]
        assert (want == 0).any() and (want == 6).any() and ((want > 0) & (want < 6)).any()
        np.testing.assert_array_equal(ours[want == 0], 0)
        np.testing.assert_array_equal(ours[want == 6], 6)
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5)
