"""Profiling: run the compiled float model on calibration samples and record every tensor.

The calibration graph (the loaded float graph cleaned and folded: the tensors the quantizer will
see and rewrite) gets every value a node computes as an extra graph output, so each keeps a
buffer of its own in the compiled network; the host code runs sample by sample, and compiled
accumulators (`binning`) take each tensor's values into its min, max and Glow histogram
straight from those buffers, each sample a batch. Progress is reported and a cancel
request stops the run between samples.
"""

from __future__ import annotations

from collections.abc import Callable

from compiler.codegen.host import HostNet
from compiler.driver import Options, compilation
from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.passes import PassConfig, Pipeline, run_pipeline
from compiler.quant.binning import BufferHistograms, CompiledHistogram
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.equalize import equalize
from compiler.quant.histogram import DEFAULT_BINS
from compiler.quant.profile import Profile, TensorRange, graph_hash

BATCH = 64  # samples between progress reports and cancel checks
# The passes that decide which float tensors will exist, with the operators still ONNX's (so
# quantize-dequantize pairs can go around them): cleanup, constant folding, BatchNorm folded
# into the convolution before it.
CALIBRATION_PASSES = ("remove_identity", "fold_constant_layout", "fold_constants",
                      "fold_batchnorm", "dce")


def calibration_graph(graph: Graph, equalized: bool = False) -> Graph:
    """The float graph a profile describes and the quantizer rewrites.

    With `equalized`, after cross-layer equalization of its convolution pairs.
    """
    pipeline = Pipeline([PassConfig(name) for name in CALIBRATION_PASSES])
    folded = run_pipeline(graph, pipeline, snapshots=False, diffs=False).graph
    return equalize(folded)[0] if equalized else folded


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
                  cancelled: Callable[[], bool] | None = None,
                  equalized: bool = False) -> Profile:
    """Profile `graph` (a loaded model) on `data`: the tensors of its calibration graph.

    Each sample is one batch of every tensor's histogram (as each inference is in Glow); the
    compiled accumulators read the network's output buffers where they are.
    """
    final = calibration_graph(graph, equalized)
    probe = instrumented(final)
    # Ranges and histograms do not depend on the elements' order: tensors computed
    # channels-last are read as they are, without a Transpose back to the model's layout.
    probe.free_output_order = True
    # Compiled for LLVM's speed (a profile compiles once and runs each sample once): kernels
    # kept apart (inlined into one entry function they cost a quarter more time to optimize)
    # and compact (convolution edges in guarded loops: 40 % less compile time, 4 % slower).
    net = compilation(probe).net(Options("host", separate_kernels=True, fast_compile=True))
    names = profiled_tensors(final)
    histograms = {name: CompiledHistogram(name, bins) for name in names}
    inputs = {v.name for v in final.inputs}
    runner = HostNet(net)
    try:
        views = runner.output_views()
        buffers = BufferHistograms([(histograms[name], views[name].ctypes.data,
                                     views[name].size) for name in names if name not in inputs])
        fed = [histograms[name] for name in names if name in inputs]
        for start in range(0, len(data), BATCH):
            stop = min(start + BATCH, len(data))
            for feeds in data.feeds(start, stop):
                if cancelled is not None and cancelled():
                    raise Cancelled("profiling cancelled")
                runner.set_inputs(feeds)
                runner.call()
                for histogram in fed:
                    histogram.add(feeds[histogram.name])
                buffers.add()
            if progress is not None:
                progress(stop, len(data))
    finally:
        runner.close()
    tensors = {}
    for name, compiled in histograms.items():
        h = compiled.histogram()
        tensors[name] = TensorRange(h.low, h.high, [int(c) for c in h.counts])
    return Profile(graph_hash(final), model, {"source": data.source, "samples": len(data)},
                   bins, tensors, equalized=equalized)
