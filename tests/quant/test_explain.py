"""The per-channel requantization shown to users, and the real-value formula."""

import numpy as np

from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from compiler.ir.types import QuantParams
from compiler.qmath.explain import real_value_formula, requant_channels, summary
from tests.quant.int8_oracle import quantize_digits


def test_each_output_channel_has_its_multiplier_and_shift(tmp_path):
    final = compilation(load_onnx(quantize_digits(tmp_path)["QDQ"])).final
    conv = next(n for n in final.nodes if n.op == "QLinearConv")
    channels = requant_channels(conv)
    assert len(channels) == conv.inputs[3].type.shape[0] > 1  # per-channel weights
    x_scale = float(conv.inputs[1].data)
    y_scale = float(conv.inputs[6].data)
    for c, w_scale in zip(channels, conv.inputs[4].data):
        real = x_scale * float(w_scale) / y_scale
        assert abs(c.real - real) <= 1e-12 * real
        assert abs(c.onnx_scale - real) <= 1e-6 * real  # float32 of the same number
        assert (1 << 30) <= c.multiplier < (1 << 31)
        assert abs(c.multiplier * 2.0 ** (c.shift - 31) - real) <= 2.0 ** (c.shift - 31)
    assert summary(channels).startswith(f"{len(channels)} output channels: real multiplier")
    assert requant_channels(next(n for n in final.nodes if n.op == "Reshape")) == []


def test_the_formula_names_scale_and_zero_point():
    assert real_value_formula(QuantParams((0.0235,), (-128,))) == "real = 0.0235 × (q − (-128))"
    assert real_value_formula(QuantParams((0.5,), (3,))) == "real = 0.5 × (q − 3)"
    text = real_value_formula(QuantParams(tuple(np.linspace(0.1, 0.4, 4)), (0,) * 4, 0))
    assert text.startswith("real = scale[c] × (q − zero_point[c]) over axis 0: 4 scales")
