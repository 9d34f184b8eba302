"""Plants in the device loop: the runner firmware, the serial link and validation on a board."""

from __future__ import annotations

from plants import Plant

FAULTS = "tests/device/test_link_faults.py"
COUNTS = "tests/device/test_layer_counts.py"
MLPERF = "tests/device/test_mlperf_runner.py"

PLANTS = (
    Plant("device-runner-overruns-buffer", "compiler/device/kiln_runner.c",
          "    if (command_length + 1 >= KILN_CMD_SIZE) {",
          "    if (command_length + 1 >= KILN_CMD_SIZE + 64) {", (FAULTS,),
          "a command longer than the runner's buffer is written past its end"),
    Plant("device-identity-unchecked", "compiler/device/validate.py",
          "    if got != want:", "    if False:", (FAULTS,),
          "a firmware built from another network is validated as if it were this one"),
    Plant("device-chunks-overflow-buffer", "compiler/device/validate.py",
          'chunk = max(1, (buffer - len("db ") - 2) // 2)', "chunk = max(1, buffer)",
          (FAULTS,), "inputs are sent in db commands longer than the firmware's buffer"),
    Plant("device-results-zero-point-sign", "compiler/device/model_source.py",
          'value = (f"((float)((int32_t){read} - ({quant.zero_point[0]})) * "',
          'value = (f"((float)((int32_t){read} + ({quant.zero_point[0]})) * "', (MLPERF,),
          "MLPerf Tiny's results dequantize int8 outputs with the zero point's sign flipped"),
    Plant("device-layers-without-chain-kernels", "compiler/device/validate.py",
          "    return [k for k in net.kernels if symbols is None or k.symbol in symbols]",
          "    return [net.kernels[k] for k in sorted(set(net.timed))]", (COUNTS,),
          "a row chain's kernels vanish from the device's per-layer rows (one driver row)"),
    Plant("device-chain-ticks-counted-twice", "compiler/device/validate.py",
          "            per_symbol[kernel.part_of] = per_symbol.get(kernel.part_of, 0) - value",
          "            per_symbol[kernel.part_of] = per_symbol.get(kernel.part_of, 0)",
          (COUNTS,), "a chain driver's row keeps its kernels' ticks as well as its own"),
    Plant("device-xcross-also-not-measured", "app/cli/validate.py",
          'f"   (against {r.reference})")\n    else:',
          'f"   (against {r.reference})")\n    if True:',
          ("tests/device/test_validate_models.py",),
          "kiln validate prints the X-cross row and also says it was not measured"),
    Plant("device-systick-clock-wrong", "compiler/codegen/targets.py",
          "    cpu_hz: int = 25_000_000", "    cpu_hz: int = 20_000_000", (COUNTS,),
          "the board's SysTick rate is misstated: latency and ticks a second are off by 25 %"),
)
