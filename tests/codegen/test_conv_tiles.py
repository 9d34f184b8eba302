"""The register-tiled convolution is right for every tile shape a target can ask for.

Tiles are shaped by the target (AVX-512 host, AVX2, NEON/MVE, scalar FPU), but the shape only
changes the IR, not the instruction set it needs: each shape is compiled for this host with the
target's tiling, run, and compared with onnxruntime. Edge pixels, partial tiles and partial
channel chunks are all exercised by the odd sizes below, in both forms: the fast one (edge
tiles unrolled by column) and the compact one that fast compilation asks for (guarded loops).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import helper

from compiler.codegen.conv import Tiling, tiling_for
from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.driver import compile_graph
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.helpers import assert_close, make_model, ort_run

# (vector bits, registers): AVX-512 host, AVX2 host, NEON / MVE, scalar FPU (Cortex-M4/M7/M33).
SHAPES = [(512, 32), (256, 16), (128, 8), (0, 32)]


def _target(bits: int, registers: int):
    return dataclasses.replace(get_target("host"), vector_bits=bits, registers=registers)


def _conv(c_in, c_out, size, kernel=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1), group=1,
          dilations=(1, 1), residual=False):
    rng = np.random.default_rng(c_in * 100 + c_out)
    inits = {"w": rng.standard_normal((c_out, c_in // group, *kernel)).astype(np.float32),
             "b": rng.standard_normal(c_out).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group, strides=list(strides),
                              pads=list(pads), dilations=list(dilations))]
    inputs = [("x", np.float32, [1, c_in, *size])]
    if residual:
        inputs.append(("r", np.float32, None))
        nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    else:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    return nodes, inputs, inits


CASES = {
    "3x3-pad": dict(c_in=5, c_out=19, size=(7, 13)),
    "3x3-stride2": dict(c_in=8, c_out=40, size=(9, 11), strides=(2, 2)),
    "5x5-dilated-asym": dict(c_in=3, c_out=8, size=(12, 10), kernel=(5, 5), dilations=(2, 1),
                             pads=(3, 0, 1, 2)),
    "pointwise": dict(c_in=17, c_out=33, size=(5, 7), kernel=(1, 1), pads=(0, 0, 0, 0)),
    "pointwise-stride2": dict(c_in=16, c_out=24, size=(6, 9), kernel=(1, 1), pads=(0, 0, 0, 0),
                              strides=(2, 2)),
    "depthwise": dict(c_in=21, c_out=21, size=(10, 9), group=21),
    "depthwise-stride2-asym": dict(c_in=40, c_out=40, size=(11, 8), group=40, strides=(2, 2),
                                   pads=(0, 1, 1, 0)),
    "wide-kernel": dict(c_in=1, c_out=12, size=(20, 6), kernel=(10, 4), strides=(2, 2),
                        pads=(4, 1, 5, 2)),
    "narrow-image": dict(c_in=4, c_out=6, size=(3, 2), kernel=(3, 3)),
}


@pytest.mark.parametrize("compact", [False, True], ids=["fast", "compact"])
@pytest.mark.parametrize("bits,registers", SHAPES, ids=[f"{b}b{r}r" for b, r in SHAPES])
@pytest.mark.parametrize("case", list(CASES))
def test_tiled_conv_matches_onnxruntime(case, bits, registers, compact):
    nodes, inputs, inits = _conv(**CASES[case])
    model = make_model(nodes, inputs, [("y", np.float32, None)], inits)
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    net = HostNet(compile_graph(graph, _target(bits, registers), fast_compile=compact))
    rng = np.random.default_rng(7)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs}
    got = net.run(feeds)["y"]
    (want,) = ort_run(model, feeds)
    assert_close(got, want, what=f"{case} with {bits}-bit vectors, {registers} registers"
                 f"{', compact' if compact else ''}")
    net.close()


@pytest.mark.parametrize("compact", [False, True], ids=["fast", "compact"])
@pytest.mark.parametrize("bits,registers", SHAPES[:2])
def test_tiled_conv_with_fused_residual(bits, registers, compact):
    nodes, inputs, inits = _conv(c_in=12, c_out=12, size=(9, 10), residual=True)
    inputs[1] = ("r", np.float32, [1, 12, 9, 10])
    model = make_model(nodes, inputs, [("y", np.float32, None)], inits)
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    assert any(n.op == "Conv" for n in graph.nodes)
    net = HostNet(compile_graph(graph, _target(bits, registers), fast_compile=compact))
    rng = np.random.default_rng(8)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs}
    (want,) = ort_run(model, feeds)
    assert_close(net.run(feeds)["y"], want, what="conv + residual add + relu")
    net.close()


def test_tile_shapes_fit_the_register_file():
    for bits, registers in SHAPES:
        tiling = tiling_for(_target(bits, registers))
        for channels in (1, 3, 8, 16, 19, 64, 256):
            chunk, pixels = tiling.shape(channels)
            vectors = -(-chunk // tiling.lanes)
            assert 1 <= chunk <= channels
            assert pixels >= 1
            assert vectors * pixels + vectors + 1 <= max(registers, 2 * vectors + 1)
    assert tiling_for(None) == Tiling(8, 16)


def test_each_tiling_reaches_the_code():
    """A target of another CPU's vector width compiles with that CPU's tiles, not the host's."""
    nodes, inputs, inits = _conv(**CASES["3x3-pad"])
    graph = run_pipeline(load_onnx(make_model(nodes, inputs, [("y", np.float32, None)], inits)),
                         snapshots=False).graph
    widths = {compile_graph(graph, _target(bits, registers)).llvm_ir.count(" x float>")
              for bits, registers in SHAPES[:3]}
    assert len(widths) == 3
