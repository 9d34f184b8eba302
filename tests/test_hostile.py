"""Hostile models from the fuzzing run: each is refused with one sentence, cheaply.

Every case exits 2 with a line naming the file, the node or tensor and the reason, and the
memory-hungry ones are refused before anything big is allocated or read.
"""


import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from app import cli
from compiler.limits import ENV_VAR
from tests.peak import measure_kiln


def _save(tmp_path, nodes, inputs, outputs, inits=(), name="hostile.onnx", opset=17):
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _refused(capsys, *args) -> str:
    assert cli.main(list(args)) == 2
    err = capsys.readouterr().err
    assert err.startswith("kiln: error: ") and err.count("\n") == 1, err
    assert "Error:" not in err and "Traceback" not in err  # a sentence, not a Python exception
    return err


def _peak_mb(args, env=None) -> tuple[int, float, str]:
    """(exit code, peak resident MB, last stderr line) of `kiln ARGS` in a fresh process."""
    code, _, peak, err = measure_kiln(args, env)
    return code, peak, err


def _external_model(tmp_path, gib: int):
    """A few-KB model whose one initializer points at a sparse file of `gib` GiB."""
    data = tmp_path / "weights.bin"
    with open(data, "wb") as handle:
        handle.truncate(gib << 30)
    count = (gib << 30) // 4
    tensor = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[count])
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"),
                       ("length", str(gib << 30))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    node = helper.make_node("Identity", ["W"], ["y"], name="take_w")
    path = _save(tmp_path, [node], [], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                       [count])], [tensor])
    assert path.stat().st_size < 4096
    return path


def test_external_data_of_8_gib_is_refused_without_reading_it(tmp_path):
    path = _external_model(tmp_path, 8)
    code, peak, err = _peak_mb(["inspect", str(path)])
    assert code == 2 and "tensor 'W' would take 8.0 GiB" in err and ENV_VAR in err
    assert peak < 200, f"kiln inspect peaked at {peak:.0f} MB"


def test_allowed_external_data_is_mapped_not_read(tmp_path):
    path = _external_model(tmp_path, 2)
    code, peak, err = _peak_mb(["inspect", str(path), "--json"], {ENV_VAR: str(4 << 30)})
    assert code == 0, err
    assert peak < 400, f"kiln inspect read the data: {peak:.0f} MB"


def test_a_4_gib_constant_of_shape_is_refused(tmp_path, capsys):
    shape = numpy_helper.from_array(np.array([1 << 30], np.int64), "shape")
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], name="huge_fill",
                            value=numpy_helper.from_array(np.array([1.0], np.float32)))
    path = _save(tmp_path, [node], [], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, None)], [shape])
    err = _refused(capsys, "inspect", str(path))
    assert "node huge_fill" in err and "4.0 GiB" in err
    code, peak, _ = _peak_mb(["run", str(path)])
    assert code == 2 and peak < 200


def _conv(tmp_path, **attrs):
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="wild_conv", **attrs)
    return _save(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                  [1, 2, 8, 8])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])


def test_a_padding_of_16384_is_refused_at_load(tmp_path, capsys):
    path = _conv(tmp_path, pads=[16384] * 4)
    err = _refused(capsys, "inspect", str(path))
    assert "node wild_conv" in err and "GiB" in err and "limit" in err


def test_a_dilation_of_2_to_the_40_is_refused(tmp_path, capsys):
    path = _conv(tmp_path, dilations=[1 << 40, 1 << 40])
    err = _refused(capsys, "compile", str(path), "-o", str(tmp_path / "b"))
    assert "node wild_conv" in err and "dilations" in err and "32-bit" in err
    assert not (tmp_path / "b").exists()


def test_an_input_dimension_of_zero_plans_and_compiles_to_nothing(tmp_path, capsys):
    """Empty tensors are valid ONNX (the conformance suite runs them): they inspect, run, plan
    no bytes and compile to code that writes nothing."""
    node = helper.make_node("Relu", ["x"], ["y"], name="r")
    path = _save(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                  [1, 0, 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 0, 4])])
    assert cli.main(["inspect", str(path)]) == 0
    assert cli.main(["memory", str(path)]) == 0
    capsys.readouterr()
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "net.h").exists()


def test_gather_indices_out_of_range_are_refused_at_load(tmp_path, capsys):
    idx = numpy_helper.from_array(np.array([0, 7], np.int64), "idx")
    node = helper.make_node("Gather", ["x", "idx"], ["y"], name="far_gather", axis=0)
    path = _save(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                  [3, 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [idx])
    err = _refused(capsys, "inspect", str(path))
    assert "hostile.onnx" in err and "node far_gather" in err and "7" in err


@pytest.mark.parametrize("bad", ["bytes_name", "retyped_initializer"])
def test_messages_are_sentences_not_python_exceptions(tmp_path, capsys, bad):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    if bad == "bytes_name":
        model = helper.make_model(helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y]),
            opset_imports=[helper.make_opsetid("", 17)])
        data = model.SerializeToString().replace(b"\x1a\x01r", b"\x1a\x01\xff")
        assert b"\xff" in data
        path = tmp_path / "hostile.onnx"
        path.write_bytes(data)
    else:
        init = numpy_helper.from_array(np.ones(2, np.float32), "w")
        init.data_type = TensorProto.INT64  # 8 bytes of raw data for two int64 values
        path = _save(tmp_path, [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                     [x], [y], [init])
    err = _refused(capsys, "inspect", str(path))
    assert "hostile.onnx" in err
