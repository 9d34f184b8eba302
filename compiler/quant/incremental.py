"""Re-evaluating a quantized model after a range changes, recomputing only what depends on it.

The quantization workbench lets the user drag one tensor's range and must show the new errors
at once. `IncrementalEvaluator` keeps, for a fixed set of samples: every float tensor of the
calibration graph (computed once) and every value of the current QDQ graph (the fake-quantized
model: float operators between quantize-dequantize pairs). A range change rebuilds the QDQ
graph from the profile with the new override (constants only, milliseconds), marks the nodes
whose constant inputs changed (that pair, and the biases quantized with its scale), and re-runs
those and everything downstream; every other value is reused. Per-tensor errors are
recomputed only for tensors whose values changed, the output error always.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field, replace

import numpy as np

from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Node
from compiler.quant.batched import fake_quantize, run_node
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.evaluate import TensorReport, quantized_pairs, tensor_report
from compiler.quant.metrics import signal_power, sqnr_db, top1_agreement
from compiler.quant.profile import Profile
from compiler.quant.profiler import calibration_graph
from compiler.quant.quantize import RENAMED_KEY, Options, quantize

DEFAULT_SAMPLES = 100


@dataclass
class Evaluation:
    """The errors of the current quantization on the evaluator's samples."""

    tensors: dict[str, TensorReport]  # by float tensor name
    output_sqnr: dict[str, float]
    top1_agreement: float
    recomputed: int  # nodes run for this evaluation
    seconds: float
    changed: list[str] = field(default_factory=list)  # tensors whose errors were recomputed


