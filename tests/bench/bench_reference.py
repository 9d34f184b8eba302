"""Benchmark: the reference interpreter against onnxruntime on the same inputs, per model.

The reference interpreter is the oracle, not the fast path (the compiled engine comes later);
this prints its cost as a ratio so a slowdown that would make the test suite crawl is visible.
"""

from __future__ import annotations

import time
from pathlib import Path

import onnxruntime as ort

from compiler.frontends.onnx import load_onnx
from compiler.inputs import random_inputs
from compiler.interpreter import run

ROOT = Path(__file__).resolve().parents[2]
MODELS = [ROOT / "app" / "resources" / "models" / "digits_cnn.onnx"]
MODELS += sorted((ROOT.parent / "shared" / "models" / "onnx").glob("*.onnx"))


def _best_of(fn, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    print(f"{'model':32} {'reference ms':>13} {'onnxruntime ms':>15} {'ratio':>8}")
    for path in MODELS:
        graph = load_onnx(path)
        feeds = random_inputs(graph)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        ours = _best_of(lambda: run(graph, feeds))  # noqa: B023 (used inside the iteration)
        theirs = _best_of(lambda: session.run(None, feeds))  # noqa: B023
        print(f"{path.stem:32} {ours * 1e3:13.2f} {theirs * 1e3:15.3f} {ours / theirs:8.1f}x")


if __name__ == "__main__":
    main()
