"""The dot-product kernels of Cortex-M cores (Helium VMLADAVA, DSP SMLAD, the scalar
multiply-accumulates of cores without either) give the interpreter's bytes, under QEMU, for the
shapes that exercise them.

Convolutions with padding cut windows at every border (the input zero point is folded per
border class), strides, 1x1, 3x3 and 5x4 filters, depths that are multiples of 16 and of 8
only, shallow inputs gathered into columns (1, 3 and 6 channels), fused activations; fully
connected layers of several depths, depthwise blocks. Each case runs a batch of two seeded
inputs under both requantization rules on cortex-m7 (DSP), cortex-m55 (Helium) and cortex-m3
(scalar).

The x86 levels' kernels run on 50 seeded inputs where this CPU has the level's features; the
AVX-512 VNNI kernels also run on any AVX2 CPU with VPDPBUSD emulated, so their tiling, borders
and zero-point folds are checked on every machine. A level only compiled is named in the
terminal summary (tests/conftest.py), never skipped silently.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from compiler.codegen.table import lookup
from compiler.codegen.targets import DotProduct, get_target
from compiler.driver import compilation, compile_graph
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.qmath.requant import REQUANT_KEY
from tests.codegen import firmware
from tests.codegen.objects import check_int8_object
from tests.tflite.oracles import quantized
from tests.tflite.writer import Model, Op, T, write

SAME, VALID = 0, 1
MACHINES = {t: firmware.board_for(t).qemu_machine
            for t in ("cortex-m7", "cortex-m55", "cortex-m3")}


def _conv(cin: int, cout: int, kernel: int | tuple[int, int], stride: int, padding: int,
          activation: int, zx: int = 9, size: tuple[int, int] = (9, 6)) -> bytes:
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    rng = np.random.default_rng(cin * 100 + cout + kh + kw + stride)
    h, w = size
    if padding == SAME:
        oh, ow = -(-h // stride), -(-w // stride)
    else:
        oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    ws = rng.uniform(0.005, 0.03, cout).tolist()
    wshape = (cout, kh, kw, cin)
    return write(Model(
        [quantized("x", (2, h, w, cin), 0.04, zx),
         T("w", wshape, "int8", rng.integers(-127, 128, wshape), scale=ws,
           zero_point=[0] * cout, axis=0),
         T("b", (cout,), "int32", rng.integers(-800, 800, cout),
           scale=[0.04 * s for s in ws], zero_point=[0] * cout),
         quantized("y", (2, oh, ow, cout), 0.05, -7)],
        [Op("CONV_2D", [0, 1, 2], [3], ("Conv2DOptions", {
            "Padding": padding, "StrideH": stride, "StrideW": stride,
            "FusedActivationFunction": activation}))], [0], [3]))


def _fully_connected(depth: int, units: int, zx: int = -9) -> bytes:
    rng = np.random.default_rng(depth + units)
    return write(Model(
        [quantized("x", (2, depth), 0.05, zx),
         T("w", (units, depth), "int8", rng.integers(-127, 128, (units, depth)),
           scale=[0.01], zero_point=[0]),
         T("b", (units,), "int32", rng.integers(-3000, 3000, units), scale=[0.0005],
           zero_point=[0]),
         quantized("y", (2, units), 0.04, 11)],
        [Op("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {
            "FusedActivationFunction": 1}))], [0], [3]))


CASES = {
    "conv3x3-same-c16": lambda: _conv(16, 8, 3, 1, SAME, 1),
    "conv3x3-same-stride2-c24": lambda: _conv(24, 4, 3, 2, SAME, 3),
    "conv3x3-valid-c8": lambda: _conv(8, 12, 3, 1, VALID, 0),
    "conv1x1-c32": lambda: _conv(32, 8, 1, 1, VALID, 1),
    # Too shallow for depth dot products: the window is gathered into a column first.
    "conv3x3-same-stride2-c3": lambda: _conv(3, 8, 3, 2, SAME, 3),
    "conv5x4-same-stride2-c1": lambda: _conv(1, 12, (5, 4), 2, SAME, 1),
    "conv3x3-valid-c6": lambda: _conv(6, 4, 3, 1, VALID, 0),
    "fc-64x12": lambda: _fully_connected(64, 12),
    "fc-8x4": lambda: _fully_connected(8, 4),
    "fc-24x8": lambda: _fully_connected(24, 8),
    "depthwise-same-c16": lambda: _depthwise(16, 1, SAME),
    "depthwise-valid-stride2-c32": lambda: _depthwise(32, 2, VALID),
}


@pytest.mark.parametrize("target", sorted(MACHINES))
@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_dot_kernels_equal_the_interpreter_on_cortex_m(case, rule, target, tmp_path):
    firmware.require_tools()
    graph = load_model(CASES[case]())
    graph.metadata[REQUANT_KEY] = rule
    prepared = compilation(graph).prepared
    core = get_target(target)
    dot_node = next(n for n in prepared.nodes if n.op in ("QLinearConv", "QGemm"))
    emitter = lookup(dot_node, core)[0].__name__
    assert emitter.endswith(("_dot", "_im2col")), emitter  # the case exercises them
    net = compile_graph(prepared, core, name="net")
    rng = np.random.default_rng(11)
    feeds = {v.name: rng.integers(-128, 128, v.type.shape).astype(v.type.dtype)
             for v in prepared.inputs}
    elf = firmware.build(net, firmware.main_c(net, feeds), MACHINES[target], tmp_path)
    stdout, _ = firmware.run(elf, MACHINES[target])
    got = firmware.parse_outputs(net, stdout)
    want = run(prepared, feeds)
    for value in prepared.outputs:
        differing = int(np.count_nonzero(got[value.name].astype(np.int64)
                                         != want[value.name].astype(np.int64)))
        assert differing == 0, f"{differing} of {want[value.name].size} elements differ"


def _depthwise(channels: int, stride: int, padding: int, low: int = -127) -> bytes:
    rng = np.random.default_rng(channels + stride)
    h, w = 9, 7
    oh, ow = (-(-h // stride), -(-w // stride)) if padding == SAME else (
        (h - 3) // stride + 1, (w - 3) // stride + 1)
    ws = rng.uniform(0.005, 0.03, channels).tolist()
    weights = rng.integers(low, 128, (1, 3, 3, channels))
    weights[0, :, :, 0] = low  # a whole window at the lowest weight
    return write(Model(
        [quantized("x", (2, h, w, channels), 0.04, -5),
         T("w", (1, 3, 3, channels), "int8", weights,
           scale=ws, zero_point=[0] * channels, axis=3),
         T("b", (channels,), "int32", rng.integers(-800, 800, channels),
           scale=[0.04 * s for s in ws], zero_point=[0] * channels),
         quantized("y", (2, oh, ow, channels), 0.05, 3)],
        [Op("DEPTHWISE_CONV_2D", [0, 1, 2], [3], ("DepthwiseConv2DOptions", {
            "Padding": padding, "StrideH": stride, "StrideW": stride, "DepthMultiplier": 1,
            "FusedActivationFunction": 3}))], [0], [3]))


# The host's kernels: x86 dot-product convolutions (16 and 8 output lanes, gathered shallow
# inputs) and fully connected layers, depthwise blocks.
HOST_CASES = {
    "conv3x3-same-c16-o32": (lambda: _conv(16, 32, 3, 1, SAME, 1), "emit_qconv_lanes"),
    "conv3x3-same-stride2-c8-o24": (lambda: _conv(8, 24, 3, 2, SAME, 3), "emit_qconv_lanes"),
    "conv1x1-c32-o64": (lambda: _conv(32, 64, 1, 1, VALID, 0), "emit_qconv_lanes"),
    "conv3x3-same-stride2-c3-o16": (lambda: _conv(3, 16, 3, 2, SAME, 1), "emit_qconv_lanes"),
    "conv5x4-same-c1-o8": (lambda: _conv(1, 8, (5, 4), 1, SAME, 1), "emit_qconv_lanes"),
    "depthwise-same-c32": (lambda: _depthwise(32, 1, SAME), "emit_qdepthwise_dot"),
    "depthwise-valid-stride2-c64": (lambda: _depthwise(64, 2, VALID), "emit_qdepthwise_dot"),
    # A weight of -128: two taps' int16 products could overflow, so each tap is widened alone.
    "depthwise-same-c16-w-128": (lambda: _depthwise(16, 1, SAME, low=-128),
                                 "emit_qdepthwise_dot"),
    "fc-64x16": (lambda: _fully_connected(64, 16), "emit_qgemm_lanes"),
    "fc-19x8": (lambda: _fully_connected(19, 8), "emit_qgemm_lanes"),  # a partial last word
    "fc-640x128": (lambda: _fully_connected(640, 128), "emit_qgemm_lanes"),
    # What the VNNI kernels share with every other: the input zero point folded with the sign
    # flip (-128: nothing to fold; 0; 127), windows cut on both sides (a 7x7 filter on 5x4),
    # rows and columns a stride leaves out, words of one and three channels (one chain),
    # 8 lanes in groups of one, gathered columns padded with -128, partial last words of 1,
    # 2 and 3 bytes (the last one the only word).
    "conv3x3-same-c4-o16-zx-128": (lambda: _conv(4, 16, 3, 1, SAME, 0, zx=-128),
                                   "emit_qconv_lanes"),
    "conv3x3-same-c12-o8-zx127": (lambda: _conv(12, 8, 3, 1, SAME, 1, zx=127),
                                  "emit_qconv_lanes"),
    "conv3x3-valid-stride2-c16-o40-zx0": (lambda: _conv(16, 40, 3, 2, VALID, 0, zx=0),
                                          "emit_qconv_lanes"),
    "conv7x7-same-c8-o48-5x4": (lambda: _conv(8, 48, 7, 1, SAME, 1, zx=-57, size=(5, 4)),
                                "emit_qconv_lanes"),
    "conv5x5-same-stride2-c2-o128-zx-128": (lambda: _conv(2, 128, 5, 2, SAME, 0, zx=-128),
                                            "emit_qconv_lanes"),
    "conv3x3-same-c3-o8-zx127": (lambda: _conv(3, 8, 3, 1, SAME, 0, zx=127), "emit_qconv_lanes"),
    "fc-3x8-zx-128": (lambda: _fully_connected(3, 8, zx=-128), "emit_qgemm_lanes"),
    "fc-5x16-zx127": (lambda: _fully_connected(5, 16, zx=127), "emit_qgemm_lanes"),
    "fc-18x24-zx0": (lambda: _fully_connected(18, 24, zx=0), "emit_qgemm_lanes"),
    "fc-36x80-zx100": (lambda: _fully_connected(36, 80, zx=100), "emit_qgemm_lanes"),
}


# The x86 levels whose kernels these cases exercise, compiled on every machine: VPDPBUSD where
# the level has VNNI, VPMADDWD on sign-extended int16 pairs elsewhere.
X86_LEVELS = ("x86-64-v3", "alderlake", "skylake-avx512", "icelake-server")


# AVX-512 VNNI's kernels as any AVX2 CPU runs them: x86-64-v3 with the VNNI emitters chosen
# and only VPDPBUSD replaced by portable IR of the same sum. The weights' arrangement, tiling,
# border classes, zero-point folds and gathered columns are icelake-server's own, checked on
# machines where its objects cannot run (the float64 requantization's last step differs: a
# floor and a conversion where AVX-512 converts rounding down). The bundle names x86-64-v3:
# it runs where that does.
VNNI_ON_AVX2 = replace(get_target("x86-64-v3"), int8_dot=DotProduct.VNNI,
                       int8_dot_emulated=True)


def _prepared(case: str, rule: str):
    """The case's graph under `rule`, and its prepared form with the layer the case is about."""
    graph = load_model(HOST_CASES[case][0]())
    graph.metadata[REQUANT_KEY] = rule
    prepared = compilation(graph).prepared
    return graph, prepared, next(n for n in prepared.nodes if n.op in ("QLinearConv", "QGemm"))


