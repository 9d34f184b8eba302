"""onnxruntime as the oracle of Kiln's integer operators.

A QDQ model means float arithmetic between Dequantize and Quantize; every runtime that runs it
in integers (onnxruntime included, for the units its optimizer happens to fuse) chooses where.
So the oracle runs exactly the integer operators Kiln chose: the graph right after `to_integer`
is saved as ONNX (QLinearConv, com.microsoft QGemm, the float islands as they are) and
onnxruntime executes it with its graph optimizations off, one kernel per node.
"""

from __future__ import annotations

import numpy as np

from compiler.driver import Compilation
from compiler.frontends.onnx.export import to_onnx
from compiler.ir.graph import Graph


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


def differing(ours: np.ndarray, want: np.ndarray) -> int:
    """Elements that differ (integers compared exactly; dtype and shape must agree)."""
    assert ours.dtype == want.dtype and ours.shape == want.shape, (ours.dtype, want.dtype)
    return int(np.count_nonzero(ours.astype(np.int64) != want.astype(np.int64)))
