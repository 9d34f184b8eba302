"""Hostile and unusual quantized models: no internal error, and compiled equals reference.

A fuzzing audit found models that `kiln inspect` and `kiln run` took but whose compilation
ended in an internal error (exit 3). Each case here either compiles, and then the network
compiled for this host gives the reference interpreter's outputs element for element while the
interpreter gives onnxruntime's (int8 operands wherever an onnxruntime kernel multiplies, since
its uint8 x int8 products are exact only on CPUs with VNNI), or is refused: exit 2 and one
line naming the file, the node and the reason.
"""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import onnx
import pytest
from elftools.elf.elffile import ELFFile
from onnx import helper

from app import cli
from compiler.driver import compilation, compile_graph
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx
from compiler.harness.guarded import compile_guarded
from compiler.interpreter import run
from compiler.qmath.requant import REQUANT_KEY
from compiler.quant.calibrate import params_for
from tests.conftest import ROOT, shared_models
from tests.helpers import assert_close, make_model, ort_run
from tests.quant.int8_oracle import qdq_session
from tests.tflite.oracles import quantized
from tests.tflite.writer import Model, Op, write

TINY = np.float32(1e-45)  # a subnormal float32: positive and finite, 1 / TINY overflows


def _contrib(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` importing onnxruntime's com.microsoft domain (QLinearAdd, QLinearConcat...)."""
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def _feeds(graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in graph.inputs:
        if v.type.dtype == "float32":
            feeds[v.name] = rng.standard_normal(v.type.shape).astype(np.float32)
        else:
            info = np.iinfo(v.type.dtype)
            feeds[v.name] = rng.integers(info.min, info.max + 1, v.type.shape).astype(
                v.type.dtype)
    return feeds


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    np.testing.assert_array_equal(got, want, err_msg=what)


def _compiled(graph, seeds=range(3), oracle=None):
    """Compile `graph` for the host and hold it against the interpreter, and the interpreter
    against `oracle(feeds) -> outputs in graph order` when given; returns the compiled net.

    The network runs guarded (every buffer between canary bands, checked after each run), so
    a kernel writing past its output fails here too.
    """
    runner = compile_guarded(compilation(graph).prepared, "host")
    net = runner.net
    try:
        for seed in seeds:
            feeds = _feeds(graph, seed)
            got = runner.run(feeds)
            want = run(graph, feeds)
            for value in graph.outputs:
                _same(got[value.name], want[value.name], f"seed {seed}: compiled {value.name}")
            if oracle is not None:
                for value, theirs in zip(graph.outputs, oracle(feeds)):
                    _same(want[value.name], theirs, f"seed {seed}: onnxruntime {value.name}")
    finally:
        runner.close()
    return net


def _against_onnxruntime(model: onnx.ModelProto, seeds=range(3)):
    """Compiled == interpreter == onnxruntime (its kernels, one per node) on `model`."""
    return _compiled(load_onnx(model), seeds, lambda feeds: ort_run(model, feeds))


def _save(tmp_path, model: onnx.ModelProto, name: str = "hostile.onnx"):
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _refused(capsys, *args) -> str:
    assert cli.main([str(a) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kiln: error: ") and err.count("\n") == 1, err
    assert "Error:" not in err and "Traceback" not in err, err
    return err


def _params(dtype, *names: str) -> dict[str, np.ndarray]:
    """A scale and zero point for each name prefix (scales 0.02 apart, small zero points)."""
    out = {}
    for i, name in enumerate(names):
        out[f"{name}s"] = np.float32(0.03 + 0.02 * i)
        out[f"{name}z"] = np.array(2 - i if dtype == np.int8 else 120 + i, dtype)
    return out


# -- 1. constant operands have a buffer -------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("shape", [(), (2, 3)], ids=["scalar", "2x3"])
def test_a_graph_that_only_dequantizes_an_initializer_compiles(dtype, shape):
    """No runtime input at all: the kernel reads its operand from the weights."""
    q = np.arange(np.prod(shape, dtype=int)).reshape(shape).astype(dtype)
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")
    model = make_model([node], [], [("y", np.float32, None)],
                       {"q": q, "s": np.float32(0.5), "z": np.array(3, dtype)})
    _against_onnxruntime(model, seeds=[0])


BINARY_CASES = {  # (shape of A, shape of B, A constant, B constant)
    "scalar": ((1, 4), (), False, True), "vector4": ((1, 4), (4,), False, True),
    "1x1": ((1, 4), (1, 1), False, True), "1x4": ((1, 4), (1, 4), False, True),
    "constant_a_broadcast": ((2, 3, 4), (4,), True, False),
    "column_and_row": ((3, 1), (1, 4), True, False),
    "both_constant": ((1, 4), (1, 4), True, True), "both_scalar": ((), (), True, True)}


@pytest.mark.parametrize("case", BINARY_CASES, ids=list(BINARY_CASES))
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_constant_operands_of_qlinear_add_and_mul_compile(op, case):
    a_shape, b_shape, a_constant, b_constant = BINARY_CASES[case]
    rng = np.random.default_rng(1)
    inits = _params(np.int8, "a", "b", "c")
    inputs = []
    for name, shape, constant in (("a", a_shape, a_constant), ("b", b_shape, b_constant)):
        if constant:
            inits[name] = rng.integers(-128, 128, shape).astype(np.int8)
        else:
            inputs.append((name, np.int8, list(shape)))
    node = helper.make_node(op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"],
                            domain="com.microsoft", name="binary")
    _against_onnxruntime(_contrib(make_model([node], inputs, [("c", np.int8, None)], inits)))


@pytest.mark.parametrize("pattern", ["input_constant", "constant_input", "constants_only"])
def test_constant_inputs_of_qlinear_concat_compile(pattern):
    kinds = {"input_constant": "ic", "constant_input": "ci", "constants_only": "cc"}[pattern]
    rng = np.random.default_rng(2)
    inits = {"ys": np.float32(0.1), "yz": np.int8(-3)}
    names, inputs = ["ys", "yz"], []
    for i, kind in enumerate(kinds):
        inits.update({f"s{i}": np.float32(0.05 * (i + 1)), f"z{i}": np.int8(i - 1)})
        if kind == "c":
            inits[f"t{i}"] = rng.integers(-128, 128, (1, 3)).astype(np.int8)
        else:
            inputs.append((f"t{i}", np.int8, [1, 3]))
        names += [f"t{i}", f"s{i}", f"z{i}"]
    node = helper.make_node("QLinearConcat", names, ["y"], domain="com.microsoft", axis=1,
                            name="join")
    _against_onnxruntime(_contrib(make_model([node], inputs, [("y", np.int8, None)], inits)),
                         seeds=[0])


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"])
def test_a_one_input_quantized_operator_of_a_constant_compiles(op):
    """Table and softmax kernels read a constant input from the weights too."""
    attrs = {"QLinearLeakyRelu": {"alpha": 0.1},
             "QLinearSoftmax": {"axis": -1, "opset": 13}}.get(op, {})
    rng = np.random.default_rng(3)
    y_scale, y_zero = (np.float32(1 / 256), np.int8(-128)) if op != "QLinearLeakyRelu" else (
        np.float32(0.03), np.int8(1))
    inits = {"x": rng.integers(-128, 128, (2, 6)).astype(np.int8), "xs": np.float32(0.05),
             "xz": np.int8(2), "ys": y_scale, "yz": y_zero}
    node = helper.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft",
                            name="unary", **attrs)
    _against_onnxruntime(_contrib(make_model([node], [], [("y", np.int8, None)], inits)),
                         seeds=[0])


@pytest.mark.parametrize("op", ["Identity", "Reshape"])
@pytest.mark.parametrize("source", ["initializer", "graph_input"])
def test_an_output_that_only_moves_bytes_compiles(op, source):
    """An Identity or reshape that placement cannot make a view becomes a copy."""
    inits = {"shape": np.array([2, 3], np.int64)} if op == "Reshape" else {}
    inputs = [("x", np.int8, [6])]
    if source == "initializer":
        inits["x"], inputs = np.arange(-3, 3).astype(np.int8), []
    node = helper.make_node(op, ["x", "shape"] if op == "Reshape" else ["x"], ["y"], name="move")
    _against_onnxruntime(make_model([node], inputs, [("y", np.int8, None)], inits), seeds=[0])


def test_an_initializer_shadowing_a_graph_input_is_a_constant(tmp_path, capsys):
    """With IR version 4 and later an initializer named as a graph input is that input's
    default value, which the caller may override. Kiln compiles networks for their weights:
    the initializer is the value, as onnxruntime computes when the input is not fed, and the
    input is no input of the compiled network (`--input` for it is refused)."""
    inits = {**_params(np.int8, "a", "b", "c"), "b": np.arange(-2, 2).astype(np.int8)}
    node = helper.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"],
                            ["c"], domain="com.microsoft", name="add_default")
    model = _contrib(make_model([node], [("a", np.int8, [1, 4]), ("b", np.int8, [4])],
                                [("c", np.int8, None)], inits))
    assert model.ir_version >= 4
    graph = load_onnx(model)
    assert [v.name for v in graph.inputs] == ["a"]
    _compiled(graph, oracle=lambda feeds: ort_run(model, feeds))
    path = _save(tmp_path, model)
    np.save(tmp_path / "b.npy", np.zeros(4, np.int8))
    err = _refused(capsys, "run", path, "--input", f"b={tmp_path / 'b.npy'}")
    assert "--input b" in err and "no input of that name" in err


# -- 2. a parameter computed at run time is refused at compile time -------------------------

def _qlinear_conv(runtime: str) -> onnx.ModelProto:
    rng = np.random.default_rng(4)
    inits = {"xs": np.float32(0.02), "xz": np.int8(1),
             "w": rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8),
             "ws": np.float32(0.01), "wz": np.int8(0), "ys": np.float32(0.05),
             "yz": np.int8(-3)}
    value = inits.pop(runtime)
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                            ["y"], name="qconv", pads=[1, 1, 1, 1])
    return make_model([node], [("x", np.int8, [1, 3, 6, 6]),
                               (runtime, value.dtype, list(np.shape(value)))],
                      [("y", np.int8, None)], inits)


def _qlinear_matmul(runtime: str, a_shape=(2, 4), b_shape=(4, 5)) -> onnx.ModelProto:
    rng = np.random.default_rng(5)
    inits = {"as": np.float32(0.02), "az": np.int8(1),
             "b": rng.integers(-128, 128, b_shape).astype(np.int8), "bs": np.float32(0.01),
             "bz": np.int8(0), "ys": np.float32(0.05), "yz": np.int8(2)}
    value = inits.pop(runtime)
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"], name="qmatmul")
    return make_model([node], [("a", np.int8, list(a_shape)),
                               (runtime, value.dtype, list(np.shape(value)))],
                      [("y", np.int8, None)], inits)


@pytest.mark.parametrize("model, runtime, node, what", [
    (_qlinear_conv, "ws", "QLinearConv qconv", "its weight scale"),
    (_qlinear_conv, "xs", "QLinearConv qconv", "its input scale"),
    (_qlinear_matmul, "bs", "QLinearMatMul qmatmul", "its B scale")],
    ids=["conv_weight_scale", "conv_input_scale", "matmul_b_scale"])
def test_a_qoperator_scale_fed_at_run_time_is_refused_by_the_compiler(
        model, runtime, node, what, tmp_path, capsys):
    """ONNX lets a graph input feed a scale, and its conformance suite does so for QLinearConv
    and QLinearMatMul: `inspect` and the reference interpreter take the model (equal to
    onnxruntime), but a kernel compiles its scales in, so compiling is refused in one sentence
    naming the file, the node and the input. (Run-time weights compile: see the next test.)"""
    onnx_model = model(runtime)
    path = _save(tmp_path, onnx_model, "dynamic.onnx")
    assert cli.main(["inspect", str(path)]) == 0
    graph = load_onnx(onnx_model)
    feeds = _feeds(graph, 0)
    if feeds[runtime].dtype == np.float32:
        feeds[runtime] = np.array(0.015, np.float32)  # a scale
    _same(run(graph, feeds)["y"], ort_run(onnx_model, feeds)[0], "reference")
    capsys.readouterr()
    for args in (["compile", path, "-o", tmp_path / "bundle"],
                 ["run", "--engine", "compiled", path]):
        err = _refused(capsys, *args)
        assert "dynamic.onnx" in err and node in err and what in err, err
        assert f"({runtime})" in err and "computed at run time" in err, err
    assert not (tmp_path / "bundle").exists()


RUNTIME_PARAMETERS = {  # operator, its inputs, the one fed at run time, node attributes
    "sigmoid_input_scale": ("QLinearSigmoid", ["x", "xs", "xz", "ys", "yz"], "xs", {}),
    "leaky_relu_output_zero_point": ("QLinearLeakyRelu", ["x", "xs", "xz", "ys", "yz"], "yz",
                                     {"alpha": 0.2}),
    "matmul_integer_a_zero_point": ("MatMulInteger", ["x", "w", "xz", "wz"], "xz", {}),
    "qgemm_bias": ("QGemm", ["x", "xs", "xz", "w", "ws", "wz", "bias", "ys", "yz"], "bias", {}),
}


@pytest.mark.parametrize("case", RUNTIME_PARAMETERS, ids=list(RUNTIME_PARAMETERS))
def test_runtime_parameters_are_refused_where_they_were_compiled_wrong(case):
    """Some kernels compiled such a parameter as if it were absent and gave other outputs than
    the reference (a table built for the wrong scale), others failed inside; all now refuse."""
    op, names, runtime, attrs = RUNTIME_PARAMETERS[case]
    rng = np.random.default_rng(7)
    values = {"xs": np.float32(0.05), "xz": np.int8(1), "ys": np.float32(0.04),
              "yz": np.int8(-2), "ws": np.float32(0.01), "wz": np.int8(0),
              "w": rng.integers(-127, 128, (4, 5)).astype(np.int8),
              "bias": np.arange(5, dtype=np.int32)}
    inits = {n: values[n] for n in names[1:] if n != runtime}
    x_shape = [2, 4] if op in ("MatMulInteger", "QGemm") else [1, 6]
    node = helper.make_node(op, names, ["y"], name="victim",
                            domain="" if op == "MatMulInteger" else "com.microsoft", **attrs)
    model = _contrib(make_model(
        [node], [("x", np.int8, x_shape), (runtime, values[runtime].dtype,
                                           list(np.shape(values[runtime])))],
        [("y", np.int32 if op == "MatMulInteger" else np.int8, None)], inits))
    with pytest.raises(KilnError, match=rf"{op} victim: input \d \({runtime}\), .* is "
                                        "computed at run time"):
        compile_graph(compilation(load_onnx(model)).prepared, "host")


# -- 3. QLinearMatMul of any rank, as ONNX's MatMul ---------------------------------------------

MATMUL_SHAPES = {"vector_b": ((2, 4), (4,)), "vector_a": ((4,), (4, 5)),
                 "vectors": ((6,), (6,)), "batched_a": ((3, 2, 4), (4, 5)),
                 "batched_b": ((2, 4), (3, 4, 5)), "batched_both": ((3, 2, 4), (3, 4, 5)),
                 "broadcast_batches": ((2, 1, 3, 4), (1, 5, 4, 16)),
                 "batched_vector_a": ((5,), (2, 5, 32))}


def _matmul_model(a_shape, b_shape, rng, b_zero=0) -> onnx.ModelProto:
    inits = {"as": np.float32(0.02), "az": np.int8(3),
             "b": rng.integers(-128, 128, b_shape).astype(np.int8), "bs": np.float32(0.004),
             "bz": np.int8(b_zero), "ys": np.float32(0.05), "yz": np.int8(-5)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"], name="qmatmul")
    return make_model([node], [("a", np.int8, list(a_shape))], [("y", np.int8, None)], inits)


@pytest.mark.parametrize("case", MATMUL_SHAPES, ids=list(MATMUL_SHAPES))
def test_qlinear_matmul_with_a_constant_b_of_any_rank_compiles(case):
    """A 1-D B is a vector, a 3-D B a batch of matrices (ONNX MatMul), as onnxruntime says."""
    a_shape, b_shape = MATMUL_SHAPES[case]
    _against_onnxruntime(_matmul_model(a_shape, b_shape, np.random.default_rng(8)))


@pytest.mark.parametrize("case", ["vector_b", "batched_both", "broadcast_batches"])
def test_batched_qlinear_matmul_under_the_tflite_rule_and_a_weight_zero_point(case):
    """The tflite rule's fixed point and B's zero point, per matrix: compiled == reference."""
    a_shape, b_shape = MATMUL_SHAPES[case]
    graph = load_onnx(_matmul_model(a_shape, b_shape, np.random.default_rng(9), b_zero=4))
    graph.metadata[REQUANT_KEY] = "tflite"
    prepared = compilation(graph).prepared
    assert prepared.nodes[0].attrs["requant"] == "tflite"
    _compiled(prepared)


# -- 4. a subnormal scale is refused everywhere, in one sentence ------------------------------

def _softmax_model(scale_in: np.float32, scale_out: np.float32) -> onnx.ModelProto:
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"], name="dq"),
             helper.make_node("Softmax", ["xd"], ["p"], name="softmax", axis=-1),
             helper.make_node("QuantizeLinear", ["p", "ys", "yz"], ["y"], name="q_softmax")]
    return make_model(nodes, [("x", np.int8, [1, 8])], [("y", np.int8, [1, 8])],
                      {"xs": scale_in, "xz": np.int8(0), "ys": scale_out, "yz": np.int8(-128)})


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a stray one: an internal error
@pytest.mark.parametrize("where", ["quantize_after_softmax", "dequantize"])
def test_a_subnormal_scale_is_refused_in_one_sentence(where, tmp_path, capsys):
    model = (_softmax_model(np.float32(0.1), TINY) if where == "quantize_after_softmax"
             else _softmax_model(TINY, np.float32(1 / 256)))
    path = _save(tmp_path, model, "tiny_scale.onnx")
    node = "node q_softmax (QuantizeLinear)" if where == "quantize_after_softmax" else \
        "node dq (DequantizeLinear)"
    for args in (["inspect", path], ["run", path], ["run", "--engine", "compiled", path],
                 ["compile", path, "-o", tmp_path / "bundle"]):
        err = _refused(capsys, *args)
        assert "tiny_scale.onnx" in err and node in err and "1.4" in err, err
        assert "smallest normal" in err, err


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_subnormal_scale_of_a_qoperator_or_tflite_model_is_refused(tmp_path, capsys):
    node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", name="qsoftmax", axis=-1, opset=13)
    model = _contrib(make_model([node], [("x", np.int8, [1, 8])], [("y", np.int8, None)],
                                {"xs": np.float32(0.1), "xz": np.int8(0), "ys": TINY,
                                 "yz": np.int8(-128)}))
    err = _refused(capsys, "compile", _save(tmp_path, model, "qop.onnx"), "-o",
                   tmp_path / "bundle")
    assert "qop.onnx" in err and "qsoftmax" in err and "output scale" in err, err
    tflite = tmp_path / "tiny.tflite"
    tflite.write_bytes(write(Model([quantized("x", (1, 8), 0.1, 0),
                                    quantized("y", (1, 8), float(TINY), 0)],
                                   [Op("RELU", [0], [1])], [0], [1])))
    err = _refused(capsys, "inspect", tflite)
    assert "tiny.tflite" in err and "smallest normal" in err, err


def test_kilns_own_quantizer_never_makes_a_subnormal_scale():
    """A range too narrow for a normal scale quantizes every value to the zero point."""
    for schema in ("tflite", "symmetric", "uint8", "tflite-pow2"):
        assert params_for(0.0, 1e-40, schema).scale == 1.0
        assert params_for(0.0, 1.0, schema).scale < 1.0


# -- 5. the memory functions LLVM calls are there in process ---------------------------------

def _undefined(obj: bytes) -> set[str]:
    symbols = ELFFile(io.BytesIO(obj)).get_section_by_name(".symtab")
    return {s.name for s in symbols.iter_symbols() if s.name and s["st_shndx"] == "SHN_UNDEF"}


def _compiled_run_in_a_fresh_process(path) -> str:
    """stdout of `kiln run --engine compiled PATH` in a new Python, which has loaded no network
    before (once one is loaded, LLVM finds the C library's symbols in the process anyway)."""
    done = subprocess.run([sys.executable, "-m", "app.cli", "run", "--engine", "compiled",
                           str(path)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_kernel_that_needs_memset_runs_in_process(tmp_path):
    """A constant pad of 16 on each side is a fill LLVM turns into a call of memset."""
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], name="wide_pad",
                            mode="constant")
    model = make_model([node], [("x", np.int8, [1, 4, 4, 4])], [("y", np.int8, None)],
                       {"pads": np.array([0, 0, 16, 16, 0, 0, 16, 16], np.int64),
                        "value": np.int8(7)})
    net = _against_onnxruntime(model, seeds=[0])
    assert "memset" in _undefined(net.object)
    out = _compiled_run_in_a_fresh_process(_save(tmp_path, model, "pad.onnx"))
    assert out.startswith("y: int8[1, 4, 36, 36]"), out


def test_kws_with_a_saturating_quantize_runs_compiled(tmp_path):
    """MLPerf Tiny's KWS with its first QuantizeLinear's zero point at 127: the first layer's
    outputs are all 127; the compiled engine runs it, with the C library calls its object needs
    (the row-streamed chain's window moves call memmove; a whole-tensor fill was a memset)."""
    model = onnx.load(shared_models() / "onnx" / "kws_ref_model.onnx")
    quantize = next(n for n in model.graph.node if n.op_type == "QuantizeLinear")
    zero = next(t for t in model.graph.initializer if t.name == quantize.input[2])
    zero.CopyFrom(onnx.numpy_helper.from_array(
        np.full(tuple(zero.dims), 127, onnx.helper.tensor_dtype_to_np_dtype(zero.data_type)),
        zero.name))
    path = _save(tmp_path, model, "kws_zp127.onnx")
    assert "argmax=" in _compiled_run_in_a_fresh_process(path)
    session = qdq_session(path)
    net = _compiled(load_model(path), seeds=range(2),
                    oracle=lambda feeds: session.run(None, feeds))
    assert _undefined(net.object) & {"memset", "memmove"}


# -- 6. 1-D and 3-D pooling -------------------------------------------------------------------

POOLS_1D = {  # attributes of a 1-D QLinearAveragePool
    "plain": {"kernel_shape": [3]},
    "padded_strided": {"kernel_shape": [3], "pads": [1, 2], "strides": [2]},
    "count_include_pad": {"kernel_shape": [2], "pads": [1, 1], "count_include_pad": 1}}


def _qlinear_average_pool_1d(attrs: dict) -> onnx.ModelProto:
    node = helper.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", name="qpool", **attrs)
    return _contrib(make_model([node], [("x", np.int8, [2, 3, 9])], [("y", np.int8, None)],
                               {"xs": np.float32(0.05), "xz": np.int8(3),
                                "ys": np.float32(0.04), "yz": np.int8(-2)}))


@pytest.mark.parametrize("case", POOLS_1D, ids=list(POOLS_1D))
def test_a_1d_qlinear_average_pool_compiles(case):
    """It runs as an image of height 1; its scales and zero points stay scalars (they were
    given a height too, an IndexError)."""
    _against_onnxruntime(_qlinear_average_pool_1d(POOLS_1D[case]))


def test_a_1d_qlinear_average_pool_without_its_input_zero_point_compiles():
    """An omitted input (zero point 0) stays omitted in the pool seen with height 1."""
    node = helper.make_node("QLinearAveragePool", ["x", "xs", "", "ys", "yz"], ["y"],
                            domain="com.microsoft", name="qpool", kernel_shape=[3], pads=[1, 1])
    model = _contrib(make_model([node], [("x", np.uint8, [2, 3, 9])], [("y", np.uint8, None)],
                                {"xs": np.float32(0.05), "ys": np.float32(0.04),
                                 "yz": np.uint8(7)}))
    _compiled(load_onnx(model))


def test_a_1d_qlinear_average_pool_under_the_tflite_rule_compiles():
    graph = load_onnx(_qlinear_average_pool_1d(POOLS_1D["padded_strided"]))
    graph.metadata[REQUANT_KEY] = "tflite"
    _compiled(compilation(graph).prepared)


def test_a_quantized_1d_convolution_then_average_pool_compiles():
    """The fuzzed chain: float input quantized, QLinearConv 1-D, QLinearAveragePool 1-D."""
    rng = np.random.default_rng(51)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="quantize"),
             helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "cs", "cz"],
                              ["c"], name="qconv", pads=[1, 1]),
             helper.make_node("QLinearAveragePool", ["c", "cs", "cz", "ys", "yz"], ["y"],
                              domain="com.microsoft", name="qpool", kernel_shape=[2])]
    inits = {"xs": np.float32(0.02), "xz": np.int8(1), "ws": np.float32(0.01),
             "w": rng.integers(-127, 128, (2, 1, 3)).astype(np.int8), "wz": np.int8(0),
             "cs": np.float32(0.03), "cz": np.int8(-4), "ys": np.float32(0.05),
             "yz": np.int8(2)}
    _against_onnxruntime(_contrib(make_model(nodes, [("x", np.float32, [1, 1, 5])],
                                             [("y", np.int8, None)], inits)))


def test_int8_3d_pooling_is_refused_by_the_compiler(tmp_path, capsys):
    """The interpreter pools an int8 volume as onnxruntime does; no int8 kernel does, so
    compiling says so in one sentence instead of failing inside the 2-D emitter."""
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool3d", kernel_shape=[1, 2, 2])
    model = make_model([node], [("x", np.int8, [1, 2, 3, 4, 4])], [("y", np.int8, None)])
    graph = load_onnx(model)
    feeds = _feeds(graph, 0)
    assert_close(run(graph, feeds)["y"], ort_run(model, feeds)[0], rtol=1e-6, atol=1e-6)
    path = _save(tmp_path, model, "pool3d.onnx")
    for args in (["compile", path, "-o", tmp_path / "bundle"],
                 ["run", "--engine", "compiled", path]):
        err = _refused(capsys, *args)
        assert "cannot generate MaxPool pool3d" in err and "3 spatial axes" in err, err
    assert not (tmp_path / "bundle").exists()


# -- 7. float layers whose weights are computed at run time ------------------------------------

def _conv_fed_at_run_time(runtime: str, rank: int = 2) -> onnx.ModelProto:
    rng = np.random.default_rng(12)
    kernel = (3,) * rank
    values = {"w": rng.standard_normal((4, 3, *kernel)).astype(np.float32),
              "b": rng.standard_normal(4).astype(np.float32)}
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1] * 2 * rank)
    inputs = [("x", np.float32, [1, 3, *(6,) * rank]),
              (runtime, np.float32, list(values[runtime].shape))]
    return make_model([node], inputs, [("y", np.float32, None)],
                      {k: v for k, v in values.items() if k != runtime})


@pytest.mark.parametrize("rank", [1, 2], ids=["1d", "2d"])
def test_a_float_conv_with_runtime_weights_compiles_as_onnxruntime_runs_it(rank):
    """The tuned kernels arrange their weights at compile time; weights computed at run time
    take the direct kernel (compiler/codegen/conv_direct.py), which reads them as they are."""
    from compiler.codegen.host import HostNet

    model = _conv_fed_at_run_time("w", rank)
    graph = compilation(load_onnx(model)).final
    feeds = _feeds(graph, 0)
    runner = HostNet(compile_graph(graph, "host"))
    got = runner.run(feeds)[graph.outputs[0].name]
    runner.close()
    assert_close(got, ort_run(model, feeds)[0])


def test_a_qdq_conv_whose_weights_are_a_graph_input_compiles_in_float():
    """The fuzzed case: a QDQ Conv 1-D whose quantized weights were made a graph input stays a
    float convolution between its DequantizeLinear and QuantizeLinear (no integer form reads
    run-time weights), which the direct kernel compiles; its int8 result is the interpreter's
    (within the one code a float sum's order can move a value across a rounding edge)."""
    rng = np.random.default_rng(226)
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"], name="dq_w"),
             helper.make_node("Conv", ["xf", "wf"], ["c"], name="qdq_conv", pads=[1, 1]),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["y"], name="q_y")]
    inits = {"s": np.float32(0.05), "z": np.int8(0), "ws": np.float32(0.02),
             "wz": np.int8(0)}
    model = make_model(nodes, [("x", np.int8, [3, 4, 6]), ("wq", np.int8, [2, 4, 3])],
                       [("y", np.int8, None)], inits)
    graph = load_onnx(model)
    feeds = {**_feeds(graph, 0), "wq": rng.integers(-127, 128, (2, 4, 3)).astype(np.int8)}
    from compiler.codegen.host import HostNet

    want = run(graph, feeds)["y"]
    runner = HostNet(compile_graph(compilation(graph).prepared, "host"))
    got = runner.run(feeds)["y"]
    runner.close()
    assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1


def test_a_float_conv_with_a_runtime_bias_compiles():
    """Only the weights are re-arranged: a bias computed at run time is read as it is (float
    kernels reassociate sums, so to rounding)."""
    model = _conv_fed_at_run_time("b")
    graph = load_onnx(model)
    runner = compile_guarded(compilation(graph).prepared, "host")
    try:
        feeds = _feeds(graph, 0)
        assert_close(runner.run(feeds)["y"], run(graph, feeds)["y"])
        assert_close(run(graph, feeds)["y"], ort_run(model, feeds)[0])
    finally:
        runner.close()


# A 1-D A is one row and a 1-D B one column, each axis dropped from the output (the fuzz
# campaign's qop-207 found the 1-D B read as a row).
@pytest.mark.parametrize("a_shape, b_shape", [((2, 4), (4, 5)), ((3, 4), (4,)), ((4,), (4, 5)),
                                              ((4,), (4,)), ((2, 3, 4), (4,))])
def test_a_qlinear_matmul_with_run_time_weights_compiles_as_onnxruntime_runs_it(a_shape,
                                                                                b_shape):
    """B computed at run time takes the direct integer kernel (onnx rule): its codes equal
    onnxruntime's integer path."""
    from compiler.codegen.host import HostNet

    onnx_model = _qlinear_matmul("b", a_shape, b_shape)
    graph = compilation(load_onnx(onnx_model)).final
    feeds = _feeds(graph, 0)
    runner = HostNet(compile_graph(graph, "host"))
    got = runner.run(feeds)[graph.outputs[0].name]
    runner.close()
    _same(got, ort_run(onnx_model, feeds)[0], "compiled")
