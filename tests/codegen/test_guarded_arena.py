"""The guarded host build: kernels that write through windows stay inside them.

Every buffer sits in a region of its own between two canary bands (`compiler.harness.guarded`):
a store one row past a window, an output or a ring of rows changes a band and the run fails,
here on the host, not by chance on a board. Each kernel family that writes row by row or
through a window runs guarded on seeded inputs and must give the plain build's bytes with every
canary intact; a window made to overrun, and guards changed by hand, must be caught by name.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from onnx import helper

from compiler.codegen import build
from compiler.codegen.host import HostNet
from compiler.codegen.targets import DotProduct, get_target
from compiler.driver import Options, compilation, compile_graph
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.harness.guarded import (
    GuardedNet,
    GuardError,
    compile_guarded,
    guard_plan,
    guard_size,
)
from compiler.lowir.ir import Fusion
from compiler.memory.simulate import simulate
from compiler.passes.pipeline import Pipeline
from compiler.qmath.requant import REQUANT_KEY
from tests.codegen.test_conv_pair import _block_model
from tests.codegen.test_conv_tiles import CASES, _conv, _target
from tests.codegen.test_host import _conv_model
from tests.codegen.test_int8_kernels import (
    _binary,
    _conv_tflite,
    _fully_connected,
    _residual_block,
)
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model
from tests.memory.test_streams import _chain_model
from tests.tflite.oracles import quantized
from tests.tflite.writer import Model, Op, write

SEEDS = range(3)
NO_CHAINS = frozenset({"row_chains"})  # for the pair and whole-tensor streaming tests


def _feeds(graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in graph.inputs:
        dtype = np.dtype(v.type.dtype)
        if dtype.kind == "f":
            feeds[v.name] = rng.standard_normal(v.type.shape).astype(dtype)
        else:
            info = np.iinfo(dtype)
            feeds[v.name] = rng.integers(info.min, info.max + 1, v.type.shape).astype(dtype)
    return feeds


def _guarded_equals_plain(graph, target="host", io_in_arena: bool = False,
                          fast_compile: bool = False, disabled=frozenset()):
    """The prepared graph built plain and guarded gives the same bytes, canaries intact."""
    prepared = compilation(graph).prepared
    plain = HostNet(compile_graph(prepared, target, io_in_arena=io_in_arena,
                                  fast_compile=fast_compile, disabled_lowering=disabled))
    guarded = compile_guarded(prepared, target, io_in_arena=io_in_arena,
                              fast_compile=fast_compile, disabled_lowering=disabled)
    try:
        for seed in SEEDS:
            feeds = _feeds(prepared, seed)
            want, got = plain.run(feeds), guarded.run(feeds)  # run checks every guard
            for name, value in want.items():
                assert np.array_equal(got[name], value, equal_nan=True), f"{name}, seed {seed}"
    finally:
        plain.close()
        guarded.close()
    return guarded


def _onnx(nodes, inputs, inits=()) -> object:
    return load_model(make_model(nodes, inputs, [("y", np.float32, None)], dict(inits))
                      .SerializeToString())


# -- the guarded plan ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def block():
    return compilation(load_model(write(_block_model()[0]))).prepared


def test_every_buffer_sits_apart_between_two_guards_of_a_row(block):
    plan = compilation(block, Pipeline([])).plan(Options("host", disabled_lowering=NO_CHAINS))
    offsets_before = dict(plan.arena.offsets)
    guard = guard_size(block, plan.alignment)
    row = 5 * 16  # a row of the block's 21 x 5 x 16 tensors
    assert guard >= row and guard % plan.alignment == 0
    guarded, guards = guard_plan(plan, guard)
    simulate(guarded)  # every read still finds its value
    spans = []
    for region, offsets in (("activations", guarded.arena.offsets),
                            ("mutable", guarded.mutable_offsets)):
        for name, offset in offsets.items():
            size = plan.lowir.storages[name].size
            mine = {g.side: g for g in guards if g.storage == name}
            assert mine["before"].stop == offset and mine["after"].start == offset + size
            assert {g.region for g in mine.values()} == {region}
            assert min(g.stop - g.start for g in mine.values()) >= guard
            spans += [(region, offset, offset + size), *((region, g.start, g.stop)
                                                          for g in mine.values())]
    spans.sort()
    assert all(a[0] != b[0] or a[2] <= b[1] for a, b in zip(spans, spans[1:])), "overlap"
    assert any(name.endswith(".rows") for name in guarded.arena.offsets)  # the pair's window
    assert not any(guarded.overlapping(s, f.source) for s, f in guarded.lowir.streams.items())
    # The driver's own plan (the default build's) is left as it was.
    assert compilation(block, Pipeline([])).plan(
        Options("host", disabled_lowering=NO_CHAINS)).arena.offsets == offsets_before


def test_a_changed_guard_is_named_with_its_buffer_and_bytes(block):
    net = compile_guarded(block, disabled_lowering=NO_CHAINS)
    feeds = _feeds(block, 0)
    net.run(feeds)
    window = next(g for g in net.guards if g.storage.endswith(".rows") and g.side == "after")
    net.regions["activations"][window.start + 3] ^= 0xFF
    at = window.start + 3
    with pytest.raises(GuardError, match=rf"guard after {re.escape(window.storage)} changed: "
                                         rf"1 byte in activations bytes {at}\.\.{at} "):
        net.check()
    output = next(g for g in net.guards if g.region == "mutable" and g.side == "before"
                  and g.storage == block.outputs[0].name)
    net.run(feeds)  # the canary is laid again before every run
    net.regions["mutable"][output.stop - 1] ^= 1
    with pytest.raises(GuardError, match=rf"guard before {output.storage} "):
        net.check()
    net.run(feeds)
    x = block.inputs[0].name
    net.regions["mutable"][net.net.inputs[0].offset] ^= 1
    with pytest.raises(GuardError, match=f"the input {x} was written over"):
        net.check()
    net.close()


def test_a_bundle_cannot_be_run_guarded(tmp_path):
    with pytest.raises(KilnError, match="compile_guarded"):
        GuardedNet.from_bundle(tmp_path)


def test_a_pair_writing_one_row_past_its_window_is_caught(block, monkeypatch):
    """The audit's bug: the driver believes its window one row taller than its storage."""
    real = build.pair_rows
    monkeypatch.setattr(build, "pair_rows", lambda a, b, add, rows: real(a, b, add, rows + 1))
    net = compile_guarded(block, disabled_lowering=NO_CHAINS)
    with pytest.raises(GuardError, match=r"guard after \S+\.rows changed: .* written by "
                                         + re.escape("QLinearConv+QLinearConv+QLinearAdd")):
        net.run(_feeds(block, 0))
    net.close()


