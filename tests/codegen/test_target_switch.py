"""Switching targets in one process: the Code panel's kernels, `kiln memory` and the bundle agree.

The compile driver caches plans, kernel maps and nets per compilation. A plan depends on the
target (an int8 residual Add is fused into its convolution's store everywhere but on Helium), so
every cache keyed by less than the plan's key shows one target's kernels for another. The test
asks for Cortex-M7, Cortex-M55 and back, on an int8 residual network built here and on
ResNet-8 int8, and checks each answer against the other two views and the target's own rule.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper

from app import cli
from compiler.codegen.targets import get_target
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.frontends.onnx.export import save_onnx
from compiler.lowir.ir import Fusion
from compiler.quant.calibration_data import load_calibration
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import quantize
from tests.conftest import shared_models
from tests.helpers import make_model

SWITCHES = ["cortex-m7", "cortex-m55", "cortex-m7", "cortex-m55"]


def _int8_residual(folder):
    """A float residual network (conv, relu, conv, relu, conv + skip, relu, conv) quantized by
    Kiln to QDQ int8 and saved, so the CLI can open it too."""
    rng = np.random.default_rng(11)
    c = 8
    inits = {f"w{i}": (rng.standard_normal((c, c, 3, 3)) / c).astype(np.float32)
             for i in range(4)}
    pads = {"pads": [1, 1, 1, 1]}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], **pads),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w1"], ["b1"], **pads),
             helper.make_node("Relu", ["b1"], ["c"]),
             helper.make_node("Conv", ["c", "w2"], ["b"], **pads),
             helper.make_node("Add", ["b", "r"], ["s0"]), helper.make_node("Relu", ["s0"], ["s"]),
             helper.make_node("Conv", ["s", "w3"], ["y"], **pads)]
    path = folder / "residual.onnx"
    path.write_bytes(make_model(nodes, [("x", np.float32, [1, c, 8, 8])],
                                [("y", np.float32, None)], inits).SerializeToString())
    graph = load_model(path)
    np.save(folder / "samples.npy", rng.standard_normal((16, c, 8, 8)).astype(np.float32))
    profile = profile_model(graph, load_calibration(folder / "samples.npy", graph), path.name,
                            bins=256)
    quantized = folder / "residual_int8.onnx"
    save_onnx(quantize(graph, profile), quantized)
    return quantized


def _memory_json(path, target: str, capsys) -> dict:
    assert cli.main(["memory", str(path), "--target", target, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _placements(doc: dict) -> dict:
    return {"activations": doc["activations"], "constant": doc["constant"],
            "buffers": sorted((b["name"], b["offset"], b["size"]) for b in doc["buffers"])}


def _switch_and_compare(path, capsys, tmp_path) -> dict[str, int]:
    comp = compilation(load_model(path))
    arenas = {}
    for step, target in enumerate(SWITCHES):
        options = Options(target=target)
        shown = [(s.op, s.nodes) for s in comp.kernels(options).steps]  # the Code panel's map
        net = comp.net(options)
        built = [(k.op, k.nodes) for k in net.kernels if not k.part_of]  # a chain: its driver
        assert shown == built, f"{target} (step {step}): the Code panel shows another plan"
        fused = any(k.fusion in (Fusion.RESIDUAL_ADD, Fusion.CONV_PAIR)
                    or (k.part_of and "+QLinearAdd" in k.op) for k in net.kernels)
        assert fused == get_target(target).int8_residual_in_store, (target, shown)
        plan = comp.plan(options).to_json()
        assert _placements(plan) == _placements(net.plan.to_json())
        assert _placements(plan) == _placements(_memory_json(path, target, capsys)), target
        files, report = comp.bundle(tmp_path / f"bundle-{step}", options)
        assert report["regions"]["activations"] == plan["activations"], target
        assert report["target"] == get_target(target).name and len(files) > 2
        arenas[target] = plan["activations"]
    return arenas


def test_switching_targets_keeps_kernels_memory_and_bundle_together(tmp_path, capsys):
    _switch_and_compare(_int8_residual(tmp_path), capsys, tmp_path)


@pytest.mark.slow
def test_switching_targets_on_resnet8_int8(tmp_path, capsys):
    path = shared_models() / "onnx" / "pretrainedResnet_quant.onnx"
    arenas = _switch_and_compare(path, capsys, tmp_path)
    print(f"ResNet-8 int8 arenas: {arenas}")
    # Both cores run the network as one row-streamed chain (Helium with its Adds apart):
    # under 30 % of TFLite Micro's 49,152 B either way.
    assert max(arenas.values()) <= 0.3 * 49_152
