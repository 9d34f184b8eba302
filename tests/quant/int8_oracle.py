"""onnxruntime as the oracle of Kiln's integer operators.

A QDQ model means float arithmetic between Dequantize and Quantize; every runtime that runs it
in integers (onnxruntime included, for the units its optimizer happens to fuse) chooses where.
So the oracle runs exactly the integer operators Kiln chose: the graph right after `to_integer`
is saved as ONNX (QLinearConv, com.microsoft QGemm, the float islands as they are) and
onnxruntime executes it with its graph optimizations off, one kernel per node.
"""

from __future__ import annotations

import shutil

import numpy as np

from compiler.driver import Compilation
from compiler.frontends.onnx.export import to_onnx
from compiler.ir.graph import Graph
from tests.conftest import SAMPLE_MODEL


def integer_stage(compiled: Compilation) -> Graph:
    """The graph as `to_integer` left it (the pipeline's snapshots are kept)."""
    compiled.passes(snapshots=True)
    return compiled.stage("to_integer")


def ort_session(graph: Graph):
    """An onnxruntime session running `graph` node for node (no fusion, one thread)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(to_onnx(graph).SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def qdq_session(path):
    """onnxruntime running a QDQ model file with every node unit fused into its integer operator.

    As it runs on Arm. On x86 its optimizer fuses an int8 unit only after moving its tensors to
    uint8, which it does for a QuantizeLinear with one reader alone: the two readers of a
    residual block's input then run DequantizeLinear, float Conv, QuantizeLinear, whose float
    accumulation rounds apart from integer arithmetic. `session.qdqisint8allowed` is its switch
    for the int8 kernels on x86 too.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.qdqisint8allowed", "1")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def u8s8_inexact_reason() -> str | None:
    """Why onnxruntime's uint8-activation kernels are not an exact oracle on this CPU, or None.

    On x86 without VNNI (AVX-512 VNNI or AVX-VNNI) onnxruntime's u8s8 GEMM multiplies with
    VPMADDUBSW, which saturates its 16-bit pair sums (the digits CNN with uint8 activations
    differs in 380 of 400 outputs on an AVX2-only CPU); with VNNI the sums are exact int32.
    """
    from compiler.codegen.targets import host_cpu_features

    if host_cpu_features() & {"avx512vnni", "avxvnni"}:
        return None
    return ("onnxruntime's u8s8 kernels saturate 16-bit sums on x86 without VNNI, so its "
            "uint8-activation results are not exact on this CPU")


def differing(ours: np.ndarray, want: np.ndarray) -> int:
    """Elements that differ (integers compared exactly; dtype and shape must agree)."""
    assert ours.dtype == want.dtype and ours.shape == want.shape, (ours.dtype, want.dtype)
    return int(np.count_nonzero(ours.astype(np.int64) != want.astype(np.int64)))


def quantize_digits(folder) -> dict:
    """The bundled digits CNN quantized by onnxruntime's quantize_static, per-channel int8,
    in both formats: {"QDQ": path, "QOperator": path} in `folder`."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Images(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            self.feeds = iter([{"image": rng.random((1, 1, 8, 8)).astype(np.float32)}
                               for _ in range(16)])

        def get_next(self):
            return next(self.feeds, None)

    # quantize_static writes a shape-inferred copy beside its input: work on a private copy,
    # so parallel test workers never share (or delete) each other's file.
    source = folder / "digits_float.onnx"
    shutil.copyfile(SAMPLE_MODEL, source)
    paths = {}
    for form in (QuantFormat.QDQ, QuantFormat.QOperator):
        paths[form.name] = folder / f"digits_{form.name}.onnx"
        quantize_static(str(source), str(paths[form.name]), Images(), quant_format=form,
                        per_channel=True, activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8)
    return paths