def _runs_or_is_refused(graph, net, target, folder, record_property) -> None:
    """The bundle gives the interpreter's bytes on 50 inputs where this CPU runs `target`;
    elsewhere the compiled object is refused in one sentence, and the terminal summary names
    the test and the features this CPU lacks (the `kernels` property, tests/conftest.py)."""
    from compiler.codegen.host import HostNet
    from compiler.codegen.targets import missing_on_this_cpu
    from compiler.errors import KilnError
    from tests.codegen.test_int8_kernels import _bundle_equals_interpreter

    missing = missing_on_this_cpu(target)
    if not missing:
        emulated = " (VPDPBUSD emulated)" if target.int8_dot_emulated else ""
        record_property("kernels", f"ran {target.name}{emulated}")
        assert _bundle_equals_interpreter(graph, folder, seeds=range(50), target=target) == 0
        return
    with pytest.raises(KilnError, match=f"compiled for {target.name}, which needs"):
        HostNet(net)
    record_property("kernels", f"this CPU lacks {', '.join(missing)}")


@pytest.mark.parametrize("level", X86_LEVELS)
@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("case", sorted(HOST_CASES))
def test_x86_int8_kernels_equal_the_interpreter(case, rule, level, tmp_path, record_property):
    """Each x86 level's kernels (VPDPBUSD with VNNI, VPMADDWD without) give the interpreter's
    bytes on 50 inputs where this CPU runs them. Where it cannot (an AVX2-only CPU and the
    AVX-512 levels), the object must still hold the level's instructions and be refused in
    one sentence instead of faulting; the AVX2 level runs on every machine that has AVX2,
    AVX-512 ones included."""
    from compiler.codegen.llvm import emit_assembly

    target = get_target(level)
    graph, prepared, layer = _prepared(case, rule)
    assert lookup(layer, target)[0].__name__ == HOST_CASES[case][1]
    net = compile_graph(prepared, target)
    if HOST_CASES[case][1] != "emit_qdepthwise_dot":
        instruction = "vpdpbusd" if target.int8_dot is DotProduct.VNNI else "vpmaddwd"
        assert instruction in emit_assembly(net.llvm_ir, target)
    _runs_or_is_refused(graph, net, target, tmp_path, record_property)


