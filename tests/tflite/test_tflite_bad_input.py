"""Broken .tflite files: one line naming the file, the operator or tensor, and the reason."""

import numpy as np
import pytest

from app import cli
from compiler.errors import ModelError
from compiler.frontends.load import load_model
from tests.tflite.writer import Model, Op, T, write


def _fc(**changes) -> Model:
    rng = np.random.default_rng(0)
    model = Model([T("x", (1, 8)), T("w", (3, 8), data=rng.standard_normal((3, 8))),
                   T("y", (1, 3))], [Op("FULLY_CONNECTED", [0, 1, -1], [2])], [0], [2])
    for key, value in changes.items():
        setattr(model, key, value)
    return model


def _error(data: bytes, tmp_path) -> str:
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelError) as info:
        load_model(path)
    message = str(info.value)
    assert message.startswith("bad.tflite: ") and "\n" not in message
    return message


def test_the_identifier_is_checked(tmp_path):
    data = bytearray(write(_fc()))
    data[4:8] = b"XXXX"
    assert "identifier TFL3 is missing" in _error(bytes(data), tmp_path)


def test_a_truncated_file_is_refused(tmp_path):
    data = write(_fc())
    message = _error(data[: len(data) // 2], tmp_path)
    assert "malformed" in message or "claims" in message or "refers" in message


def test_unsupported_builtins_are_listed_at_once_by_name_and_index(tmp_path):
    model = _fc(ops=[Op("FULLY_CONNECTED", [0, 1, -1], [2]), Op("HASHTABLE_LOOKUP", [2], [2]),
                     Op("NON_MAX_SUPPRESSION_V5", [2], [2])])
    message = _error(write(model), tmp_path)
    assert "2 operator(s)" in message and "HASHTABLE_LOOKUP #1" in message
    assert "NON_MAX_SUPPRESSION_V5 #2" in message


def test_a_custom_operator_is_named(tmp_path):
    message = _error(write(_fc(ops=[Op("CUSTOM", [0], [2])])), tmp_path)
    assert "CUSTOM" in message and "#0" in message


def test_a_tensor_index_out_of_range_names_the_operator(tmp_path):
    message = _error(write(_fc(ops=[Op("FULLY_CONNECTED", [0, 9, -1], [2])])), tmp_path)
    assert "FULLY_CONNECTED #0" in message and "tensor 9" in message


def test_a_buffer_shorter_than_its_tensor_names_the_tensor(tmp_path):
    model = _fc()
    model.tensors[1].data = np.zeros(5, np.float32)
    message = _error(write(model), tmp_path)
    assert "tensor 1 (w)" in message and "bytes" in message


def test_a_negative_dimension_is_refused(tmp_path):
    model = _fc()
    model.tensors[0].shape = (1, -8)
    assert "dimension -8" in _error(write(model), tmp_path)


def test_a_subgraph_no_operator_calls_is_ignored_as_tflite_micro_does():
    """TFLite Micro runs subgraph 0; another is only run by CALL_ONCE, IF or WHILE."""
    graph = load_model(write(_fc(subgraphs=2)))
    assert len(graph.nodes) == 1 and graph.nodes[0].name.startswith("FULLY_CONNECTED")


def test_control_flow_is_refused_by_name(tmp_path):
    model = _fc(subgraphs=2)
    model.ops = [Op("IF", [0], [2], ("IfOptions", {"ThenSubgraphIndex": 1,
                                                   "ElseSubgraphIndex": 1}))]
    assert "IF #0" in _error(write(model), tmp_path)


def test_a_variable_read_before_any_assignment_is_refused(tmp_path):
    model = Model([T("handle", (), "resource"), T("y", (1, 4))],
                  [Op("VAR_HANDLE", [], [0], ("VarHandleOptions", {"SharedName": "v"})),
                   Op("READ_VARIABLE", [0], [1])], [], [1])
    message = _error(write(model), tmp_path)
    assert "READ_VARIABLE #1" in message and "before any value is assigned" in message


def test_an_initialization_that_computes_is_refused(tmp_path):
    init = Model([T("handle", (), "resource"), T("a", (1, 4)), T("b", (1, 4))],
                 [Op("VAR_HANDLE", [], [0], ("VarHandleOptions", {"SharedName": "v"})),
                  Op("ABS", [1], [2]), Op("ASSIGN_VARIABLE", [0, 2], [])], [1], [])
    model = Model([T("x", (1, 4)), T("y", (1, 4))],
                  [Op("CALL_ONCE", [], [], ("CallOnceOptions", {"InitSubgraphIndex": 1})),
                   Op("ABS", [0], [1])], [0], [1], more=[init])
    message = _error(write(model), tmp_path)
    assert "CALL_ONCE #0" in message and "subgraph 1" in message


def test_a_scale_of_zero_names_the_tensor(tmp_path):
    model = Model([T("x", (1, 4), "int8", scale=[0.0], zero_point=[0]),
                   T("y", (1, 4), "int8", scale=[0.1], zero_point=[0]),
                   T("s", (2,), "int32", np.array([1, 4]))],
                  [Op("RESHAPE", [0, 2], [1])], [0], [1])
    message = _error(write(model), tmp_path)
    assert "scale" in message and "0.0" in message


@pytest.mark.parametrize("dtype,zero_point", [("int8", 300), ("int8", -129), ("uint8", 256)])
def test_a_zero_point_out_of_range_names_the_tensor(dtype, zero_point, tmp_path):
    model = Model([T("x", (1, 4), dtype, scale=[0.1], zero_point=[zero_point]),
                   T("y", (1, 4), dtype, scale=[0.1], zero_point=[0])],
                  [Op("RELU", [0], [1])], [0], [1])
    message = _error(write(model), tmp_path)
    assert f"(x) has zero point {zero_point}, outside {dtype}'s" in message


def test_the_cli_prints_one_line(tmp_path, capsys):
    path = tmp_path / "bad.tflite"
    path.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(64))
    assert cli.main(["inspect", str(path)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.tflite" in err and "TFLite" in err


def _depthwise(in_channels: int, out_channels: int, multiplier: int, dtype: str) -> Model:
    rng = np.random.default_rng(1)
    w_shape = (1, 2, 2, out_channels)
    quant = {"scale": [0.1], "zero_point": [0]} if dtype == "int8" else {}
    w_quant = {"scale": [0.05], "zero_point": [0]} if dtype == "int8" else {}
    options = ("DepthwiseConv2DOptions", {"Padding": 1, "StrideW": 1, "StrideH": 1,
                                          "DepthMultiplier": multiplier})
    return Model([T("x", (1, 4, 4, in_channels), dtype, **quant),
                  T("w", w_shape, dtype, rng.integers(-127, 128, w_shape), **w_quant),
                  T("y", (1, 3, 3, out_channels), dtype, **quant)],
                 [Op("DEPTHWISE_CONV_2D", [0, 1, -1], [2], options)], [0], [2])


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("channels, multiplier", [((3, 3), -1), ((3, 3), 0), ((2, 4), 99),
                                                  ((1, 3), 1)])
def test_a_depth_multiplier_disagreeing_with_the_weights_is_refused(channels, multiplier,
                                                                     dtype, tmp_path):
    """TFLite Micro's kernel loops over the multiplier it is given, not over the weights, so
    it reads and writes outside its tensors (a fuzzed -1 gave other bytes on every run);
    Kiln used the weights. The model is refused at the operator."""
    message = _error(write(_depthwise(*channels, multiplier, dtype)), tmp_path)
    assert "node DEPTHWISE_CONV_2D #0" in message, message
    assert (f"its depth multiplier {multiplier} times the input's {channels[0]} channels is "
            f"not its weights' {channels[1]} output channels") in message, message
    load_model(write(_depthwise(*channels, channels[1] // channels[0], dtype)))


def test_a_float_input_with_an_int8_output_is_refused(tmp_path):
    """A fuzzed MEAN whose input was retyped to float32 kept its int8 output: Kiln averaged
    in float and wrote float32, TFLite Micro wrote int8."""
    model = Model([T("x", (1, 2, 2, 3), scale=[0.1], zero_point=[0]),
                   T("axes", (2,), "int32", np.array([1, 2])),
                   T("y", (1, 1, 1, 3), "int8", scale=[0.1], zero_point=[0])],
                  [Op("MEAN", [0, 1], [2], ("ReducerOptions", {"KeepDims": True}))], [0], [2])
    message = _error(write(model), tmp_path)
    assert "node MEAN #0: its input x is float32 but its output y is int8" in message, message
