"""A residual block's two convolutions run row by row as one instruction (ResNet's blocks).

The block x -> conv -> conv + x keeps x and a window of a few rows instead of x and the whole
middle tensor. Built here as int8 TFLite (Kiln's interpreter is TFLite Micro's bytes on it),
tall enough that the window moves its rows twice, and followed by a pointwise convolution so
every element of the block's sum reaches the output. Compiled for the host and run under QEMU
on Cortex-M7, the output is the interpreter's, byte for byte.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.driver import Options, compilation, compile_graph
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.lowir.ir import Fusion
from compiler.memory.buffers import align_up
from tests.memory.test_streams import _conv
from tests.tflite.oracles import check_int8, quantized
from tests.tflite.writer import Model, Op, write

H, W, C = 21, 5, 16
# The block runs as a pair only when no row-streamed chain takes it (they would here).
NO_CHAINS = frozenset({"row_chains"})


def _block_model(h: int = H, w: int = W, c: int = C, middle: int = C) -> tuple[Model, dict]:
    """image -> stem -> [conv (to `middle` channels) -> conv + stem output] -> 1 x 1 conv."""
    rng = np.random.default_rng(11)
    tensors = [quantized("image", (1, h, w, c), 0.05, -3)]
    stem, x, _ = _conv(tensors, rng, 0, c, c, 3, 1, False, h, w)
    first, y, _ = _conv(tensors, rng, x, c, middle, 3, 1, False, h, w)
    second, c_, _ = _conv(tensors, rng, y, middle, c, 3, 1, False, h, w)
    second.options[1]["FusedActivationFunction"] = 0  # the Add follows, then its Relu
    tensors.append(quantized("sum", (1, h, w, c), 0.07, -11))
    add = Op("ADD", [c_, x], [len(tensors) - 1], ("AddOptions", {"FusedActivationFunction": 1}))
    head, out, _ = _conv(tensors, rng, len(tensors) - 1, c, c, 1, 1, False, h, w)
    return Model(tensors, [stem, first, second, add, head], [0], [out]), {"image": (1, h, w, c)}


@pytest.fixture(scope="module")
def block():
    model, shapes = _block_model()
    check_int8(model, shapes)
    return load_model(write(model))


def _feeds(graph, seed: int) -> dict:
    x = graph.inputs[0]
    return {x.name: np.random.default_rng(seed).integers(-128, 128, x.type.shape)
            .astype(np.int8)}


def test_the_block_is_one_instruction_and_holds_one_tensor_and_a_window(block):
    plan = compilation(block).plan(Options("host", disabled_lowering=NO_CHAINS))
    pairs = [i for i in plan.lowir.instrs if i.kind == "op" and i.fusion is Fusion.CONV_PAIR]
    assert len(pairs) == 1 and len(pairs[0].nodes) == 3
    tensor = H * W * C
    window = next(s for s in plan.lowir.storages.values() if s.name.endswith(".rows"))
    assert window.size == 10 * W * C
    # The stem's output (the block's sum written over it) and the window, nothing else.
    a = plan.alignment
    assert plan.arena.size == align_up(tensor, a) + align_up(window.size, a)
    # Helium keeps the Add apart
    separate = compilation(block).plan(Options("cortex-m55", disabled_lowering=NO_CHAINS))
    assert not any(i.fusion is Fusion.CONV_PAIR for i in separate.lowir.instrs)


def _host_equals_interpreter(graph, seeds: int) -> None:
    """The graph compiled for the host, with its block as a pair, gives the interpreter's bytes."""
    from compiler.codegen.host import HostNet

    prepared = compilation(graph).prepared
    net = compile_graph(prepared, "host", disabled_lowering=NO_CHAINS)
    assert any(k.fusion is Fusion.CONV_PAIR for k in net.kernels)
    runner = HostNet(net)
    for seed in range(seeds):
        feeds = _feeds(prepared, seed)
        for name, value in run(prepared, feeds).items():
            assert np.array_equal(runner.run(feeds)[name], value), f"seed {seed}"
    runner.close()


def test_the_block_compiled_for_the_host_gives_the_interpreters_bytes(block):
    _host_equals_interpreter(block, 20)


# Two and three rows (no middle row; one), one column, channel counts the dot kernels do not
# take, and a middle tensor of other channels.
@pytest.mark.parametrize("h,w,c,middle", [(2, 3, 8, 8), (3, 4, 5, 5), (12, 1, 4, 12),
                                          (9, 6, 16, 24)])
def test_blocks_of_other_shapes_give_the_interpreters_bytes(h, w, c, middle):
    model, shapes = _block_model(h, w, c, middle)
    check_int8(model, shapes)
    _host_equals_interpreter(load_model(write(model)), 10)


def test_a_one_row_image_keeps_its_block_apart():
    model, _ = _block_model(1, 4, 8, 8)
    plan = compilation(load_model(write(model))).plan(Options("host",
                                                               disabled_lowering=NO_CHAINS))
    assert not any(i.fusion is Fusion.CONV_PAIR for i in plan.lowir.instrs)


@pytest.mark.slow
def test_the_block_runs_exactly_on_cortex_m7(block, tmp_path):
    from tests.codegen import firmware

    firmware.require_tools()
    prepared = compilation(block).prepared
    net = compile_graph(prepared, "cortex-m7", disabled_lowering=NO_CHAINS)
    assert any(k.fusion is Fusion.CONV_PAIR for k in net.kernels)
    for seed in range(3):
        feeds = _feeds(prepared, seed)
        firmware.assert_exact(net, prepared, feeds, "mps2-an500", tmp_path / str(seed),
                               f"seed {seed}")
