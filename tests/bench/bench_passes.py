"""Benchmark: the default pass pipeline on DenseNet-121 (about 1,750 nodes), snapshots recorded.

The GUI runs this pipeline every time a user opens a model, so it must stay interactive; the aim
is under 10 s on a two-core machine. Prints the best of three runs and the time of each pass.
"""

from __future__ import annotations

import time
from pathlib import Path

import onnx

from compiler.frontends.onnx import load_onnx
from compiler.passes import run_pipeline

MODEL = Path(onnx.__file__).parent / "backend/test/data/light/light_densenet121.onnx"


def main() -> None:
    graph = load_onnx(MODEL)
    best, result = float("inf"), None
    for _ in range(3):
        start = time.perf_counter()
        result = run_pipeline(graph, snapshots=True)
        best = min(best, time.perf_counter() - start)
    print(f"default pipeline on {MODEL.stem} ({len(graph.nodes)} -> {len(result.graph.nodes)} "
          f"nodes, {len(result.records)} passes, snapshots recorded): {best:.2f} s (best of 3)")
    for record in result.records:
        print(f"  {record.name:24} {record.ms:8.1f} ms  {'changed' if record.changed else ''}")


if __name__ == "__main__":
    main()
