"""Row-streamed chains over random geometry: each one's bytes are the interpreter's.

Seeded random runs of int8 convolutions (QLinearConv, regular and depthwise) with kernels of
one to five rows, strides one to three, dilation one or two, any padding on each side, and a
residual Add or a global average pool now and then, run as one chain whatever the chooser
would pick (the choice is forced, so every geometry's one-row kernels and schedule are
exercised). Compiled for the host, each gives the interpreter's bytes on seeded inputs, and
its plan passes the checker and the row-by-row simulation.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler.codegen.host import HostNet
from compiler.driver import Options, compilation
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.lowir import chains
from compiler.lowir.ir import Fusion
from compiler.memory.report import check_memory
from compiler.memory.simulate import simulate
from tests.helpers import make_model


def _random_net(seed: int):
    """An int8 ONNX model: a run of convolutions on one image, NCHW as ONNX has it."""
    rng = np.random.default_rng(seed)
    c, h, w = int(rng.integers(2, 9)), int(rng.integers(6, 24)), int(rng.integers(2, 9))
    shape = [1, c, h, w]
    inits = {"s": np.float32(0.05), "z": np.int8(rng.integers(-10, 10))}
    nodes = []
    x = ("x", "s", "z")  # the current tensor, its scale and zero point
    residual = None  # (tensor, scale, zero point) of an earlier output, with its (c, h)
    for i in range(int(rng.integers(2, 6))):
        depthwise = bool(rng.integers(0, 2))
        k = int(rng.integers(1, 6))
        dilation = int(rng.integers(1, 3)) if k > 1 else 1
        extent = (k - 1) * dilation + 1
        stride = int(rng.integers(1, 4))
        top, bottom = (int(rng.integers(0, extent)) for _ in range(2))
        top = max(top, extent - h - bottom)  # at least one output row
        cout = c if depthwise else int(rng.integers(2, 9))
        inits[f"w{i}"] = rng.integers(-127, 128, (cout, 1 if depthwise else c, k, k)
                                      ).astype(np.int8)
        inits[f"ws{i}"] = rng.uniform(0.002, 0.02, cout).astype(np.float32)
        inits[f"wz{i}"] = np.zeros(cout, np.int8)
        inits[f"ys{i}"] = np.float32(rng.uniform(0.03, 0.2))
        inits[f"yz{i}"] = np.int8(rng.integers(-20, 20))
        side = k // 2  # columns padded to keep the width
        nodes.append(helper.make_node(
            "QLinearConv", [*x, f"w{i}", f"ws{i}", f"wz{i}", f"ys{i}", f"yz{i}"], [f"y{i}"],
            name=f"conv{i}", kernel_shape=[k, k], strides=[stride, 1], dilations=[dilation, 1],
            pads=[top, side, bottom, k - 1 - side], group=c if depthwise else 1))
        h = (h + top + bottom - extent) // stride + 1
        x, c = (f"y{i}", f"ys{i}", f"yz{i}"), cout
        if residual is not None and residual[1] == (c, h) and rng.integers(0, 2):
            inits[f"as{i}"], inits[f"az{i}"] = np.float32(0.1), np.int8(3)
            nodes.append(helper.make_node(
                "QLinearAdd", [*x, *residual[0], f"as{i}", f"az{i}"], [f"sum{i}"],
                name=f"add{i}", domain="com.microsoft"))
            x = (f"sum{i}", f"as{i}", f"az{i}")
        residual = (x, (c, h))
    model = make_model(nodes, [("x", np.int8, shape)], [(x[0], np.int8, None)], inits)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def _forced(monkeypatch):
    """Make the chooser run every chainable run as one chain."""
    def choose(self):
        units = len(self.units)
        for first in range(units):
            for last in range(units - 1, first, -1):
                chain = self.chain(first, last)
                if chain is not None:
                    return [(first, last, chain)]
        return []
    monkeypatch.setattr(chains.ChainChooser, "choose", choose)


def test_random_chains_give_the_interpreters_bytes(monkeypatch):
    _forced(monkeypatch)
    chained = 0
    for seed in range(24):
        graph = load_onnx(_random_net(seed))
        compiled = compilation(graph)
        prepared = compiled.prepared
        plan = compiled.plan(Options("host", io_in_arena=True))
        check_memory(plan)
        simulate(plan)
        net = compiled.net(Options("host", io_in_arena=True))
        chained += any(k.fusion is Fusion.ROW_CHAIN for k in net.kernels)
        runner = HostNet(net)
        try:
            for s in range(3):
                x = prepared.inputs[0]
                feeds = {x.name: np.random.default_rng(s).integers(-128, 128, x.type.shape)
                         .astype(np.int8)}
                got = runner.run(feeds)
                for name, value in run(prepared, feeds).items():
                    assert np.array_equal(got[name], value), f"net {seed}, input seed {s}"
        finally:
            runner.close()
    assert chained >= 18, chained  # a few geometries have a layer that cannot chain


@pytest.mark.slow
@pytest.mark.parametrize("machine", ["mps2-an500", "mps3-an547"])  # Cortex-M7, Cortex-M55
def test_random_chains_run_exactly_on_cortex_m(machine, monkeypatch, tmp_path):
    from tests.codegen import firmware

    firmware.require_tools()
    _forced(monkeypatch)
    for seed in range(4):
        compiled = compilation(load_onnx(_random_net(seed)))
        prepared = compiled.prepared
        net = compiled.net(Options(firmware.MACHINES[machine].target, io_in_arena=True))
        x = prepared.inputs[0]
        feeds = {x.name: np.random.default_rng(seed).integers(-128, 128, x.type.shape)
                 .astype(np.int8)}
        firmware.assert_exact(net, prepared, feeds, machine, tmp_path / str(seed), f"net {seed}")