# -- kernels that write row by row or through a window ------------------------------------------

# The pair's block as test_conv_pair builds it: tall (its window moves twice), two and three
# rows, one column, other channel counts and a middle tensor of other channels.
@pytest.mark.parametrize("h,w,c,middle", [(21, 5, 16, 16), (2, 3, 8, 8), (3, 4, 5, 5),
                                          (12, 1, 4, 12), (9, 6, 16, 24)])
def test_conv_pairs(h, w, c, middle):
    net = _guarded_equals_plain(load_model(write(_block_model(h, w, c, middle)[0])),
                                disabled=NO_CHAINS)
    assert any(k.fusion is Fusion.CONV_PAIR for k in net.net.kernels)


@pytest.mark.parametrize("h,w,c,middle", [(21, 5, 16, 16), (9, 6, 16, 24)])
def test_row_chains(h, w, c, middle):
    """The same blocks as one row-streamed chain: no window row written past its storage."""
    net = _guarded_equals_plain(load_model(write(_block_model(h, w, c, middle)[0])))
    assert any(k.fusion is Fusion.ROW_CHAIN for k in net.net.kernels)


def test_a_chain_writing_past_its_window_is_caught(block, monkeypatch):
    """A driver believing a window one row taller than its storage writes into the guard."""
    from compiler.lowir.rows import schedule_rows

    real = build.chain_code

    def taller(chain, *args):
        return real(schedule_rows(chain.stages, set(chain.outputs), spare=1), *args)

    monkeypatch.setattr(build, "chain_code", taller)
    net = compile_guarded(block)
    with pytest.raises(GuardError, match=r"guard after \S+\.rows changed: .* written by "
                                         r"RowChain"):
        net.run(_feeds(block, 0))
    net.close()


