"""Kiln-only operators: FullyConnected, FusedElementwise and fused activations on Conv and Add."""

import numpy as np
import pytest

from compiler import ops
from compiler.errors import KilnError, ModelError, ShapeError
from compiler.frontends.onnx import to_onnx
from compiler.interpreter import run
from compiler.stats import compute_stats
from tests.passes.util import Builder


def test_fully_connected_computes_x_times_w_transposed_plus_bias_then_activation():
    b = Builder()
    x = b.input("x", (2, 3, 5))
    w, bias = b.weights(4, 5), b.weights(4, name="b")
    y = b.node("FullyConnected", [x, w, bias], activation="Clip", activation_params=(0.0, 0.5))
    g = b.build(y)
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 3, 5)).astype(np.float32)}
    want = np.clip(feeds["x"] @ w.data.T + bias.data, 0.0, 0.5)
    np.testing.assert_allclose(run(g, feeds)[y.name], want, rtol=1e-6, atol=1e-6)
    assert y.type.shape == (2, 3, 4)
    assert compute_stats(g).macs == 2 * 3 * 4 * 5


@pytest.mark.parametrize(("w_shape", "attrs", "reason"), [
    ((4, 6), {}, "weights must be"),
    ((4, 5), {"activation": "Gelu"}, "fused activation 'Gelu'"),
    ((4, 5), {"activation": "Clip", "activation_params": (0.0,)}, "takes 2 parameters"),
])
def test_fully_connected_rejects_bad_operands(w_shape, attrs, reason):
    b = Builder()
    x = b.input("x", (1, 5))
    with pytest.raises(ShapeError, match=reason):
        b.node("FullyConnected", [x, b.weights(*w_shape)], **attrs)


def test_fused_elementwise_runs_its_steps_with_each_operators_reference():
    b = Builder()
    x = b.input("x", (2, 3))
    c = b.const([1.0, -2.0, 3.0], "c")
    y = b.node("FusedElementwise", [x, c, b.const(np.float32(0.0), "lo"),
                                    b.const(np.float32(1.0), "hi")],
               steps=("Mul $0 $1", "LeakyRelu x alpha=0.5", "Add x x", "Clip x $2 $3"))
    g = b.build(y)
    xs = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    t = xs * c.data
    want = np.clip(2 * np.where(t < 0, t * np.float32(0.5), t), 0, 1)
    np.testing.assert_array_equal(run(g, {"x": xs})[y.name], want)


@pytest.mark.parametrize(("steps", "reason"), [
    ((), "at least one step"),
    (("Conv $0 $1",), "not an element-wise operator"),
    (("Relu x",), "first step"),
    (("Relu $3",), "reads input 3"),
    (("Relu y",), "operand 'y'"),
    (("LeakyRelu $0 alpha=fast",), "must be a number"),
    (("Add $0",), "takes 2 to 2 operands, not 1"),
])
def test_fused_elementwise_rejects_bad_steps(steps, reason):
    b = Builder()
    x = b.input("x", (2, 3))
    with pytest.raises(ShapeError, match=reason):
        b.node("FusedElementwise", [x], steps=steps)


def test_conv_and_add_apply_a_fused_activation_and_the_exporter_refuses_it():
    b = Builder()
    x = b.input("x", (1, 2, 4, 4))
    w = b.weights(3, 2, 1, 1)
    plain = b.node("Conv", [x, w])
    leaky = b.node("Conv", [x, w], activation="LeakyRelu", activation_params=(0.1,))
    add = b.node("Add", [plain, plain], activation="Relu")
    g = b.build(plain, leaky, add)
    feeds = {"x": np.random.default_rng(3).standard_normal((1, 2, 4, 4)).astype(np.float32)}
    out = run(g, feeds)
    y = out[plain.name]
    np.testing.assert_array_equal(out[leaky.name], np.where(y < 0, y * np.float32(0.1), y))
    np.testing.assert_array_equal(out[add.name], np.maximum(y + y, 0))
    with pytest.raises(ModelError, match="activation"):
        to_onnx(g)


def test_loaded_models_keep_the_defaults_and_still_export():
    for op in ("Conv", "Add"):
        spec = ops.lookup(op).attrs
        assert spec["activation"].default == "" and spec["activation_params"].default is None
    b = Builder()
    x = b.input("x", (1, 2))
    try:
        to_onnx(b.build(b.node("Add", [x, x])))
    except KilnError as exc:  # pragma: no cover - the assertion message says why
        pytest.fail(f"a default Add must export: {exc}")
