"""Invalid quantized models that onnxruntime, LiteRT or TFLite Micro refuse: Kiln refuses them.

Each case exits 2 from `kiln inspect`, `kiln run` and `kiln compile` with one sentence on stderr
naming the file, the node and the reason; its valid twin still loads. Where the runtime's own
refusal is cheap to observe, the test asserts it, so the test documents its oracle.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from app import cli
from compiler.frontends.onnx.schema import CONTRIB_INPUTS
from compiler.frontends.tflite.builtins import CONVERTERS
from compiler.frontends.tflite.checks import VERSIONS
from tests.conftest import require_module
from tests.helpers import make_model, ort_run
from tests.tflite.oracles import tflm
from tests.tflite.writer import Model, Op, T, write

RNG = np.random.default_rng(7)


# -- helpers --------------------------------------------------------------------------------------

def _refused(capsys, tmp_path, path, *needles: str) -> None:
    """inspect, run and compile each exit 2 with one sentence holding the file and `needles`.

    Nothing else reaches stdout or stderr: no traceback, and no Python warning either.
    """
    for command in ("inspect", "run", "compile"):
        extra = ["-o", str(tmp_path / "bundle")] if command == "compile" else []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = cli.main([command, str(path), *extra])
        out, err = capsys.readouterr()
        assert code == 2, f"kiln {command}: exit {code}, stderr {err!r}"
        assert err.startswith("kiln: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err and not out and not caught, (out, err, caught)
        for needle in (path.name, *needles):
            assert needle in err, f"{needle!r} not in {err!r}"
        assert not (tmp_path / "bundle").exists()


def _accepted(capsys, path) -> None:
    code = cli.main(["inspect", str(path)])
    err = capsys.readouterr().err
    assert code == 0 and not err, err


def _save(tmp_path, model: onnx.ModelProto, name: str):
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def _ort_refuses(model: onnx.ModelProto, feeds: dict, match: str) -> None:
    with pytest.raises(Exception, match=match):
        ort_run(model, feeds)


def _contrib(model: onnx.ModelProto) -> onnx.ModelProto:
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


# -- ONNX: QLinearConv ----------------------------------------------------------------------------

X_U8 = RNG.integers(0, 256, (1, 1, 5, 5)).astype(np.uint8)
X_I8 = RNG.integers(-128, 128, (1, 1, 5, 5)).astype(np.int8)


def _qconv(kernel=(3, 3), inputs=None, y_zp=np.uint8, declared=np.uint8) -> onnx.ModelProto:
    """x and w of y_zp's type (onnxruntime has kernels for u8 x u8 -> u8 and s8 x s8 -> s8)."""
    t = np.dtype(y_zp).type
    inits = {"xs": np.float32(0.1), "xz": t(100), "w": RNG.integers(0, 100, (2, 1, 3, 3))
             .astype(t), "ws": np.float32(0.05), "wz": t(3), "ys": np.float32(0.2), "yz": t(9)}
    names = inputs or ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    inits = {k: v for k, v in inits.items() if k in names}
    node = helper.make_node("QLinearConv", names, ["y"], name="conv", kernel_shape=list(kernel))
    return make_model([node], [("x", t, [1, 1, 5, 5])], [("y", declared, None)], inits)


def test_qlinearconv_kernel_shape_must_match_its_weights(tmp_path, capsys):
    bad = _qconv(kernel=(5, 5))
    _ort_refuses(bad, {"x": X_U8}, "kernel_shape is not compatible with W shape")
    _refused(capsys, tmp_path, _save(tmp_path, bad, "kernel.onnx"), "node conv (QLinearConv)",
             "kernel_shape [5, 5] does not match the weights' spatial shape [3, 3]")
    good = _qconv(kernel=(3, 3))
    ort_run(good, {"x": X_U8})
    _accepted(capsys, _save(tmp_path, good, "good.onnx"))


def test_qlinearconv_needs_its_input_zero_point(tmp_path, capsys):
    bad = _qconv(inputs=["x", "xs", "", "w", "ws", "wz", "ys", "yz"])
    _ort_refuses(bad, {"x": X_U8}, "input 2 is marked single but has an empty string")
    _refused(capsys, tmp_path, _save(tmp_path, bad, "no_zp.onnx"), "node conv (QLinearConv)",
             "its required input 2 (x_zero_point) is missing")
    _accepted(capsys, _save(tmp_path, _qconv(), "good.onnx"))


