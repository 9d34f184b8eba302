"""Row-streamed chains: runs of int8 layers computed row by row through windows of a few rows.

Two networks built here as int8 TFLite (checked against TFLite Micro first): a DS-CNN (a
stride-2 stem, depthwise and pointwise pairs, a stride-2 depthwise, a closing global average
pool) and a residual net (a stem, a residual block, a stride-2 block with a 1 x 1 shortcut).
Each runs as one chain: its arena holds the input, the windows and the pooled output, far
below the plan without chains; the symbolic simulation replays the schedule row by row; and
the compiled chain gives the interpreter's bytes on the host and under QEMU on Cortex-M7 and
Cortex-M55.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.lowir.ir import Fusion
from compiler.lowir.rows import RowInput, RowStage, schedule_rows
from compiler.memory.plan import PlanError
from compiler.memory.simulate import simulate
from tests.memory.test_independent_check import brute_force_valid
from tests.memory.test_streams import _conv
from tests.tflite.oracles import check_int8, quantized
from tests.tflite.writer import Model, Op, write

NO_CHAINS = frozenset({"row_chains"})


def _pool(tensors: list, x: int, h: int, w: int, c: int) -> tuple[Op, int]:
    source = tensors[x]  # TFLite Micro pools within one quantization
    tensors.append(quantized(f"pooled{len(tensors)}", (1, 1, 1, c), source.scale[0],
                             source.zero_point[0]))
    return Op("AVERAGE_POOL_2D", [x], [len(tensors) - 1], ("Pool2DOptions", {
        "Padding": 1, "StrideW": 1, "StrideH": 1, "FilterWidth": w, "FilterHeight": h,
        "FusedActivationFunction": 0})), len(tensors) - 1


def _ds_cnn(h: int = 49, w: int = 10, c: int = 40) -> tuple[Model, dict]:
    """image -> 3x3/2 stem -> (dw 3x3, pw) x 2 -> dw 3x3/2 -> pw -> global average pool."""
    rng = np.random.default_rng(3)
    tensors = [quantized("image", (1, h, w, 2), 0.05, -3)]
    ops, x, cin = [], 0, 2
    for cout, size, stride, depthwise in [(c, 3, 2, False), (c, 3, 1, True), (c, 1, 1, False),
                                          (c, 3, 1, True), (c, 1, 1, False), (c, 3, 2, True),
                                          (c, 1, 1, False)]:
        op, x, h = _conv(tensors, rng, x, cin, cout, size, stride, depthwise, h, w)
        w, cin = -(-w // stride), cout
        ops.append(op)
    op, out = _pool(tensors, x, h, w, c)
    return Model(tensors, [*ops, op], [0], [out]), {"image": (1, 49, 10, 2)}


def _res_net(h: int = 24, w: int = 8, c: int = 8) -> tuple[Model, dict]:
    """A stem, a residual block, a stride-2 block with a 1x1 shortcut, a global average pool."""
    rng = np.random.default_rng(7)
    tensors = [quantized("image", (1, h, w, 3), 0.05, -3)]

    def add(a: int, b: int) -> tuple[Op, int]:
        shape = tensors[a].shape
        tensors.append(quantized(f"sum{len(tensors)}", shape, 0.07, -11))
        return Op("ADD", [a, b], [len(tensors) - 1],
                  ("AddOptions", {"FusedActivationFunction": 1})), len(tensors) - 1

    stem, x, _ = _conv(tensors, rng, 0, 3, c, 3, 1, False, h, w)
    a, y, _ = _conv(tensors, rng, x, c, c, 3, 1, False, h, w)
    b, z, _ = _conv(tensors, rng, y, c, c, 3, 1, False, h, w)
    b.options[1]["FusedActivationFunction"] = 0
    add1, s1 = add(z, x)
    down, d, h2 = _conv(tensors, rng, s1, c, 2 * c, 3, 2, False, h, w)
    short, s, _ = _conv(tensors, rng, s1, c, 2 * c, 1, 2, False, h, w)
    short.options[1]["FusedActivationFunction"] = 0
    w2 = -(-w // 2)
    e, f, _ = _conv(tensors, rng, d, 2 * c, 2 * c, 3, 1, False, h2, w2)
    e.options[1]["FusedActivationFunction"] = 0
    add2, s2 = add(f, s)
    pool, out = _pool(tensors, s2, h2, w2, 2 * c)
    return (Model(tensors, [stem, a, b, add1, down, short, e, add2, pool], [0], [out]),
            {"image": (1, h, w, 3)})


@pytest.fixture(scope="module", params=["ds_cnn", "res_net"])
def net(request):
    model, shapes = (_ds_cnn if request.param == "ds_cnn" else _res_net)()
    check_int8(model, shapes)  # Kiln's interpreter is TFLite Micro's bytes on it
    return load_model(write(model))


def _chains(plan) -> list:
    return [i for i in plan.lowir.instrs if i.kind == "op" and i.fusion is Fusion.ROW_CHAIN]


@pytest.mark.parametrize("io_in_arena", [False, True])
def test_the_net_is_one_chain_and_its_arena_holds_only_rows(net, io_in_arena):
    compiled = compilation(net)
    plan = compiled.plan(Options("cortex-m7", io_in_arena=io_in_arena))
    without = compiled.plan(Options("cortex-m7", io_in_arena=io_in_arena,
                                    disabled_lowering=NO_CHAINS))
    chains = _chains(plan)
    assert len(chains) == 1 and not _chains(without)
    chain = plan.lowir.chains[chains[0].name]
    assert len(chain.stages) >= 7 and chain.stages[-1].sums
    # Every tensor inside passes through a window of a few rows (five where a stride-2 layer
    # and its shortcut read the same rows, the shortcut's row needed two rows later).
    assert all(rows <= 5 for _, rows in chain.windows.values())
    assert plan.arena.size <= 0.75 * without.arena.size
    simulate(plan)
    a = plan.arena
    assert brute_force_valid(a.buffers, a.offsets, a.size, a.alignment)
    assert plan.whole_tensor_bound == without.arena.lower_bound > a.lower_bound
    records = compiled.lowering(Options("cortex-m7", io_in_arena=io_in_arena))
    step = next(r for r in records if r.name == "row_chains")
    assert step.applied and step.saved > 0 and step.sites


def test_the_simulation_catches_a_window_too_small(net):
    plan = compilation(net).plan(Options("cortex-m7"))
    name = _chains(plan)[0].name
    chain = plan.lowir.chains[name]
    # Drop the first move: later rows land where rows still needed are.
    first_move = next(k for k, e in enumerate(chain.events) if e.kind == "move")
    broken = dataclasses.replace(chain, events=chain.events[:first_move]
                                 + chain.events[first_move + 1:])
    plan.lowir.chains[name] = broken
    try:
        with pytest.raises(PlanError, match="reads row"):
            simulate(plan)
    finally:
        plan.lowir.chains[name] = chain


def _feeds(graph, seed: int) -> dict:
    x = graph.inputs[0]
    return {x.name: np.random.default_rng(seed).integers(-128, 128, x.type.shape)
            .astype(np.int8)}


@pytest.mark.parametrize("io_in_arena", [False, True])
def test_the_chain_compiled_for_the_host_gives_the_interpreters_bytes(net, io_in_arena):
    from compiler.codegen.host import HostNet

    compiled = compilation(net)
    prepared = compiled.prepared
    compiled_net = compiled.net(Options("host", io_in_arena=io_in_arena))
    assert any(k.fusion is Fusion.ROW_CHAIN for k in compiled_net.kernels)
    runner = HostNet(compiled_net)
    try:
        for seed in range(10):
            feeds = _feeds(prepared, seed)
            got = runner.run(feeds)
            for name, value in run(prepared, feeds).items():
                assert np.array_equal(got[name], value), f"seed {seed}"
    finally:
        runner.close()


@pytest.mark.slow
@pytest.mark.parametrize("machine", ["mps2-an500", "mps3-an547"])  # Cortex-M7, Cortex-M55
def test_the_chain_runs_exactly_on_cortex_m(net, machine, tmp_path):
    from tests.codegen import firmware

    firmware.require_tools()
    compiled = compilation(net)
    prepared = compiled.prepared
    compiled_net = compiled.net(Options(firmware.MACHINES[machine].target, io_in_arena=True))
    assert any(k.fusion is Fusion.ROW_CHAIN for k in compiled_net.kernels)
    for seed in range(3):
        feeds = _feeds(prepared, seed)
        firmware.assert_exact(compiled_net, prepared, feeds, machine, tmp_path / str(seed),
                               f"seed {seed}")


def _stage(name: str, source: str, needed, rows: int, source_rows: int, **kw) -> RowStage:
    return RowStage(name, (name,), (RowInput(source, tuple(needed), source_rows),), name, rows,
                    10, **kw)


def test_a_three_row_window_moves_two_rows_per_row_and_spare_rows_move_less():
    rows = 12
    three = [(max(r - 1, 0), min(r + 1, rows - 1)) for r in range(rows)]
    stages = [_stage("a", "x", [(r, r) for r in range(rows)], rows, rows),
              _stage("b", "a", three, rows, rows)]
    tight = schedule_rows(stages, {"b"}, spare=0)
    assert tight.windows == {"a": (10, 3)} and tight.input_rows == {"x": rows}
    roomy = schedule_rows(stages, {"b"}, spare=5)
    assert roomy.windows == {"a": (10, 8)}
    assert 0 < roomy.moved < tight.moved
    # Each row of b reads rows of a that the schedule made, in order.
    assert [e.row for e in tight.row_events(1)] == list(range(rows))
    assert tight.inputs == ["x"] and tight.outputs == ["b"]


def test_a_stride_two_reader_pulls_two_rows_per_row():
    rows = 10
    halves = [(max(2 * r - 1, 0), min(2 * r + 1, rows - 1)) for r in range(rows // 2)]
    stages = [_stage("a", "x", [(r, r) for r in range(rows)], rows, rows),
              _stage("b", "a", halves, rows // 2, rows)]
    chain = schedule_rows(stages, {"b"})
    order = [(e.stage, e.row) for e in chain.events if e.kind == "row"]
    assert order[:5] == [(0, 0), (0, 1), (1, 0), (0, 2), (0, 3)]
    assert chain.windows["a"][1] == 3


def test_the_code_view_shows_the_chain_driver_a_layer_belongs_to(net):
    """Selecting a chained layer shows the chain's code, scrolled to its driver."""
    kernels = compilation(net).kernels(Options("cortex-m7"))
    chain = next(s for s in kernels.steps if s.op.startswith("RowChain"))
    code = kernels.kernel_code(chain.nodes[1], "cortex-m7")
    assert code.symbol == chain.symbol and code.symbol.endswith(".RowChain")
    name = re.escape(code.symbol)
    assert re.search(rf'^"?{name}"?:', code.assembly, re.M)  # where the view scrolls to
    assert re.search(rf'^define\b.*@"?{name}\(', code.llvm_ir, re.M)
