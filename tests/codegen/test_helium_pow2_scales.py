"""Power-of-two scales on Cortex-M55: LLVM's Helium back end once aborted the whole process.

float(int32 vector) * 2**-n folds into MVE's fixed-point VCVT, which LLVM then fails to encode
(an assertion, so the compile killed Kiln and the GUI with it). Found by the exactness campaign
(the operator zoo quantized under the tflite-pow2 schema). The compile runs in a child process
so a regression is a failing test, not a dead worker; the firmware must give the interpreter's
values.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from onnx import helper

from tests.conftest import ROOT, require_tools
from tests.helpers import make_model

CHILD = """
import sys
import numpy as np
from pathlib import Path
from compiler.driver import Options, compilation
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.mcu import firmware
import onnx

model = onnx.load(sys.argv[1])
graph = load_onnx(model)
compiled = compilation(graph)
feeds = [{"x": np.arange(-128, 128, 8, dtype=np.int8).reshape(1, 32)},
         {"x": np.full((1, 32), 127, np.int8)}]
net = compiled.net(Options("cortex-m55"))
board = firmware.board_for("cortex-m55")
elf = firmware.build(net, firmware.main_c(net, feeds), board.qemu_machine, Path(sys.argv[2]))
stdout, _ = firmware.run(elf, board.qemu_machine)
bad = 0
for k, f in enumerate(feeds):
    want = run(compiled.final, f)
    got = firmware.parse_outputs(net, stdout, k)
    bad += sum(int(np.count_nonzero(got[n] != w)) for n, w in want.items())
print("differing", bad)
"""


def test_a_power_of_two_dequantize_compiles_and_runs_on_cortex_m55(tmp_path):
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq")]
    model = make_model(nodes, [("x", np.int8, [1, 32])], [("y", np.float32, [1, 32])],
                       {"s": np.array(0.0625, np.float32), "z": np.array(-121, np.int8)})
    import onnx

    path = tmp_path / "dq.onnx"
    onnx.save(model, path)
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(tmp_path / "fw")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-600:]}"
    assert done.stdout.split()[-2:] == ["differing", "0"], done.stdout


def test_only_products_of_converted_integers_and_powers_of_two_are_fenced():
    from compiler.codegen.helium_fence import fence_fixed_point_products

    text = "\n".join([
        "define void @f(<8 x i32> %a, i32 %b, <4 x float> %c) {",
        "  %x = sitofp <8 x i32> %a to <8 x float>",
        "  %y = fmul <8 x float> %x, splat (float 1.562500e-02)",
        "  %s = uitofp i32 %b to float",
        "  %t = fmul contract float 0x3FB0000000000000, %s",
        "  %u = fmul float %s, 3.000000e-01",
        "  %v = fmul <4 x float> %c, splat (float 2.560000e+02)",
        "  ret void",
        "}"])
    fenced = fence_fixed_point_products(text)
    lines = fenced.splitlines()
    assert "  %y = fmul <8 x float> %x, %kiln.fence.0" in lines
    assert "  %t = fmul contract float %s, %kiln.fence.1" in lines
    assert "  %u = fmul float %s, 3.000000e-01" in lines  # not a power of two
    assert "  %v = fmul <4 x float> %c, splat (float 2.560000e+02)" in lines  # not converted
    assert "declare <8 x float> @llvm.arithmetic.fence.v8f32(<8 x float>)" in lines
    assert "declare float @llvm.arithmetic.fence.f32(float)" in lines
    assert fence_fixed_point_products(fenced) == fenced  # nothing left to fence
