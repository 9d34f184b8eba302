"""Streaming convolutions: an int8 convolution's output may overlap the input that dies there.

The kernel writes output row r only after reading the input rows row r needs, rows upwards or
downwards, so the output may sit a lag below the input or a lead above it. The planner places
chains of such layers alternately below and above; the symbolic simulation runs the rows in the
kernel's order; and the compiled chain gives the interpreter's bytes on the host and under QEMU
on Cortex-M7 and Cortex-M55, where the packing really overlaps.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from compiler.driver import Options, compilation, compile_graph
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.lowir.ir import Stream
from compiler.memory.buffers import Buffer, lower_bound
from compiler.memory.plan import ArenaPlan, PlanError, check_plan, plan_arena
from compiler.memory.simulate import simulate
from compiler.memory.strategies import first_fit
from tests.tflite.oracles import check_int8, quantized
from tests.tflite.writer import Model, Op, T, write

SAME = 0
# Whole-tensor streaming is what these tests check: no row-streamed chain takes the layers.
NO_CHAINS = frozenset({"row_chains"})


def test_lag_and_lead_of_a_padded_3x3_convolution():
    """Six rows of ten bytes in and out, one row of padding at each end."""
    needed = ((0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5))
    stream = Stream("x", 0, 10, 6, 0, 10, needed)
    # Upwards: writing row 1 ends at 20 while row 1 still reads from row 0.
    assert stream.ascending_lag() == 20
    # Downwards: row 4 starts writing at 40 while it still reads up to the end of row 5 (60).
    assert stream.descending_lead() == 20
    # A stride-2 convolution writing half the rows needs less lag than its input is long.
    halved = Stream("x", 0, 10, 6, 0, 10, ((0, 1), (1, 3), (3, 5)))
    assert halved.ascending_lag() == 10 and halved.descending_lead() == 40


def _chain(count: int, size: int = 1000, lag: int = 200, lead: int = 200) -> list[Buffer]:
    buffers = [Buffer("t0", size, 0, 1)]
    for i in range(1, count):
        buffers.append(Buffer(f"t{i}", size, i, i + 1, stream=(f"t{i - 1}", lag, lead)))
    return buffers


def test_first_fit_packs_a_chain_alternately_below_and_above():
    buffers = _chain(6)
    offsets = first_fit(buffers, 1)
    assert max(offsets[b.name] + b.size for b in buffers) == 1200
    assert lower_bound(buffers) == 1200
    moves = [offsets[f"t{i}"] - offsets[f"t{i - 1}"] for i in range(1, 6)]
    assert all(m <= -200 for m in moves[::2]) or all(m <= -200 for m in moves[1::2])
    assert any(m >= 200 for m in moves)


def test_without_streams_the_chain_takes_two_buffers():
    plain = [dataclasses.replace(b, stream=None) for b in _chain(6)]
    assert plan_arena(plain, 1).size == 2000


def test_the_checker_refuses_a_stream_placed_too_close():
    buffers = _chain(2)
    plan = ArenaPlan(buffers, {"t0": 300, "t1": 150}, 1300, 1)
    with pytest.raises(PlanError, match=r"t1 streams from t0 but sits -150 bytes from it, "
                                        r"inside \(-200, 200\)"):
        check_plan(plan)
    check_plan(ArenaPlan(buffers, {"t0": 300, "t1": 100}, 1300, 1))  # a lag below: valid
    check_plan(ArenaPlan(buffers, {"t0": 0, "t1": 200}, 1200, 1))  # a lead above: valid


def _conv(tensors: list, rng, x: int, cin: int, cout: int, size: int, stride: int,
          depthwise: bool, h: int, w: int) -> tuple[Op, int, int]:
    """A SAME-padded int8 (depthwise) convolution reading tensor `x`; its op and output."""
    oh, ow = -(-h // stride), -(-w // stride)
    wshape = (1, size, size, cout) if depthwise else (cout, size, size, cin)
    scales = rng.uniform(0.004, 0.02, cout).tolist()
    first = len(tensors)
    tensors += [T(f"w{first}", wshape, "int8", rng.integers(-127, 128, wshape), scale=scales,
                  zero_point=[0] * cout, axis=3 if depthwise else 0),
                T(f"b{first}", (cout,), "int32", rng.integers(-600, 600, cout),
                  scale=[0.05 * s for s in scales], zero_point=[0] * cout),
                quantized(f"y{first}", (1, oh, ow, cout), 0.05, int(rng.integers(-20, 20)))]
    kind = "DepthwiseConv2DOptions" if depthwise else "Conv2DOptions"
    options = {"Padding": SAME, "StrideH": stride, "StrideW": stride,
               "FusedActivationFunction": 1}
    if depthwise:
        options["DepthMultiplier"] = 1
    op = Op("DEPTHWISE_CONV_2D" if depthwise else "CONV_2D", [x, first, first + 1],
            [first + 2], (kind, options))
    return op, first + 2, oh


def _chain_model() -> tuple[Model, dict]:
    """Pointwise and depthwise layers of equal size (so each can only overlap the last), a
    stride-2 depthwise and a 5 x 5 dense one; the last feature map is the output."""
    rng = np.random.default_rng(5)
    h, w, c = 14, 6, 16
    tensors = [quantized("x", (1, h, w, c), 0.05, 3)]
    ops, x = [], 0
    layers = [(c, 1, 1, False), (c, 3, 1, True), (c, 1, 1, False), (c, 3, 1, True),
              (c, 3, 2, True), (c, 5, 1, False), (c, 1, 1, False)]
    for cout, size, stride, depthwise in layers:
        op, x, h = _conv(tensors, rng, x, c, cout, size, stride, depthwise, h, w)
        w = -(-w // stride)
        ops.append(op)
    return Model(tensors, ops, [0], [x]), {"x": (1, 14, 6, c)}


@pytest.fixture(scope="module")
def chain():
    model, shapes = _chain_model()
    check_int8(model, shapes)  # Kiln's interpreter is TFLite Micro's bytes on it
    return load_model(write(model))


def test_the_chain_streams_both_ways_and_its_simulation_holds(chain):
    plan = compilation(chain).plan(Options("host", io_in_arena=True, disabled_lowering=NO_CHAINS))
    streams = plan.lowir.streams
    overlapping = [s for s in streams if plan.overlapping(s, streams[s].source)]
    descending = [s for s in overlapping if plan.descending(s)]
    assert len(overlapping) >= 5 and 0 < len(descending) < len(overlapping)
    # Every layer holds 14 x 6 x 16 bytes (the stride-2 one half): the arena is one of them
    # and a few rows, not two.
    assert plan.arena.size < 1.3 * 14 * 6 * 16 and plan.arena.efficiency == 1.0
    simulate(plan)


def test_the_simulation_catches_rows_run_the_wrong_way(chain, monkeypatch):
    plan = compilation(chain).plan(Options("host", disabled_lowering=NO_CHAINS))
    simulate(plan)
    flipped = type(plan).descending
    monkeypatch.setattr(type(plan), "descending", lambda self, s: not flipped(self, s))
    with pytest.raises(PlanError, match="overwrote it"):
        simulate(plan)


def _feeds(graph, seed: int) -> dict:
    x = graph.inputs[0]
    rng = np.random.default_rng(seed)
    return {x.name: rng.integers(-128, 128, x.type.shape).astype(np.int8)}


def test_the_chain_compiled_for_the_host_gives_the_interpreters_bytes(chain):
    from compiler.codegen.host import HostNet

    prepared = compilation(chain).prepared
    net = compile_graph(prepared, "host", disabled_lowering=NO_CHAINS)
    assert any(net.plan.overlapping(s, f.source) for s, f in net.plan.lowir.streams.items())
    runner = HostNet(net)
    for seed in range(20):
        feeds = _feeds(prepared, seed)
        want = run(prepared, feeds)
        got = runner.run(feeds)
        for name, value in want.items():
            assert np.array_equal(got[name], value), f"seed {seed}, output {name}"
    runner.close()


@pytest.mark.slow
@pytest.mark.parametrize("machine", ["mps2-an500", "mps3-an547"])  # Cortex-M7, Cortex-M55
def test_the_chain_runs_exactly_on_cortex_m(chain, machine, tmp_path):
    from tests.codegen import firmware

    firmware.require_tools()
    prepared = compilation(chain).prepared
    net = compile_graph(prepared, firmware.MACHINES[machine].target,
                        disabled_lowering=NO_CHAINS)
    streams = net.plan.lowir.streams
    assert any(net.plan.descending(s) for s in streams)
    assert any(net.plan.overlapping(s, f.source) and not net.plan.descending(s)
               for s, f in streams.items())
    for seed in range(3):
        feeds = _feeds(prepared, seed)
        firmware.assert_exact(net, prepared, feeds, machine, tmp_path / str(seed),
                               f"seed {seed}")
