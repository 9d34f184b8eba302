"""The figures the export, the size report and Compare show, each against an independent count.

Weights against the ELF's own symbol table (read here with pyelftools), each kernel's weights
against the arrays of the graph it compiles, the whole arena against the memory plan, and the
precision label against the dtypes of the weights. On models the tests build: the wider
ResNet-8 (`tests.wide_resnet`), the digits sample; and KWS from the shared models.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from app import cli
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.graphdiff.stages import Operand, compare
from compiler.ir.graph import Constant
from compiler.quant.profile import load_profile
from compiler.quant.recipe import QuantRecipe, quantize_with
from tests.conftest import SAMPLE_MODEL, shared_models
from tests.wide_resnet import smooth_images, write_wide_resnet8
from views.size_report import footprint


def _elf_weight_symbols(obj: bytes) -> int:
    """Bytes of the object's data symbols named like weights, summed (the ELF's own count)."""
    elf = ELFFile(io.BytesIO(obj))
    return sum(sym["st_size"] for sym in elf.get_section_by_name(".symtab").iter_symbols()
               if sym["st_info"]["type"] == "STT_OBJECT" and sym.name.endswith(".weights"))


def _graph_weight_bytes(graph) -> int:
    """Bytes of the distinct constants of two or more dimensions the graph's nodes read."""
    seen = {}
    for node in graph.nodes:
        for v in node.inputs:
            if isinstance(v, Constant) and len(v.type.shape) >= 2:
                seen[id(v)] = v.type.nbytes
    return sum(seen.values())


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """(model, profile) of the wider ResNet-8, calibrated on 32 smooth images."""
    folder = tmp_path_factory.mktemp("wide")
    model = write_wide_resnet8(folder)
    np.save(folder / "images.npy", smooth_images(32).reshape(32, 32, 32, 3))
    assert cli.main(["profile", str(model), "--data", str(folder / "images.npy"), "-o",
                     str(folder / "profile.json"), "-q"]) == 0
    return model, folder / "profile.json"


def _bundle(tmp_path, model, *extra) -> tuple[dict, bytes]:
    out = tmp_path / "b"
    assert cli.main(["compile", str(model), "-o", str(out), "--force", "-q", *extra]) == 0
    return json.loads((out / "net.report.json").read_text()), (out / "net.o").read_bytes()


@pytest.mark.parametrize("target", ["host", "cortex-m7", "cortex-m4"])
def test_the_weights_row_is_the_elf_weights_symbol_float_and_int8(wide, tmp_path, target):
    model, profile = wide
    floating, float_obj = _bundle(tmp_path / "f", model, "--target", target)
    integer, int_obj = _bundle(tmp_path / "q", model, "--target", target, "--profile",
                               str(profile))
    for report, obj in ((floating, float_obj), (integer, int_obj)):
        assert report["weight_bytes"] == _elf_weight_symbols(obj) > 0
        assert footprint(report)["Weights"] == report["weight_bytes"]
        # Each kernel's weights are its own: none claims more than the object holds, and
        # together they hold every weight array of the graph.
        layers = sum(layer["weight_bytes"] for layer in report["layers"])
        assert all(layer["weight_bytes"] <= report["weight_bytes"] for layer in report["layers"])
        assert layers <= report["weight_bytes"]
    graph = load_model(model)
    qdq = quantize_with(graph, QuantRecipe(load_profile(profile)))
    int8_weights = _graph_weight_bytes(compilation(qdq).final)
    int8_layers = sum(layer["weight_bytes"] for layer in integer["layers"])
    assert int8_layers >= int8_weights, "a kernel's weights went uncounted"
    float_layers = sum(layer["weight_bytes"] for layer in floating["layers"])
    assert float_layers >= _graph_weight_bytes(compilation(graph).final)
    # int8 weights (even stored as int16 pairs) take at most half the float ones.
    assert integer["weight_bytes"] / floating["weight_bytes"] < 0.55
    if target == "host":
        assert integer["weight_bytes"] / floating["weight_bytes"] < 0.3


