"""ResNet-8 at twice its width ("ResNet-8-large": 32, 64 and 128 channels), built here as int8
TFLite with MLPerf Tiny's ResNet-8 topology: a 3 x 3 stem, one residual block per stack, the
second and third stacks halving the image with a 1 x 1 shortcut, a global average pool.

The shared models hold only the standard width, so this net is made by the test: TFLite
Micro runs it first (Kiln's interpreter gives its bytes) and reports its own arena (the head of
its RecordingMicroAllocator), which Kiln's row-streamed plan (`kiln memory X --io-in-arena`)
must stay at most 0.40 of, checked and simulated row by row on the host, Cortex-M7 and
Cortex-M55.
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.memory.report import check_memory
from compiler.memory.simulate import simulate
from tests.memory.test_independent_check import brute_force_valid
from tests.memory.test_row_chains import _pool
from tests.memory.test_streams import _conv
from tests.tflite.oracles import check_int8, quantized
from tests.tflite.writer import Model, Op, write

_SIDE = 32  # CIFAR-10 images, as ResNet-8


def resnet8(width: int = 32) -> Model:
    """MLPerf Tiny's ResNet-8 body at stack widths `width`, 2 x and 4 x `width`."""
    rng = np.random.default_rng(8)
    tensors = [quantized("image", (1, _SIDE, _SIDE, 3), 0.05, -3)]
    ops = []

    def conv(x, cin, cout, size, stride, side, activation=True):
        op, out, _ = _conv(tensors, rng, x, cin, cout, size, stride, False, side, side)
        if not activation:
            op.options[1]["FusedActivationFunction"] = 0
        ops.append(op)
        return out

    def add(a, b):
        tensors.append(quantized(f"sum{len(tensors)}", tensors[a].shape, 0.07, -11))
        ops.append(Op("ADD", [a, b], [len(tensors) - 1],
                      ("AddOptions", {"FusedActivationFunction": 1})))
        return len(tensors) - 1

    side, cin = _SIDE, width
    x = conv(0, 3, width, 3, 1, side)
    x = add(conv(conv(x, width, width, 3, 1, side), width, width, 3, 1, side, False), x)
    for cout in (2 * width, 4 * width):
        down = conv(x, cin, cout, 3, 2, side)
        shortcut = conv(x, cin, cout, 1, 2, side, activation=False)
        side, cin = side // 2, cout
        x = add(conv(down, cout, cout, 3, 1, side, activation=False), shortcut)
    op, out = _pool(tensors, x, side, side, cin)
    return Model(tensors, [*ops, op], [0], [out])


def tflm_arena(data: bytes) -> int:
    """TFLite Micro's arena for the model: its allocator's head (the tensors' plan), as it
    prints it (in a process of its own: the report is written by C++ to standard output)."""
    script = ("import sys; from tflite_micro.python.tflite_micro import runtime; "
                 "runtime.Interpreter.from_bytes(sys.stdin.buffer.read(), "
                 "arena_size=1 << 22).print_allocations()")
    done = subprocess.run([sys.executable, "-c", script], input=data, capture_output=True,
                          timeout=120)
    found = re.search(rb"Arena allocation head (\d+) bytes", done.stdout + done.stderr)
    if found is None:
        pytest.skip("the tflite-micro wheel did not report its arena here")
    return int(found.group(1))


@pytest.fixture(scope="module")
def large():
    model = resnet8()
    check_int8(model, {"image": (1, _SIDE, _SIDE, 3)})
    data = write(model)
    return load_model(data), tflm_arena(data)


@pytest.mark.parametrize("target", ["host", "cortex-m7", "cortex-m55"])
def test_resnet8_large_plans_at_most_040_of_tflite_micro(large, target):
    graph, tflm = large
    plan = compilation(graph).plan(Options(target, io_in_arena=True))
    check_memory(plan)
    simulate(plan)
    a = plan.arena
    assert brute_force_valid(a.buffers, a.offsets, a.size, a.alignment)
    assert plan.lowir.chains and plan.whole_tensor_bound > a.lower_bound
    print(f"ResNet-8-large on {target}: {a.size:,} B, lower bound {a.lower_bound:,} B, "
          f"whole tensors {plan.whole_tensor_bound:,} B, TFLite Micro {tflm:,} B")
    assert tflm >= 2 * _SIDE * _SIDE * 32, "TFLite Micro holds two 32 x 32 x 32 tensors"
    assert a.size <= 0.40 * tflm, f"{a.size / tflm:.3f} of TFLite Micro's arena"


def test_resnet8_large_host_bundle_gives_the_interpreters_bytes(large, tmp_path):
    from tests.codegen.test_int8_kernels import _bundle_equals_interpreter

    assert _bundle_equals_interpreter(large[0], tmp_path) == 0


@pytest.mark.parametrize("machine", ["mps2-an500", "mps3-an547"])  # Cortex-M7, Cortex-M55
def test_resnet8_large_runs_exactly_under_qemu(large, machine, tmp_path):
    """As `kiln memory --io-in-arena` plans it: the chains' windows in the arena."""
    from tests.codegen import firmware

    firmware.require_tools()
    compiled = compilation(large[0])
    target = firmware.MACHINES[machine].target
    net = compiled.net(Options(target, io_in_arena=True))
    assert [i for i in net.plan.lowir.instrs if i.name in net.plan.lowir.chains]
    rng = np.random.default_rng(1)
    feeds = {v.name: rng.integers(-128, 128, v.type.shape).astype(np.int8)
             for v in compiled.prepared.inputs}
    firmware.assert_exact(net, compiled.prepared, feeds, machine, tmp_path,
                          f"ResNet-8-large on {target}")