def test_an_output_declared_uint8_with_an_int8_zero_point(tmp_path, capsys):
    bad = _qconv(y_zp=np.int8, declared=np.uint8)
    _ort_refuses(bad, {"x": X_I8}, r"Type \(tensor\(uint8\)\) of output arg \(y\)")
    _refused(capsys, tmp_path, _save(tmp_path, bad, "declared.onnx"), "node conv (QLinearConv)",
             "its output 'y' is declared uint8 in the file, but QLinearConv computes int8, the "
             "type of its input y_zero_point")
    good = _qconv(y_zp=np.int8, declared=np.int8)
    ort_run(good, {"x": X_I8})
    _accepted(capsys, _save(tmp_path, good, "good.onnx"))


# -- ONNX: required inputs of the other QOperators ------------------------------------------------

def _qmatmul(drop: int | None = None) -> tuple[onnx.ModelProto, dict]:
    inits = {"as": np.float32(0.1), "az": np.uint8(120), "b": RNG.integers(0, 256, (4, 3))
             .astype(np.uint8), "bs": np.float32(0.02), "bz": np.uint8(128),
             "ys": np.float32(0.3), "yz": np.uint8(5)}
    names = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    if drop is not None:
        inits.pop(names[drop])
        names[drop] = ""
    node = helper.make_node("QLinearMatMul", names, ["y"], name="mm")
    model = make_model([node], [("a", np.uint8, [2, 4])], [("y", np.uint8, None)], inits)
    return model, {"a": RNG.integers(0, 256, (2, 4)).astype(np.uint8)}


def _qgemm(drop: int | None = None) -> tuple[onnx.ModelProto, dict]:
    inits = {"as": np.float32(0.1), "az": np.int8(3), "b": RNG.integers(-127, 128, (3, 4))
             .astype(np.int8), "bs": np.float32(0.02), "bz": np.int8(0),
             "c": np.arange(3, dtype=np.int32), "ys": np.float32(0.3), "yz": np.int8(-2)}
    names = ["a", "as", "az", "b", "bs", "bz", "c", "ys", "yz"]
    if drop is not None:
        inits.pop(names[drop])
        names[drop] = ""
    node = helper.make_node("QGemm", names, ["y"], name="fc", domain="com.microsoft", transB=1)
    model = _contrib(make_model([node], [("a", np.int8, [2, 4])], [("y", np.int8, None)], inits))
    return model, {"a": RNG.integers(-128, 128, (2, 4)).astype(np.int8)}


def _qunary(op: str, drop: int | None = None) -> tuple[onnx.ModelProto, dict]:
    inits = {"xs": np.float32(0.1), "xz": np.uint8(128), "ys": np.float32(0.05),
             "yz": np.uint8(0 if op == "QLinearSoftmax" else 100)}
    names = ["x", "xs", "xz", "ys", "yz"]
    if drop is not None:
        inits.pop(names[drop])
        names[drop] = ""
    attrs = {"opset": 13} if op == "QLinearSoftmax" else {}
    node = helper.make_node(op, names, ["y"], name="q", domain="com.microsoft", **attrs)
    model = _contrib(make_model([node], [("x", np.uint8, [1, 2, 3, 3])],
                                [("y", np.uint8, None)], inits))
    return model, {"x": RNG.integers(0, 256, (1, 2, 3, 3)).astype(np.uint8)}


REQUIRED = [  # (case, model builder, the missing input, its name, a twin that omits an optional)
    ("matmul_a_zp", _qmatmul, 2, "a_zero_point", None),
    ("matmul_b_zp", _qmatmul, 5, "b_zero_point", None),
    ("qgemm_a_zp", _qgemm, 2, "a_zero_point", 6),
    ("qgemm_b_zp", _qgemm, 5, "b_zero_point", 6),
    ("pool_x_zp", lambda drop=None: _qunary("QLinearGlobalAveragePool", drop), 2,
     "x_zero_point", None),
    ("softmax_y_zp", lambda drop=None: _qunary("QLinearSoftmax", drop), 4, "y_zero_point", 2),
]


@pytest.mark.parametrize("case,build,missing,name,optional", REQUIRED,
                         ids=[r[0] for r in REQUIRED])
def test_required_zero_points_of_qoperators(tmp_path, capsys, case, build, missing, name,
                                            optional):
    bad, feeds = build(missing)
    _ort_refuses(bad, feeds, f"input {missing} is marked single but has an empty string")
    _refused(capsys, tmp_path, _save(tmp_path, bad, f"{case}.onnx"),
             f"its required input {missing} ({name}) is missing")
    good, feeds = build(optional)
    ort_run(good, feeds)
    _accepted(capsys, _save(tmp_path, good, "good.onnx"))