def test_streamed_int8_convolutions_with_io_in_the_arena():
    """The chain whose plain plan overlaps each output with its input, rows up and down."""
    graph = load_model(write(_chain_model()[0]))
    _guarded_equals_plain(graph, disabled=NO_CHAINS)
    _guarded_equals_plain(graph, io_in_arena=True, disabled=NO_CHAINS)
    _guarded_equals_plain(graph, io_in_arena=True)  # as one row-streamed chain


# Every register tile shape of test_conv_tiles, fast and compact edges in turn.
@pytest.mark.parametrize("bits,registers,compact", [(512, 32, False), (256, 16, True),
                                                    (128, 8, False), (0, 32, True)])
@pytest.mark.parametrize("case", list(CASES))
def test_conv_tiles(case, bits, registers, compact):
    nodes, inputs, inits = _conv(**CASES[case])
    _guarded_equals_plain(_onnx(nodes, inputs, inits), _target(bits, registers),
                          fast_compile=compact)


@pytest.mark.parametrize("kwargs", [
    {"c_in": 4, "c_out": 6, "strides": (2, 2), "act": "Relu"},
    {"c_in": 6, "c_out": 4, "group": 2, "pads": (0, 1, 2, 0)},
    {"c_in": 8, "c_out": 8, "group": 8, "strides": (2, 1), "act": "Relu", "kernel": (1, 5),
     "pads": (0, 2, 0, 2)},
], ids=["strided-relu", "grouped-asym-pad", "dw-1x5"])
def test_float_convolutions(kwargs):
    _guarded_equals_plain(load_model(_conv_model(**kwargs).SerializeToString()))


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1],
                     "count_include_pad": 1}),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                     "pads": [1, 1, 1, 1], "count_include_pad": 1}),
], ids=["max-pad", "avg-include-pad", "max-ceil", "avg-ceil-include-pad"])
def test_float_pools(op, attrs):
    # A Relu between them keeps a buffer in the arena for the pool to read.
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r"], ["y"], **attrs)]
    _guarded_equals_plain(_onnx(nodes, [("x", np.float32, [1, 5, 7, 6])]))


@pytest.mark.parametrize("depthwise,stride,padding,activation", [
    (False, 1, 0, 3), (False, 2, 1, 0), (True, 1, 0, 1), (True, 2, 0, 3)])
def test_int8_convolutions(depthwise, stride, padding, activation):
    _guarded_equals_plain(load_model(_conv_tflite(depthwise, stride, padding, activation)))


@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("channels", [16, 5])
def test_int8_residual_add_in_the_store(rule, channels):
    graph = load_model(_residual_block(channels, 0))
    graph.metadata[REQUANT_KEY] = rule
    host = get_target("host")
    # The host's kernels and, where it has a dot-product instruction, the generic ones.
    for target in {host, dataclasses.replace(host, int8_dot=DotProduct.NONE)}:
        _guarded_equals_plain(graph, target)


def test_int8_pools_fully_connected_binary_and_tables():
    shape = (1, 7, 6, 5)
    pool = Model([quantized("x", shape, 0.05, -3), quantized("y", (1, 4, 3, 5), 0.05, -3)],
                 [Op("AVERAGE_POOL_2D", [0], [1], ("Pool2DOptions", {
                     "Padding": 0, "StrideH": 2, "StrideW": 2, "FilterHeight": 3,
                     "FilterWidth": 3}))], [0], [1])
    table = Model([quantized("x", (1, 4, 4, 16), 0.05, 3),
                   quantized("y", (1, 4, 4, 16), 1 / 256, -128)],
                  [Op("LOGISTIC", [0], [1])], [0], [1])
    for data in (write(pool), write(table), _fully_connected(True, 3, rows=3),
                 _binary("ADD", (1, 1, 1, 6), 1), _binary("MUL", (1, 4, 5, 6), 0)):
        _guarded_equals_plain(load_model(data))


def test_the_sample_model():
    graph = load_model(SAMPLE_MODEL)
    _guarded_equals_plain(graph)
    _guarded_equals_plain(graph, io_in_arena=True)