def test_host_depthwise_sums_two_taps_in_int16_only_when_no_weight_is_minus_128():
    """Two int16 products of int8 values overflow only when both are -128 * -128: with a
    weight of -128 each tap is widened alone, otherwise taps are summed in pairs."""
    target = get_target("x86-64-v3")
    for case, paired in (("depthwise-same-c32", True), ("depthwise-same-c16-w-128", False)):
        _, prepared, _ = _prepared(case, "tflite")
        text = compile_graph(prepared, target).llvm_ir
        assert bool(re.search(r"add nsw <\d+ x i16>", text)) == paired, case


@pytest.mark.parametrize("rule", ["tflite", "onnx"])
@pytest.mark.parametrize("case", sorted(HOST_CASES))
def test_vnni_kernels_equal_the_interpreter_on_any_avx2_cpu(case, rule, tmp_path,
                                                            record_property):
    """The VNNI emitters, VPDPBUSD emulated, give the interpreter's bytes on 50 inputs on
    every AVX2 CPU, and their object holds no AVX-512 instruction: a wrong fold, border or
    tile in them fails here whether or not this CPU has AVX-512 VNNI."""
    from compiler.codegen.llvm import emit_assembly

    graph, prepared, layer = _prepared(case, rule)
    assert lookup(layer, VNNI_ON_AVX2)[0].__name__ == HOST_CASES[case][1]
    net = compile_graph(prepared, VNNI_ON_AVX2)
    avx512 = re.findall(r"vpdpbusd|%zmm\d+|%k[1-7]\b", emit_assembly(net.llvm_ir, VNNI_ON_AVX2))
    assert not avx512, sorted(set(avx512))
    _runs_or_is_refused(graph, net, VNNI_ON_AVX2, tmp_path, record_property)


@pytest.mark.parametrize("case", sorted({**CASES, **HOST_CASES}))
def test_every_case_compiles_for_every_target(case):
    """Each core's specialized kernels, and the plain ones of cores without them (M0+, M3,
    AArch64, RISC-V), compile for these shapes."""
    from compiler.codegen.targets import target_names

    build = CASES.get(case) or HOST_CASES[case][0]
    prepared = compilation(load_model(build())).prepared
    for target in target_names():
        target = get_target(target)
        check_int8_object(compile_graph(prepared, target), target, dot_used=False)