def test_contrib_input_table_is_onnxruntimes():
    """CONTRIB_INPUTS mirrors onnxruntime's com.microsoft schemas (names and optionality)."""
    pybind = require_module("onnxruntime.capi.onnxruntime_pybind11_state", "the test oracle")
    schemas = {s.name: s for s in pybind.get_all_operator_schema() if s.domain == "com.microsoft"}
    marks = {"Single": "", "Optional": "?", "Variadic": "*"}
    for op, inputs in CONTRIB_INPUTS.items():
        theirs = tuple(i.name + marks[str(i.option).rsplit(".", 1)[-1]]
                       for i in schemas[op].inputs)
        assert inputs == theirs, op


# -- ONNX: element types the schema ties together -------------------------------------------------

def _quantize(declared, zp=np.int8, scale=np.float32, opset=13):
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")
    inits = {"s": np.array(0.1, scale), "z": np.array(3, zp)}
    return make_model([node], [("x", np.float32, [4])], [("y", declared, None)], inits, opset)


def _qadd(declared):
    inits = {"as": np.float32(0.1), "az": np.int8(1), "bs": np.float32(0.2), "bz": np.int8(-3),
             "cs": np.float32(0.3), "cz": np.int8(2)}
    node = helper.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"],
                            ["y"], name="add", domain="com.microsoft")
    return _contrib(make_model([node], [("a", np.int8, [4]), ("b", np.int8, [4])],
                               [("y", declared, None)], inits))


TIED = [  # (case, bad model, its valid twin, feeds, Kiln's words, onnxruntime's)
    ("quantize_output", _quantize(np.uint8), _quantize(np.int8),
     {"x": np.linspace(-2, 2, 4, dtype=np.float32)},
     "its output 'y' is declared uint8 in the file, but QuantizeLinear computes int8, the type "
     "of its input y_zero_point", "does not match expected type"),
    ("quantize_scale", _quantize(np.int8, scale=np.float16, opset=21),
     _quantize(np.int8, scale=np.float32, opset=21),
     {"x": np.linspace(-2, 2, 4, dtype=np.float32)},
     "its inputs x (float32) and y_scale (float16) must have one element type",
     r"Type parameter \(T1\) of Optype \(QuantizeLinear\) bound to different types"),
    ("qlinearadd_output", _qadd(np.uint8), _qadd(np.int8),
     {"a": np.arange(4, dtype=np.int8), "b": np.arange(4, dtype=np.int8)},
     "its output 'y' is declared uint8 in the file, but QLinearAdd computes int8",
     "does not match expected type"),
]


@pytest.mark.parametrize("case,bad,good,feeds,ours,theirs", TIED, ids=[t[0] for t in TIED])
def test_types_the_schema_ties_together(tmp_path, capsys, case, bad, good, feeds, ours, theirs):
    _ort_refuses(bad, feeds, theirs)
    _refused(capsys, tmp_path, _save(tmp_path, bad, f"{case}.onnx"), ours)
    ort_run(good, feeds)
    _accepted(capsys, _save(tmp_path, good, "good.onnx"))


# -- ONNX: attributes of a later opset ------------------------------------------------------------

LATER = [  # (operator, attribute, value, the opset that introduced it)
    ("QuantizeLinear", "block_size", 0, 21),
    ("QuantizeLinear", "saturate", 1, 19),
    ("QuantizeLinear", "output_dtype", TensorProto.UINT8, 21),
    ("DequantizeLinear", "block_size", 0, 21),
    ("DequantizeLinear", "output_dtype", TensorProto.FLOAT, 23),
]


def _later(op: str, opset: int, **attrs) -> tuple[onnx.ModelProto, dict]:
    quantize = op == "QuantizeLinear"
    x_type, y_type = (np.float32, np.uint8) if quantize else (np.uint8, np.float32)
    node = helper.make_node(op, ["x", "s"], ["y"], name="q", **attrs)
    model = make_model([node], [("x", x_type, [4])], [("y", y_type, None)],
                       {"s": np.float32(0.1)}, opset)
    return model, {"x": np.arange(4).astype(x_type)}


