"""Under QEMU, `kiln validate`'s per-layer instructions are `kiln bench --target`'s layer rows.

Both count the same kernels on the same input (seed 0's random input, which validation's
random inputs start with) with the same plugin, one from the runner firmware's timed build,
the other from the bench's split build; the layers add up to the whole inference within 1 %,
and with `-icount shift=0` (one instruction a nanosecond) the device's SysTick ticks track
the instructions at the board's clock: 40 instructions a tick at AN500's 25 MHz.
"""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE_MODEL, require_tools, shared_models

EXPECTED_HZ = {"cortex-m7": 25_000_000, "cortex-m55": 32_000_000}  # QEMU's mps2-an500, mps3-an547


def _measure(model, target):
    from compiler.device.validate import validate
    from compiler.harness.cortex_m_bench import bench_target

    require_tools("qemu-system-arm", "arm-none-eabi-gcc")
    device = validate(model, target, "qemu", None, 1, seed=0)
    assert device.passed, device.problems
    bench = bench_target(model, target, 0, {}, None, False)
    return device, bench.kiln


def _check(device, kiln, target, shipped_within=0.01):
    assert [(la.symbol, la.op, la.nodes) for la in device.layers] == \
        [(la.symbol, la.op, la.nodes) for la in kiln.layers]
    assert [la.instructions for la in device.layers] == [la.instructions for la in kiln.layers]
    layers = sum(la.instructions for la in device.layers)
    assert abs(layers / device.total_instructions - 1) < 0.01, (layers, device.total_instructions)
    assert abs(layers / kiln.separate_total - 1) < 0.01, (layers, kiln.separate_total)
    # The bench's whole count is of the shipped build, kernels inlined into the entry point:
    # on a small network that saves a few percent of calls (the digits CNN on Cortex-M55: 3 %).
    assert kiln.total <= kiln.separate_total
    assert abs(layers / kiln.total - 1) < shipped_within, (layers, kiln.total)
    # Ticks: QEMU's virtual clock runs 1 ns an instruction, so a tick is 1e9/Hz instructions.
    assert device.tick_unit == "SysTick ticks"
    assert device.ticks_per_second == EXPECTED_HZ[target]
    per_tick = 1e9 / device.ticks_per_second
    assert abs(device.total_ticks * per_tick / device.total_instructions - 1) < 0.03
    for la in device.layers:
        if la.op.startswith("RowChain"):
            continue  # a chain driver's ticks are its walk less its kernels': the timing's too
        # A layer shorter than a couple of ticks may read 0 or 1 of them: only longer ones count.
        if la.instructions >= 2 * per_tick:
            assert la.ticks > 0, la
        if la.instructions >= 5_000:
            assert abs(la.ticks * per_tick / la.instructions - 1) < 0.05, la
    assert sum(la.ticks for la in device.layers) <= device.total_ticks


@pytest.mark.parametrize("target", ["cortex-m7", "cortex-m55"])
def test_digits_layers_equal_the_bench(target):
    device, kiln = _measure(SAMPLE_MODEL, target)
    _check(device, kiln, target, 0.01 if target == "cortex-m7" else 0.04)
    assert len(device.layers) >= 4 and all(la.instructions > 0 for la in device.layers)


def test_resnet8_int8_layers_equal_the_bench():
    model = shared_models() / "tflite" / "pretrainedResnet_quant.tflite"
    device, kiln = _measure(model, "cortex-m7")
    _check(device, kiln, "cortex-m7")
    assert device.integer_elements == device.integer_equal == 10
    assert sum(la.macs for la in device.layers) > 10_000_000
    assert any(la.op.startswith("RowChain") for la in device.layers)  # the driver case is here

