"""Benchmark: where a compiled model's time goes, kernel by kernel.

Every kernel of the model's final graph (after the pipeline and the prepare stage; a fused
Conv+Add counts as one) is cut out as a graph of its own, compiled for this host exactly as in
the whole network, and timed alone (median of medians, warm caches). The table shows each
kernel's time, MACs, GFLOP/s and share of the sum, slowest first.
Run `python tests/bench/bench_layers.py MODEL.onnx` from the project root.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for the compiler when run as a script

from compiler.codegen.host import HostNet  # noqa: E402
from compiler.driver import compilation  # noqa: E402
from compiler.frontends.onnx import load_onnx  # noqa: E402
from compiler.inputs import random_inputs  # noqa: E402
from compiler.ir.graph import Constant, Graph  # noqa: E402
from compiler.passes.pipeline import Pipeline  # noqa: E402
from compiler.stats import node_macs  # noqa: E402


def _alone(graph: Graph, names: tuple[str, ...]) -> Graph:
    """The nodes `names` (a kernel) as a graph: runtime inputs become graph inputs."""
    nodes = [n for n in graph.nodes if n.name in names]
    made = {id(out) for n in nodes for out in n.outputs}
    cut = Graph(f"{names[0]}_alone", graph.opset)
    mapping = {}
    for node in nodes:
        for value in node.inputs:
            if value is None or id(value) in mapping or id(value) in made:
                continue
            mapping[id(value)] = (cut.add_constant(value.name, value.data, value.type)
                                  if isinstance(value, Constant)
                                  else cut.add_input(value.name, value.type))
        copy = cut.add_node(node.op, [None if v is None else mapping[id(v)] for v in node.inputs],
                            [out.type for out in node.outputs], dict(node.attrs), node.name,
                            [out.name for out in node.outputs])
        for old, new in zip(node.outputs, copy.outputs):
            mapping[id(old)] = new
    cut.outputs = [mapping[id(nodes[-1].outputs[0])]]
    return cut


def _time(net: HostNet, runs: int = 400, repeats: int = 5) -> float:
    medians = []
    for _ in range(repeats):
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            net.call()
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return statistics.median(medians) * 1e6


def main(model: str) -> int:
    """Print the per-kernel table of `model`."""
    compiled = compilation(load_onnx(model))
    prepared = compiled.prepared
    macs_of = node_macs(prepared)
    ids = {n.name: n.id for n in prepared.nodes}
    rows = []
    for step in compiled.kernels().steps:
        cut = _alone(prepared, step.nodes)
        with tempfile.TemporaryDirectory(prefix="kiln-layer-") as folder:
            compilation(cut, Pipeline([])).bundle(folder)
            net = HostNet.from_bundle(folder)
            try:
                net.run(random_inputs(cut, 0))
                us = _time(net)
            finally:
                net.close()
        macs = sum(macs_of.get(ids[name]) or 0 for name in step.nodes)
        rows.append((us, step.op, step.nodes[0], macs))
    total = sum(r[0] for r in rows)
    print(f"{Path(model).name}: {len(rows)} kernels, {total:.1f} µs summed alone")
    print(f"{'µs':>8} {'share':>6} {'GFLOP/s':>8} {'MACs':>12}  kernel")
    for us, op, name, macs in sorted(rows, reverse=True):
        gflops = 2 * macs / (us * 1e-6) / 1e9 if us else 0.0
        print(f"{us:8.2f} {100 * us / total:5.1f}% {gflops:8.1f} {macs:12,}  {op} {name}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python tests/bench/bench_layers.py MODEL.onnx", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
