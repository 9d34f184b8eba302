"""AArch64 and RISC-V 32 objects run, not only compile: int8 networks under qemu-user give the
interpreter's bytes (`compiler.harness.usermode` links each with a small LLVM IR program and
`ld.lld`)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from compiler.codegen.llvm import emit_assembly
from compiler.codegen.table import lookup
from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.frontends.load import load_model
from compiler.harness import usermode
from compiler.interpreter import run
from compiler.qmath.requant import REQUANT_KEY
from tests.codegen.test_int8_dot_kernels import CASES, HOST_CASES
from tests.codegen.test_int8_kernels import INT8_MODELS
from tests.conftest import shared_models
from tests.samples import int8_sample

# AArch64 without and with the dot product (SDOT kernels; QEMU's "max" CPU has it).
TARGETS = ["aarch64", "aarch64-dotprod", "riscv32"]


def _require(target: str) -> None:
    missing = usermode.missing_tools(get_target(target).triple.split("-")[0])
    if not missing:
        return
    message = (f"{' and '.join(missing)} not found (Debian packages: "
               f"{usermode.PACKAGES}; `make test` installs them when run as root)")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + "; CI must have them")
    pytest.skip(message)


def _equal(prepared, target: str, feeds, folder) -> None:
    net = compile_graph(prepared, get_target(target))
    got = usermode.run(net, feeds, folder)
    want = run(prepared, feeds)
    for value in prepared.outputs:
        differing = int(np.count_nonzero(got[value.name].astype(np.int64)
                                         != want[value.name].astype(np.int64)))
        assert differing == 0, f"{value.name}: {differing} of {want[value.name].size} differ"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("case", sorted({**CASES, **HOST_CASES}))
def test_int8_layers_are_exact_on_aarch64_and_riscv32(case, rule, target, tmp_path):
    _require(target)
    build = CASES.get(case) or HOST_CASES[case][0]
    graph = load_model(build())
    graph.metadata[REQUANT_KEY] = rule
    prepared = compilation(graph).prepared
    if target == "aarch64-dotprod" and case in HOST_CASES:  # the hosts' kernels, on SDOT
        layer = next(n for n in prepared.nodes if n.op in ("QLinearConv", "QGemm"))
        emitter = lookup(layer, get_target(target))[0].__name__
        assert emitter == HOST_CASES[case][1]
        if emitter != "emit_qdepthwise_dot":
            assert "\tsdot\t" in emit_assembly(compile_graph(prepared, get_target(
                target)).llvm_ir, get_target(target))
    rng = np.random.default_rng(5)
    feeds = {v.name: rng.integers(-128, 128, v.type.shape).astype(v.type.dtype)
             for v in prepared.inputs}
    _equal(prepared, target, feeds, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", ["tflite", "onnx"])
@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_models_are_exact_on_aarch64_and_riscv32(name, source, target, tmp_path):
    """The four int8 MLPerf Tiny models on their real sample input."""
    _require(target)
    folder = shared_models()
    prepared = compilation(load_model(folder / source / f"{name}.{source}")).prepared
    x = prepared.inputs[0]

    def quantization():  # the .tflite twin's input parameters (an ONNX int8 input has none)
        twin = load_model(folder / "tflite" / f"{name}.tflite").inputs[0].type.quant
        return twin.scale[0], twin.zero_point[0]

    _equal(prepared, target, {x.name: int8_sample(name, x.type.shape, folder, quantization)},
           tmp_path)
