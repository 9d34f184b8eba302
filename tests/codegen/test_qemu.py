"""Compiled networks run on emulated Cortex-M boards (QEMU MPS2) and match the reference
interpreter: a firmware image is built from the network's object in the test and run under
semihosting, which prints every output element."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.codegen.targets import get_target
from compiler.driver import compile_graph
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.passes.runner import run_pipeline
from tests.codegen import firmware
from tests.conftest import shared_models
from tests.helpers import assert_close


def _graph(model: str):
    path = shared_models() / "onnx" / f"{model}.onnx"
    assert path.exists(), f"{path.name} is missing from the shared models folder"
    return run_pipeline(load_onnx(onnx.load(path)), snapshots=False).graph


@pytest.mark.parametrize("model,machine", [
    ("mnist-8", "mps2-an500"), ("mnist-8", "mps2-an505"), ("mnist-8", "mps2-an385"),
    ("pretrainedResnet", "mps2-an500"), ("pretrainedResnet", "mps2-an505"),
])
def test_model_on_board(model, machine, tmp_path):
    firmware.require_tools()
    graph = _graph(model)
    net = compile_graph(graph, get_target(firmware.MACHINES[machine].target), name="net")
    rng = np.random.default_rng(7)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(np.float32)
             for v in graph.inputs}
    elf = firmware.build(net, firmware.main_c(net, feeds), machine, tmp_path)
    flash, ram = firmware.placement(elf)
    assert flash >= net.plan.constant, "the weights stay in flash"
    assert ram >= net.plan.arena.size + net.plan.mutable, "the regions are in RAM"
    stdout, seconds = firmware.run(elf, machine)
    got = firmware.parse_outputs(net, stdout)
    print(f"{model} on {machine}: {seconds:.2f} s under QEMU")
    for name, want in run(graph, feeds).items():
        assert_close(got[name], want, rtol=1e-4, atol=1e-5, what=f"{name} on {machine}")


def test_fault_is_reported(tmp_path):
    """A firmware that faults ends with a clear failure (status 99), not a hang or a pass."""
    firmware.require_tools()
    graph = _graph("mnist-8")
    net = compile_graph(graph, get_target("cortex-m7"), name="net")
    main = firmware.main_c(net, {v.name: np.zeros(v.type.shape, np.float32)
                                 for v in graph.inputs})
    main = main.replace("    int status =", "    __builtin_trap();\n    int status =")
    elf = firmware.build(net, main, "mps2-an500", tmp_path)
    with pytest.raises(pytest.fail.Exception, match="exited with 99"):
        firmware.run(elf, "mps2-an500")
