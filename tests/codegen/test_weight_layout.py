"""int8 weights on DSP cores: ready int16 pairs (fewer instructions) or bytes (half the flash).

The pairs layout stores each four weights widened to the int16 pairs SMLAD takes; the lean one
keeps the model's bytes and unpacks each word with two SXTB16 in the kernel. The automatic
choice keeps bytes where pairs would take more than a quarter of the core's usual flash;
`--weight-layout` and the Options override it, `kiln compile --board` switches to bytes when
pairs would not fit the board, and the report says which layout a bundle holds. Both layouts
run the interpreter's bytes under QEMU (test_int8_kernels), and on Cortex-M4, which has no
VRINT, float rounding is done inline (checked here on ties).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from app import cli
from compiler.codegen import requant
from compiler.codegen.bundle import report
from compiler.codegen.table import lookup
from compiler.codegen.targets import Board, auto_lean_weights, get_target
from compiler.codegen.weights import int8_weight_bytes
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.qmath.requant import REQUANT_KEY
from tests.conftest import shared_models
from tests.tflite.oracles import quantized
from tests.tflite.writer import Model, Op, T, write


def _dense_tflite(units: int = 32, depth: int = 64) -> bytes:
    """An int8 fully connected layer with per-tensor weights, shaped for the dot kernels."""
    rng = np.random.default_rng(4)
    return write(Model([quantized("x", (2, depth), 0.05, -9),
                        T("w", (units, depth), "int8", rng.integers(-127, 128, (units, depth)),
                          scale=[0.01], zero_point=[0]),
                        T("b", (units,), "int32", rng.integers(-3000, 3000, units),
                          scale=[0.0005] * units, zero_point=[0] * units),
                        quantized("y", (2, units), 0.04, 11)],
                       [Op("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {
                           "FusedActivationFunction": 0}))], [0], [3]))


@pytest.fixture(scope="module")
def dense():
    """The layer, prepared."""
    return compilation(load_model(_dense_tflite())).prepared


def _weights(node, target):
    return lookup(node, target)[1](node)[3]


def test_pairs_double_the_weights_and_bytes_keep_them(dense):
    node = next(n for n in dense.nodes if n.op == "QGemm")
    m7 = get_target("cortex-m7")
    pairs = _weights(node, dataclasses.replace(m7, lean_weights=False))
    lean = _weights(node, dataclasses.replace(m7, lean_weights=True))
    assert pairs.dtype == np.int16 and lean.dtype == np.int8
    assert pairs.nbytes == 2 * lean.nbytes
    # Bytes are the model's rows as they are; pairs reorder each four to 0, 2, 1, 3.
    assert np.array_equal(np.sort(pairs.reshape(-1, 4), axis=1),
                          np.sort(lean.reshape(-1, 4).astype(np.int16), axis=1))
    # Per-tensor weights: each requantization table is stored once, not once per output.
    arrays = lookup(node, m7)[1](node)
    tables = (requant.MULTIPLIERS, requant.SHIFTS, requant.LEFTS, requant.RIGHTS,
              requant.ROUNDS, requant.NEGATIVE_FIXES)
    assert all(arrays[slot].size == 1 for slot in tables if slot in arrays)
    assert requant.MULTIPLIERS in arrays


def test_the_automatic_layout_weighs_weights_against_the_usual_flash():
    m7, m4, m55 = (get_target(n) for n in ("cortex-m7", "cortex-m4", "cortex-m55"))
    assert m7.lean_weights is None and m7.usual_flash == 2 * 1024 * 1024
    assert not auto_lean_weights(m7, 200_000).lean_weights  # pairs: 400 KB of 2 MB
    assert auto_lean_weights(m7, 264_192).lean_weights  # ad01: pairs would take 528 KB
    assert auto_lean_weights(m4, 208_000).lean_weights  # VWW on a 1 MB part
    assert auto_lean_weights(m55, 10**7) is m55  # Helium reads bytes anyway
    asked = dataclasses.replace(m7, lean_weights=False)
    assert auto_lean_weights(asked, 10**7) is asked  # an explicit choice stands


def test_options_and_the_report_carry_the_layout(dense):
    compiled = compilation(dense)
    auto = compiled.net(Options("cortex-m7"))
    lean = compiled.net(Options("cortex-m7", lean_weights=True))
    assert auto.target.lean_weights is False and lean.target.lean_weights is True
    assert report(auto)["weight_layout"] == "int16 pairs"
    assert report(lean)["weight_layout"] == "int8"
    assert report(compiled.net(Options("cortex-m55")))["weight_layout"] == "int8"
    assert Options("cortex-m55", lean_weights=False).resolved_target().lean_weights is None


def test_kiln_compile_takes_the_layout_and_switches_to_bytes_for_a_small_board(
        dense, tmp_path, capsys, monkeypatch):
    path = tmp_path / "dense.tflite"
    path.write_bytes(_dense_tflite())
    sizes = {}
    for layout in ("int8", "int16"):
        assert cli.main(["compile", str(path), "--target", "cortex-m7", "--weight-layout",
                         layout, "-o", str(tmp_path / layout), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        sizes[layout] = doc["sections"]["rodata"]
        assert doc["weight_layout"] == ("int8" if layout == "int8" else "int16 pairs")
    assert sizes["int16"] > sizes["int8"]
    # A board whose flash holds the bytes but not the pairs: the compile keeps bytes.
    compiled = compilation(dense)
    pairs = report(compiled.net(Options("cortex-m7", lean_weights=False)))
    lean = report(compiled.net(Options("cortex-m7", lean_weights=True)))
    used = {name: doc["sections"]["text"] + doc["sections"]["rodata"]
            for name, doc in (("pairs", pairs), ("lean", lean))}
    small = Board("tiny-m7", "cortex-m7", (used["pairs"] + used["lean"]) // 2, 64 * 1024)
    options, note = compiled.layout_that_fits(Options("cortex-m7"), small)
    assert options.lean_weights is True and "would not fit tiny-m7's flash" in note
    roomy = dataclasses.replace(small, flash=10 * used["pairs"])
    assert compiled.layout_that_fits(Options("cortex-m7"), roomy) == (Options("cortex-m7"), "")
    asked = Options("cortex-m7", lean_weights=False)  # the user's choice stands
    assert compiled.layout_that_fits(asked, small) == (asked, "")
    # The export (the dialog's and `kiln compile --build`'s path) weighs the board too.
    from compiler.driver import BuildRequest

    files, written, note = compiled.export(tmp_path / "small", BuildRequest(Options(
        "cortex-m7"), small))
    assert written["weight_layout"] == "int8" and "would not fit tiny-m7's flash" in note
    assert written["board"]["fits"] is True
    _, roomy_report, roomy_note = compiled.export(tmp_path / "roomy", BuildRequest(Options(
        "cortex-m7"), roomy))
    assert roomy_report["weight_layout"] == "int16 pairs" and roomy_note == ""


def test_ad01_keeps_its_weights_in_300_kb_of_cortex_m7_flash():
    path = shared_models() / "tflite" / "ad01_int8.tflite"
    compiled = compilation(load_model(path))
    assert int8_weight_bytes(compiled.prepared) == 264_192
    board = "stm32f746g-disco"
    lean = report(compiled.net(Options("cortex-m7")), board)
    pairs = report(compiled.net(Options("cortex-m7", lean_weights=False)), board)
    assert lean["weight_layout"] == "int8"
    assert lean["board"]["flash_used"] <= 300 * 1024
    assert pairs["board"]["flash_used"] > 1.9 * 264_192


def _quantize_model() -> onnx.ModelProto:
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    graph = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 64])],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]),
         helper.make_tensor("z", TensorProto.INT8, [], [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["onnx", "tflite"])
def test_cortex_m4_rounds_ties_inline_as_the_interpreter(rule, tmp_path):
    """Ties to even (onnx) and away from zero (tflite) with no VRINT and no libm call."""
    from tests.codegen import firmware

    firmware.require_tools()
    graph = load_model(_quantize_model().SerializeToString())
    graph.metadata[REQUANT_KEY] = rule
    prepared = compilation(graph).prepared
    net = compilation(prepared).net(Options("cortex-m4"))
    # Halves (ties) of both signs and parities, near misses, the clamp's edges, big values.
    halves = np.arange(-16, 16, dtype=np.float32) * 0.5 + 0.25
    x = np.concatenate([halves, np.float32([0.2500001, -0.2499999, 63.75, -64.25, 1e9, -1e9,
                                             8388608.5, -3e7, 0.0, -0.0, 31.75, -31.25,
                                             2.75, -2.75, 5.25, -5.25, 7.75, -7.75, 1.2,
                                             -1.2, 100.0, -100.0, 0.75, -0.75, 1.25, -1.25,
                                             3.25, -3.25, 4.75, -4.75, 6.25, -6.25])])
    feeds = {prepared.inputs[0].name: x.reshape(1, 64)}
    firmware.assert_exact(net, prepared, feeds, "mps2-an386", tmp_path)
