"""A TFLite model saved as ONNX: channels-last nodes between Transposes, folded activations as
Clips, tables as Gathers, the tflite rule as a model property; reloaded, the same bytes."""

import numpy as np
import onnx
import pytest

from compiler.driver import compilation
from compiler.errors import ModelError
from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx, save_onnx, to_onnx
from compiler.interpreter import run
from tests.tflite.built_models import segmentation
from tests.tflite.oracles import quantized
from tests.tflite.writer import Model, Op, T, write


def _model() -> Model:
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (4, 3, 3, 2))
    return Model([quantized("x", (1, 6, 6, 2), 0.05, 1),
                  T("w", (4, 3, 3, 2), "int8", w, scale=[0.01, 0.02, 0.03, 0.01],
                    zero_point=[0] * 4),
                  quantized("c", (1, 6, 6, 4), 0.1, -3),
                  quantized("h", (1, 6, 6, 4), 0.05, -20),
                  T("y", (1, 6, 6, 4), "int8", scale=[1 / 256], zero_point=[-128])],
                 [Op("CONV_2D", [0, 1, -1], [2], ("Conv2DOptions", {
                     "StrideH": 1, "StrideW": 1, "FusedActivationFunction": 3})),
                  Op("HARD_SWISH", [2], [3]), Op("LOGISTIC", [3], [4])], [0], [4])


@pytest.mark.parametrize("stage", ["loaded", "final"])
def test_a_saved_tflite_model_computes_the_same_bytes(stage):
    graph = load_model(write(_model()))
    model = to_onnx(graph)
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert {"Transpose", "Clip", "Gather", "QLinearConv"} <= set(ops)
    assert {p.key: p.value for p in model.metadata_props}["kiln.requant"] == "tflite"
    again = load_onnx(model)
    if stage == "final":
        graph, again = compilation(graph).final, compilation(again).final
    for seed in range(5):
        x = np.random.default_rng(seed).integers(-128, 128, (1, 6, 6, 2)).astype(np.int8)
        assert np.array_equal(run(graph, {"x": x})[graph.outputs[0].name],
                              run(again, {"x": x})[again.outputs[0].name])


def test_a_model_with_kilns_own_8bit_operators_is_refused_as_onnx_by_name(tmp_path):
    """TFLite's 8-bit RESIZE_BILINEAR becomes Kiln's IntResizeBilinear, which ONNX cannot say:
    saving names the node and the operator and says what the model can still do."""
    graph = load_model(write(segmentation(True)[0]))
    with pytest.raises(ModelError, match="RESIZE_BILINEAR_5.*IntResizeBilinear is Kiln's own "
                                         "operator.*exported as a bundle"):
        save_onnx(graph, tmp_path / "segmentation.onnx")
    assert not (tmp_path / "segmentation.onnx").exists()
