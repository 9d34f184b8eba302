"""Profiling: run the compiled float model on calibration samples and record every tensor.

The calibration graph (the loaded float graph cleaned and folded: the tensors the quantizer will
see and rewrite) gets every value a node computes as an extra graph output, so each keeps a
buffer of its own in the bundle; the compiled host code runs sample by sample, and each tensor's
values go into its min, max and Glow histogram batch by batch. Progress is reported and a cancel
request stops the run between samples.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from compiler.codegen.bundle import write_bundle
from compiler.codegen.host import HostNet
from compiler.driver import compilation, compile_graph
from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.passes import PassConfig, Pipeline, run_pipeline
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.histogram import DEFAULT_BINS, Histogram
from compiler.quant.profile import Profile, TensorRange, graph_hash

BATCH = 64  # samples whose values enter the histograms together
# The passes that decide which float tensors will exist, with the operators still ONNX's (so
# quantize-dequantize pairs can go around them): cleanup, constant folding, BatchNorm folded
# into the convolution before it.
CALIBRATION_PASSES = ("remove_identity", "fold_constant_layout", "fold_constants",
                      "fold_batchnorm", "dce")


def calibration_graph(graph: Graph) -> Graph:
    """The float graph a profile describes and the quantizer rewrites."""
    pipeline = Pipeline([PassConfig(name) for name in CALIBRATION_PASSES])
    return run_pipeline(graph, pipeline, snapshots=False, diffs=False).graph


class Cancelled(KilnError):
    """The caller asked the profiling run to stop."""


def profiled_tensors(graph: Graph) -> list[str]:
    """The float tensors a profile covers, in graph order.

    The inputs and every node output computed from them: a weight dequantized from int8 is a
    constant, not an activation.
    """
    runtime = {id(v) for v in graph.inputs}
    names = [v.name for v in graph.inputs if v.type.dtype == "float32"]
    for node in graph.nodes:
        if any(v is not None and id(v) in runtime for v in node.inputs):
            runtime.update(id(v) for v in node.outputs)
            names += [v.name for v in node.outputs if v.type.dtype == "float32"]
    return list(dict.fromkeys(names))


def instrumented(graph: Graph) -> Graph:
    """A copy of `graph` whose outputs are every float tensor computed by a node, in order."""
    copy = graph.snapshot()
    wanted = set(profiled_tensors(copy))
    values = [v for n in copy.nodes for v in n.outputs if v.name in wanted]
    copy.outputs = list(dict.fromkeys([*copy.outputs, *values]))
    return copy


def profile_model(graph: Graph, data: CalibrationData, model: str = "", bins: int = DEFAULT_BINS,
                  progress: Callable[[int, int], None] | None = None,
                  cancelled: Callable[[], bool] | None = None) -> Profile:
    """Profile `graph` (a loaded model) on `data`: the tensors of its calibration graph."""
    final = calibration_graph(graph)
    probe = instrumented(final)
    net = compile_graph(compilation(probe).prepared, "host")
    histograms = {name: Histogram.empty(bins) for name in profiled_tensors(final)}
    inputs = {v.name for v in final.inputs}
    with tempfile.TemporaryDirectory(prefix="kiln-profile-") as folder:
        write_bundle(net, Path(folder))
        runner = HostNet.from_bundle(folder)
        try:
            views = runner.output_views()
            batch = {name: np.empty((BATCH, views[name].size if name in views
                                     else data.samples[0].size), np.float32)
                     for name in histograms}
            for start in range(0, len(data), BATCH):
                stop = min(start + BATCH, len(data))
                for row, feeds in enumerate(data.feeds(start, stop)):
                    if cancelled is not None and cancelled():
                        raise Cancelled("profiling cancelled")
                    runner.set_inputs(feeds)
                    runner.call()
                    for name, rows in batch.items():
                        source = feeds[name] if name in inputs else views[name]
                        rows[row] = source.reshape(-1)
                for name, rows in batch.items():
                    histograms[name].add(rows[:stop - start], name)
                if progress is not None:
                    progress(stop, len(data))
        finally:
            runner.close()
    tensors = {name: TensorRange(h.low, h.high, [int(c) for c in h.counts])
               for name, h in histograms.items()}
    return Profile(graph_hash(final), model, {"source": data.source, "samples": len(data)},
                   bins, tensors)