@pytest.mark.parametrize("op,name,value,since", LATER, ids=[f"{o}-{a}" for o, a, _, _ in LATER])
def test_an_attribute_of_a_later_opset_is_refused(tmp_path, capsys, op, name, value, since):
    bad, feeds = _later(op, 13, **{name: value})
    _ort_refuses(bad, feeds, f"Unrecognized attribute: {name} for operator {op}")
    _refused(capsys, tmp_path, _save(tmp_path, bad, "later.onnx"), f"node q ({op})",
             f"attribute '{name}' is not defined for {op} at opset 13, the model's (it arrived "
             f"at opset {since})")
    for model, _ in (_later(op, since, **{name: value}), _later(op, 13)):  # valid twins
        ort_run(model, feeds)
        _accepted(capsys, _save(tmp_path, model, "good.onnx"))


# -- TFLite: int8 weights are symmetric -----------------------------------------------------------

def _layer(builtin: str, weight_zp: int, bias_scale: float | None = None) -> Model:
    x = T("x", (1, 5, 5, 2), "int8", scale=[0.1], zero_point=[-3])
    if builtin == "FULLY_CONNECTED":
        x = T("x", (1, 8), "int8", scale=[0.1], zero_point=[-3])
        w_shape, y_shape, options = (3, 8), (1, 3), None
    elif builtin == "CONV_2D":
        w_shape, y_shape = (3, 3, 3, 2), (1, 3, 3, 3)
        options = ("Conv2DOptions", {"Padding": 1, "StrideW": 1, "StrideH": 1})
    else:
        w_shape, y_shape = (1, 3, 3, 2), (1, 3, 3, 2)
        options = ("DepthwiseConv2DOptions", {"Padding": 1, "StrideW": 1, "StrideH": 1,
                                              "DepthMultiplier": 1})
    channels = w_shape[-1] if builtin == "DEPTHWISE_CONV_2D" else w_shape[0]
    w = T("w", w_shape, "int8", RNG.integers(-127, 128, w_shape), scale=[0.02],
          zero_point=[weight_zp], axis=3 if builtin == "DEPTHWISE_CONV_2D" else 0)
    bias = T("b", (channels,), "int32", RNG.integers(-50, 50, channels),
             scale=[bias_scale if bias_scale is not None else 0.1 * 0.02], zero_point=[0])
    y = T("y", y_shape, "int8", scale=[0.3], zero_point=[4])
    return Model([x, w, bias, y], [Op(builtin, [0, 1, 2], [3], options)], [0], [3])


def _tflite(tmp_path, model: Model, name: str):
    path = tmp_path / name
    path.write_bytes(write(model))
    return path


def _tflm_refuses(model: Model) -> None:
    with pytest.raises(RuntimeError, match="failed to allocate tensors"):
        tflm(write(model))


@pytest.mark.parametrize("builtin", ["FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D"])
def test_int8_weights_with_a_zero_point_are_refused(tmp_path, capsys, builtin):
    # The oracle is the spec (QUANT.md 2.1): TFLite Micro asserts a zero filter zero point in
    # debug builds only (TFLITE_DCHECK), and LiteRT's reference FULLY_CONNECTED and
    # DEPTHWISE_CONV_2D compute with it anyway; LiteRT's CONV_2D refuses it.
    bad = _layer(builtin, weight_zp=3)
    if builtin == "CONV_2D":
        litert = require_module("ai_edge_litert.interpreter", "the test oracle")
        with pytest.raises(RuntimeError, match=r"zero_point->data\[i\] != 0"):
            litert.Interpreter(model_content=write(bad), experimental_op_resolver_type=litert
                               .OpResolverType.BUILTIN_REF).allocate_tensors()
    _refused(capsys, tmp_path, _tflite(tmp_path, bad, "zp.tflite"), f"node {builtin} #0",
             "its int8 weights w have zero point 3; TFLite's int8 weights are symmetric")
    good = _layer(builtin, weight_zp=0)
    tflm(write(good))
    _accepted(capsys, _tflite(tmp_path, good, "good.tflite"))


# -- TFLite: operator versions --------------------------------------------------------------------

def _fc_model(version: int) -> Model:
    model = _layer("FULLY_CONNECTED", weight_zp=0)
    model.versions = {"FULLY_CONNECTED": version}
    return model


def test_an_operator_version_newer_than_any_known_is_refused(tmp_path, capsys):
    litert = require_module("ai_edge_litert.interpreter", "the test oracle")
    with pytest.raises(ValueError, match="FULLY_CONNECTED' version '99'"):
        litert.Interpreter(model_content=write(_fc_model(99)))
    _refused(capsys, tmp_path, _tflite(tmp_path, _fc_model(99), "v99.tflite"),
             "node FULLY_CONNECTED #0", "it is version 99 of FULLY_CONNECTED, newer than any Kiln "
             "reads (up to 14")
    _refused(capsys, tmp_path, _tflite(tmp_path, _fc_model(15), "v15.tflite"), "version 15")
    _accepted(capsys, _tflite(tmp_path, _fc_model(VERSIONS["FULLY_CONNECTED"]), "good.tflite"))


