"""onnxruntime's QLinearSoftmax on every emulated Cortex-M board, rows chosen near rounding ties.

onnxruntime divides each entry by the row's float32 sum in float64. Cores whose FPU is single
precision (Cortex-M4, M7 and M33 as Kiln builds them) find the same rounding exactly in float32
with fused multiply-adds, the others divide in float64; rows whose quotients lie next to a half
step, where a plain float32 division rounds the other way, tell them apart.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.armattrs import float_calls
from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.frontends.onnx import load_onnx
from tests.codegen.firmware import outputs_of_each
from tests.helpers import ort_run
from tests.quant.test_qlinear_ops import UNARY, _contrib_case, _softmax_near_ties

HARD_FLOAT = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")


@pytest.mark.parametrize("target", ["cortex-m3", *HARD_FLOAT])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_softmax_near_ties_on_the_board_equal_onnxruntime(dtype, target, tmp_path):
    x_scale, y_scale, x = _softmax_near_ties(np.random.default_rng(0), dtype, 37, 16)
    y_zp = -120 if dtype == np.int8 else 3
    params = [np.array(x_scale), np.array(0, dtype), np.array(y_scale), np.array(y_zp, dtype)]
    model = _contrib_case("QLinearSoftmax", dtype, [list(x.shape)], params, UNARY, axis=-1,
                          opset=13)
    want = ort_run(model, {"x": x})[0]
    net = compile_graph(compilation(load_onnx(model)).prepared, get_target(target))
    if target in HARD_FLOAT:
        assert float_calls(net.object) == []  # no float64 helper: it links as hard float
    got = outputs_of_each(net, [{"x": x}], target, tmp_path)[0]["y"]
    assert int((got != want).sum()) == 0


def test_an_output_scale_below_two_to_the_minus_17_is_refused_where_float32_divides():
    from compiler.errors import KilnError

    params = [np.array(np.float32(0.05)), np.array(0, np.int8), np.array(np.float32(2**-18)),
              np.array(-128, np.int8)]
    model = _contrib_case("QLinearSoftmax", np.int8, [[2, 10]], params, UNARY, axis=-1,
                          opset=13)
    prepared = compilation(load_onnx(model)).prepared
    with pytest.raises(KilnError, match=r"output scale 3\.8147e-06 is below 2\*\*-17; "
                                        r"cortex-m4's float32 arithmetic"):
        compile_graph(prepared, get_target("cortex-m4"))
    compile_graph(prepared, get_target("cortex-m55"))  # float64 there