class IncrementalEvaluator:
    """A float model, its profile and quantization options, evaluated on fixed samples."""

    def __init__(self, graph: Graph, profile: Profile, data: CalibrationData,
                 options: Options | None = None, samples: int = DEFAULT_SAMPLES):
        self.graph, self.options = graph, options or Options()
        self.profile = copy.deepcopy(profile)
        self.count = min(samples, len(data))
        self._input = data.input_name
        stacked = data.samples[:self.count]
        self._feed = stacked.reshape(self.count, *graph.inputs[0].type.shape)
        self.corrections: dict[str, np.ndarray] = {}
        self._float = self._run_all(calibration_graph(graph, self.profile.equalized))
        self.qdq = quantize(graph, self.profile, self.options)
        self._runtime = _runtime_values(self.qdq)
        self._values = self._run_all(self.qdq, self._runtime)
        self._reports: dict[str, TensorReport] = {}
        self._signal: dict[str, float] = {}  # float tensors' sums of squares: they never change
        self.evaluation = self._evaluate(list(self._values), len(self.qdq.nodes), 0.0)

    def set_range(self, tensor: str, low: float, high: float) -> Evaluation:
        """Quantize `tensor` over [low, high] from now on; the new errors."""
        self.profile.set_override(tensor, low, high)
        return self._requantize()

    def clear_range(self, tensor: str) -> Evaluation:
        """Back to the calibration method's range for `tensor`; the new errors."""
        self.profile.overrides.pop(tensor, None)
        return self._requantize()

    def set_corrections(self, corrections: dict[str, np.ndarray]) -> Evaluation:
        """Add these to the float biases (by node) before quantizing; the new errors."""
        self.corrections = {k: np.asarray(v, np.float64) for k, v in corrections.items()}
        return self._requantize()

    def update(self, overrides: dict[str, dict[str, float]], keep_float: tuple[str, ...] = ()
               ) -> Evaluation:
        """Take all of a caller's edits at once (the GUI's current ranges and float tensors)."""
        for name in overrides:
            if name not in self.profile.tensors:
                raise KilnError(f"the profile has no tensor named {name!r}")
        self.profile.overrides = {k: dict(v) for k, v in overrides.items()}
        self.options = replace(self.options, keep_float=tuple(keep_float))
        return self._requantize()

    def warm_up(self) -> None:
        """Run every node once more in the calling thread.

        The thread's allocator then holds the memory later re-evaluations need (the first one
        otherwise pays for it).
        """
        self._run_all(self.qdq, self._runtime)

    def set_options(self, options: Options) -> Evaluation:
        """Quantize with other options (method, schema, what stays float); the new errors."""
        self.options = options
        return self._requantize()

    def float_value(self, name: str) -> np.ndarray:
        """A tensor of the float calibration graph on the samples, stacked."""
        return self._float[name]

    def quantized_value(self, name: str) -> np.ndarray:
        """A tensor of the current QDQ graph on the samples, stacked."""
        return self._values[name]

    def _requantize(self) -> Evaluation:
        start = time.perf_counter()
        new = quantize(self.graph, self.profile, self.options, self.corrections)
        runtime = _runtime_values(new)
        old_nodes = {n.name: n for n in self.qdq.nodes}
        changed: set[str] = set()  # names of values recomputed

        def stale(node: Node) -> bool:
            old = old_nodes.get(node.name)
            return (old is None or _constants_differ(node, old)
                    or any(v is not None and v.name in changed for v in node.inputs))

        ran = self._execute(new, self._values, runtime, stale, changed)
        self.qdq, self._runtime = new, runtime
        self.evaluation = self._evaluate(sorted(changed), ran, time.perf_counter() - start)
        return self.evaluation

    # -- running ------------------------------------------------------------------------------

    def _run_all(self, graph: Graph, runtime: set[str] | None = None) -> dict[str, np.ndarray]:
        values = {self._input: self._feed}
        runtime = _runtime_values(graph) if runtime is None else runtime
        self._execute(graph, values, runtime, lambda node: True, set())
        return values

    def _execute(self, graph: Graph, values: dict[str, np.ndarray], runtime: set[str],
                 stale, changed: set[str]) -> int:
        """Run the nodes `stale` picks, in order, into `values`; returns how many ran.

        A quantize-dequantize pair runs as one fake quantization: the integer tensor between
        them is read by nothing else, so it is never made.
        """
        readers: dict[str, list[Node]] = {}
        for node in graph.nodes:
            for value in node.inputs:
                if value is not None:
                    readers.setdefault(value.name, []).append(node)
        fused: set[str] = set()  # DequantizeLinear nodes already computed with their pair
        ran = 0
        for node in graph.nodes:
            if node.name in fused or not stale(node):
                continue
            arrays, stacked = self._operands(node, values, runtime)
            after = readers.get(node.output.name, []) if node.op == "QuantizeLinear" else []
            if len(after) == 1 and after[0].op == "DequantizeLinear" and stacked[0]:
                real = fake_quantize(arrays[0], node, after[0])
                if real is not None:
                    values[after[0].output.name] = real
                    changed.add(after[0].output.name)
                    fused.add(after[0].name)
                    ran += 2
                    continue
            for value, array in zip(node.outputs, run_node(node, arrays, self.count, stacked)):
                values[value.name] = array
                changed.add(value.name)
            ran += 1
        return ran

    @staticmethod
    def _operands(node: Node, values: dict[str, np.ndarray], runtime: set[str]
                  ) -> tuple[list, list[bool]]:
        """The node's input arrays, and which of them are stacked per sample."""
        arrays, stacked = [], []
        for value in node.inputs:
            if value is None:
                arrays.append(None)
            elif isinstance(value, Constant):
                arrays.append(value.data)
            else:
                arrays.append(values[value.name])
            stacked.append(value is not None and value.name in runtime)
        return arrays, stacked

    # -- errors -------------------------------------------------------------------------------

    def _evaluate(self, changed: list[str], ran: int, seconds: float) -> Evaluation:
        pairs = quantized_pairs(self.qdq)
        renamed = self.qdq.metadata.get(RENAMED_KEY, {})
        touched = set(changed)
        recomputed = []
        for name, (twin, scale, zero, dtype) in pairs.items():
            shown = renamed.get(name, name)
            if twin in touched or shown not in self._reports:
                if shown not in self._signal:
                    self._signal[shown] = signal_power(self._float[shown])
                self._reports[shown] = tensor_report(
                    shown, self._float[shown].reshape(-1), self._values[twin].reshape(-1),
                    scale, zero, dtype, self._signal[shown])
                recomputed.append(shown)
        for gone in set(self._reports) - {renamed.get(n, n) for n in pairs}:
            del self._reports[gone]  # kept in float now
        outputs = [v.name for v in self.graph.outputs]
        sqnr = {name: sqnr_db(self._float[name], self._values[name]) for name in outputs}
        first = outputs[0]
        agree = top1_agreement(self._float[first].reshape(self.count, -1),
                               self._values[first].reshape(self.count, -1))
        # In the graph's order, whatever order the reports were made in: a tensor kept in
        # float and quantized again (an undo) comes back to its place, not to the end.
        reports = {renamed.get(n, n): self._reports[renamed.get(n, n)] for n in pairs}
        return Evaluation(reports, sqnr, agree, ran, seconds, recomputed)


def _runtime_values(graph: Graph) -> set[str]:
    """The values that differ per sample: the inputs and what is computed from them.

    Not a weight's DequantizeLinear: computed once and shared.
    """
    runtime = {v.name for v in graph.inputs}
    for node in graph.nodes:
        if any(v is not None and v.name in runtime for v in node.inputs):
            runtime.update(v.name for v in node.outputs)
    return runtime


def _constants_differ(node: Node, old: Node) -> bool:
    """Whether a node's constant inputs (scales, zero points, quantized biases) changed."""
    if node.op != old.op or len(node.inputs) != len(old.inputs) or node.attrs != old.attrs:
        return True
    for a, b in zip(node.inputs, old.inputs):
        if (a is None) != (b is None) or (a is not None and a.name != b.name):
            return True
        if isinstance(a, Constant) and isinstance(b, Constant) and (
                a.data.dtype != b.data.dtype or a.data.shape != b.data.shape
                or not np.array_equal(a.data, b.data)):
            return True
    return False