def test_every_builtin_has_a_newest_version_litert_registers():
    """Kiln's newest version of each builtin it reads is one LiteRT's resolver knows."""
    litert = require_module("ai_edge_litert.interpreter", "the test oracle")
    assert set(VERSIONS) == set(CONVERTERS)
    for builtin, version in VERSIONS.items():
        model = Model([T("x", (1, 4)), T("y", (1, 4))], [Op(builtin, [0], [1])], [0], [1],
                      versions={builtin: version})
        litert.Interpreter(model_content=write(model))  # resolves the operator, or raises


# -- TFLite: TFLite Micro's other Prepare checks --------------------------------------------------

def _pool(builtin: str, out_zp: int) -> Model:
    return Model([T("x", (1, 4, 4, 2), "int8", scale=[0.1], zero_point=[0]),
                  T("y", (1, 2, 2, 2), "int8", scale=[0.1], zero_point=[out_zp])],
                 [Op(builtin, [0], [1], ("Pool2DOptions", {"Padding": 1, "StrideW": 2,
                                                          "StrideH": 2, "FilterWidth": 2,
                                                          "FilterHeight": 2}))], [0], [1])


def _concat(b_scale: float) -> Model:
    return Model([T("a", (1, 4), "int8", scale=[0.1], zero_point=[1]),
                  T("b", (1, 4), "int8", scale=[b_scale], zero_point=[1]),
                  T("y", (1, 8), "int8", scale=[0.1], zero_point=[1])],
                 [Op("CONCATENATION", [0, 1], [2], ("ConcatenationOptions", {"Axis": 1}))],
                 [0, 1], [2])


def _quantize_tflite(scales: list) -> Model:
    return Model([T("x", (1, 2)), T("y", (1, 2), "int8", scale=scales,
                                    zero_point=[0] * len(scales), axis=1)],
                 [Op("QUANTIZE", [0], [1])], [0], [1])


def _retyped_fc(x_dtype: str) -> Model:
    model = _layer("FULLY_CONNECTED", weight_zp=0)
    model.tensors[0] = T("x", (1, 8), x_dtype, scale=[0.1], zero_point=[3])
    return model


def _hard_swish(out_scale: float) -> Model:
    return Model([T("x", (1, 8), "int8", scale=[0.5], zero_point=[0]),
                  T("y", (1, 8), "int8", scale=[out_scale], zero_point=[0])],
                 [Op("HARD_SWISH", [0], [1])], [0], [1])


PREPARE = [  # (case, bad model, valid twin, Kiln's words)
    ("max_pool_params", _pool("MAX_POOL_2D", 3), _pool("MAX_POOL_2D", 0),
     "TFLite Micro's 8-bit MAX_POOL_2D does not rescale"),
    ("concat_params", _concat(0.2), _concat(0.1),
     "its input b has scale 0.200000003 and zero point 1 but its output y 0.100000001 and 1"),
    ("quantize_per_channel", _quantize_tflite([0.1, 0.2]), _quantize_tflite([0.1]),
     "its output y has 2 scales; TFLite Micro's QUANTIZE writes one"),
    ("layer_changes_type", _retyped_fc("uint8"), _retyped_fc("int8"),
     "its input x is uint8 but its output y is int8"),
    ("hard_swish_scale", _hard_swish(0.001), _hard_swish(0.01),
     "which TFLite Micro's 8-bit HARD_SWISH refuses"),
    ("fc_bias_scale", _layer("FULLY_CONNECTED", 0, bias_scale=0.5),
     _layer("FULLY_CONNECTED", 0, bias_scale=0.1 * 0.02 * 1.001),
     "its bias b has scale 0.5, not input x weight scale"),
]


@pytest.mark.parametrize("case,bad,good,ours", PREPARE, ids=[p[0] for p in PREPARE])
def test_tflite_micro_prepare_checks(tmp_path, capsys, case, bad, good, ours):
    _tflm_refuses(bad)
    _refused(capsys, tmp_path, _tflite(tmp_path, bad, f"{case}.tflite"), ours)
    tflm(write(good))
    _accepted(capsys, _tflite(tmp_path, good, "good.tflite"))