def test_a_row_chain_counts_each_weight_once(wide, tmp_path):
    model, profile = wide
    report, obj = _bundle(tmp_path, model, "--profile", str(profile))
    chains = [layer for layer in report["layers"] if layer["op"].startswith("RowChain")]
    assert chains, "the wider ResNet-8 streams its body as a row chain"
    graph = quantize_with(load_model(model), QuantRecipe(load_profile(profile)))
    final = compilation(graph).final
    nodes = {n.name: n for n in final.nodes}
    for chain in chains:
        own = {id(v): v.type.nbytes for name in chain["nodes"] if name in nodes
               for v in nodes[name].inputs if isinstance(v, Constant) and len(v.type.shape) >= 2}
        # Its int8 weights, plus int32 biases and multipliers: under twice the weights alone.
        assert sum(own.values()) <= chain["weight_bytes"] < 2 * sum(own.values())


def test_precision_and_layout_are_separate_labels(wide, tmp_path, capsys):
    model, profile = wide
    capsys.readouterr()
    floating, _ = _bundle(tmp_path / "f", model, "--target", "cortex-m4")
    assert floating["precision"] == "float32"
    integer, _ = _bundle(tmp_path / "q", model, "--target", "cortex-m4", "--profile",
                         str(profile), "--weight-layout", "int16")
    assert integer["precision"] == "int8" and integer["weight_layout"] == "int16 pairs"
    assert cli.main(["compile", str(model), "--target", "cortex-m4", "-o",
                     str(tmp_path / "f2")]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert "weights embedded, float32:" in line and "int8" not in line and "int16" not in line
    assert cli.main(["compile", str(model), "--target", "cortex-m4", "--profile", str(profile),
                     "--weight-layout", "int16", "-o", str(tmp_path / "q2")]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert "weights embedded, int8 (int8 stored as int16 pairs):" in line


def test_a_layer_left_float_reads_int8_and_float32(wide, tmp_path):
    model, profile = wide
    doc = json.loads(profile.read_text())
    graph = load_model(model)
    first_conv = next(n for n in graph.nodes if n.op == "Conv")
    # The stem in float: its input, its output and the Relu's after it.
    relu = next(n for n in graph.nodes if first_conv.outputs[0] in n.inputs)
    doc["keep_float"] = [first_conv.inputs[0].name, first_conv.outputs[0].name,
                         relu.outputs[0].name]
    kept = tmp_path / "kept.json"
    kept.write_text(json.dumps(doc))
    report, _ = _bundle(tmp_path, model, "--profile", str(kept))
    assert report["precision"] == "int8 and float32"


def test_compares_whole_arena_is_the_plans(wide):
    model, profile = wide
    graph = load_model(model)
    qdq = quantize_with(graph, QuantRecipe(load_profile(profile)))
    options = Options("host")
    d = compare(Operand(graph, options=options), Operand(qdq, options=options),
                same_origin=True)
    a, b, delta = d.totals()["arena_bytes"]
    plan_a, plan_b = compilation(graph).plan(options), compilation(qdq).plan(options)
    assert (a, b) == (plan_a.arena.size, plan_b.arena.size)
    assert delta == plan_b.arena.size - plan_a.arena.size
    # The plan reuses buffers: the sum of the layers' outputs is more than the arena.
    assert sum(v for v in d.metrics_a["arena_bytes"].values() if v) > a


def test_kws_and_the_sample_weights_rows_are_their_elf_symbols(tmp_path):
    models = [SAMPLE_MODEL]
    kws = shared_models() / "onnx" / "kws_ref_model.onnx"
    if kws.is_file():
        models.append(kws)
    for i, model in enumerate(models):
        report, obj = _bundle(tmp_path / str(i), model, "--target", "cortex-m7")
        assert report["weight_bytes"] == _elf_weight_symbols(obj) > 0
        assert sum(layer["weight_bytes"] for layer in report["layers"]) <= report["weight_bytes"]
        expected = "int8" if model is kws else "float32"
        assert report["precision"] == expected
